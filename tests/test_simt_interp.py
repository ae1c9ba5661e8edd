"""The lowered SIMT IR of every sample, executed by the SIMT-level interpreter, against the Tile IR interpreter.

tilec.simt.interp runs what lower-to-simt produced — every thread of every block, shared memory,
barriers, warp shuffles, cp.async, ldmatrix and mma.sync lane by lane — so a wrong fragment layout, a missing
bounds predicate or a missing barrier is caught here on a CPU. Each sample runs at a shape of one or a few whole
tiles and at a ragged one, for sm80 (32-lane warps, mma.sync/ldmatrix/cp.async) and for gfx90a (64-lane
wavefronts, FMA gemm, no cp.async) where the HIP back end exists. Outputs start as NaN in both runs, so an
element the lowered code fails to write is a mismatch.

Tolerances: both interpreters round the same way; they differ only in the order of f32 accumulation (mma
tiles of 16 against one matmul), well below half an ulp of the f16/bf16 outputs most of the time, so the bound
is one or two ulps of the output dtype. A layout or predication bug gives errors of order one.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.interp import random_inputs, run_kernel
from tilec.ir import tile as T
from tilec.simt.interp import SimtInterpreterError, run_simt
from tilec.targets.registry import backend_available, lookup

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TOL = {"f16": (4e-3, 4e-3), "bf16": (3e-2, 3e-2), "f32": (1e-4, 1e-4)}

G64 = {"block_M": 64, "block_N": 64}
ROWS_SMALL = {"block_M": 2, "block_N": 256, "threads": 64}
ROW_TILES = {"block_M": 1, "block_N": 1024, "threads": 64, "tile_elems": 4}
# The persistent row schedule: grids of two blocks looping over the rows (pipelined, the next rows copied into the
# second shared stage), held rows in one register tile or read back a tile at a time, and rows past block_N.
ROWS_PERSISTENT = {"block_M": 2, "block_N": 256, "threads": 64, "row_grid": 2}
ROW_TILES_PERSISTENT = {"block_M": 1, "block_N": 512, "threads": 64, "row_grid": 2}
# (sample, defines, [one-tile sizes, ragged sizes])
CASES = [
    ("vector_add", {}, [{"N": 1024}, {"N": 1500}]),
    ("row_sum", {}, [{"M": 16, "N": 256}, {"M": 20, "N": 300}]),
    ("softmax", {}, [{"M": 4, "N": 512}, {"M": 7, "N": 1000}]),
    ("rmsnorm", {}, [{"M": 4, "N": 512}, {"M": 7, "N": 1000}]),
    ("layernorm", {}, [{"M": 4, "N": 512}, {"M": 7, "N": 1000}]),
    # Rows held on chip (N <= block_N: one read of X) at a ragged length, and streamed past it; two rows a
    # block in one register tile, and one row a block in several.
    ("softmax", ROWS_SMALL, [{"M": 3, "N": 200}, {"M": 5, "N": 700}]),
    ("rmsnorm", ROWS_SMALL, [{"M": 3, "N": 200}, {"M": 5, "N": 700}]),
    ("layernorm", ROWS_SMALL, [{"M": 3, "N": 200}, {"M": 5, "N": 700}]),
    ("softmax", ROW_TILES, [{"M": 3, "N": 700}, {"M": 2, "N": 1500}]),
    ("rmsnorm", ROW_TILES, [{"M": 3, "N": 700}, {"M": 2, "N": 1500}]),
    ("layernorm", ROW_TILES, [{"M": 3, "N": 700}, {"M": 2, "N": 1500}]),
    ("softmax", ROWS_PERSISTENT, [{"M": 7, "N": 200}, {"M": 5, "N": 700}]),
    ("rmsnorm", ROWS_PERSISTENT, [{"M": 7, "N": 200}, {"M": 5, "N": 700}]),
    ("layernorm", ROWS_PERSISTENT, [{"M": 7, "N": 200}, {"M": 5, "N": 700}]),
    ("softmax", ROW_TILES_PERSISTENT, [{"M": 5, "N": 500}, {"M": 3, "N": 1500}]),
    ("rmsnorm", ROW_TILES_PERSISTENT, [{"M": 5, "N": 500}, {"M": 3, "N": 1500}]),
    ("layernorm", ROW_TILES_PERSISTENT, [{"M": 5, "N": 500}, {"M": 3, "N": 1500}]),
    ("transpose", {}, [{"M": 64, "N": 64}, {"M": 100, "N": 37}]),
    ("gemm", G64, [{"M": 64, "N": 64, "K": 64},
                   {"M": 70, "N": 100, "K": 45}]),
    ("gemm", {**G64, "dtype": "bf16"}, [{"M": 64, "N": 64, "K": 64},
                                        {"M": 70, "N": 60, "K": 40}]),
    ("gemm", {**G64, "trans_B": True}, [{"M": 64, "N": 64, "K": 32},
                                        {"M": 70, "N": 60, "K": 40}]),
    ("gemm_bias_relu", G64, [{"M": 64, "N": 64, "K": 64}, {"M": 70, "N": 60, "K": 40}]),
    ("flash_attention", {}, [{"B": 1, "S": 64, "H": 1}, {"B": 1, "S": 50, "H": 2}]),
    ("flash_attention", {"dtype": "bf16"}, [{"B": 1, "S": 50, "H": 1}]),
    ("flash_attention", {"causal": True}, [{"B": 1, "S": 100, "H": 1}]),
]
TARGETS = ["sm80", "gfx90a"]


def _id(case) -> str:
    sample, defines, _ = case
    return "-".join([sample] + [f"{k}={v}" for k, v in defines.items()])


@functools.cache
def _compiled(sample: str, defines: tuple, target: str | None):
    return tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=dict(defines))


def _sizes(tk: T.Kernel, sizes: dict[str, int]) -> dict[str, int]:
    return {n: v for n, v in sizes.items() if n in {s.name for s in tk.size_vars}}


def check(sample: str, defines: dict, sizes: dict[str, int], target: str, seed: int = 0, result=None) -> None:
    key = tuple(sorted(defines.items()))
    tk = _compiled(sample, key, None).module.kernels[0]
    result = result or _compiled(sample, key, target)
    sk = result.simt.kernels[0]
    sizes = _sizes(tk, sizes)
    args = random_inputs(tk, sizes, seed)
    for p in tk.params:
        if isinstance(p, T.Buffer) and p.is_output and p.dtype.is_float:
            args[p.name][...] = np.nan
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_kernel(tk, want)
    run_simt(sk, args, sizes, warp_size=lookup(target).warp_size)
    for p in tk.params:
        if isinstance(p, T.Buffer) and p.is_output:
            got, exp = args[p.name].astype(np.float64), want[p.name].astype(np.float64)
            assert not np.isnan(exp).any(), "the oracle left output elements unwritten"
            rtol, atol = TOL.get(p.dtype.name, (0, 0))
            bad = ~np.isclose(got, exp, rtol=rtol, atol=atol)
            assert not bad.any(), (
                f"{sample} {defines} for {target} at {sizes}: {p.name} differs in {int(bad.sum())} of {bad.size} "
                f"elements (first at {np.argwhere(bad)[0].tolist()}), max |err| {np.nanmax(np.abs(got - exp)):.3g}, "
                f"{int(np.isnan(got).sum())} unwritten")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_lowered_sample_matches_interpreter(case, target):
    if not backend_available(lookup(target).backend):
        pytest.skip(f"no {lookup(target).backend} back end")
    sample, defines, shapes = case
    for sizes in shapes:
        check(sample, defines, sizes, target)


@pytest.mark.parametrize("sample", ["softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("defines", [ROWS_PERSISTENT, ROW_TILES_PERSISTENT], ids=["rows", "row_tiles"])
def test_persistent_rows_on_sm90(sample, defines):
    """sm90 streams rows longer than block_N by TMA, the held rows of the persistent schedule by cp.async."""
    for sizes in ({"M": 5, "N": 300}, {"M": 3, "N": 1500}):
        check(sample, defines, sizes, "sm90")


# ---------------------------------------------------------------- the checks catch broken lowerings


def _fresh(sample: str, defines: dict, target: str = "sm80"):
    return tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=defines)


GEMM_SIZES = {"M": 64, "N": 64, "K": 32}


def test_swapped_lanes_in_mma_layout_are_caught(monkeypatch):
    """A lowering whose accumulator layout swaps lanes 0 and 1 runs without error but gives a wrong result."""
    from tilec.ir import dtypes as D
    from tilec.ir.layout import MmaTiled

    orig = MmaTiled.coords

    def swapped(self, t, k):
        return orig(self, T.Binary(D.I32, None, "^", t, T.Const(D.I32, None, 1)), k)

    monkeypatch.setattr(MmaTiled, "coords", swapped)
    broken = _fresh("gemm", G64)
    with pytest.raises(AssertionError, match="differs"):
        check("gemm", G64, GEMM_SIZES, "sm80", result=broken)


def test_missing_barrier_is_a_race(monkeypatch):
    from tilec.passes.lower_to_simt import Lowerer

    monkeypatch.setattr(Lowerer, "barrier", lambda self: None)
    broken = _fresh("transpose", {})
    with pytest.raises(SimtInterpreterError, match="data race"):
        check("transpose", {}, {"M": 64, "N": 64}, "sm80", result=broken)


def test_missing_cp_async_wait_is_caught():
    from tilec.ir import simt as S

    broken = _fresh("gemm", G64)

    def strip(body):
        out = []
        for s in body:
            if isinstance(s, S.SCall) and s.name == "cp_async_wait":
                continue
            for attr in ("body", "then_body", "else_body"):
                if hasattr(s, attr):
                    setattr(s, attr, strip(getattr(s, attr)))
            out.append(s)
        return out

    k = broken.simt.kernels[0]
    k.body = strip(k.body)
    with pytest.raises(SimtInterpreterError, match="cp_async_wait"):
        check("gemm", G64, GEMM_SIZES, "sm80", result=broken)


def test_barrier_under_divergent_condition_is_an_error():
    from tilec.ir import dtypes as D
    from tilec.ir import simt as S

    k = _fresh("vector_add", {}).simt.kernels[0]
    cond = T.Compare(D.BOOL, None, "<", S.ThreadIdx(D.I32, None), T.Const(D.I32, None, 7))
    k.body = [S.SIf(None, cond, [S.Barrier(None)])] + k.body
    args = {"A": np.zeros(4, np.float16), "B": np.zeros(4, np.float16), "C": np.zeros(4, np.float16)}
    with pytest.raises(SimtInterpreterError, match="barrier reached by 7 of 256"):
        run_simt(k, args, {"N": 4})


def test_out_of_bounds_global_access_is_an_error(monkeypatch):
    from tilec.passes.lower_to_simt import Lowerer

    monkeypatch.setattr(Lowerer, "bounds", lambda self, r, idx: None)
    broken = _fresh("transpose", {})
    with pytest.raises(SimtInterpreterError, match="out-of-bounds"):
        check("transpose", {}, {"M": 100, "N": 37}, "sm80", result=broken)


def test_ldmatrix_matches_the_isa_reference():
    """The vectorized ldmatrix model agrees with mma_layouts.simulate_ldmatrix on a random shared tile."""
    from tilec.ir import dtypes as D
    from tilec.ir import simt as S
    from tilec.targets.cuda import mma_layouts as L

    rng = np.random.default_rng(1)
    i32 = D.I32
    tid = S.ThreadIdx(i32, None)

    def times(n):
        return T.Binary(i32, None, "*", tid, T.Const(i32, None, n))

    for num, trans in ((4, False), (4, True), (2, False), (2, True)):
        smem = S.SBuffer("s", D.F16, "shared", 1024, offset=0)
        src = S.SBuffer("src", D.F16, "global", None, const=True)
        rowbuf = S.SBuffer("rows", D.I32, "global", None, const=True)
        out = S.SBuffer("out", D.U32, "global", None)
        regs = S.SBuffer("r", D.U32, "local", 4)
        body = [
            S.DeclareArray(None, regs),
            S.SCall(None, "copy16", [S.AddrOf(D.I64, None, smem, times(8)), S.AddrOf(D.I64, None, src, times(8))]),
            S.Barrier(None),
            S.SCall(None, f"ldmatrix_x{num}" + ("_trans" if trans else ""),
                    [S.AddrOf(D.I64, None, regs, T.Const(i32, None, 0)),
                     S.AddrOf(D.I64, None, smem, S.Ref(i32, None, rowbuf, tid))]),
        ]
        for r in range(num):
            idx = T.Binary(i32, None, "+", times(4), T.Const(i32, None, r))
            body.append(S.SStore(None, out, idx, S.Ref(D.U32, None, regs, T.Const(i32, None, r))))
        k = S.SKernel("k", [src, rowbuf, out], [], [T.Const(i32, None, 1)], 128, [smem], 2048, body, None)
        rows = rng.permutation(64)[:32] * 16  # each lane's row start (elements), 16-byte aligned
        mem = rng.standard_normal(1024).astype(np.float16)
        got = np.zeros(128 * 4, np.uint32)
        run_simt(k, {"src": mem, "rows": np.concatenate([rows] * 4).astype(np.int32), "out": got}, {})
        want = L.pack_registers(L.simulate_ldmatrix(mem, list(rows), num, trans).reshape(32, 2 * num))
        assert np.array_equal(got.reshape(128, 4)[:32, :num], want), (num, trans)


def test_stmatrix_matches_the_isa_reference():
    """stmatrix_x{4,2} (sm90), ldmatrix's inverse: register half h of register r of lane l lands in row l // 4 of
    matrix r, column 2 * (l % 4) + h, at the row address lane 8 * r + l // 4 gives (PTX ISA; mma_layouts)."""
    from tilec.ir import dtypes as D
    from tilec.ir import simt as S
    from tilec.targets.cuda import mma_layouts as L

    rng = np.random.default_rng(3)
    i32 = D.I32
    tid = S.ThreadIdx(i32, None)

    def at(n, j):
        return T.Binary(i32, None, "+", T.Binary(i32, None, "*", tid, T.Const(i32, None, n)), T.Const(i32, None, j))

    for num in (4, 2):
        smem = S.SBuffer("s", D.F16, "shared", 1024, offset=0)
        regs_in = S.SBuffer("regs", D.U32, "global", None, const=True)
        rowbuf = S.SBuffer("rows", D.I32, "global", None, const=True)
        out = S.SBuffer("out", D.F16, "global", None)
        zero = [S.SStore(None, smem, at(32, j), T.Const(D.F16, None, 0.0)) for j in range(32)]
        body = zero + [
            S.Barrier(None),
            S.SCall(None, f"stmatrix_x{num}", [S.AddrOf(D.I64, None, smem, S.Ref(i32, None, rowbuf, tid)),
                                               *(S.Ref(D.U32, None, regs_in, at(4, r)) for r in range(num))]),
            S.Barrier(None),
        ] + [S.SStore(None, out, at(32, j), S.Ref(D.F16, None, smem, at(32, j))) for j in range(32)]
        k = S.SKernel("k", [regs_in, rowbuf, out], [], [T.Const(i32, None, 1)], 32, [smem], 2048, body, None)
        rows = rng.permutation(64)[:32] * 16  # each lane's row start (elements), 16-byte aligned, no two alike
        bits = rng.standard_normal((32, 4, 2)).astype(np.float16).view(np.uint16).astype(np.uint32)
        regs = (bits[..., 0] | (bits[..., 1] << 16)).astype(np.uint32)
        got = np.zeros(1024, np.float16)
        run_simt(k, {"regs": regs.ravel(), "rows": rows.astype(np.int32), "out": got}, {})
        want_bits = np.zeros(1024, np.uint16)
        for lane in range(32):
            for r in range(num):
                for h in range(2):
                    matrix, row, col = L.ldmatrix_dest(lane, r, h, False)
                    want_bits[rows[L.ldmatrix_address_lane(matrix, row)] + col] = bits[lane, r, h]
        assert np.array_equal(got.view(np.uint16), want_bits), num


def test_mma_matches_a_matrix_product():
    """The lane-by-lane mma model: pack A, B per the PTX fragment layouts, run mma_f16, unpack C."""
    from tilec.ir import dtypes as D
    from tilec.ir import simt as S
    from tilec.targets.cuda import mma_layouts as L

    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    ra = L.pack_registers(L.pack_fragments(a, L.MMA_M16N8K16_A))  # (32, 4)
    rb = L.pack_registers(L.pack_fragments(b, L.MMA_M16N8K16_B))  # (32, 2)
    fc = L.pack_fragments(c, L.MMA_M16N8K16_C)  # (32, 4)
    i32 = D.I32
    tid = S.ThreadIdx(i32, None)
    ga, gb, gc = (S.SBuffer(n, dt, "global", None) for n, dt in (("a", D.U32), ("b", D.U32), ("c", D.F32)))
    la, lb, lc = (S.SBuffer(n, dt, "local", sz) for n, dt, sz in (("la", D.U32, 4), ("lb", D.U32, 2), ("lc", D.F32, 4)))

    def at(buf, n, j):
        return T.Binary(i32, None, "+", T.Binary(i32, None, "*", tid, T.Const(i32, None, n)), T.Const(i32, None, j))

    cst = [T.Const(i32, None, j) for j in range(4)]
    body: list = [S.DeclareArray(None, la), S.DeclareArray(None, lb), S.DeclareArray(None, lc)]
    body += [S.SStore(None, la, cst[j], S.Ref(D.U32, None, ga, at(ga, 4, j))) for j in range(4)]
    body += [S.SStore(None, lb, cst[j], S.Ref(D.U32, None, gb, at(gb, 2, j))) for j in range(2)]
    body += [S.SStore(None, lc, cst[j], S.Ref(D.F32, None, gc, at(gc, 4, j))) for j in range(4)]
    body.append(S.SCall(None, "mma_f16", [S.AddrOf(D.I64, None, x, cst[0]) for x in (lc, la, lb)]))
    body += [S.SStore(None, gc, at(gc, 4, j), S.Ref(D.F32, None, lc, cst[j])) for j in range(4)]
    k = S.SKernel("k", [ga, gb, gc], [], [T.Const(i32, None, 1)], 32, [], 0, body, None)
    out = fc.astype(np.float32).copy()
    run_simt(k, {"a": ra.astype(np.uint32), "b": rb.astype(np.uint32), "c": out}, {})
    got = L.unpack_fragments(out.reshape(32, 4), L.MMA_M16N8K16_C)
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- AMD MFMA 16x16x16


def test_mfma_layouts_are_bijections():
    """Each of A, B, C/D: the 64 lanes x 4 elements cover the 16x16 tile exactly once."""
    from tilec.targets.hip import mfma_layouts as ML

    for fn in (ML.mfma_16x16x16_a, ML.mfma_16x16x16_b, ML.mfma_16x16x16_c):
        coords = {fn(lane, i) for lane in range(64) for i in range(4)}
        assert coords == {(r, c) for r in range(16) for c in range(16)}, fn.__name__


def _mfma_regs(a, b, c):
    from tilec.targets.hip import mfma_layouts as ML

    t = ML.tables()
    return a[t["a_row"], t["a_col"]], b[t["b_row"], t["b_col"]], c[t["c_row"], t["c_col"]], t


def test_mfma_lane_simulation_is_a_matrix_product():
    """numpy lane-level MFMA (per-lane registers gathered by the layout functions) equals A @ B + C."""
    from tilec.targets.hip import mfma_layouts as ML

    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    c = rng.standard_normal((16, 16)).astype(np.float32)
    ra, rb, rc, t = _mfma_regs(a, b, c)
    d = ML.simulate(ra.astype(np.float32), rb.astype(np.float32), rc)
    got = np.zeros((16, 16), np.float32)
    got[t["c_row"], t["c_col"]] = d
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64) + c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_interpreter_mfma_matches_a_matrix_product(dtype):
    """The SIMT interpreter's mfma_f32_16x16x16{f16,bf16_1k} on a 2-wave block (one independent MFMA per wave)."""
    import ml_dtypes

    from tilec.ir import dtypes as D
    from tilec.ir import simt as S

    dt, npdt = (D.F16, np.float16) if dtype == "f16" else (D.BF16, ml_dtypes.bfloat16)
    name = "mfma_f32_16x16x16f16" if dtype == "f16" else "mfma_f32_16x16x16bf16_1k"
    rng = np.random.default_rng(4)
    mats = [(rng.standard_normal((16, 16)).astype(npdt), rng.standard_normal((16, 16)).astype(npdt),
             rng.standard_normal((16, 16)).astype(np.float32)) for _ in range(2)]
    regs = [_mfma_regs(*m) for m in mats]
    i32 = D.I32
    tid = S.ThreadIdx(i32, None)
    ga, gb, gc = (S.SBuffer(n, t, "global", None) for n, t in (("a", dt), ("b", dt), ("c", D.F32)))
    la, lb, lc = (S.SBuffer(n, t, "local", 4) for n, t in (("la", dt), ("lb", dt), ("lc", D.F32)))
    cst = [T.Const(i32, None, j) for j in range(4)]

    def at(j):
        return T.Binary(i32, None, "+", T.Binary(i32, None, "*", tid, T.Const(i32, None, 4)), cst[j])

    body: list = [S.DeclareArray(None, x) for x in (la, lb, lc)]
    for g, loc, t in ((ga, la, dt), (gb, lb, dt), (gc, lc, D.F32)):
        body += [S.SStore(None, loc, cst[j], S.Ref(t, None, g, at(j))) for j in range(4)]
    body.append(S.SCall(None, name, [S.AddrOf(D.I64, None, x, cst[0]) for x in (lc, la, lb)]))
    body += [S.SStore(None, gc, at(j), S.Ref(D.F32, None, lc, cst[j])) for j in range(4)]
    k = S.SKernel("k", [ga, gb, gc], [], [T.Const(i32, None, 1)], 128, [], 0, body, None)
    a = np.concatenate([r[0] for r in regs]).reshape(-1)
    b = np.concatenate([r[1] for r in regs]).reshape(-1)
    c = np.concatenate([r[2] for r in regs]).reshape(-1).astype(np.float32)
    run_simt(k, {"a": a, "b": b, "c": c}, {}, warp_size=64)
    d = c.reshape(2, 64, 4)
    for w, ((ma, mb, mc), (_, _, _, t)) in enumerate(zip(mats, regs, strict=True)):
        got = np.zeros((16, 16), np.float32)
        got[t["c_row"], t["c_col"]] = d[w]
        want = ma.astype(np.float64) @ mb.astype(np.float64) + mc
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(SimtInterpreterError, match="64-lane"):
        run_simt(k, {"a": a, "b": b, "c": c}, {}, warp_size=32)


@pytest.mark.parametrize("defines", [G64, {**G64, "dtype": "bf16"}, {**G64, "trans_B": True}])
def test_gfx90a_gemm_takes_the_mfma_path(defines):
    """The gemm cases above run MFMA on gfx90a (not the FMA fallback)."""
    r = _compiled("gemm", tuple(sorted(defines.items())), "gfx90a")
    table = r.module.kernels[0].schedule
    assert {g.instruction for g in table.gemms.values()} == {"mfma"}
    assert any(c.name.startswith("mfma_f32_16x16x16") for c in _calls(r.simt.kernels[0].body))


@pytest.mark.parametrize("defines", [{}, {"causal": True}, {"dtype": "bf16"}])
def test_gfx90a_flash_attention_takes_the_mfma_path(defines):
    """Both flash-attention gemms run MFMA on gfx90a: the accumulators are transposed MFMA tiles (a lane holds 4
    elements of one row), the row statistics are their row projections, and P (acc_s_cast) is the register
    operand of the second MFMA -- no shared staging buffer, no FMA gemm."""
    from tilec.ir.layout import MfmaTiled, Projected

    r = _compiled("flash_attention", tuple(sorted(defines.items())), "gfx90a")
    k = r.module.kernels[0]
    table = k.schedule
    assert [g.instruction for g in table.gemms.values()] == ["mfma", "mfma"]
    by_name = {table.labels[key]: lay for key, lay in table.fragments.items()}
    for name in ("acc_s", "acc_s_cast", "acc_o"):
        assert isinstance(by_name[name], MfmaTiled) and by_name[name].transposed, (name, by_name[name])
    for name in ("scores_max", "scores_sum", "logsum"):
        assert isinstance(by_name[name], Projected) and isinstance(by_name[name].parent, MfmaTiled), name
    sk = r.simt.kernels[0]
    assert not any("stage" in b.name and b.scope == "shared" for b in sk.shared)
    mfmas = [c for c in _calls(sk.body) if c.name.startswith("mfma_f32_16x16x16")]
    assert any(c.args[2].buffer.name == "acc_s_cast" for c in mfmas)  # P is the MFMA's B argument (C^T = V^T P^T)


def _calls(body):
    from tilec.ir import simt as S

    for s in body:
        if isinstance(s, S.SCall):
            yield s
        for attr in ("body", "then_body", "else_body"):
            sub = getattr(s, attr, None)
            if isinstance(sub, list):
                yield from _calls(sub)


def test_wrong_mfma_accumulator_layout_is_caught(monkeypatch):
    """The interpreter models MFMA from mfma_layouts; an accumulator layout that disagrees with the one the lowering
    assumes (MfmaTiled: rows 4*(lane/16)+e, column lane%16) makes the gfx90a gemm differ from the oracle."""
    from tilec.targets.hip import mfma_layouts as ML

    real = ML.tables

    def transposed(eight_bit: bool = False):
        t = real(eight_bit)
        t["c_row"], t["c_col"] = t["c_col"], t["c_row"]
        return t

    monkeypatch.setattr(ML, "tables", transposed)
    with pytest.raises(AssertionError, match="differs"):
        check("gemm", G64, GEMM_SIZES, "gfx90a", result=_fresh("gemm", G64, "gfx90a"))


# ---------------------------------------------------------------- reductions and projections of MFMA accumulators

MFMA_STATS = """
const dtype = f16
const block_M = 64

kernel stats(A: dtype[M, K], B: dtype[K, 64], C: out f32[M, 64], RowMax: out f32[M], ColSum: out f32[MB, 64]):
    with Kernel(ceildiv(M, block_M), threads=256) as bx:
        A_s = alloc_shared((block_M, 32), dtype)
        B_s = alloc_shared((32, 64), dtype)
        acc = alloc_fragment((block_M, 64), f32)
        row_max = alloc_fragment((block_M,), f32)
        col_sum = alloc_fragment((64,), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, 32), num_stages=2):
            copy(A[bx * block_M, k * 32], A_s)
            copy(B[k * 32, 0], B_s)
            gemm(A_s, B_s, acc, policy=GemmWarpPolicy.POLICY)
        reduce_max(acc, row_max, dim=1)
        reduce_sum(acc, col_sum, dim=0)
        for i, j in Parallel(block_M, 64):
            acc[i, j] = acc[i, j] - row_max[i] + col_sum[j]
        copy(acc, C[bx * block_M, 0])
        copy(row_max, RowMax[bx * block_M])
        copy(col_sum, ColSum[bx, 0])
"""


def _check_stats(result, sizes):
    tk = tilec.compile("stats.tile", text=result[1]).module.kernels[0]
    sk = result[0].simt.kernels[0]
    args = random_inputs(tk, sizes, 5)
    for name in ("C", "RowMax", "ColSum"):
        args[name][...] = np.nan
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_kernel(tk, want)
    run_simt(sk, args, sizes, warp_size=64)
    for name in ("C", "RowMax", "ColSum"):
        np.testing.assert_allclose(args[name], want[name], rtol=1e-4, atol=1e-3, err_msg=name)


@pytest.mark.parametrize("policy", ["FullRow", "FullCol"])  # 4 waves 4x1 (columns across waves) or 1x4 (rows)
@pytest.mark.parametrize("transposed", [True, False])
def test_mfma_accumulator_reductions(policy, transposed, monkeypatch):
    """Row max (dim=1) and column sum (dim=0) of an MFMA accumulator into its projections, and a Parallel loop
    mixing acc[i, j] with row[i] and col[j], on gfx90a at a ragged shape. Layout inference transposes a row-reduced
    accumulator (rows by lane%16: shuffles xor 16, 32; columns by e: xor 1..8); forcing the untransposed tile
    covers the other two reductions. FullRow puts the 4 waves along M (column sums combine across waves through
    LDS), FullCol along N (row maxima do)."""
    from tilec.ir.layout import MfmaTiled, Projected
    from tilec.passes import layout_inference as LI

    if not transposed:
        monkeypatch.setattr(LI, "_transposed_wanted", lambda *a: False)
    text = MFMA_STATS.replace("POLICY", policy)
    r = tilec.compile("stats.tile", text=text, target="gfx90a")
    table = r.module.kernels[0].schedule
    lays = {table.labels[key]: lay for key, lay in table.fragments.items()}
    assert isinstance(lays["acc"], MfmaTiled) and lays["acc"].transposed == transposed
    assert (lays["acc"].wm, lays["acc"].wn) == ((4, 1) if policy == "FullRow" else (1, 4))
    assert isinstance(lays["row_max"], Projected) and isinstance(lays["col_sum"], Projected)
    _check_stats((r, text), {"M": 100, "K": 40, "MB": 2})


def test_wrong_mfma_reduction_shuffles_are_caught(monkeypatch):
    """A row reduction that shuffles over the wrong lane bits (xor 1..8 where the row runs over lane/16) gives wrong
    row maxima: the interpreter's shuffles follow the lanes, so such a lowering bug shows (lanes that hold one row
    disagree about its maximum: a write conflict when they store it, or a wrong value)."""
    from tilec.ir import layout as L

    monkeypatch.setattr(L, "_mfma_in_lane", lambda p, keep: (keep == 0) == p.transposed)
    text = MFMA_STATS.replace("POLICY", "FullRow")
    r = tilec.compile("stats.tile", text=text, target="gfx90a")
    monkeypatch.undo()
    with pytest.raises((AssertionError, SimtInterpreterError), match="write conflict|Mismatch"):
        _check_stats((r, text), {"M": 64, "K": 32, "MB": 1})


def test_interleaved_operand_layout_is_needed(monkeypatch):
    """Flash attention's V tile is K-major and interleaved so that one 128-bit read gives a lane two k-steps of the
    P V MFMA; storing it without the interleave (the reads unchanged) breaks the kernel: the 128-bit reads are no
    longer 16-byte aligned (the interpreter checks vector alignment), or the values differ."""
    import dataclasses

    from tilec.ir.layout import SharedLayout

    real = SharedLayout.offset
    monkeypatch.setattr(SharedLayout, "offset",
                        lambda self, idx: real(dataclasses.replace(self, interleave=False), idx))
    broken = _fresh("flash_attention", {}, "gfx90a")
    monkeypatch.undo()
    with pytest.raises((AssertionError, SimtInterpreterError), match="differs|not aligned"):
        check("flash_attention", {}, {"B": 1, "S": 64, "H": 1}, "gfx90a", result=broken)


def _pipelined_loop(body):
    from tilec.ir import simt as S

    for i, s in enumerate(body):
        if isinstance(s, S.SComment) and "staged in registers" in s.text:
            return next(x for x in body[i:] if isinstance(x, S.SFor) and not x.unroll)
    for s in body:
        for attr in ("body", "then_body", "else_body"):
            found = _pipelined_loop(getattr(s, attr, None) or [])
            if found is not None:
                return found
    return None


def test_register_staged_pipeline_order_and_missing_barrier():
    """gfx90a gemm: in the Pipelined loop, the next tile's global loads come before this tile's MFMAs, the stores
    to the other buffer after them, then the loop's only barrier. Removing that barrier is a data race."""
    from tilec.ir import simt as S

    broken = _fresh("gemm", G64, "gfx90a")
    loop = _pipelined_loop(broken.simt.kernels[0].body)
    assert loop is not None
    def stmts(body):
        for s in body:
            yield s
            for attr in ("body", "then_body", "else_body"):
                yield from stmts(getattr(s, attr, None) or [])

    kinds = []
    for s in loop.body:
        inner = list(stmts([s]))
        if any(isinstance(x, S.SCall) and x.name.startswith("load_vec") and x.args[1].buffer.scope == "global"
               for x in inner):
            kinds.append("load")
        elif isinstance(s, S.SCall) and s.name.startswith("mfma"):
            kinds.append("mfma")
        elif isinstance(s, S.SIf) and any(isinstance(x, S.SStore) and x.buffer.scope == "shared" or
                                          isinstance(x, S.SCall) and x.name.startswith("store_vec") for x in inner):
            kinds.append("store")
        elif isinstance(s, S.Barrier):
            kinds.append("barrier")
    assert kinds[0] == "load" and kinds[-2:] == ["store", "barrier"] and kinds.count("barrier") == 1, kinds
    assert "mfma" in kinds[1:-2]
    loop.body = [s for s in loop.body if not isinstance(s, S.Barrier)]
    with pytest.raises(SimtInterpreterError, match="data race"):
        check("gemm", G64, {"M": 64, "N": 64, "K": 96}, "gfx90a", result=broken)


MFMA_VARIANTS = [  # other tilings than the samples' defaults, on gfx90a only, each at a ragged shape
    ("gemm", {**G64, "block_K": 16}, {"M": 70, "N": 100, "K": 45}),  # 64-bit reads
    ("gemm", {**G64, "block_K": 64, "trans_B": True}, {"M": 70, "N": 60, "K": 100}),
    ("gemm", {"block_M": 32, "block_N": 128, "block_K": 32}, {"M": 40, "N": 130, "K": 70}),
    ("flash_attention", {"block_N": 32}, {"B": 1, "S": 50, "H": 1}),  # P V: one interleaved k-pair
    ("flash_attention", {"dim": 32, "block_N": 32, "causal": True}, {"B": 1, "S": 70, "H": 1}),
    ("flash_attention", {"block_N": 16}, {"B": 1, "S": 40, "H": 1}),  # P V: K = 16, 64-bit reads of V
    ("flash_attention", {"dim": 128}, {"B": 1, "S": 70, "H": 1}),  # double buffers would not fit: plain loop
]


@pytest.mark.parametrize("sample,defines,sizes", MFMA_VARIANTS, ids=[_id((s, d, None)) for s, d, _ in MFMA_VARIANTS])
def test_gfx90a_mfma_variants(sample, defines, sizes):
    r = _fresh(sample, defines, "gfx90a")
    k = r.module.kernels[0]
    assert {g.instruction for g in k.schedule.gemms.values()} == {"mfma"}
    (plan,) = k.schedule.loops.values()
    assert plan.mechanism == ("sync" if defines.get("dim") == 128 else "registers"), plan
    check(sample, defines, sizes, "gfx90a", result=r)
