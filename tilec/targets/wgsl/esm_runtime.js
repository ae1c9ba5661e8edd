// tilec's WebGPU launcher, the same in every generated module (tilec/targets/wgsl/esm.py puts WGSL, SOURCE, K and
// NEED before it, and strips its comments and indentation). Sizes come from the arguments' shapes and are checked
// as tilec.runtime checks them.
export class TilecError extends Error {
  constructor(kernel, message, line) {
    super(`${kernel}${line ? ` (${SOURCE}:${line})` : ""}: ${message}`);
    this.name = "TilecError"; this.kernel = kernel; this.line = line;
  }
}
const bad = (k, m) => { throw new TilecError(k.name, m, k.line); };
// fp8 has no typed array of its own: its bytes travel in a Uint8Array, as bf16's halves travel in a Uint16Array
const ARRAYS = {f32: [Float32Array], i32: [Int32Array], u32: [Uint32Array], i8: [Int8Array], u8: [Uint8Array],
  i16: [Int16Array], u16: [Uint16Array], bool: [Uint8Array], f8e4m3: [Uint8Array], f8e5m2: [Uint8Array],
  f16: [globalThis.Float16Array, Uint16Array].filter(Boolean), bf16: [Uint16Array]};
const BYTES = {f32: 4, i32: 4, u32: 4, f16: 2, bf16: 2, i16: 2, u16: 2, i8: 1, u8: 1, f8e4m3: 1, f8e5m2: 1, bool: 1};
const STORAGE = 0x8c, I32 = 2 ** 31;
const isBuf = (x) => !!x?.getMappedRange; // a GPUBuffer (of any realm or implementation)
const pad4 = (n) => Math.max(4, Math.ceil(n / 4) * 4);
const prod = (a) => a.reduce((x, y) => x * y, 1);
const dimOf = (d, s) => (typeof d === "number" ? d : Array.isArray(d) ? d[0](s) : s[d]); // number, size, formula
const text = (d) => (Array.isArray(d) ? d[1] : d);
const shown = (k, s) => k.sizes.map((n) => `${n}=${s[n]}`).join(", ");
let shared = null;

// The device every call uses unless it passes {device}: set here, or requested by the first call with the
// adapter's limits where a kernel needs more than WebGPU's defaults, and shader-f16 where a kernel uses f16.
export function useDevice(device) { shared = Promise.resolve(device); }

export function getDevice() {
  return (shared ??= (async () => {
    const a = await globalThis.navigator?.gpu?.requestAdapter({powerPreference: "high-performance"});
    if (!a) throw new TilecError(SOURCE, "no WebGPU adapter (navigator.gpu) here");
    const L = a.limits, requiredLimits = {maxStorageBufferBindingSize: L.maxStorageBufferBindingSize,
      maxBufferSize: L.maxBufferSize};
    for (const [n, v] of Object.entries(NEED.limits)) requiredLimits[n] = Math.min(v, L[n]);
    return a.requestDevice({requiredLimits,
      requiredFeatures: NEED.f16 && a.features.has("shader-f16") ? ["shader-f16"] : []});
  })().catch((e) => { shared = null; throw e; }));
}

function checkDevice(dev, k, pub) {
  const L = dev.limits;
  if (k.f16 && !dev.features.has("shader-f16"))
    bad(pub, "uses f16 and this WebGPU device lacks shader-f16: rebuild it with -D dtype=f32");
  for (const [need, limit, what] of [[k.wg, "maxComputeWorkgroupStorageSize", "bytes of workgroup storage"],
    [k.b.length, "maxStorageBuffersPerShaderStage", "storage buffers"],
    [k.threads, "maxComputeInvocationsPerWorkgroup", "threads a workgroup"]])
    if (need > L[limit]) bad(pub, `needs ${need} ${what}; this device's ${limit} is ${L[limit]}: rebuild it smaller`);
}

const CACHE = new WeakMap(); // GPUDevice -> {mod: the shader module, p: kernel name -> Promise<{pipe, layout}>}
function pipeline(dev, k) {
  let c = CACHE.get(dev);
  if (!c) CACHE.set(dev, (c = {mod: null, p: {}}));
  return (c.p[k.name] ??= (async () => {
    dev.pushErrorScope("validation");
    c.mod ??= dev.createShaderModule({code: WGSL, label: SOURCE});
    const entries = k.b.map(([, binding, rw]) => ({binding, visibility: 4,
      buffer: {type: rw ? "storage" : "read-only-storage"}}));
    if (k.u) entries.push({binding: k.u.binding, visibility: 4, buffer: {type: "uniform"}});
    const layout = dev.createBindGroupLayout({entries});
    let pipe, why;
    try {
      pipe = await dev.createComputePipelineAsync({layout: dev.createPipelineLayout({bindGroupLayouts: [layout]}),
        compute: {module: c.mod, entryPoint: k.entry ?? k.name}});
    } catch (e) { why = e.message; }
    why ??= (await dev.popErrorScope())?.message;
    if (why) { // the compiler's first error, with its WGSL line, where the implementation says it
      const m = (await c.mod.getCompilationInfo?.())?.messages?.find((x) => x.type === "error");
      if (m) why = `WGSL line ${m.lineNum}: ${m.message}`;
      delete c.p[k.name];
      bad(k, `WebGPU rejected tilec's WGSL (a tilec bug: please report it): ${why}`);
    }
    return {pipe, layout};
  })());
}

// A tensor: a typed array, a GPUBuffer or {data, shape}; a shape may also be a property of the array or buffer
// (a 1-D typed array needs none).
function tensorOf(k, p, x) {
  const data = x && !ArrayBuffer.isView(x) && !isBuf(x) && "data" in x ? x.data : x, shape = x?.shape ?? x?.dims;
  const t = {x, data, gpu: isBuf(data), shape: shape && Array.from(shape, Number), n: data?.length};
  if (t.gpu) {
    if (!(data.usage & 0x80)) bad(k, `'${p.name}' is a GPUBuffer without STORAGE usage`);
    t.n = data.size / BYTES[p.dtype];
  } else if (!ARRAYS[p.dtype].some((C) => data instanceof C))
    bad(k, `'${p.name}' is ${p.dtype}: pass a ${ARRAYS[p.dtype].map((C) => C.name).join(" or ")} or a GPUBuffer, ` +
      `not ${data?.constructor?.name ?? data}`);
  return t;
}

// The sizes the tensors ts imply (given: options.sizes); final: every size known and every check made.
function sizesOf(k, ts, given, final) {
  const s = {...given}, formulas = [];
  const dims = (p, t) => p.shape.forEach((d, i) => {
    const got = t.shape[i];
    if (typeof d === "number") { if (d !== got) bad(k, `dimension ${i} of '${p.name}' must be ${d}, not ${got}`); }
    else if (Array.isArray(d)) formulas.push([p, i, d, got]);
    else if ((s[d] ??= got) !== got) bad(k, `size ${d} is ${s[d]} by an earlier argument, ${got} by '${p.name}'`);
  });
  for (const p of k.params) {
    const t = ts[p.name];
    if (!p.t || !t) continue;
    if (!t.shape && p.shape.length === 1 && !t.gpu) t.shape = [t.n];
    if (!t.shape) bad(k, `give '${p.name}' a shape: {data, shape: [${p.shape.map(text)}]}`);
    if (t.shape.length !== p.shape.length)
      bad(k, `'${p.name}' has ${t.shape.length} dimension(s), expected ${p.shape.length} [${p.shape.map(text)}]`);
    dims(p, t);
  }
  for (const [p, i, [f, ft], got] of formulas)
    if (f(s) !== got) bad(k, `dimension ${i} of '${p.name}' must be ${ft} = ${f(s)}, not ${got}`);
  if (!final) return s;
  for (const n of k.sizes) {
    if (!(n in s)) bad(k, `no tensor argument gives the size ${n}`);
    if (s[n] >= I32) bad(k, `size ${n} = ${s[n]} does not fit WGSL's 32-bit integers`);
  }
  for (const p of k.params) {
    const t = ts[p.name], n = p.t && t ? prod(t.shape) : 0;
    if (n >= I32) bad(k, `'${p.name}' has ${n} elements; WGSL indexes with 32-bit integers`);
    if (n && (t.gpu ? n * BYTES[p.dtype] > t.data.size : n !== t.n))
      bad(k, `'${p.name}' holds ${t.gpu ? `${t.data.size} bytes` : `${t.n} elements`}, not the ${n} of [${t.shape}]`);
  }
  for (const [lhs, op, rhs, message, lt, rt] of k.checks ?? []) {
    const a = lhs(s), b = rhs(s);
    if (!(op === "==" ? a === b : a <= b)) bad(k, `${message}: ${lt} = ${a}, ${rt} = ${b} (sizes ${shown(k, s)})`);
  }
  return s;
}

function scalarOf(k, p, v) {
  const d = p.dtype, int = Number.isInteger(v);
  if (d === "bool" ? typeof v !== "boolean" : typeof v !== "number" || (d[0] === "i" && !(int && v >= -I32 && v < I32))
      || (d[0] === "u" && !(int && v >= 0 && v < 2 * I32)))
    bad(k, `scalar '${p.name}' is ${d}: ${v} is not one`);
  return +v;
}

function upload(dev, t, nbytes) {
  const buf = dev.createBuffer({size: pad4(nbytes), usage: STORAGE, mappedAtCreation: true});
  new Uint8Array(buf.getMappedRange()).set(new Uint8Array(t.data.buffer, t.data.byteOffset, nbytes));
  buf.unmap();
  return buf;
}

// A call of public kernel `name` (a kernel, or a multi-launch kernel's stages and scratch) on args, outputs
// optional, options {device, sizes} last. Resolves to the output(s) once the results are in them.
export async function call(name, args) {
  const k = K[name], ins = k.params.filter((p) => !p.out), last = args.at(-1);
  let opts = {};
  if (args.length > ins.length && last?.constructor === Object && !("data" in last)) [opts, args] = [last, args.slice(0, -1)];
  if (args.length !== k.params.length && args.length !== ins.length)
    bad(k, `takes ${k.params.length} arguments (${k.params.map((p) => p.name)})` +
      (ins.length < k.params.length ? ` or ${ins.length} without its outputs` : "") + `, not ${args.length}`);
  const space = {}, ts = {}, temp = [], bufs = {};
  (args.length === ins.length ? ins : k.params).forEach((p, i) => {
    space[p.name] = p.t ? (ts[p.name] = tensorOf(k, p, args[i])) : scalarOf(k, p, args[i]);
  });
  const stages = (k.stages ?? [[name, k.params.map((p) => p.name)]]).map(([n, a]) => [K[n], a]);
  const dev = opts.device ?? await getDevice();
  for (const [st] of stages) checkDevice(dev, st, k);
  let sizes = sizesOf(k, ts, opts.sizes, false);
  const gpu = Object.values(ts).some((t) => t.gpu), outs = k.params.filter((p) => p.out);
  for (const p of outs) if (!ts[p.name]) { // an output left out: allocated like the inputs
    const shape = p.shape.map((d) => dimOf(d, sizes)), n = prod(shape);
    if (shape.includes(undefined)) bad(k, `pass output '${p.name}': no input gives its shape`);
    const data = gpu ? dev.createBuffer({size: pad4(n * BYTES[p.dtype]), usage: STORAGE}) : new ARRAYS[p.dtype][0](n);
    data.shape = shape;
    space[p.name] = ts[p.name] = {x: data, data, gpu, shape, n: gpu ? data.size / BYTES[p.dtype] : n};
  }
  sizes = sizesOf(k, ts, opts.sizes, true);
  try {
    const most = dev.limits.maxStorageBufferBindingSize, enc = dev.createCommandEncoder();
    for (const p of k.params) if (p.t) {
      const t = ts[p.name], nbytes = prod(t.shape) * BYTES[p.dtype];
      if (pad4(nbytes) > most) bad(k, `'${p.name}' is ${nbytes} bytes; this device binds at most ${most}`);
      if (!t.gpu) temp.push(upload(dev, t, nbytes));
      bufs[p.name] = t.gpu ? t.data : temp.at(-1);
    }
    for (const b of k.scratch ?? []) {
      temp.push((bufs[b.name] = dev.createBuffer({size: pad4(b.bytes(sizes)), usage: STORAGE})));
      ts[b.name] = {gpu: true, data: bufs[b.name], shape: b.shape.map((d) => dimOf(d, sizes))};
    }
    for (const [st, names] of stages) {
      const sts = {}, sargs = {};
      st.params.forEach((p, i) => { sargs[p.name] = space[names[i]]; sts[p.name] = ts[names[i]]; });
      const ss = sizesOf(st, sts, {}, true), grid = st.grid({...sargs, ...ss}), most = dev.limits.maxComputeWorkgroupsPerDimension;
      if (grid.some((g) => g <= 0)) continue;
      grid.forEach((g, i) => g > most && bad(k, `needs ${g} workgroups along ${"xyz"[i]} for ${shown(k, sizes)}; ` +
        `this device allows ${most}: use smaller pieces or larger tiles`));
      const {pipe, layout} = await pipeline(dev, st);
      const entries = st.b.map(([i, binding]) => ({binding, resource: {buffer: bufs[names[i]]}}));
      if (st.u) {
        const v = new DataView(new ArrayBuffer(st.u.size)), ubuf = dev.createBuffer({size: st.u.size, usage: 0x48});
        for (const [f, at, type] of st.u.fields) v[`set${{f32: "Float32", u32: "Uint32"}[type] ?? "Int32"}`](at,
          f in ss ? ss[f] : sargs[f], true);
        dev.queue.writeBuffer(ubuf, 0, v.buffer);
        temp.push(ubuf);
        entries.push({binding: st.u.binding, resource: {buffer: ubuf}});
      }
      const pass = enc.beginComputePass();
      pass.setPipeline(pipe);
      pass.setBindGroup(0, dev.createBindGroup({layout, entries}));
      pass.dispatchWorkgroups(...grid);
      pass.end();
    }
    const reads = outs.filter((p) => !ts[p.name].gpu).map((p) => {
      const t = ts[p.name], staging = dev.createBuffer({size: pad4(t.data.byteLength), usage: 0x9});
      enc.copyBufferToBuffer(bufs[p.name], 0, staging, 0, staging.size);
      temp.push(staging);
      return [t.data, staging];
    });
    dev.queue.submit([enc.finish()]);
    await Promise.all(reads.map(async ([data, staging]) => {
      await staging.mapAsync(1);
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength).set(
        new Uint8Array(staging.getMappedRange(), 0, data.byteLength));
    }));
    if (!reads.length) await dev.queue.onSubmittedWorkDone();
  } finally {
    for (const b of temp) b.destroy();
  }
  const out = outs.map((p) => ts[p.name].x);
  return out.length > 1 ? out : out[0];
}
