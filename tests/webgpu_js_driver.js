// Runs kernels of tilec-generated ES modules in a JavaScript WebGPU runtime, for tests/test_webgpu_js.py: under
// Deno (`deno run --allow-read --allow-write webgpu_js_driver.js DIR/job.json`: outputs and results written into
// DIR) or in a browser page that imports runJob and fetches from the served DIR (results returned, outputs in
// base64). job.json: {cases: [{id, module, kernel, args, outputs_passed, device?}], formulas}; file names are
// relative to DIR; each tensor argument {file, dtype, shape, output} is read from its raw bytes and passed as
// {data, shape}. Results: {adapter, formulas, [id]: {ok, ms, error?, outputs?}}.
const ARRAYS = {f32: Float32Array, i32: Int32Array, u32: Uint32Array, f16: globalThis.Float16Array ?? Uint16Array,
  bf16: Uint16Array, i8: Int8Array, u8: Uint8Array, i16: Int16Array, u16: Uint16Array, bool: Uint8Array,
  f8e4m3: Uint8Array, f8e5m2: Uint8Array};
const inDeno = typeof Deno !== "undefined";

const base64 = (bytes) => {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
};

export async function runJob(job, dir) {
  const read = async (name) => (inDeno ? Deno.readFileSync(`${dir}/${name}`)
    : new Uint8Array(await (await fetch(`${dir}/${name}`)).arrayBuffer()));
  const adapter = await navigator.gpu?.requestAdapter();
  const results = {adapter: adapter ? {f16: adapter.features.has("shader-f16")} : null};
  let plain = null; // a device without shader-f16 and with WebGPU's default limits
  for (const c of job.cases) {
    try {
      const mod = await import(inDeno ? new URL(`file://${dir}/${c.module}`).href : `${dir}/${c.module}`);
      const args = [];
      for (const a of c.args) {
        if (a.value !== undefined) { args.push(a.value); continue; }
        const bytes = await read(a.file), C = ARRAYS[a.dtype];
        args.push({data: new C(bytes.buffer, bytes.byteOffset, bytes.byteLength / C.BYTES_PER_ELEMENT), shape: a.shape});
      }
      const passed = c.outputs_passed ? args : args.filter((_, i) => !c.args[i].output);
      if (c.device === "plain") passed.push({device: (plain ??= await adapter.requestDevice())});
      const t0 = performance.now();
      let out = await mod[c.kernel](...passed);
      const ms = performance.now() - t0, outputs = c.args.filter((a) => a.output);
      out = outputs.length > 1 ? out : [out];
      results[c.id] = {ok: true, ms, outputs: []};
      outputs.forEach((a, i) => {
        const data = out[i].data ?? out[i], bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        if (inDeno) Deno.writeFileSync(`${dir}/${a.file}.out`, bytes);
        else results[c.id].outputs.push(base64(bytes));
      });
    } catch (e) {
      results[c.id] = {ok: false, error: `${e.name}: ${e.message}`};
    }
  }
  // size formulas as esm.py translates them, evaluated here (tilec/runtime/formulas.py gives the Python values)
  results.formulas = (job.formulas ?? []).map(([code, sizes]) => new Function("s", `return ${code};`)(sizes));
  return results;
}

if (inDeno && import.meta.main) {
  const dir = Deno.args[0].replace(/\/[^/]*$/, "");
  const results = await runJob(JSON.parse(await Deno.readTextFile(Deno.args[0])), dir);
  await Deno.writeTextFile(`${dir}/results.json`, JSON.stringify(results));
}
