"""The gemm implementation on mma.sync m16n8k16 (NVIDIA sm80+): ldmatrix from XOR-swizzled shared tiles (or
an accumulator-layout register A operand) and one mma per 16x8 atom and k-step, per warp. Its descriptor (MMA),
eligibility and accumulator layout (MmaTiled, checked against mma_layouts.py), shared operand layouts and lowering;
registered by tilec/targets/cuda/instructions.py."""

from __future__ import annotations

from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.exprs import cast
from ...ir.fold import fold
from ...ir.instructions import MatrixInstruction
from ...ir.layout import (
    MmaTiled,
    add,
    c,
    div,
    mod,
    mul,
)
from ...ops import gemm
from ...ops.gemm_impl import GemmContext, GemmImpl
from .intrinsics import PACK_PAIR

MMA = MatrixInstruction("mma", "mma.sync.m16n8k16", 16, 8, 16, 32, 32, (D.F16, D.BF16), MmaTiled)


def lower(cx: GemmContext, s: T.Gemm) -> None:
    lay: MmaTiled = cx.sched.fragment(s.c.buffer)
    m, n, kd = gemm.dims(s)
    dt = s.a.buffer.dtype
    kind = "f16" if dt == D.F16 else "bf16"
    warp = div(cx.tid, 32)
    lane = mod(cx.tid, 32)
    warp_m = mod(warp, lay.wm)
    warp_n = div(warp, lay.wm)
    wm_rows, wn_cols = m // lay.wm, n // lay.wn
    mi_count, ni_count = lay.mi, lay.ni
    c_sb = cx.sbuf(s.c.buffer)

    def shared_addr(r: T.Region, row: T.Expr, col: T.Expr) -> T.Expr:
        # The lane's offset in the (swizzled) tile is a per-thread constant: hoist it; only the
        # pipeline stage's base changes from one iteration to the next.
        idx = gemm.operand_index(cx, r, row, col)
        offset = cx.hoist(f"{r.buffer.name}_off", fold(cx.shared_layout(r.buffer).offset(idx)))
        stage = cx.stage_offset(r.buffer)
        return S.AddrOf(D.I64, None, cx.sbuf(r.buffer), add(stage, offset) if stage is not None else offset)

    def body(kk: int):
        a_regs = S.SBuffer(cx.fresh("a_frag").name, D.U32, "local", mi_count * 4)
        b_regs = S.SBuffer(cx.fresh("b_frag").name, D.U32, "local", ni_count * 2)
        cx.emit(S.DeclareArray(None, a_regs))
        cx.emit(S.DeclareArray(None, b_regs))
        k0 = c(kk * 16)
        for mi in range(mi_count):
            row0 = add(mul(warp_m, wm_rows), mi * 16)
            if s.a.buffer.scope == "fragment":
                pack_register_a(cx, s, a_regs, mi, c(kk))
                continue
            if not s.transpose_a:  # A is [M, K]: lane l gives row l%16, k-half l/16
                addr = shared_addr(s.a, add(row0, mod(lane, 16)), add(k0, mul(div(lane, 16), 8)))
                regs = S.AddrOf(D.I64, None, a_regs, c(mi * 4))
                cx.emit(S.call(None, "ldmatrix", [regs, addr], count=4, trans=False))
            else:  # A is [K, M]: matrices (k0-7,m0-7) (k0-7,m8-15) (k8-15,m0-7) (k8-15,m8-15)
                q = div(lane, 8)
                addr = shared_addr(s.a, add(add(k0, mul(div(q, 2), 8)), mod(lane, 8)), add(row0, mul(mod(q, 2), 8)))
                cx.emit(S.call(None, "ldmatrix", [S.AddrOf(D.I64, None, a_regs, c(mi * 4)), addr], count=4, trans=True))
        ni = 0
        while ni < ni_count:
            col0 = add(mul(warp_n, wn_cols), ni * 8)
            pair = ni + 1 < ni_count
            q = div(lane, 8)
            if not s.transpose_b:  # B is [K, N]: .trans; matrices (k0-7,n) (k8-15,n) (k0-7,n+8) (k8-15,n+8)
                krow = add(add(k0, mul(mod(q, 2), 8)), mod(lane, 8))
                ncol = add(col0, mul(div(q, 2), 8)) if pair else col0
                count, trans = (4 if pair else 2), True
                addr = shared_addr(s.b, krow, ncol)
            else:  # B is [N, K]: matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
                nrow = add(add(col0, mul(div(q, 2), 8)), mod(lane, 8)) if pair else add(col0, mod(lane, 8))
                kcol = add(k0, mul(mod(q, 2), 8))
                count, trans = (4 if pair else 2), False
                addr = shared_addr(s.b, nrow, kcol)
            regs = S.AddrOf(D.I64, None, b_regs, c(ni * 2))
            cx.emit(S.call(None, "ldmatrix", [regs, addr], count=count, trans=trans))
            ni += 2 if pair else 1
        for mi in range(mi_count):
            for nj in range(ni_count):
                acc = S.AddrOf(D.I64, None, c_sb, c((mi * ni_count + nj) * 4))
                cx.emit(S.call(None, "mma", dtype=kind, args=[acc, S.AddrOf(D.I64, None, a_regs, c(mi * 4)),
                                                        S.AddrOf(D.I64, None, b_regs, c(nj * 2))]))

    cx.shared_read()
    for kk in range(kd // 16):  # unrolled here, so every shared offset is a hoistable constant
        body(kk)


def pack_register_a(cx: GemmContext, s: T.Gemm, a_regs: S.SBuffer, mi: int, kk: T.Expr) -> None:
    la: MmaTiled = cx.sched.fragment(s.a.buffer)
    src = cx.sbuf(s.a.buffer)
    pack = PACK_PAIR[s.a.buffer.dtype]
    for reg, (tile_off, e) in enumerate(((0, 0), (0, 2), (1, 0), (1, 2))):
        ni = add(mul(kk, 2), tile_off)
        base = add(mul(add(mul(c(mi), la.ni), ni), 4), e)
        lo = cast(S.Ref(src.dtype, None, src, base), D.F32)
        hi = cast(S.Ref(src.dtype, None, src, add(base, 1)), D.F32)
        cx.emit(S.SStore(None, a_regs, c(mi * 4 + reg), S.value(D.U32, None, pack, [lo, hi])))


def accumulator_layout(q: gemm.GemmQuery) -> MmaTiled | None:
    """mma.sync m16n8k16: f16/bf16 operands (B in shared memory), an f32 2-D fragment accumulator, whole warps;
    the accumulator tiled over the warps by the gemm's policy."""
    s, c_buf = q.s, q.s.c.buffer
    if not (c_buf.scope == "fragment" and c_buf.dtype == D.F32 and s.a.buffer.dtype in MMA.operand_types
            and s.c.const_extents is not None and len(c_buf.shape) == 2 and q.kernel.threads % MMA.lanes == 0):
        return None
    choice = gemm.choose_warps(q, MMA.m, MMA.n)
    if choice is None or q.k % MMA.k or not gemm.operand_tiles_ok(s):
        return None
    return MmaTiled(*c_buf.const_shape, *choice)


class MmaGemm(GemmImpl):
    name = "mma"
    instruction = MMA
    backend = "cuda"
    intrinsics = ("ldmatrix", "mma", "pack_half2", "pack_bf162")
    swizzles_operands = True  # ldmatrix reads XOR-swizzled tiles without bank conflicts

    def accumulator_layout(self, q: gemm.GemmQuery) -> MmaTiled | None:
        return accumulator_layout(q)

    def register_a_fits(self, s: T.Gemm, la, lc) -> bool:
        """A register A operand in the accumulator layout of an earlier mma gemm, warps stacked along M."""
        return (isinstance(la, MmaTiled) and isinstance(lc, MmaTiled) and la.wn == 1 and lc.wn == 1
                and la.wm == lc.wm and not s.transpose_a)

    def lower(self, cx: GemmContext, s: T.Gemm) -> None:
        lower(cx, s)
