// The demo's logic, shared by index.html (in the browser) and tests/test_web_page.py (under Deno): run the softmax
// and gemm modules that build.sh compiled with tilec on this machine's GPU, check them against plain JavaScript,
// time them. Each result: {kernel, shape, maxError, tolerance, ok, firstMs, ms}.
import {gemm} from "./gemm.js";
import {getDevice, softmax} from "./softmax.js";

const random = (n, seed) => { // a small LCG, so every run checks fresh but reproducible values
  let s = seed >>> 0;
  return Float32Array.from({length: n}, () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32) * 2 - 1);
};

function softmaxReference(x, m, n) {
  const y = new Float32Array(m * n);
  for (let i = 0; i < m; i++) {
    const row = x.subarray(i * n, (i + 1) * n), top = Math.max(...row);
    let sum = 0;
    for (let j = 0; j < n; j++) sum += (y[i * n + j] = Math.exp(row[j] - top));
    for (let j = 0; j < n; j++) y[i * n + j] /= sum;
  }
  return y;
}

function gemmReference(a, b, m, n, k) {
  const c = new Float32Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let p = 0; p < k; p++) {
      const v = a[i * k + p];
      for (let j = 0; j < n; j++) c[i * n + j] += v * b[p * n + j];
    }
  }
  return c;
}

const maxError = (got, want) => got.reduce((e, v, i) => Math.max(e, Math.abs(v - want[i]) / (1 + Math.abs(want[i]))), 0);

async function timed(run, repeats) {
  let t = performance.now();
  const out = await run();
  const firstMs = performance.now() - t; // pipeline creation included
  t = performance.now();
  for (let r = 0; r < repeats; r++) await run();
  return {out, firstMs, ms: (performance.now() - t) / repeats};
}

export async function runDemo({sizes = {m: 300, n: 1000, gm: 200, gn: 136, gk: 72}, repeats = 3} = {}) {
  const device = await getDevice(); // one device for both modules, passed to each call
  const {m, n, gm, gn, gk} = sizes, results = [];
  const x = random(m * n, 1);
  const s = await timed(() => softmax({data: x, shape: [m, n]}, {device}), repeats);
  const se = maxError(s.out, softmaxReference(x, m, n));
  results.push({kernel: "softmax", shape: `${m}x${n}`, maxError: se, tolerance: 1e-5, ok: se <= 1e-5, ...s, out: undefined});
  const a = random(gm * gk, 2), b = random(gk * gn, 3);
  const c = new Float32Array(gm * gn); // gemm's C: passed (its N is a size of B's that C does not name)
  const g = await timed(() => gemm({data: a, shape: [gm, gk]}, {data: b, shape: [gk, gn]}, {data: c, shape: [gm, gn]},
    {device}), repeats);
  const ge = maxError(c, gemmReference(a, b, gm, gn, gk));
  results.push({kernel: "gemm", shape: `${gm}x${gn}x${gk}`, maxError: ge, tolerance: 1e-4, ok: ge <= 1e-4, ...g, out: undefined});
  return results;
}
