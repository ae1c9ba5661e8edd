"""Per-thread code: `get_thread_binding` / `thread_binding`, `threads=(x, y)`, and what check-threads refuses.

Each kernel runs in the interpreter (vectorized over the block's threads) against numpy at a regular and a
ragged shape, then its sm80, sm90 and gfx942 lowerings run lane by lane in the SIMT model
(tilec/simt/interp.py, which reports a data race where a barrier is missing) against the interpreter;
the CUDA builds go through nvcc, the HIP ones through hipcc / clang, the WGSL runs on wgpu (lavapipe) where
those exist. Every refusal is checked at its line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel
from tilec.interp.run import random_inputs
from tilec.ir import tile as T
from tilec.simt.interp import SimtInterpreterError, run_simt
from tilec.targets.registry import lookup

# thread tn owns one row: the A tile and the block's rows of B staged in shared memory each K step
GEMV = """
const BN = 64
const BK = 32

kernel gemv(A: f16[K], B: f16[N, K], C: out f16[N]):
    with T.Kernel(T.ceildiv(N, BN), threads=BN) as bn:
        tn = T.get_thread_binding(0)
        A_s = T.alloc_shared((BK,), f16)
        B_s = T.alloc_shared((BN, BK), f16)
        acc = T.alloc_local((1,), f32)
        T.clear(acc)
        for bk in T.serial(T.ceildiv(K, BK)):
            for tk in T.serial(BK):
                k = bk * BK + tk
                A_s[tk] = A[k] if k < K else 0
                B_s[tn, tk] = B[bn * BN + tn, k] if bn * BN + tn < N and k < K else 0
            for tk in T.serial(BK):
                acc[0] += A_s[tk].astype(f32) * B_s[tn, tk].astype(f32)
        if bn * BN + tn < N:
            C[bn * BN + tn] = acc[0]
"""

# a per-thread local array, a tree reduction in shared memory (a thread-dependent `if` in a uniform `while`),
# an `if tx == 0` write of the block's result, a loop whose trip count depends on the thread, a `while` that
# each thread leaves on its own
BLOCK_SUM = """
const TH = 64

kernel block_sum(X: f32[N], S: out f32[G], P: out f32[N], Q: out i32[G, 64]):
    with Kernel(G, threads=TH) as bx:
        tx = get_thread_binding()
        buf = alloc_shared((TH,), f32)
        vals = alloc_local((4,), f32)
        for i in serial(4):
            g = bx * TH * 4 + tx * 4 + i
            vals[i] = if_then_else(g < N, X[g], 0.0)
        acc = alloc_var(f32, 0.0)
        for i in serial(4):
            acc += vals[i]
            g = bx * TH * 4 + tx * 4 + i
            if g < N:
                P[g] = vals[i] * 2.0 + f32(tx)
        buf[tx] = acc
        stride = TH // 2
        while stride > 0:
            if tx < stride:
                buf[tx] = buf[tx] + buf[tx + stride]
            stride = stride // 2
        if tx == 0:
            S[bx] = buf[0]
        n = 0
        for i in range(tx % 5):
            n += i + 1
        m = tx
        while m > 0:
            m = m // 2
            n += 100
        Q[bx, tx] = n
"""

# threads=(x, y): a split-K gemv whose partial sums meet in shared memory through atomic_add
SPLITK = """
const BN = 4
const RT = 16
const TK = 4

kernel splitk(A: f16[K], B: f16[N, K], C: out f16[N]):
    with T.Kernel(T.ceildiv(N, BN), threads=(BN, RT)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_l = T.alloc_local((TK,), f16)
        B_l = T.alloc_local((TK,), f16)
        part = T.alloc_shared((BN,), f32)
        acc = T.alloc_local((1,), f32)
        if tk == 0:
            part[tn] = 0
        T.clear(acc)
        for bk in T.serial(T.ceildiv(K, RT * TK)):
            for k in T.serial(TK):
                kk = bk * RT * TK + tk * TK + k
                A_l[k] = A[kk] if kk < K else 0
                B_l[k] = B[bn * BN + tn, kk] if bn * BN + tn < N and kk < K else 0
            for k in T.serial(TK):
                acc[0] += A_l[k].astype(f32) * B_l[k].astype(f32)
        T.atomic_add(part[tn], acc[0])
        if bn * BN + tn < N:
            C[bn * BN + tn] = part[tn]
"""

# tile operations around per-thread code: a gemm (warp-specialized with TMA on sm90), then thread tx sums
# row tx of the product; TileLang's `for tx in T.thread_binding(...)` form, and a shared rotate that every
# thread reads before any writes (a read-modify-write of shared memory indexed by the thread)
GEMM_ROWSUM = """
const BM = 128
const BN = 64
const BK = 32

kernel gemm_rowsum(A: f16[M, K], B: f16[K, N], R: out f32[M, G], W: out f32[G, 128]):
    with Kernel(ceildiv(N, BN), ceildiv(M, BM), threads=128) as (bx, by):
        A_s = alloc_shared((BM, BK), f16)
        B_s = alloc_shared((BK, BN), f16)
        C_s = alloc_shared((BM, BN), f32)
        acc = alloc_fragment((BM, BN), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, BK), num_stages=2):
            copy(A[by * BM, k * BK], A_s)
            copy(B[k * BK, bx * BN], B_s)
            gemm(A_s, B_s, acc)
        copy(acc, C_s)
        for tx in T.thread_binding(0, 128, thread="threadIdx.x"):
            total = alloc_var(f32, 0.0)
            for j in serial(BN):
                if bx * BN + j < N:
                    total += C_s[tx, j]
            if by * BM + tx < M:
                R[by * BM + tx, bx] = total
            C_s[tx, 0] = C_s[(tx + 1) % 128, 1]
            if by == 0:
                W[bx, tx] = C_s[tx, 0]
"""


# a histogram in shared memory: per-thread atomics under a thread-dependent condition
HISTOGRAM = """
kernel histogram(X: i32[N], H: out i32[G, 16]):
    with Kernel(G, threads=64) as bx:
        tx = get_thread_binding()
        hist = alloc_shared((16,), i32)
        if tx < 16:
            hist[tx] = 0
        for j in serial(4):
            g = bx * 256 + tx * 4 + j
            if g < N:
                atomic_add(hist[X[g] & 15], 1)
        if tx < 16:
            H[bx, tx] = hist[tx]
"""


# issue #27: a copy into a per-thread buffer is made by every thread in full (it was spread over the threads,
# leaving each thread's copy mostly unset), read at a thread-dependent index
LOCAL_COPY = """
kernel local_copy(M: i32[N, 4], O: out i32[N, 128]):
    with T.Kernel(N, threads=128) as bx:
        tx = T.get_thread_binding()
        m = T.alloc_local([4], T.int32)
        T.copy(M[bx, 0:4], m)
        O[bx, tx] = m[tx % 4]
"""

# a per-thread mask (the form check-threads recommends) guarding block-wide tile operations: with the copy spread
# over the threads the mask differed between threads and the barriers inside the branch hung the block
LOCAL_MASK = """
kernel local_mask(M: i32[N, 4], X: f32[N, 4, 64], O: out f32[N, 64]):
    with T.Kernel(N, threads=64) as bx:
        m = T.alloc_local([4], T.int32)
        T.copy(M[bx, 0:4], m)
        s = T.alloc_shared([64], T.float32)
        acc = T.alloc_fragment([64], T.float32)
        T.clear(acc)
        for k in T.serial(4):
            if m[k] % 2 != 0:
                T.copy(X[bx, k, 0:64], s)
                for i in T.Parallel(64):
                    acc[i] += s[i]
        T.copy(acc, O[bx, 0:64])
"""


def _ref_local_copy(a, s):
    return {"O": a["M"][:, np.arange(128) % 4]}


def _ref_local_mask(a, s):
    return {"O": np.einsum("nk,nkj->nj", (a["M"] % 2 != 0).astype(np.float32), a["X"])}


def _ref_histogram(a, s):
    x = a["X"]
    return {"H": np.array([np.bincount(x[256 * i:256 * (i + 1)] & 15, minlength=16) for i in range(s["G"])])}


def _ref_gemv(a, s):
    return {"C": a["B"].astype(np.float32) @ a["A"].astype(np.float32)}


def _ref_block_sum(a, s, th=64):
    x, g = a["X"], s["G"]
    xs = np.zeros(g * th * 4, np.float32)
    xs[:x.size] = x
    tx = (np.arange(x.size) % (th * 4)) // 4
    n = np.array([sum(range(1, t % 5 + 1)) + 100 * t.bit_length() for t in range(th)])
    return {"S": xs.reshape(g, -1).sum(1), "P": x * 2 + tx, "Q": np.tile(n, (g, 1))}


def _ref_rowsum(a, s):
    c = a["A"].astype(np.float32) @ a["B"].astype(np.float32)
    g = s["G"]
    pad = np.zeros((c.shape[0], g * 64), np.float32)
    pad[:, :c.shape[1]] = c
    tiles = pad[:128].reshape(128, g, 64)  # block row 0's tiles: W reads column 1 of the next row
    return {"R": pad.reshape(c.shape[0], g, 64).sum(2), "W": np.roll(tiles[:, :, 1], -1, axis=0).T}


KERNELS = {
    "gemv": (GEMV, _ref_gemv, [{"N": 128, "K": 64}, {"N": 100, "K": 75}], 2e-3),
    "block_sum": (BLOCK_SUM, _ref_block_sum, [{"N": 512, "G": 2}, {"N": 300, "G": 2}], 1e-4),
    "splitk": (SPLITK, _ref_gemv, [{"N": 8, "K": 128}, {"N": 10, "K": 150}], 2e-3),
    "histogram": (HISTOGRAM, _ref_histogram, [{"N": 512, "G": 2}, {"N": 300, "G": 2}], 0),
    "gemm_rowsum": (GEMM_ROWSUM, _ref_rowsum, [{"M": 128, "N": 128, "K": 64, "G": 2},
                                               {"M": 150, "N": 100, "K": 70, "G": 2}], 1e-3),
    "local_copy": (LOCAL_COPY, _ref_local_copy, [{"N": 4}, {"N": 3}], 0),
    "local_mask": (LOCAL_MASK, _ref_local_mask, [{"N": 4}, {"N": 3}], 1e-5),
}


def _compile(name: str, target: str | None = None, **kw):
    return tilec.compile(f"{name}.tile", text=KERNELS[name][0], target=target, verify=True, **kw)


def _inputs(k: T.Kernel, sizes: dict, seed: int) -> dict:
    args = random_inputs(k, {v.name: sizes[v.name] for v in k.size_vars}, seed)
    for p in k.params:  # outputs start as NaN: an element nobody writes is a mismatch
        if isinstance(p, T.Buffer) and p.is_output and p.dtype.is_float:
            args[p.name][...] = np.nan
    return args


def _copy(args: dict) -> dict:
    return {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}


def _close(got, want, tol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    bad = ~np.isclose(got, want, rtol=tol, atol=tol)
    assert not bad.any(), f"{what}: {int(bad.sum())} of {bad.size} differ (first at {np.argwhere(bad)[0].tolist()})"


@pytest.mark.parametrize("shape", [0, 1], ids=["regular", "ragged"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_interpreter_matches_numpy(name, shape):
    _, ref, shapes, tol = KERNELS[name]
    k = _compile(name).module.kernels[0]
    sizes = shapes[shape]
    args = _inputs(k, sizes, seed=shape)
    run_kernel(k, args)
    for out, want in ref(args, sizes).items():
        _close(args[out], want, tol, f"{name}.{out} at {sizes}")


# gemm_rowsum's tiles need 44 KiB of shared memory, past WebGPU's 16 KiB
WEBGPU_KERNELS = ["gemv", "block_sum", "splitk", "histogram", "local_copy", "local_mask"]
LOWERINGS = [(n, t) for n in KERNELS for t in ("sm80", "sm90", "gfx942", "webgpu")
             if t != "webgpu" or n in WEBGPU_KERNELS]


@pytest.mark.parametrize("name,target", LOWERINGS)
def test_lowering_matches_interpreter(name, target):
    """Every thread of every block executed by the SIMT model; a missing barrier would be a data race."""
    from tilec.ir.simt_printer import simt_module_str

    _, _, shapes, tol = KERNELS[name]
    k = _compile(name).module.kernels[0]
    lowered = _compile(name, target)
    sk = lowered.simt.kernels[0]
    if target == "sm90" and simt_module_str(lowered.simt) == simt_module_str(_compile(name, "sm80").simt):
        pytest.skip("sm90 lowers this kernel to the SIMT code sm80 does, instruction for instruction (CI time: the "
                    "sm80 run covers it)")
    for i, sizes in enumerate(shapes):
        args = _inputs(k, sizes, seed=10 + i)
        want = _copy(args)
        run_kernel(k, want)
        run_simt(sk, args, sizes, warp_size=lookup(target).warp_size)
        for p in k.params:
            if isinstance(p, T.Buffer) and p.is_output:
                _close(args[p.name], want[p.name], max(tol, 1e-3), f"{name}.{p.name} on {target} at {sizes}")


def test_sm90_keeps_the_thread_index_of_the_consumers():
    """Warp-specialized on sm90 (a producer warpgroup for the TMA copies): the user's thread index is the consumer
    thread's own, 0..threads-1, and the producer runs none of the per-thread code."""
    src = _compile("gemm_rowsum", "sm90").source
    assert "__launch_bounds__(256, 1) gemm_rowsum(" in src  # 128 consumers + the producer warpgroup
    consumer = src[src.index("int(threadIdx.x) >= 128"):]
    assert "int tx = int(threadIdx.x);" in consumer


def test_missing_barrier_after_thread_indexed_shared_writes_is_a_race(monkeypatch):
    """The barriers this feature relies on are real: without the one after `buf[tx] = acc` the model sees
    threads read what others have not yet written."""
    from tilec.passes.lower_to_simt import Lowerer

    monkeypatch.setattr(Lowerer, "barrier", lambda self: None)
    k = _compile("block_sum").module.kernels[0]
    sk = _compile("block_sum", "sm80").simt.kernels[0]
    with pytest.raises(SimtInterpreterError, match="data race"):
        run_simt(sk, _inputs(k, {"N": 512, "G": 1}, 0), {"N": 512, "G": 1})


def test_shared_update_indexed_by_the_thread_is_made_by_every_thread():
    """`C_s[tx, 0] = C_s[(tx + 1) % 128, 1]`: every thread reads, a barrier, every thread writes its element (a
    block-uniform update is made by thread 0 alone)."""
    lines = [x.strip() for x in _compile("gemm_rowsum", "sm80").source.splitlines()]
    i = next(n for n, x in enumerate(lines) if x.startswith("float shared_value = C_s["))
    assert lines[i + 1:i + 4] == ["int shared_index = tx * 64;", "__syncthreads();",
                                  "C_s[shared_index] = shared_value;"]


def test_print_of_a_per_thread_value_prints_that_thread():
    import io

    text = """
kernel k(A: f32[N]):
    with Kernel(1, threads=64) as bx:
        tx = get_thread_binding()
        print(tx * 10, msg="v", thread=5)
"""
    k = tilec.compile("k.tile", text=text).module.kernels[0]
    out = io.StringIO()
    run_kernel(k, {"A": np.zeros(4, np.float32)}, stdout=out)
    assert out.getvalue().strip() == "[block (0, 0, 0) thread 5] v: 50"
    sk = tilec.compile("k.tile", text=text, target="sm80").simt.kernels[0]
    dev = io.StringIO()
    run_simt(sk, {"A": np.zeros(4, np.float32)}, {"N": 4}, stdout=dev)
    assert dev.getvalue() == out.getvalue()


def test_multi_dimensional_threads_unflatten_like_cuda():
    text = """
kernel k(O: out i32[2, 4, 4, 2]):
    with Kernel(1, threads=(2, 4, 4)) as bx:
        x = get_thread_binding(0)
        y = get_thread_binding(1)
        z = T.get_thread_binding(dim=2)
        O[0, y, z, x] = x + 10 * y + 100 * z
        t = T.thread_binding(0, 4, thread="threadIdx.y")
        O[1, y, z, x] = t
"""
    result = tilec.compile("k.tile", text=text, verify=True)
    assert result.module.kernels[0].threads == 32
    o = np.zeros((2, 4, 4, 2), np.int32)
    run_kernel(result.module.kernels[0], {"O": o})
    z, y, x = np.meshgrid(np.arange(4), np.arange(4), np.arange(2), indexing="ij")
    want0 = (x + 10 * y + 100 * z).transpose(1, 0, 2)
    assert (o[0] == want0).all() and (o[1] == np.arange(4)[:, None, None]).all()
    got = np.zeros_like(o)
    run_simt(tilec.compile("k.tile", text=text, target="sm80").simt.kernels[0], {"O": got}, {})
    assert (got == o).all()


def test_emit_ir_shows_the_thread_index():
    ir = tilec.compile("splitk.tile", text=SPLITK).ir()
    assert "tn: i32 = threadIdx % 4" in ir and "tk: i32 = threadIdx // 4" in ir
    assert "atomic_add part[tn +: 1], acc[0] [per element]" in ir  # each thread adds its own partial sum


# ---------------------------------------------------------------- toolchains and WebGPU


def _require(tool, what: str):
    if tool:
        return tool
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1)")
    pytest.skip(f"no {what}")


@pytest.mark.parametrize("target", ["sm80", "sm90"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_builds_with_nvcc(name, target):
    _require(shutil.which("nvcc"), "nvcc")
    art = tilec.compile(f"{name}.tile", text=KERNELS[name][0], target=target, emit="cubin", use_cache=False)
    assert art.data[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", list(KERNELS))
def test_builds_for_gfx942(name):
    from tilec.targets.hip.toolchain import find_compiler

    _require(find_compiler("gfx942"), "hipcc or clang-19")
    art = tilec.compile(f"{name}.tile", text=KERNELS[name][0], target="gfx942", emit="hsaco", use_cache=False)
    assert art.data[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", WEBGPU_KERNELS)
def test_webgpu_matches_interpreter(name, tmp_path):
    import tilec.runtime as rt
    from tilec.artifacts import dumps, manifest
    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    _require(ok, f"WebGPU ({why})")
    _require("shader-f16" in wgsl.Device.get().features, "a WebGPU adapter with shader-f16 (mesa-vulkan-drivers)")
    result = _compile(name, "webgpu")
    out = tmp_path / f"{name}.wgsl"
    out.write_text(result.source)
    Path(str(out) + ".json").write_text(dumps(manifest(result, "wgsl", ["wgsl"], "none", {}, out.name)))
    mod = rt.load(out)
    k = _compile(name).module.kernels[0]
    _, _, shapes, tol = KERNELS[name]
    for i, sizes in enumerate(shapes):
        args = _inputs(k, sizes, seed=20 + i)
        want = _copy(args)
        run_kernel(k, want)
        getattr(mod, k.name)(*[args[p.name] for p in k.params])
        for p in k.params:
            if isinstance(p, T.Buffer) and p.is_output:
                _close(args[p.name], want[p.name], max(tol, 1e-2), f"{name}.{p.name} on webgpu at {sizes}")


# ---------------------------------------------------------------- refusals


def _errors(body: str, target: str | None = None, threads: str = "128") -> list:
    text = f"""
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads={threads}) as bx:
        tx = get_thread_binding()
        s = alloc_shared((128,), f32)
        f = alloc_fragment((128,), f32)
        loc = alloc_local((4,), f32)
""" + "".join(f"        {line}\n" for line in body.strip("\n").splitlines())
    with pytest.raises(CompileError) as e:
        tilec.compile("k.tile", text=text, target=target)
    return [d for d in e.value.diagnostics if d.severity == "error"]


REFUSALS = [
    # a tile operation, a Parallel loop, a Pipelined loop under a thread-dependent condition
    ("if tx < 32:\n    copy(A[bx * 128], s)", 9, "copy is a block-wide tile operation"),
    ("while tx < 4:\n    clear(loc)", 9, "cannot run under the thread-dependent condition at line 8"),
    ("if tx < 64:\n    for i in Parallel(128):\n        s[i] = 0.0", 9, "a Parallel loop is spread over all the"),
    ("for k in range(tx):\n    for i in Parallel(128):\n        s[i] = 0.0", 9, "a Parallel loop is spread"),
    ("if tx == 0:\n    for k in Pipelined(4, num_stages=2):\n        copy(A[k * 128], s)", 9,
     "a Pipelined loop keeps the whole block in step"),
    ("for k in Pipelined(tx, num_stages=2):\n    copy(A[k * 128], s)", 8, "trip count that uses 'tx'"),
    # thread-dependent operands of tile operations
    ("copy(A[bx * 128 + tx], s)", 8, "the operands of copy, a block-wide tile operation, must be the same"),
    ("fill(s, f32(tx))", 8, "must be the same in every thread"),
    ("for i in serial(4):\n    loc[i] = f32(tx)\ncopy(loc, s[0:4])", 10,
     "copy reads 'loc', which holds a different value in every thread"),
    # thread-dependent values inside Parallel loops, fragments indexed by the thread
    ("for i in Parallel(128):\n    f[i] = f32(tx)", 9, "uses 'tx' (computed from the thread index)"),
    ("for i in serial(4):\n    loc[i] = f32(tx)\nfor i in Parallel(128):\n    f[i] = loc[0]", 11,
     "'loc' (a per-thread buffer holding thread-dependent values)"),
    ("x = f[tx]", 8, "fragment 'f' is spread over the threads by the compiler"),
    # one element written by every thread with its own value
    ("B[bx] = f32(tx)", 8, "every thread stores a value of its own into the same element of 'B'"),
    ("s[0] = f32(tx)", 8, "into the same element of 's'"),
    # shared memory ordered only by a barrier, under thread-dependent control flow
    ("if tx < 16:\n    s[tx] = 1.0\n    B[tx] = s[tx + 1]", 10, "reads shared memory that the statement at line 9"),
    ("if tx < 16:\n    v = s[tx + 1]\n    s[tx] = v", 10, "writes shared memory that the statement at line 9 reads"),
    ("if tx < 16:\n    for i in serial(4):\n        s[tx] = s[tx] + 1.0", 10, "reads shared memory that"),
    ("while s[tx] > 0.0:\n    s[tx] = s[tx] - 1.0", 9, "writes shared memory that the statement at line 8"),
]


@pytest.mark.parametrize("body,line,message", REFUSALS, ids=[r[2][:40] for r in REFUSALS])
def test_refusal(body, line, message):
    errs = _errors(body)
    assert errs, body
    assert any(e.span.line == line and message in e.message for e in errs), [(e.span.line, e.message) for e in errs]


@pytest.mark.parametrize("body,message", [
    ("y = get_thread_binding(1)", "this kernel's threads (threads=128) have 1 dimension(s)"),
    ("y = thread_binding(0, 64, thread=\"threadIdx.x\")", "thread_binding(0, 64) must cover the kernel's threads"),
    ("y = thread_binding(0, 128, thread=\"blockIdx.x\")", "binds threadIdx.x, .y or .z"),
    ("for i in Parallel(128):\n    y = get_thread_binding()", "uses the thread index"),
    ("x = alloc_local((tx,), f32)", "must be known at compile time"),
    ("for i in Parallel(tx):\n    s[i] = 0.0", "compile-time integer"),
])
def test_builder_refusal(body, message):
    errs = _errors(body)
    assert any(message in e.message for e in errs), [e.message for e in errs]


def test_interpreter_reports_threads_racing_on_one_element():
    """Allowed by the compiler (under `if tx == 0:` one thread stores), but here four threads store different
    values: the interpreter stops at the store, and the SIMT model reports the same conflict."""
    from tilec.interp.tile_interp import InterpreterError

    text = """
kernel k(B: out f32[N]):
    with Kernel(1, threads=64) as bx:
        tx = get_thread_binding()
        if tx < 4:
            B[0] = f32(tx)
        if tx < 4:
            B[1] = 2.0
"""
    k = tilec.compile("k.tile", text=text).module.kernels[0]
    with pytest.raises(InterpreterError, match=r"threads store different values to 'B'\[0\] in one statement"):
        run_kernel(k, {"B": np.zeros(4, np.float32)})
    sk = tilec.compile("k.tile", text=text, target="sm80").simt.kernels[0]
    with pytest.raises(SimtInterpreterError, match="write conflict"):
        run_simt(sk, {"B": np.zeros(4, np.float32)}, {"N": 4})
    ok = text.replace("B[0] = f32(tx)", "B[0] = 1.0")  # one value from every thread: one store
    args = {"B": np.zeros(4, np.float32)}
    run_kernel(tilec.compile("k.tile", text=ok).module.kernels[0], args)
    assert args["B"].tolist() == [1.0, 2.0, 0.0, 0.0]


def test_thread_binding_loop_checks_its_extent():
    text = """
kernel k(B: out f32[N]):
    with Kernel(1, threads=(32, 2)) as bx:
        for ty in T.thread_binding(0, 4, thread="threadIdx.y"):
            B[ty] = 1.0
"""
    with pytest.raises(CompileError) as e:
        tilec.compile("k.tile", text=text)
    d = e.value.diagnostics[0]
    assert d.span.line == 4 and "thread_binding(0, 2, ...)" in d.message


def test_threads_tuple_must_be_whole_warps():
    text = """
kernel k(B: out f32[N]):
    with Kernel(1, threads=(3, 5)) as bx:
        B[get_thread_binding(0)] = 1.0
"""
    tilec.compile("k.tile", text=text)  # the interpreter runs any count
    with pytest.raises(CompileError, match="15 threads"):
        tilec.compile("k.tile", text=text, target="sm80")


def test_ascend_refuses_the_thread_index():
    with pytest.raises(CompileError) as e:
        tilec.compile("gemv.tile", text=GEMV, target="ascend910b")
    d = e.value.diagnostics[0]
    assert d.span.line == 7 and "AscendC back end has no SIMT threads" in d.message


def test_webgpu_refuses_a_barrier_under_a_condition_that_reads_shared_memory():
    """A thread-dependent value read back from shared memory at a block-uniform index is the same in every
    thread (the CUDA targets put a tile op under it), but WGSL's uniformity rules count it as non-uniform."""
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        tx = get_thread_binding()
        s = alloc_shared((128,), f32)
        t = alloc_shared((128,), f32)
        s[tx] = A[bx * 128 + tx] if bx * 128 + tx < N else 0.0
        if s[0] > 0.0:
            copy(A[bx * 128], t)
            copy(t, B[bx * 128])
"""
    tilec.compile("k.tile", text=text, target="sm80")
    with pytest.raises(CompileError) as e:
        tilec.compile("k.tile", text=text, target="webgpu")
    d = e.value.diagnostics[0]
    assert d.span.line == 8 and "non-uniform control flow" in d.message


def test_stores_at_the_thread_index_in_a_loop_end_each_iteration_with_a_barrier():
    """Iteration k of thread t stores s[t + k], which thread t + 1 stored in iteration k - 1: without a barrier
    between the iterations a slow thread's older store could land last (the SIMT model calls it a race)."""
    text = """
kernel k(B: out f32[N]):
    with Kernel(1, threads=64) as bx:
        tx = get_thread_binding()
        s = alloc_shared((64,), f32)
        for k in serial(4):
            s[(tx + k) % 64] = f32(k * 100 + tx)
        B[tx] = s[tx]
"""
    k = tilec.compile("k.tile", text=text).module.kernels[0]
    want = {"B": np.zeros(64, np.float32)}
    run_kernel(k, want)
    assert want["B"][5] == 300 + 2
    for target in ("sm80", "gfx942"):
        got = {"B": np.zeros(64, np.float32)}
        run_simt(tilec.compile("k.tile", text=text, target=target).simt.kernels[0], got, {"N": 64},
                 warp_size=lookup(target).warp_size)
        assert (got["B"] == want["B"]).all()


def test_writes_to_other_shared_buffers_need_no_barrier_but_the_same_buffer_does():
    """naive_gemv's staging loop (a block-uniform store to A_s, a store at the thread's own row of B_s) runs without
    barriers, like TileLang's; two stores at different threads' elements of one buffer keep theirs (without it the
    SIMT model sees a race)."""
    src = _compile("gemv", "sm80").source
    staging = src[src.index("for (int tk = 0"):src.index("for (int tk_2")]
    assert "__syncthreads" not in staging.split("}\n", 1)[0]
    text = """
kernel k(B: out f32[N]):
    with Kernel(1, threads=64) as bx:
        tx = get_thread_binding()
        s = alloc_shared((64,), f32)
        s[tx] = 1.0
        s[(tx + 1) % 64] = f32(tx)
        B[tx] = s[tx]
"""
    sk = tilec.compile("k.tile", text=text, target="sm80").simt.kernels[0]
    from tilec.ir import simt as S

    first = next(i for i, x in enumerate(sk.body) if isinstance(x, S.SStore) and x.buffer.name == "s")
    assert isinstance(sk.body[first + 1], S.Barrier)
    want = {"B": np.zeros(64, np.float32)}
    run_kernel(tilec.compile("k.tile", text=text).module.kernels[0], want)
    got = {"B": np.zeros(64, np.float32)}
    run_simt(sk, got, {"N": 64})
    assert (got["B"] == want["B"]).all() and want["B"][1] == 0.0


def test_a_parallel_loop_writing_the_buffer_keeps_the_barrier_between_iterations():
    """Thread tx stores s[tx]; the next iteration's Parallel loop has thread i store s[63 - i]: a store by another
    thread to the same element, which only the barrier at the end of the iteration orders."""
    text = """
kernel k(B: out f32[N]):
    with Kernel(1, threads=64) as bx:
        tx = get_thread_binding()
        s = alloc_shared((64,), f32)
        for k in serial(3):
            for i in Parallel(64):
                s[63 - i] = f32(k * 100 + i)
            s[tx] = f32(k * 1000 + tx)
        B[tx] = s[tx]
"""
    want = {"B": np.zeros(64, np.float32)}
    run_kernel(tilec.compile("k.tile", text=text).module.kernels[0], want)
    assert want["B"][3] == 2003
    got = {"B": np.zeros(64, np.float32)}
    run_simt(tilec.compile("k.tile", text=text, target="sm80").simt.kernels[0], got, {"N": 64})
    assert (got["B"] == want["B"]).all()


def test_a_gemm_operand_at_a_thread_dependent_region_is_refused():
    """check-threads sees every tile op's regions, a gemm's A, B and C too (not only copy-like fields)."""
    text = """
kernel g(A: f16[M, K], B: f16[K, N], C: out f32[M, N]):
    with T.Kernel(ceildiv(N, 64), ceildiv(M, 64), threads=128) as (bx, by):
        tx = T.get_thread_binding()
        A_s = T.alloc_shared((64, 32), f16)
        B_s = T.alloc_shared((32, 64), f16)
        acc = T.alloc_fragment((64, 64), f32)
        T.clear(acc)
        T.copy(A[by * 64, 0], A_s)
        T.copy(B[0, bx * 64], B_s)
        T.gemm(A_s[0:64, tx // 128:tx // 128 + 32], B_s, acc)
        T.copy(acc, C[by * 64, bx * 64])
"""
    with pytest.raises(CompileError) as e:
        tilec.compile("g.tile", text=text)
    errs = [d for d in e.value.diagnostics if d.severity == "error"]
    assert any(d.span.line == 11 and "the operands of gemm" in d.message for d in errs), errs


def test_interpreter_refuses_a_parallel_store_whose_points_race_on_one_element(tmp_path):
    """A Parallel loop whose store ignores the loop's variables writes one element from every point: one point
    (`Parallel(1)`) or points that agree are fine, points that store different values are a race on a GPU."""
    from tilec.interp.tile_interp import InterpreterError

    src = tmp_path / "one_element.tile"
    src.write_text("""
kernel one_element(A: f32[4], B: out f32[2]):
    with Kernel(1, threads=32) as bx:
        for i in Parallel(1):
            B[0] = A[0] * 2.0
        for i in Parallel(4):
            B[1] = A[i]
""")
    k = tilec.compile(str(src)).module.kernels[0]
    args = {"A": np.full(4, 3.0, np.float32), "B": np.zeros(2, np.float32)}
    run_kernel(k, args)
    assert args["B"].tolist() == [6.0, 3.0]
    with pytest.raises(InterpreterError, match=r"threads store different values to 'B'\[1\]"):
        run_kernel(k, {"A": np.arange(4, dtype=np.float32), "B": np.zeros(2, np.float32)})
