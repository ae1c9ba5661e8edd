// Runs kernels of tilec-generated ES modules under a JavaScript WebGPU runtime (Deno), for tests/test_webgpu_js.py.
// deno run --allow-read --allow-write webgpu_js_driver.js JOB.json: JOB {out, cases: [{id, module, kernel, args,
// outputs_passed, expect_error?, device?}]}; each tensor argument {file, dtype, shape} is read from its raw bytes and
// passed as {data, shape}; each output is written back as raw bytes to FILE.out. Results: {id: {ok, ms, error}}.
const ARRAYS = {f32: Float32Array, i32: Int32Array, u32: Uint32Array, f16: globalThis.Float16Array ?? Uint16Array,
  i8: Int8Array, u8: Uint8Array, bool: Uint8Array};
const job = JSON.parse(await Deno.readTextFile(Deno.args[0]));
const adapter = await navigator.gpu?.requestAdapter();
const results = {adapter: adapter ? {f16: adapter.features.has("shader-f16"),
  workgroupStorage: adapter.limits.maxComputeWorkgroupStorageSize} : null};
let plain = null; // a device without shader-f16 and with WebGPU's default limits
for (const c of job.cases) {
  try {
    const mod = await import(new URL(`file://${c.module}`).href);
    const args = c.args.map((a) => {
      if (a.value !== undefined) return a.value;
      const bytes = Deno.readFileSync(a.file);
      return {data: new ARRAYS[a.dtype](bytes.buffer, bytes.byteOffset, bytes.byteLength / ARRAYS[a.dtype].BYTES_PER_ELEMENT),
        shape: a.shape};
    });
    const passed = c.outputs_passed ? args : args.filter((_, i) => !c.args[i].output);
    if (c.device === "plain") passed.push({device: (plain ??= await adapter.requestDevice())});
    const t0 = performance.now();
    let out = await mod[c.kernel](...passed);
    const ms = performance.now() - t0;
    out = c.args.filter((a) => a.output).length > 1 ? out : [out];
    c.args.filter((a) => a.output).forEach((a, i) => {
      const data = out[i].data ?? out[i];
      Deno.writeFileSync(`${a.file}.out`, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    });
    results[c.id] = {ok: true, ms};
  } catch (e) {
    results[c.id] = {ok: false, error: `${e.name}: ${e.message}`};
  }
}
// size formulas as esm.py translates them, evaluated here (tilec/runtime/formulas.py gives the Python values)
results.formulas = (job.formulas ?? []).map(([code, sizes]) => new Function("s", `return ${code};`)(sizes));
await Deno.writeTextFile(job.out, JSON.stringify(results));
