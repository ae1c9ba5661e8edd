"""Functions of several launches (`with Kernel(...)` blocks sharing alloc_global scratch) on ascend910b, end to end:
the runner includes the launcher header tilec ships (`-o k.h`), sizes one scratch buffer with its
NAME_scratch_bytes and calls its NAME_launch, which places the scratch tensors and launches the stage kernels in
order on tilec's CPU model of the AscendC API (model_run.build_sequence_runner). Checked against the interpreter's
run of the whole function (fresh scratch, stages in order) at regular and ragged shapes, on fresh inputs; planted
bugs in the header's sequence (stages in the wrong order, a scratch tensor at the wrong offset, a scratch size too
small), which checking each stage kernel on its own cannot see, must fail."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main
from tilec.interp.run import random_inputs, run_any, run_kernel, shape_of
from tilec.targets.ascend.model_run import (
    ModelError,
    build_runner,
    build_sequence_runner,
    run_on_model,
    run_sequence_on_model,
    sequence_header,
)

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++-19") is None,
                                reason="the AscendC CPU model needs a C++ compiler")

# two scratch tensors, so that where the second one starts matters
SCALED = """\
kernel scaled(A: f32[N], C: out f32[N]):
    S = alloc_global((N,), f32)
    U = alloc_global((N,), f32)
    with Kernel(ceildiv(N, 256), threads=128) as bx:
        for i in Parallel(256):
            if bx * 256 + i < N:
                S[bx * 256 + i] = A[bx * 256 + i] * 2.0
                U[bx * 256 + i] = A[bx * 256 + i] + 1.0
    with Kernel(ceildiv(N, 256), threads=128) as bx:
        for i in Parallel(256):
            if bx * 256 + i < N:
                C[bx * 256 + i] = S[bx * 256 + i] * U[bx * 256 + i]
"""


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    path = tmp_path_factory.mktemp("launches") / "scaled.tile"
    path.write_text(SCALED)
    front = tilec.compile(path)
    built = tilec.compile(path, target="ascend910b")
    (seq,) = built.simt.launches
    return front, built, seq


@pytest.fixture(scope="module")
def splitkv():
    path = ROOT / "examples" / "tilelang" / "gqa_decode_splitkv.tile"
    defines = {"num_split": 3}
    front = tilec.compile(path, defines=defines)
    built = tilec.compile(path, target="ascend910b", defines=defines)
    (seq,) = built.simt.launches
    return front, built, seq, build_sequence_runner(built.source, built.simt, seq)


def _aligned_scratch_bytes(function, sizes: dict[str, int]) -> int:
    """What NAME_scratch_bytes must give: each scratch tensor at a 256-byte boundary (the manifest's rule)."""
    return sum(-(-math.prod(shape_of(b, sizes)) * b.dtype.bytes // 256) * 256 for b in function.scratch)


def _end_to_end(front, built, seq, sizes: dict[str, int], header: str | None = None, exe=None):
    """(the model's outputs through NAME_launch, the interpreter's, the scratch bytes the header gave)."""
    (function,) = front.module.launches
    args = random_inputs(function, sizes, seed=int(np.random.default_rng().integers(1 << 30)))
    for p in function.params:  # outputs start as NaN on both sides: an element no stage writes shows
        if isinstance(p, tilec.ir.tile.Buffer) and p.is_output:
            args[p.name][...] = np.nan
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_any(front.module, function, want)
    exe = exe or build_sequence_runner(built.source, built.simt, seq, header)
    _, scratch = run_sequence_on_model(exe, seq, {**sizes, **args}, cores=4)
    return args, want, scratch


@pytest.mark.parametrize("shape", ["regular", "ragged"])
def test_split_kv_decoding_runs_end_to_end_through_its_launcher(splitkv, shape):
    """examples/tilelang/gqa_decode_splitkv.tile (a mixed stage writing the partial outputs and their log-sum-exps
    into scratch, a vector stage combining them) as a caller runs it: one scratch buffer, one NAME_launch call."""
    front, built, seq, exe = splitkv
    sizes = {"regular": {"batch": 1, "heads": 8, "heads_kv": 2, "seqlen_kv": 128},
             "ragged": {"batch": 2, "heads": 4, "heads_kv": 1, "seqlen_kv": 70}}[shape]
    got, want, scratch = _end_to_end(front, built, seq, sizes, exe=exe)
    assert scratch == _aligned_scratch_bytes(front.module.launches[0], sizes)
    np.testing.assert_allclose(got["Output"].astype(np.float32), want["Output"].astype(np.float32),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("size", ["M=128,N=128,K=256", "M=70,N=45,K=300"])
def test_split_k_gemm_runs_end_to_end_with_tilec_run(capsys, size):
    """samples/gemm.tile with split_k=2: a cube stage writing the K slices' products into scratch planes, a vector
    stage summing them into C; `tilec run --check` runs the function, not its stages on inputs of their own."""
    rc = tilec_main(["run", str(ROOT / "samples" / "gemm.tile"), "--target", "ascend910b", "--check",
                     "-Dsplit_k=2", "-Dblock_M=64", "-Dblock_N=128", "-Dblock_K=64", "-Dthreads=128",
                     "-Dnum_stages=4", "--size", size])
    out = capsys.readouterr().out
    assert rc == 0 and "gemm_launch, 2 launches (AIC_ONLY, AIV_ONLY)" in out and "PASS" in out, out
    assert "__stage" not in out  # no stage is run (or checked) on its own


@pytest.mark.parametrize("n", [512, 300])
def test_two_scratch_tensors_end_to_end(scaled, n):
    front, built, seq = scaled
    got, want, scratch = _end_to_end(front, built, seq, {"N": n})
    assert scratch == _aligned_scratch_bytes(front.module.launches[0], {"N": n})
    np.testing.assert_array_equal(got["C"], want["C"])


def _stages_alone_pass(front, built, n: int) -> bool:
    """The former check: each stage kernel on inputs of its own (scratch tensors as separate arrays) against the
    interpreter. It never reads the launcher header."""
    for program in built.simt:
        k = next(k for k in front.module.kernels if k.name == program.name)
        args = random_inputs(k, {"N": n}, seed=11)
        want = {a: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for a, v in args.items()}
        run_kernel(k, want)
        run_on_model(build_runner(built.source, program), program, {"N": n, **args}, cores=4)
        if not all(np.array_equal(args[p.name], want[p.name], equal_nan=True)
                   for p in k.params if getattr(p, "is_output", False)):
            return False
    return True


def test_planted_stages_in_the_wrong_order_fail_end_to_end_only(scaled):
    """Planted: the header launches the second stage first. Each stage alone still matches the interpreter; the
    function's output does not (the second stage reads scratch nobody has written: NaN)."""
    front, built, seq = scaled
    header = sequence_header(built.simt, seq)
    first, second = (f"    err = {st}_launch(" for st in seq.stages)
    lines = header.splitlines()
    i, j = (next(n for n, ln in enumerate(lines) if ln.startswith(s)) for s in (first, second))
    lines[i], lines[j] = lines[j], lines[i]
    planted = "\n".join(lines) + "\n"
    assert planted != header
    assert _stages_alone_pass(front, built, 300)
    got, want, _ = _end_to_end(front, built, seq, {"N": 300}, planted)
    assert np.isnan(got["C"]).any() and not np.isnan(want["C"]).any()


def test_planted_scratch_offset_fails(scaled):
    """Planted: the header places the second scratch tensor 256 bytes early, over the end of the first. Blocks of
    the first stage then write the same bytes as two different tensors: the model reports it (or the values are
    wrong)."""
    front, built, seq = scaled
    header = sequence_header(built.simt, seq)
    planted = header.replace("    void* U = (uint8_t*)scratch + at;", "    void* U = (uint8_t*)scratch + at - 256;")
    assert planted != header
    try:
        got, want, _ = _end_to_end(front, built, seq, {"N": 300}, planted)
    except ModelError as e:
        assert "GM scratch" in str(e), e
    else:
        assert not np.array_equal(got["C"], want["C"])


def test_planted_short_scratch_is_an_access_outside_the_buffer(scaled):
    """Planted: NAME_scratch_bytes forgets the last tensor, so the caller's buffer is too small; the model reports the
    stage's write past its end."""
    front, built, seq = scaled
    header = sequence_header(built.simt, seq)
    head, sep, tail = header.partition("_scratch_bytes(int64_t N)\n{\n    int64_t at = 0;\n")
    body, end, rest = tail.partition("    return at;")
    planted = head + sep + body.splitlines(keepends=True)[0] + end + rest  # only the first tensor counted
    assert planted != header
    with pytest.raises(ModelError, match="outside every tensor"):
        _end_to_end(front, built, seq, {"N": 300}, planted)


def test_a_stage_named_by_kernel_runs_on_its_own(capsys):
    """`--kernel NAME__stage1` still runs that stage alone (on inputs of its own): what the function's run leaves out
    is only what nobody asked for."""
    rc = tilec_main(["run", str(ROOT / "examples" / "tilelang" / "gqa_decode_splitkv.tile"), "--target", "ascend910b",
                     "--check", "-Dnum_split=3", "--kernel", "gqa_decode__stage1", "--size", "batch=2,heads=4"])
    out = capsys.readouterr().out
    assert rc == 0 and "gqa_decode__stage1.Output: f16[2, 4, 64]" in out and "AIV_ONLY" in out and "PASS" in out, out
