"""The gemm implementation on AMD v_mfma_f32_16x16x16{f16,bf16_1k} (wave64, CDNA2/3): its descriptor (MFMA),
eligibility and accumulator layout (MfmaTiled, checked against mfma_layouts.py), K-major shared operand layouts and
lowering; registered by tilec/targets/hip/instructions.py."""

from __future__ import annotations

from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.fold import as_int, fold
from ...ir.instructions import MatrixInstruction
from ...ir.layout import (
    MfmaTiled,
    SharedLayout,
    add,
    c,
    div,
    mod,
    mul,
)
from ...ops import gemm
from ...ops.gemm_impl import GemmContext, GemmImpl

# (8-bit floats: v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8}, gfx942 only; the others refuse those types up front.)
MFMA = MatrixInstruction("mfma", "mfma.16x16x16", 16, 16, 16, 64, 64, (D.F16, D.BF16, D.F8E4M3, D.F8E5M2),
                         MfmaTiled, k_8bit=32)


def lower(cx: GemmContext, s: T.Gemm) -> None:
    """AMD v_mfma_f32_16x16x16{f16,bf16_1k}, per wave. Each lane needs, per 16x16 atom and k-step, the 4
    k-values of one A row (m = lane%16) and of one B column (n = lane%16), k = 4*(lane/16) + i (layouts in
    tilec/targets/hip/mfma_layouts.py). A transposed accumulator (MfmaTiled.transposed) is computed as
    C^T = B^T A^T: the same per-lane values, with the MFMA's A and B arguments swapped.

    k order: the MFMA sums over k, so any bijection between (k-step, lane group, element) and the tile's k is
    correct as long as A and B agree. With both operands in shared memory and K a multiple of 32, k-steps go
    in pairs and lane group g takes k = 32p + 8g + 4t + i in step t of pair p: 8 consecutive k per lane, one
    128-bit LDS read from a K-major swizzled tile. A register A operand (the transposed accumulator of an
    earlier MFMA) fixes the plain order k = 16kk + 4g + i; its B operand is then read 128 bits at a time
    from an interleaved K-major tile (SharedLayout.interleave), else 64 bits (4 consecutive k)."""
    lay: MfmaTiled = cx.sched.fragment(s.c.buffer)
    m, n, kd = gemm.dims(s)
    dt = s.a.buffer.dtype
    wave = div(cx.tid, MFMA.lanes)
    lane = mod(cx.tid, MFMA.lanes)
    wave_m = mod(wave, lay.wm)
    wave_n = div(wave, lay.wm)
    wm_rows, wn_cols = m // lay.wm, n // lay.wn
    c_sb = cx.sbuf(s.c.buffer)
    group = div(lane, 16)
    reg_a = s.a.buffer.scope == "fragment"
    b_lay = cx.shared_layout(s.b.buffer)

    def kmajor(r: T.Region, k_first: bool, count: int = 8) -> bool:
        """K is the stored-contiguous dim, and `count` k-values of a lane form one aligned vector."""
        lay = cx.shared_layout(r.buffer)
        kstart = as_int(cx.lx(r.starts[0 if k_first else -1]))
        return (lay.transposed == k_first and lay.row_elems % count == 0 and kstart is not None
                and kstart % (32 if lay.interleave else count) == 0)

    paired = not reg_a and kd % 32 == 0 and not b_lay.interleave and \
        not cx.shared_layout(s.a.buffer).interleave
    interleaved = reg_a and b_lay.interleave and kmajor(s.b, not s.transpose_b) and kd % 32 == 0

    def operand(r: T.Region, k_first: bool, other: T.Expr, k0: T.Expr, count: int, regs: S.SBuffer, at: int):
        """regs[at + j] = the operand at (other, k0 + j) (j < count; logical k, or stored order when the tile
        is interleaved): one vector LDS read when the tile is K-major, else element by element."""
        def idx(kx):
            return gemm.operand_index(cx, r, kx, other) if k_first else gemm.operand_index(cx, r, other, kx)

        stage = cx.stage_offset(r.buffer)
        if kmajor(r, k_first, count):
            off = cx.hoist(f"{r.buffer.name}_off", fold(cx.shared_layout(r.buffer).offset(idx(k0))))
            addr = S.AddrOf(D.I64, None, cx.sbuf(r.buffer), add(stage, off) if stage is not None else off)
            cx.emit(S.call(None, "load_vec", n=count, args=[S.AddrOf(D.I64, None, regs, c(at)), addr,
                                                          T.Const(D.BOOL, None, True)]))
            return
        for j in range(count):
            off = cx.shared_layout(r.buffer).offset(idx(add(k0, j)))
            off = cx.hoist(f"{r.buffer.name}_off", fold(off))
            ref = S.Ref(r.buffer.dtype, None, cx.sbuf(r.buffer), add(stage, off) if stage is not None else off)
            cx.emit(S.SStore(None, regs, c(at + j), ref))

    eight_bit = dt.bits == 8  # v_mfma_f32_16x16x32 (gfx942): one instruction takes a lane's 8 k-values

    def mfma(mi: int, nj: int, a_addr: S.AddrOf, b_addr: S.AddrOf) -> None:
        acc = S.AddrOf(D.I64, None, c_sb, c((mi * lay.ni + nj) * 4))
        args = [acc, b_addr, a_addr] if lay.transposed else [acc, a_addr, b_addr]
        cx.emit(S.call(None, "mfma_fp8" if eight_bit else "mfma", args, dtype=dt.name))

    rows = [add(add(mul(wave_m, wm_rows), mi * 16), mod(lane, 16)) for mi in range(lay.mi)]
    cols = [add(add(mul(wave_n, wn_cols), nj * 16), mod(lane, 16)) for nj in range(lay.ni)]
    per = 8 if paired or interleaved else 4  # k-values per lane and atom read at once

    def scale_accumulators(factor: float) -> None:
        """The fp8 MFMA adds a quarter of A @ B (it reads the OCP bytes as FNUZ, at half value): the accumulators
        are held at a quarter during the gemm's k-steps (exact, a power of two)."""
        r = cx.fresh("r")
        ref = S.Ref(D.F32, None, c_sb, r)
        cx.emit(S.SFor(None, r, c(0), c(lay.num_local),
                       [S.SStore(None, c_sb, r, T.Binary(D.F32, None, "*", ref, T.Const(D.F32, None, factor)))],
                       unroll=True))

    if eight_bit:
        scale_accumulators(0.25)
    for kp in range(kd // (16 * (per // 4))):
        b_regs = S.SBuffer(cx.fresh("b_frag").name, dt, "local", lay.ni * per)
        cx.emit(S.DeclareArray(None, b_regs))
        if paired:
            k0 = add(mul(group, 8), kp * 32)
        elif interleaved:
            k0 = add(mul(group, 4), kp * 32)  # stored order: this and the next k-step's 4 values
        else:
            k0 = add(mul(group, 4), kp * 16)
        for nj in range(lay.ni):
            operand(s.b, not s.transpose_b, cols[nj], k0, per, b_regs, nj * per)
        if reg_a:
            la: MfmaTiled = cx.sched.fragment(s.a.buffer)
            a_sb = cx.sbuf(s.a.buffer)
            for t in range(per // 4):
                kk = kp * (per // 4) + t
                for mi in range(lay.mi):
                    for nj in range(lay.ni):
                        mfma(mi, nj, S.AddrOf(D.I64, None, a_sb, c((mi * la.ni + kk) * 4)),
                             S.AddrOf(D.I64, None, b_regs, c(nj * per + t * 4)))
            continue
        a_regs = S.SBuffer(cx.fresh("a_frag").name, dt, "local", lay.mi * per)
        cx.emit(S.DeclareArray(None, a_regs))
        for mi in range(lay.mi):
            operand(s.a, s.transpose_a, rows[mi], k0, per, a_regs, mi * per)
        for t in range(1 if eight_bit else per // 4):
            for mi in range(lay.mi):
                for nj in range(lay.ni):
                    mfma(mi, nj, S.AddrOf(D.I64, None, a_regs, c(mi * per + t * 4)),
                         S.AddrOf(D.I64, None, b_regs, c(nj * per + t * 4)))
    if eight_bit:
        scale_accumulators(4.0)
    cx.shared_read()


def accumulator_layout(q: gemm.GemmQuery) -> MfmaTiled | None:
    """MFMA 16x16x16 (wave64): f16/bf16 operands, an f32 2-D fragment accumulator, whole waves; a register A
    operand only when it is the (transposed) accumulator of an earlier MFMA gemm. The accumulator is
    transposed (lane l holds row l%16, computed as C^T = B^T A^T) when its rows are projected or it feeds a
    gemm as the register A operand."""
    s, c_buf = q.s, q.s.c.buffer
    if not (c_buf.scope == "fragment" and c_buf.dtype == D.F32 and s.a.buffer.dtype in MFMA.operand_types
            and s.c.const_extents is not None and len(c_buf.shape) == 2 and q.kernel.threads % MFMA.lanes == 0):
        return None
    choice = gemm.choose_warps(q, MFMA.m, MFMA.n)
    a_ok = s.a.buffer.scope == "shared" or (isinstance(q.a_layout, MfmaTiled) and q.a_layout.transposed
                                            and q.a_layout.wn == 1 and not s.transpose_a)
    if s.a.buffer.dtype.bits == 8:  # both operands in shared memory, read 8 k-values (64 bits) per lane
        a_ok = s.a.buffer.scope == "shared"
    if choice is None or q.k % MFMA.step_k(s.a.buffer.dtype) or not gemm.operand_tiles_ok(s) or not a_ok:
        return None
    return MfmaTiled(*c_buf.const_shape, *choice, transposed=q.transposed_wanted)


def operand_layouts(gemms: list[T.Gemm]) -> dict[T.Buffer, SharedLayout]:
    """Shared operands of MFMA gemms are stored K-major (K contiguous; a [K, N] B or a [K, M] A is transposed
    when it is copied in) and XOR-swizzled, so that each lane reads its k-values of an atom with one 64- or
    128-bit LDS read and the 8 lanes of one 128-bit read phase hit distinct bank groups. The B operand of a
    gemm with a register A operand is interleaved (SharedLayout.interleave) when transposed: its A registers
    follow the fixed MFMA k order, so two k-steps' values must be adjacent in LDS for one 128-bit read.
    The first gemm that reads a buffer decides its layout; other readers stay correct (every access goes
    through the layout), only slower."""
    out: dict[T.Buffer, SharedLayout] = {}
    for s in gemms:
        for r, k_first in ((s.a, s.transpose_a), (s.b, not s.transpose_b)):
            b = r.buffer
            if b.scope != "shared" or b in out or len(b.shape) != 2:
                continue
            shape = b.const_shape
            if k_first and (shape[0] * b.dtype.bytes) % 16:
                k_first = False  # stored K rows would not be whole 16-byte chunks: keep the row-major tile
            lay = SharedLayout(shape, b.dtype.bytes, transposed=k_first)
            interleave = k_first and s.a.buffer.scope == "fragment" and lay.row_elems % 32 == 0
            swz = lay.can_swizzle()
            out[b] = SharedLayout(shape, b.dtype.bytes, swizzle=swz, transposed=k_first, interleave=interleave)
    return out


class MfmaGemm(GemmImpl):
    name = "mfma"
    instruction = MFMA
    backend = "hip"
    intrinsics = ("mfma", "load_vec")
    unit = "waves"
    stored_as = "an MFMA operand (stored in the matrix instruction's order)"

    def accumulator_layout(self, q: gemm.GemmQuery) -> MfmaTiled | None:
        return accumulator_layout(q)

    def register_a_fits(self, s: T.Gemm, la, lc) -> bool:
        """A register A operand that is the whole transposed accumulator of an earlier MFMA gemm, waves along M."""
        return (isinstance(la, MfmaTiled) and isinstance(lc, MfmaTiled) and la.transposed and lc.transposed
                and la.wn == 1 and lc.wn == 1 and la.wm == lc.wm and la.m == lc.m and not s.transpose_a
                and s.a.const_extents == s.a.buffer.const_shape)

    def shared_operand_layouts(self, gemms: list[T.Gemm]) -> dict[T.Buffer, SharedLayout]:
        return operand_layouts(gemms)

    def lower(self, cx: GemmContext, s: T.Gemm) -> None:
        lower(cx, s)
