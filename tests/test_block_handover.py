"""Blocks of one launch handing results over (language.md, "Blocks of one launch meeting at a counter"):
`T.fence_global()` and zeroed scratch (`alloc_global(..., zeroed=True)`) — the last block of a row tile to arrive at
its counter sums the other blocks' shares, then sets the counter back to zero for the next call.

Checked against numpy in the interpreter and, lane by lane, in the SIMT model of each GPU target; the generated
code's fence and barriers; the manifest's layout; what each target refuses; and planted slips (a counter left
nonzero, a fence under a thread condition) that must be caught.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp.run import random_inputs, run_launches
from tilec.interp.tile_interp import InterpreterError

HANDOVER = """
const parts = 3

kernel rowsum(X: f32[M, N], Y: out f32[M, 64]):
    Shares = alloc_global((parts, M, 64), f32)
    Arrived = alloc_global((ceildiv(M, 32),), i32, zeroed=True)
    with Kernel(ceildiv(M, 32), parts, threads=128) as (bx, bz):
        tx = get_thread_binding()
        last = alloc_shared((1,), i32)
        f = alloc_fragment((32, 64), f32)
        copy(X[bx * 32, bz * 64], f)
        copy(f, Shares[bz, bx * 32, 0])
        fence_global()
        if tx == 0:
            last[0] = atomic_add(Arrived[bx], 1, return_prev=True)
        if last[0] == parts - 1:
            fence_global()
            for z in range(parts):
                if z != bz:
                    for i, j in Parallel(32, 64):
                        if bx * 32 + i < M:
                            f[i, j] += Shares[z, bx * 32 + i, j]
            copy(f, Y[bx * 32, 0])
            if tx == 0:
                Arrived[bx] = 0
"""


# one launch reading a zeroed counter no launch writes: zeros
READS_ZEROED = """
kernel k(A: f32[M], C: out f32[M]):
    Z = alloc_global((1,), i32, zeroed=True)
    with Kernel(ceildiv(M, 64), threads=64) as bx:
        for i in Parallel(64):
            if bx * 64 + i < M:
                C[bx * 64 + i] = A[bx * 64 + i] + Z[0].astype(f32)
"""


def _write(tmp_path, text: str):
    p = tmp_path / "k.tile"
    p.write_text(text)
    return p


def _want(x: np.ndarray) -> np.ndarray:
    cols = np.zeros((x.shape[0], 192), np.float64)
    cols[:, :min(192, x.shape[1])] = x[:, :192]
    return cols[:, 0:64] + cols[:, 64:128] + cols[:, 128:192]


@pytest.mark.parametrize("M, N", [(45, 192), (64, 192), (1, 150), (100, 200)])
def test_the_last_block_to_arrive_sums_the_shares(tmp_path, M, N):
    m = tilec.compile(_write(tmp_path, HANDOVER), verify=True).module
    (seq,) = m.launches
    args = random_inputs(seq, {"M": M, "N": N}, seed=M + N)
    run_launches(m, seq, args)
    np.testing.assert_allclose(args["Y"], _want(args["X"]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942"])
def test_each_gpu_lowering_runs_the_handover_lane_by_lane(tmp_path, target):
    from tilec.simt.interp import run_simt_sequence

    path = _write(tmp_path, HANDOVER)
    front = tilec.compile(path).module
    result = tilec.compile(path, target=target)
    args = random_inputs(front.launches[0], {"M": 70, "N": 192}, seed=3)
    run_simt_sequence(result, args, {"M": 70, "N": 192})
    np.testing.assert_allclose(args["Y"], _want(args["X"]), rtol=1e-5, atol=1e-5)


def test_a_counter_left_nonzero_is_an_error_naming_it(tmp_path):
    """Planted slip: the last block forgets to reset its counter, so the next call would start from 3."""
    forgets = HANDOVER.replace("                Arrived[bx] = 0", "                pass")
    m = tilec.compile(_write(tmp_path, forgets)).module
    args = random_inputs(m.launches[0], {"M": 40, "N": 192}, seed=1)
    with pytest.raises(InterpreterError, match=r"'rowsum' ends with 2 nonzero element\(s\) of its zeroed scratch "
                                               r"tensor 'Arrived' \(first \[0\]: 3\)"):
        run_launches(m, m.launches[0], args)


def test_the_simt_model_checks_the_counters_too(tmp_path):
    from tilec.simt.interp import run_simt_sequence

    path = _write(tmp_path, HANDOVER.replace("                Arrived[bx] = 0", "                pass"))
    front = tilec.compile(path).module
    args = random_inputs(front.launches[0], {"M": 40, "N": 192}, seed=1)
    with pytest.raises(InterpreterError, match="zeroed scratch tensor 'Arrived'"):
        run_simt_sequence(tilec.compile(path, target="sm80"), args, {"M": 40, "N": 192})


def test_zeroed_scratch_may_be_read_before_any_launch_writes_it(tmp_path):
    """A launch that only reads a scratch tensor is refused (it starts undefined), unless the tensor is zeroed."""
    src = READS_ZEROED
    m = tilec.compile(_write(tmp_path, src)).module
    args = random_inputs(m.launches[0], {"M": 70}, seed=2)
    run_launches(m, m.launches[0], args)
    np.testing.assert_array_equal(args["C"], args["A"])
    with pytest.raises(CompileError, match="reads the scratch tensor 'Z', which no earlier launch writes"):
        tilec.compile(_write(tmp_path, src.replace(", zeroed=True", "")))


def test_zeroed_scratch_holds_integers(tmp_path):
    with pytest.raises(CompileError) as e:
        tilec.compile(_write(tmp_path, HANDOVER.replace("i32, zeroed=True", "f32, zeroed=True")))
    assert "a zeroed scratch tensor holds counters: its dtype must be an integer type, not f32" in str(e.value)


def test_cuda_fences_between_the_block_barriers(tmp_path):
    """The plane's stores, a barrier, the acquire-release fence, a barrier, then thread 0's atomic; after the atomic
    the same sequence again before the other shares are read (the acquire side)."""
    src = tilec.compile(_write(tmp_path, HANDOVER), target="sm90").source
    body = src[src.index("__global__"):]
    fence = "  __syncthreads();\n  tl::fence_acq_rel_gpu();\n  __syncthreads();\n"
    assert body.count("tl::fence_acq_rel_gpu();") == 2
    assert body.index(fence) < body.index("tl::atomic_add(&Arrived")
    assert "fence.acq_rel.gpu" in src  # the device header's definition
    hip = tilec.compile(_write(tmp_path, HANDOVER), target="gfx942").source
    assert hip.count('__builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "agent");') == 2


def test_the_manifest_puts_zeroed_scratch_first(tmp_path):
    from tilec.artifacts import launch_entries

    result = tilec.compile(_write(tmp_path, HANDOVER), target="sm80")
    from tilec.artifacts import kernel_entries

    (entry,) = launch_entries(result.module, kernel_entries(result))
    assert [(b["name"], b.get("zeroed", False)) for b in entry["scratch"]] == [("Arrived", True), ("Shares", False)]
    assert entry["scratch"][0]["offset"] == "0"
    assert entry["zeroed_bytes"] == "(ceildiv((4 * ceildiv(M, 32)), 256) * 256)"
    assert json.dumps(entry)  # plain JSON


def test_emit_ir_round_trips_the_fence_and_the_zeroed_scratch(tmp_path):
    from tilec.ir.printer import module_str
    from tilec.ir.reader import read_module

    m = tilec.compile(_write(tmp_path, HANDOVER)).module
    text = module_str(m)
    assert "  scratch Arrived: i32[ceildiv(M, 32)] zeroed" in text and "fence_global" in text
    assert module_str(read_module(text)) == text


@pytest.mark.parametrize("target, why", [
    ("webgpu", "fence_global() orders global memory between the blocks of a launch, but WGSL's barriers and atomics "
               "order memory within a workgroup only"),
])
def test_targets_without_a_device_fence_refuse_it_at_the_line(tmp_path, target, why):
    with pytest.raises(CompileError) as e:
        tilec.compile(_write(tmp_path, HANDOVER), target=target)
    (d, *_) = e.value.diagnostics
    assert why in d.message and (d.span.line, d.span.col) == (13, 9)


def test_ascend_refuses_the_fence_at_the_line(tmp_path):
    src = """
kernel k(A: f32[M, 64], C: out f32[M, 64]):
    with Kernel(ceildiv(M, 32), threads=128) as bx:
        f = alloc_fragment((32, 64), f32)
        copy(A[bx * 32, 0], f)
        copy(f, C[bx * 32, 0])
        fence_global()
"""
    with pytest.raises(CompileError) as e:
        tilec.compile(_write(tmp_path, src), target="ascend910b")
    assert "fence_global() hands results between the blocks of one launch through an atomic counter" in str(e.value)


@pytest.mark.parametrize("body, message", [
    ("        if tx == 0:\n            fence_global()\n",
     "fence_global() is block-wide (a barrier follows the fence): every thread of the block must reach it"),
    ("        for i in Parallel(64):\n            fence_global()\n",
     "T.fence_global() is a statement of the whole block; it cannot be inside a Parallel loop"),
    ("        fence_global(1)\n", "T.fence_global() takes no arguments"),
])
def test_a_fence_where_not_every_thread_reaches_it_is_refused(tmp_path, body, message):
    src = ("kernel k(A: f32[64], C: out f32[64]):\n    with Kernel(1, threads=64) as bx:\n"
           "        tx = get_thread_binding()\n" + body + "        C[tx] = A[tx]\n")
    with pytest.raises((CompileError, InterpreterError)) as e:
        tilec.compile(_write(tmp_path, src), target="sm80")
    assert message in str(e.value)


def test_ascend_refuses_zeroed_scratch_at_its_declaration(tmp_path):
    src = READS_ZEROED
    with pytest.raises(CompileError) as e:
        tilec.compile(_write(tmp_path, src), target="ascend910b")
    (d, *_) = e.value.diagnostics
    assert "the zeroed scratch tensor 'Z': the AscendC launcher does not clear scratch" in d.message
    assert (d.span.line, d.span.col) == (3, 5)


def test_written_tensors_of_a_handover_kernel_are_not_restrict(tmp_path):
    """Other blocks' planes must not be read through the read-only path that __restrict__ lets nvcc choose (it did:
    LDG.E.64.CONSTANT in the first build of the one-launch split-K); the kernel's inputs keep it."""
    src = tilec.compile(_write(tmp_path, HANDOVER), target="sm90").source
    sig = src[src.index("__global__"):].split("{", 1)[0]
    assert "const float* __restrict__ X" in sig
    assert "float* Y" in sig and "float* Shares" in sig and "int* Arrived" in sig
    plain = tilec.compile(_write(tmp_path, "kernel k(A: f32[64], C: out f32[64]):\n"
                                           "    with Kernel(1, threads=64) as bx:\n"
                                           "        for i in Parallel(64):\n            C[i] = A[i]\n"),
                          target="sm90").source
    assert "float* __restrict__ C" in plain


def test_the_one_launch_split_k_example_matches_numpy(tmp_path):
    """examples/handover/gemm_split_k_last_block.tile at ragged shapes (interpreter) and in the sm90 SIMT model."""
    from pathlib import Path

    from tilec.simt.interp import run_simt_sequence

    example = Path(__file__).resolve().parent.parent / "examples" / "handover" / "gemm_split_k_last_block.tile"
    for defines, sizes in [({}, {"M": 70, "N": 130, "K": 600}), ({"split_k": 2}, {"M": 1, "N": 200, "K": 257})]:
        m = tilec.compile(example, defines=defines).module
        args = random_inputs(m.launches[0], sizes, seed=sizes["M"])
        want = args["A"].astype(np.float32) @ args["B"].astype(np.float32)
        run_launches(m, m.launches[0], args)
        np.testing.assert_allclose(args["C"].astype(np.float32), want, rtol=1e-2, atol=1e-2)
    result = tilec.compile(example, target="sm90", defines={"split_k": 3})
    sizes = {"M": 70, "N": 130, "K": 400}
    args = random_inputs(m.launches[0], sizes, seed=9)
    want = args["A"].astype(np.float32) @ args["B"].astype(np.float32)
    run_simt_sequence(result, args, sizes)
    np.testing.assert_allclose(args["C"].astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_the_language_guide_s_example_runs(tmp_path):
    """docs/language.md's counter hand-over example, compiled and run as the guide shows it."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text()
    section = doc[doc.index("### Blocks of one launch meeting at a counter"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]
    m = tilec.compile(_write(tmp_path, code), verify=True).module
    args = random_inputs(m.launches[0], {"M": 45, "N": 192}, seed=4)
    run_launches(m, m.launches[0], args)
    np.testing.assert_allclose(args["Y"], _want(args["X"]), rtol=1e-5, atol=1e-5)
    tilec.compile(_write(tmp_path, code), target="sm90")


# ---------------------------------------------------------------- tilec.runtime's zeroed scratch (fake driver)


@pytest.fixture
def handover_module(tmp_path, monkeypatch):
    from fake_cuda import load_fake_module

    return load_fake_module(monkeypatch, tilec.compile(_write(tmp_path, HANDOVER), target="sm80"))


def test_device_arrays_get_counters_zeroed_once_in_a_kept_buffer_of_their_own(handover_module):
    from fake_cuda import DeviceArray

    mod, fake = handover_module
    x, y = DeviceArray(0x1000, (45, 192)), DeviceArray(0x9000, (45, 64))
    mod.rowsum(x, y)
    (ws, ws_bytes), (counters, counter_bytes) = fake.allocs  # the workspace, then the counters' own buffer
    assert counter_bytes == 8 and fake.zeroed == [(counters, 8)]  # Arrived: 2 counters
    (launch,) = fake.launches
    assert launch.args[:4] == [0x1000, 0x9000, ws + 256, counters]  # X, Y, Shares (after Arrived's bytes), Arrived
    mod.rowsum(x, y)  # kept: the function left the counters zero, so no memset
    mod.rowsum(DeviceArray(0x1000, (20, 192)), DeviceArray(0x9000, (20, 64)))  # a smaller call: the same zero bytes
    assert len(fake.allocs) == 2 and len(fake.zeroed) == 1
    mod.rowsum(DeviceArray(0x1000, (9000, 192)), DeviceArray(0x9000, (9000, 64)))  # 282 counters: both buffers grow
    assert len(fake.allocs) == 4 and fake.zeroed[-1] == (fake.allocs[-1][0], 4 * 282) and counters in fake.freed
    mod.rowsum.release_workspaces()
    assert {ptr for ptr, _ in fake.allocs} <= set(fake.freed)


def test_numpy_arguments_get_the_workspace_s_counters_cleared_each_call(handover_module):
    mod, fake = handover_module
    x, y = np.ones((45, 192), np.float32), np.zeros((45, 64), np.float32)
    for _ in range(2):
        mod.rowsum(x, y)
    workspaces = [ptr for ptr, nbytes in fake.allocs if nbytes == mod.rowsum.workspace_bytes(x, y)]
    assert fake.zeroed == [(w, 8) for w in workspaces] and len(workspaces) == 2  # the 2 counters, each call
