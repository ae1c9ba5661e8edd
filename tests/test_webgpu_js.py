"""The ES modules of `tilec --target webgpu -o k.js` run under a real JavaScript WebGPU runtime: Deno (the `deno`
package of the npm registry, installed by scripts/install_deno.sh; its `navigator.gpu` is wgpu, on Mesa's lavapipe
in CI). Every sample configuration of tests/test_wgsl.py and every TileLang port that builds for webgpu goes
through its module at the ragged shape (outputs passed, or left out and returned, in turn) and matches the
interpreter; the module's errors (shapes, dtypes, a device without shader-f16) are exceptions naming the kernel
and its .tile line. All cases run in one Deno process (tests/webgpu_js_driver.js). Without Deno the tests skip,
and fail under TILEC_REQUIRE_TOOLCHAINS=1."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.interp.run import public_kernels, run_any
from tilec.ir import tile as T
from tilec.runtime.formulas import evaluate
from tilec.targets.wgsl.esm import declarations, js_formula

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "webgpu_js_driver.js"
from webgpu_cases import arguments, sample_configs, webgpu_ports  # noqa: E402


def find_deno() -> str | None:
    """$TILEC_DENO, else deno on PATH, else the copy scripts/install_deno.sh puts in $TILEC_DENO_DIR
    (~/.cache/tilec-deno)."""
    cached = Path(os.environ.get("TILEC_DENO_DIR") or Path.home() / ".cache" / "tilec-deno") / "node_modules/.bin/deno"
    for candidate in (os.environ.get("TILEC_DENO"), shutil.which("deno"), str(cached)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _require(ok: bool, what: str) -> None:
    if ok:
        return
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but not available")
    pytest.skip(what)


def _cases():
    """(id, .tile path, defines, kernel to build or None, kernel to call or None, sizes, inputs function, tolerance,
    WebGPU limits above the spec's defaults that the module is built with)."""
    for sample, defines, sizes in sample_configs():
        tol = {"f16": 1e-2, "bf16": 3e-2}.get(defines.get("dtype", "f16"), 1e-4)
        yield (f"{sample}[{','.join(f'{k}={v}' for k, v in sorted(defines.items()))}]",
               ROOT / "samples" / f"{sample}.tile", defines, None, None, sizes, None, tol, {})
    for case in webgpu_ports():
        for name in case.kernels or [None]:
            yield (f"port:{case.name}" + (f":{name}" if name else ""), ROOT / "examples" / "tilelang" / case.file,
                   {**case.defines, **case.webgpu_defines}, case.kernel, name, case.sizes["ragged"], case.inputs,
                   max(case.rtol, case.atol, 1e-2), case.limits_for("webgpu"))


CASES = list(_cases())
# (formula, sizes): floor division and modulo of negative values, nested ceildiv, min/max, as manifests write them
FORMULAS = [("ceildiv(M, 4)", {"M": 37}), ("((M - 70) // 8) * (N % 3)", {"M": 5, "N": -7}),
            ("max(min(N - 1024, 0), 1) + ceildiv(ceildiv(M - 20, 3), K) + ((K - 9) % 4)", {"M": 10, "N": 2000, "K": 7}),
            ("(M * N) // 7 - ((0 - N) // 2)", {"M": 123456, "N": 9999})]


def _write(dest: Path, a: np.ndarray) -> None:
    dest.write_bytes(np.ascontiguousarray(a).tobytes())


@pytest.fixture(scope="module")
def job():
    """Every case's module built and its arguments written; (folder, expected outputs by case id, modules)."""
    work = Path(tempfile.mkdtemp(prefix="tilec-deno-"))
    modules: dict[tuple, Path] = {}
    jobs, expected = [], {}
    for n, (cid, path, defines, build_kernel, kernel, sizes, inputs, tol, limits) in enumerate(CASES):
        key = (str(path), tuple(sorted(defines.items())), build_kernel)
        if key not in modules:
            art = tilec.compile(path, "webgpu", defines=defines, kernel=build_kernel, emit="esm",
                                output_name=f"m{len(modules)}.js", limits=limits)
            (work / f"m{len(modules)}.d.ts").write_text(declarations(json.loads(art.manifest)))
            modules[key] = work / f"m{len(modules)}.js"
            modules[key].write_bytes(art.data)
        result = tilec.compile(path, defines=defines, kernel=build_kernel)
        pub = {k.name: k for k in public_kernels(result.module)}
        k = pub[kernel] if kernel else public_kernels(result.module)[0]
        args, _ = arguments(k, sizes, defines, inputs, seed=n)
        want = {a: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for a, v in args.items()}
        run_any(result.module, k, want)
        jargs = []
        for i, p in enumerate(k.params):
            if isinstance(p, T.Var):
                v = args[p.name]
                jargs.append({"value": bool(v) if p.dtype.name == "bool" else
                              float(v) if p.dtype.is_float else int(v)})
                continue
            f = work / f"c{n}_{i}.bin"
            _write(f, args[p.name])
            jargs.append({"file": f.name, "dtype": p.dtype.name, "shape": list(args[p.name].shape),
                          "output": bool(p.is_output)})
            if p.is_output:
                expected.setdefault(cid, []).append((p.name, f, want[p.name], tol))
        # outputs left out in every other case, where the inputs give their shapes (else the module refuses, as
        # tilec.runtime does: gemm's C is [M, N] and only B has N, under another name)
        named = {getattr(d, "name", None) for p in k.params if isinstance(p, T.Buffer) and not p.is_output
                 for d in p.shape}
        outputs_given = all(getattr(d, "name", None) in named or isinstance(d, T.Const)
                            for p in k.params if isinstance(p, T.Buffer) and p.is_output for d in p.shape)
        jobs.append({"id": cid, "module": modules[key].name, "kernel": k.name, "args": jargs,
                     "outputs_passed": n % 2 == 0 or not outputs_given})
    # errors: a wrong shape, a wrong dtype, and f16 on a device without shader-f16
    softmax = next(j for j in jobs if j["id"] == "softmax[]")
    bad_shape = json.loads(json.dumps(softmax))
    bad_shape["args"][0]["shape"][1] -= 1
    jobs.append({**bad_shape, "id": "error:shape"})
    jobs.append({**softmax, "id": "error:f16", "device": "plain"})
    (work / "job.json").write_text(json.dumps({"cases": jobs, "formulas": [[js_formula(f), s] for f, s in FORMULAS]}))
    yield work, expected, modules
    shutil.rmtree(work, ignore_errors=True)


def _env() -> dict:
    env = {**os.environ, "DENO_NO_UPDATE_CHECK": "1", "NO_COLOR": "1"}
    if not os.path.isdir(env.get("XDG_RUNTIME_DIR", "")):
        env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="tilec-xdg-")
    return env


@pytest.fixture(scope="module")
def deno_run(job):
    """Every case under Deno: (results, outputs by case id)."""
    work, expected, modules = job
    deno = find_deno()
    _require(deno is not None, "Deno (scripts/install_deno.sh installs it from the npm registry)")
    r = subprocess.run([deno, "run", "--quiet", "--allow-read", "--allow-write", str(DRIVER), str(work / "job.json")],
                       capture_output=True, text=True, env=_env(), timeout=900)
    assert r.returncode == 0, r.stderr
    results = json.loads((work / "results.json").read_text())
    _require(results["adapter"] is not None, "Deno found no WebGPU adapter (install mesa-vulkan-drivers)")
    outputs = {cid: [Path(f"{f}.out").read_bytes() for _, f, _, _ in outs] for cid, outs in expected.items()
               if results[cid]["ok"]}
    return results, outputs


@pytest.fixture(scope="module")
def chromium_run(job):
    """Every case in headless Chromium (Dawn; SwiftShader without a GPU), the job served over HTTP."""
    from chromium_cdp import Chromium, find_chromium

    work, expected, _ = job
    chromium = find_chromium()
    _require(chromium is not None, "Chromium (Debian's chromium package)")
    shutil.copy(DRIVER, work / DRIVER.name)
    (work / "driver.html").write_text(
        '<!doctype html><script type="module">import {runJob} from "./webgpu_js_driver.js";\n'
        'globalThis.results = fetch("job.json").then((r) => r.json()).then((job) => runJob(job, "."))'
        ".then((r) => JSON.stringify(r));</script>\n")
    handler = functools.partial(_QuietHandler, directory=str(work))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with Chromium(chromium, f"http://127.0.0.1:{server.server_address[1]}/driver.html") as page:
            page.wait_for("typeof globalThis.results === 'object'", 60)
            results = json.loads(page.evaluate("globalThis.results"))
    finally:
        server.shutdown()
    _require(results["adapter"] is not None, "Chromium found no WebGPU adapter")
    outputs = {cid: [base64.b64decode(b) for b in results[cid]["outputs"]] for cid in expected if results[cid]["ok"]}
    return results, outputs


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _check_case(run, job, cid: str) -> None:
    results, outputs = run
    res = results[cid]
    if not res["ok"] and not results["adapter"]["f16"] and "lacks shader-f16" in res["error"]:
        pytest.skip("this adapter has no shader-f16 (the module says so, as it should)")
    assert res["ok"], res["error"]
    for (name, _, want, tol), raw in zip(job[1][cid], outputs[cid], strict=True):
        got = np.frombuffer(raw, dtype=want.dtype).reshape(want.shape)
        if want.dtype.name.startswith("float8"):
            # WGSL allows 2.5 ulp for an f32 division (Tint's, in Chromium, is not IEEE's): a quotient at an fp8
            # midpoint may round to either neighbour, one fp8 step (at most 1/8 of the value) from the interpreter's
            tol = max(tol, 0.125)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol,
                                   err_msg=f"{cid}: {name}")


@pytest.mark.parametrize("cid", [c[0] for c in CASES])
def test_module_matches_the_interpreter_under_deno(job, deno_run, cid):
    _check_case(deno_run, job, cid)


@pytest.mark.parametrize("cid", [c[0] for c in CASES])
def test_module_matches_the_interpreter_in_chromium(job, chromium_run, cid):
    _check_case(chromium_run, job, cid)


def test_module_errors_name_the_kernel_and_its_line(deno_run):
    results, _ = deno_run
    line = next(i for i, t in enumerate((ROOT / "samples" / "softmax.tile").read_text().splitlines(), 1)
                if t.startswith("kernel softmax"))
    err = results["error:shape"]
    assert not err["ok"] and f"TilecError: softmax (softmax.tile:{line}): 'X' holds" in err["error"], err
    err = results["error:f16"]
    assert not err["ok"] and "shader-f16" in err["error"] and "-D dtype=f32" in err["error"], err


def test_modules_are_small_and_self_contained(job):
    """≤ 10 KB of JavaScript besides the embedded WGSL and the kernels' descriptions (the launcher is about 9 KB;
    each kernel, or a multi-launch kernel's stage, adds its description, under 1.5 KB), and no import."""
    _, _, modules = job
    for path in modules.values():
        text = path.read_text()
        start = text.index("export const WGSL = `")
        end = text.index("`;\n", start)
        js = text[:start] + text[end:]
        table = text[text.index("const K={\n"):text.index("\n};\n")]
        described = table.count("\n")
        assert len(js.encode()) - len(table.encode()) <= 10 * 1024, (path, len(js.encode()), len(table.encode()))
        assert len(table.encode()) <= 1536 * described, (path, len(table.encode()), described)
        assert "import " not in js and "require(" not in js


def test_size_formulas_mean_the_same_in_javascript(deno_run):
    results, _ = deno_run
    assert results["formulas"] == [evaluate(f, s) for f, s in FORMULAS]


def test_declarations_type_check_under_deno(job, deno_run):
    """The .d.ts accepts a correct call and refuses a wrong one (deno check: TypeScript with WebGPU's types)."""
    _, _, modules = job
    module = modules[(str(ROOT / "samples" / "softmax.tile"), (), None)]
    ok, bad = module.with_name("ok.ts"), module.with_name("bad.ts")
    ok.write_text(f'import {{softmax, TilecError}} from "./{module.name}";\n'
                  "const y = await softmax({data: new Uint16Array(6), shape: [2, 3]});\n"
                  "const rows: number = y.shape![0];\nexport {rows, TilecError};\n")
    bad.write_text(f'import {{softmax}} from "./{module.name}";\n'
                   "await softmax(new Float64Array(6), new Uint16Array(6), 3);\n")
    deno = find_deno()
    env = {**os.environ, "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
    r = subprocess.run([deno, "check", str(ok)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([deno, "check", str(bad)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "Float64Array" in r.stderr, r.stderr
