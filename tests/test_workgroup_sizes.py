"""Every thread count a kernel may ask for is correct or refused at the user's line, on every target.

A block whose thread count the generic fragment layout did not divide evenly (softmax, rmsnorm, layernorm with
`threads=33`, 100, 160, ...) gave its last threads a row group past the fragment's rows: the SIMT model showed
their reductions reading past `x_s` and `reduce_scratch`, on WebGPU (which builds any count up to 256) and on
CUDA for multiples of 32 such as 160. Here: the layout over every count from 1 to 256, the three samples at the
counts that failed, run lane by lane against the interpreter, the CUDA/HIP refusals located at the kernel, and
every sample configuration and TileLang port that builds for webgpu run lane by lane (no access outside a
buffer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from webgpu_cases import arguments, sample_configs, webgpu_ports

import tilec
from tilec.diagnostics import CompileError
from tilec.interp.run import public_kernels, random_inputs, run_kernel
from tilec.ir import dtypes as D
from tilec.ir import tile as T
from tilec.ir.layout import block_row
from tilec.simt.interp import run_simt, run_simt_sequence

ROOT = Path(__file__).resolve().parent.parent
LISTED = [3, 17, 31, 33, 40, 48, 65, 100, 127, 130, 200]  # the counts issue #33 found reading out of bounds
ROW_SAMPLES = ["softmax", "rmsnorm", "layernorm"]


_NP_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod, "<": np.less}


def _evaluate(e: T.Expr, env: dict[str, np.ndarray]) -> np.ndarray:
    """A layout's index expression (constants, the thread and element variables, + - * // % <) over arrays."""
    if isinstance(e, T.Const):
        return np.asarray(int(e.value))
    if isinstance(e, T.Var):
        return env[e.name]
    assert isinstance(e, T.Binary | T.Compare) and e.op in _NP_OPS, e
    return _NP_OPS[e.op](_evaluate(e.a, env), _evaluate(e.b, env))


@pytest.mark.parametrize("shape", [(4, 256), (2, 1024), (1, 70), (3, 40), (16, 128), (8, 8), (5,)])
def test_block_row_places_every_element_once_for_every_thread_count(shape):
    """For 1..256 threads: every (thread, local element) the layout marks valid lies inside the fragment, and
    each element of the fragment is held by exactly one thread (none twice: two threads would race on it)."""
    t, k = T.Var(D.I32, None, "t", "thread"), T.Var(D.I32, None, "k", "local")
    total = int(np.prod(shape))
    for threads in range(1, 257):
        lay = block_row(shape, threads)
        env = {"t": np.arange(threads)[:, None], "k": np.arange(lay.num_local)[None, :]}
        grid = np.zeros((threads, lay.num_local), dtype=np.int64)
        idx = [np.broadcast_to(_evaluate(x, env), grid.shape) for x in lay.coords(t, k)]
        ok = lay.valid(t, k)
        ok = np.ones(grid.shape, bool) if ok is None else np.broadcast_to(_evaluate(ok, env), grid.shape)
        for i, d in zip(idx, shape, strict=True):
            assert ((i[ok] >= 0) & (i[ok] < d)).all(), f"{threads} threads: an index past {d}"
        seen = np.bincount(np.ravel_multi_index([i[ok] for i in idx], shape), minlength=total)
        assert (seen == 1).all(), f"{threads} threads: elements held {sorted(set(seen.tolist()))} times"


def _matches_interpreter(result, sizes: dict[str, int], rtol: float, atol: float, seed: int = 0) -> None:
    """The lowered kernel run lane by lane (SimtInterpreterError on any access outside a buffer) agrees with
    the Tile IR interpreter on the same fresh random inputs."""
    k = public_kernels(result.module)[0]
    args = random_inputs(k, sizes, seed=seed)
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_simt_sequence(result, args, sizes)
    if isinstance(k, T.Kernel):
        run_kernel(k, want)
    else:
        from tilec.interp.run import run_any

        run_any(result.module, k, want)
    for p in k.params:
        if getattr(p, "is_output", False):
            np.testing.assert_allclose(np.asarray(args[p.name], np.float32), np.asarray(want[p.name], np.float32),
                                       rtol=rtol, atol=atol, err_msg=p.name)


@pytest.mark.parametrize("threads", LISTED)
@pytest.mark.parametrize("sample", ROW_SAMPLES)
def test_row_samples_on_webgpu_at_odd_thread_counts(sample, threads):
    result = tilec.compile(ROOT / "samples" / f"{sample}.tile", "webgpu", defines={"threads": threads})
    _matches_interpreter(result, {"M": 3, "N": 45}, 1e-2, 1e-2, seed=threads)


@pytest.mark.parametrize("sample", ROW_SAMPLES)
def test_row_samples_on_cuda_at_a_multiple_of_32_the_layout_did_not_divide(sample):
    """160 threads: whole warps, so CUDA built it, and its last warp read past the shared row before."""
    result = tilec.compile(ROOT / "samples" / f"{sample}.tile", "sm80", defines={"threads": 160})
    _matches_interpreter(result, {"M": 3, "N": 70}, 1e-2, 1e-2)


@pytest.mark.parametrize("target,unit", [("sm80", 32), ("gfx942", 64)])
def test_cuda_and_hip_refuse_partial_warps_at_the_threads_argument(target, unit):
    # at the Kernel's threads= argument (the one line to change)
    lines = (ROOT / "samples" / "softmax.tile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kernel softmax"))
    kernel_line = next(i for i, line in enumerate(lines[start:], start + 1) if "threads=" in line)
    for threads in LISTED:
        with pytest.raises(CompileError) as e:
            tilec.compile(ROOT / "samples" / "softmax.tile", target, defines={"threads": threads})
        (d,) = [d for d in e.value.diagnostics if "whole number of" in d.message]
        assert d.span is not None and d.span.line == kernel_line, d
        assert f"{threads} threads" in d.message and f"multiple of {unit}" in d.message


# ---------------------------------------------------------------- everything that builds for webgpu

def _config_id(sample: str, defines: dict) -> str:
    return "-".join([sample, *(f"{k}={v}" for k, v in sorted(defines.items()))])


@pytest.mark.parametrize("sample,defines,sizes", [pytest.param(*c, id=_config_id(*c[:2])) for c in sample_configs()])
def test_samples_that_build_for_webgpu_stay_inside_their_buffers(sample, defines, sizes):
    """At a smaller ragged shape than test_wgsl's (the lane-by-lane model is slow), still past every tile edge."""
    result = tilec.compile(ROOT / "samples" / f"{sample}.tile", "webgpu", defines=defines)
    small = {k: v if v <= 3 else min(v, 45 if v % 2 else 37) for k, v in sizes.items()}
    tol = 1e-2 if defines.get("dtype", "f16") == "f16" else 1e-3
    k = public_kernels(result.module)[0]
    _matches_interpreter(result, arguments(k, small, defines)[1], tol, tol)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in webgpu_ports()])
def test_ports_that_build_for_webgpu_stay_inside_their_buffers(case):
    """Each port that builds for webgpu (its small tiles, with its webgpu settings) lane by lane at its ragged
    shape: every kernel (a multi-launch kernel's stages in order) against the interpreter."""
    path = ROOT / "examples" / "tilelang" / case.file
    defines = {**case.defines, **case.webgpu_defines}
    front = tilec.compile(path, defines=defines, kernel=case.kernel)
    lowered = tilec.compile(path, "webgpu", defines=defines, kernel=case.kernel, limits=case.limits_for("webgpu"))
    units = front.module.kernels if case.kernels is None else [
        k for n in case.kernels for k in front.module.kernels if n in (k.name, k.attrs.get("stage_of"))]
    args = None
    for k in units:
        args, ksizes = arguments(k, case.sizes["ragged"], defines, case.inputs, seed=7, earlier=args)
        want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
        run_kernel(k, want)
        run_simt(next(s for s in lowered.simt.kernels if s.name == k.name), args, ksizes)
        for p in k.params:
            if getattr(p, "is_output", False):
                np.testing.assert_allclose(np.asarray(args[p.name], np.float32), np.asarray(want[p.name], np.float32),
                                           rtol=max(case.rtol, 1e-2), atol=max(case.atol, 1e-2), err_msg=p.name)
        args = want
        if case.kernels is None and "stage_of" not in k.attrs:
            break
