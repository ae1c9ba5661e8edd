"""The TileLang ports in examples/tilelang/: each one run by the interpreter against a numpy
reference at a regular and a ragged shape (small tiles through -D, so the interpreter is quick), and each
target's lowering run by the SIMT model against the interpreter. (The compile for every target of
scripts/tilelang_ports.py's table: tests/test_examples_tilelang_targets.py, a file of its own so that
pytest-xdist's --dist loadfile can run it beside this one.)"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.interp import run_kernel
from tilec.interp.run import public_kernels, random_inputs, run_any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from tilelang_ports import CASES, EXPECTED_TARGETS, TARGETS  # noqa: E402


def _size_from(kernel, args: dict, name: str) -> int:
    """A runtime size read off the arguments that a case's input function made."""
    for p in kernel.params:
        for axis, d in enumerate(getattr(p, "shape", [])):
            if getattr(d, "name", None) == name and p.name in args:
                return args[p.name].shape[axis]
    raise KeyError(name)


def _f32(a):
    return np.asarray(a).astype(np.float32)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("shape", ["regular", "ragged"])
def test_port_matches_numpy(case, shape):
    _check_against_numpy(case, shape, case.defines)


FITTED = [(c, t) for c in CASES for t in c.fit_targets if (c.name, t) not in EXPECTED_TARGETS]


@pytest.mark.parametrize("case,target", FITTED, ids=lambda v: getattr(v, "name", v))
def test_port_at_the_fitted_defines_matches_numpy(case, target):
    """What the GPU runs where a target builds the port with --fit (bench/ports_gpu.py): the tile sizes the fit
    picks are sizes the interpreter's defines never try (a persistent gemm's tile ids once missed the last rows of
    a ragged M at sm80's fitted block_N, in every execution alike)."""
    _check_against_numpy(case, "ragged", {**case.defines, **case.defines_for(target)})


@functools.cache
def _front(file: str, defines: tuple):
    """One compile per port and defines, shared by its shapes (CI time: the ragged and regular runs compiled the
    same source twice)."""
    return tilec.compile(ROOT / "examples" / "tilelang" / file, defines=dict(defines), verify=True)


def _check_against_numpy(case, shape, defines):
    result = _front(case.file, tuple(sorted(defines.items())))
    kernels = {k.name: k for k in public_kernels(result.module)}
    sizes = case.sizes[shape]
    rng = np.random.default_rng(abs(hash((case.name, shape))) % 2**32)
    args = case.inputs(sizes, rng) if case.inputs else None
    for name in case.kernels or [public_kernels(result.module)[0].name]:
        k = kernels[name]
        if args is None:
            args = random_inputs(k, {s.name: sizes[s.name] for s in k.size_vars}, seed=int(rng.integers(1 << 30)))
        else:
            for p in k.params:  # scratch and outputs of later kernels
                if p.name not in args:
                    extra = random_inputs(k, {s.name: sizes[s.name] for s in k.size_vars})
                    args[p.name] = extra[p.name]
        run_any(result.module, k, args)
    expected = case.reference(args, sizes)
    for name, want in expected.items():
        got = _f32(args[name])
        assert got.shape == np.shape(want), name
        np.testing.assert_allclose(got, _f32(want), rtol=case.rtol, atol=case.atol, err_msg=f"{case.name}: {name}")


SIMT_TARGETS = ["sm80", "sm90", "gfx942", "webgpu"]


@functools.cache
def _lowered(case_name: str, target: str):
    case = next(c for c in CASES if c.name == case_name)
    path = ROOT / "examples" / "tilelang" / case.file
    # the interpreter's small tiles, made smaller where the target has less on-chip memory (and the fitted ones
    # where the target builds with --fit): what bench/ports_gpu.py builds; both runs use them
    defines = {**case.defines, **case.defines_for(target)}
    # (the target-neutral compile: the numpy check's when the case has no kernel of its own, shared by the targets
    # whose defines are the case's)
    front = (_front(case.file, tuple(sorted(defines.items()))) if case.kernel is None else
             tilec.compile(path, defines=defines, kernel=case.kernel))
    return front, tilec.compile(path, defines=defines, target=target, kernel=case.kernel,
                                limits=case.limits_for(target))


def _same_simt_as_sm80(case) -> bool:
    """CI time: where sm90's lowering of a port (no wgmma, no TMA) prints as sm80's, at the same defines, running it
    again in the SIMT model would repeat the sm80 run exactly (the printed SIMT IR reads back as the same kernel)."""
    from tilec.ir.simt_printer import simt_module_str

    if (case.name, "sm80") in EXPECTED_TARGETS or case.defines_for("sm80") != case.defines_for("sm90"):
        return False
    return simt_module_str(_lowered(case.name, "sm80")[1].simt) == simt_module_str(_lowered(case.name, "sm90")[1].simt)


# CI time: the ragged shape on every target, the regular one on sm80 (interior tiles are target-neutral); every
# pair was run once for docs/reliability.md's figures
LOWERINGS = [(t, "ragged") for t in SIMT_TARGETS] + [("sm80", "regular")]


@pytest.mark.parametrize("target,shape", LOWERINGS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_port_lowering_matches_interpreter(case, target, shape):
    """The target's lowering, executed lane by lane by the SIMT model, agrees with the interpreter at a regular and
    a ragged shape (where the target compiles the port at all); outputs start as NaN (accumulated ones from the same
    finite values), the tolerance from the dtype and the reduction length (tilec/testing/differential.py)."""
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup
    from tilec.testing.differential import mismatches, prepare_outputs

    if (case.name, target) in EXPECTED_TARGETS:
        pytest.skip(f"{target} refuses this port: {EXPECTED_TARGETS[case.name, target]}")
    if target == "webgpu" and case.inputs and case.webgpu_defines:
        pytest.skip("the case's input function makes the shapes and dtypes of its interpreter defines, which "
                    "WebGPU's change")
    if target == "sm90" and _same_simt_as_sm80(case):
        pytest.skip("sm90 lowers this port to the SIMT code sm80 does, instruction for instruction (the sm80 run at "
                    "this shape covers it)")
    front, lowered = _lowered(case.name, target)
    sizes = case.sizes[shape]
    rng = np.random.default_rng(7)
    args = case.inputs(sizes, rng) if case.inputs else None
    # each kernel (a multi-launch kernel: each of its stages, the scratch as the interpreter's stages leave it)
    # runs on the same inputs in both
    units = front.module.kernels if case.kernels is None else [
        k for n in case.kernels for k in front.module.kernels if n in (k.name, k.attrs.get("stage_of"))]
    for k in units:
        ksizes = {s.name: sizes.get(s.name) or _size_from(k, args, s.name) for s in k.size_vars}
        fresh = random_inputs(k, ksizes, seed=3)
        args = fresh if args is None else {**fresh, **args}
        prepare_outputs(k, args, seed=5)
        want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
        run_kernel(k, want)
        sk = next(s for s in lowered.simt.kernels if s.name == k.name)
        run_simt(sk, args, ksizes, warp_size=lookup(target).warp_size)
        bad = mismatches(k, args, want, ksizes)
        assert not bad, f"{case.name} on {target} at {ksizes}: " + "; ".join(bad)
        if case.kernels is None and "stage_of" not in k.attrs and not case.inputs:
            # both executions leaving an element NaN agree with each other; numpy says whether it was computed (a
            # case with its own inputs may update an output in place, leaving the NaN prepare_outputs put there)
            for name, ref in case.reference(args, sizes).items():
                unwritten = int((np.isnan(_f32(args[name])) & np.isfinite(_f32(ref))).sum())
                assert not unwritten, f"{case.name} on {target} at {ksizes}: {name} has {unwritten} unwritten"
        args = want
        if case.kernels is None and "stage_of" not in k.attrs:
            break


def test_docs_table_agrees_with_the_cases():
    """docs/tilelang_ports.md (generated by scripts/tilelang_ports.py, which runs the toolchains) has a
    row per case, and its refusals are exactly the expected ones: regenerate it when this fails."""
    rows = {}
    for line in (ROOT / "docs" / "tilelang_ports.md").read_text().splitlines():
        if line.startswith("| [") and "](../examples/tilelang/" in line:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0].split("]")[0].lstrip("[")] = dict(zip(TARGETS, cells[2:], strict=True))
    assert list(rows) == [c.name for c in CASES]
    for case in CASES:
        for target in TARGETS:
            cell, want = rows[case.name][target], EXPECTED_TARGETS.get((case.name, target))
            if want is None:
                assert cell.startswith(("builds", "runs")), f"{case.name} on {target}: {cell}"
            else:
                assert cell.startswith("no") and want in cell, f"{case.name} on {target}: {cell}"


# ports whose WebGPU build the table cannot run with random inputs (structured inputs, or limits above the spec's
# defaults: --max-storage-buffers 9, which the runtime requests and lavapipe grants); 8/16-bit integers held in 32 bits;
# fp8 outputs written a byte of a u32 word at a time
ON_LAVAPIPE = [c for c in CASES if c.webgpu_limits or c.name in ("dequant_gemv_int4", "dequant_gemm_fp4", "gemm_sp",
                                                                  "group_per_split_token_cast_to_fp8")]


@pytest.mark.parametrize("case", ON_LAVAPIPE, ids=lambda c: c.name)
def test_port_runs_on_lavapipe(case):
    """The port's WebGPU build (its WebGPU defines and limits) runs under wgpu/lavapipe: each of its kernels in order
    on the case's inputs at the ragged shape, against numpy."""
    import json

    from tilec.runtime import wgsl as rt

    ok, why = rt.available()
    if not ok:
        pytest.skip(why)
    path = ROOT / "examples" / "tilelang" / case.file
    defines = {**case.defines, **case.defines_for("webgpu")}
    sizes = case.sizes["ragged"]
    args = case.inputs(sizes, np.random.default_rng())
    for name in case.kernels or [None]:
        art = tilec.compile(path, "webgpu", defines=defines, emit="wgsl", kernel=name,
                            limits=case.limits_for("webgpu"))
        manifest = json.loads(art.manifest)
        module = rt.WgslModule(art.data.decode(), manifest)
        kernel = getattr(module, name or public_kernels(tilec.compile(path, defines=defines).module)[0].name)
        kernel(*[args[p["name"]] for p in kernel.entry["params"]])  # outputs written back in place
    for name, want in case.reference(args, sizes).items():
        np.testing.assert_allclose(_f32(args[name]), _f32(want), rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name} on webgpu: {name}")


def test_amd_named_barrier_orders_the_threads_it_joins():
    """gfx942 has no named barriers; topk_selector's T.sync_threads(3, 256) runs there as a software barrier in
    LDS (tilec_hip_named_barrier.h; its own phase test: tests/test_hip_named_barrier.py). The lowering joins the
    256 threads at each one (the port's lowering test above runs it in the SIMT model): without them the
    suffix sum's reads and writes of the histogram race, which the SIMT model reports, so each barrier is load-
    bearing and one that let a thread through early would show as that race."""
    import copy

    from tilec.ir import simt as S
    from tilec.simt.interp import SimtInterpreterError, run_simt

    case = next(c for c in CASES if c.name == "topk_selector")
    lowered = _lowered(case.name, "gfx942")[1]
    sk = next(s for s in lowered.simt.kernels if s.name == "topk_selector")
    named = [s for s in S.walk_simt(sk.body) if isinstance(s, S.Barrier) and s.index is not None]
    assert len(named) == 6 and {(s.threads, s.index.value) for s in named} == {(256, 3)}
    assert any(b.name == "tl_named_barrier" and b.offset is not None for b in sk.shared)

    def strip(body):
        out = []
        for s in body:
            if isinstance(s, S.Barrier) and s.index is not None:
                continue
            for attr in ("body", "then_body", "else_body"):
                if isinstance(getattr(s, attr, None), list):
                    setattr(s, attr, strip(getattr(s, attr)))
            out.append(s)
        return out

    broken = copy.deepcopy(sk)
    broken.body = strip(broken.body)
    sizes = case.sizes["ragged"]
    args = case.inputs(sizes, np.random.default_rng(11))
    run_simt(sk, {n: np.array(a, copy=True) for n, a in args.items()}, sizes, warp_size=64)  # the real one: clean
    with pytest.raises(SimtInterpreterError, match="data race on shared 's_histogram'"):
        run_simt(broken, args, sizes, warp_size=64)
