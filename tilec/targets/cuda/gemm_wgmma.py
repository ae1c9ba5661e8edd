"""gemm on Hopper's wgmma.m64nNk16: its descriptor (WGMMA), which gemms can run on it, the warpgroup accumulator
layout and the TMA panel layout of its shared operands; registered by tilec/targets/cuda/instructions.py.

Its lowering -- descriptors, async groups, the producer warpgroup -- is sm90 machinery that keeps state across
statements: `WgmmaGemm.lower` hands the gemm to the kernel's HopperLowering (tilec/targets/cuda/hopper_lowering.py,
the sm90 target's LoweringExtension, `GemmContext.extension`).
"""

from __future__ import annotations

from ...ir import dtypes as D
from ...ir import tile as T
from ...ir.instructions import MatrixInstruction
from ...ir.layout import SharedLayout, WgmmaTiled, panel_span
from ...ops import gemm
from ...ops.gemm_impl import GemmContext, GemmImpl

WGMMA = MatrixInstruction("wgmma", "wgmma.m64nNk16", 64, 8, 16, 128, 32,
                          (D.F16, D.BF16, D.F8E4M3, D.F8E5M2), WgmmaTiled, max_n=256, k_8bit=32)


def _panel_ok(b: T.Buffer) -> bool:
    """A shared tile that TMA can fill and wgmma can read: 2-D, rows of whole 32-, 64- or 128-byte swizzle panels
    (a 96-wide bf16 tile is three 64-byte panels)."""
    shape = b.const_shape
    return len(shape) == 2 and panel_span(shape[-1] * b.dtype.bytes) != 0


def _whole(r: T.Region) -> bool:
    return all(isinstance(x, T.Const) and int(x.value) == 0 for x in r.starts) and \
        list(r.const_extents) == list(r.buffer.const_shape)


def accumulator_layout(q: gemm.GemmQuery) -> WgmmaTiled | None:
    """The warpgroup accumulator layout when this gemm can run on wgmma.m64nNk16, else None.

    Operands: B (and A, unless A is a register fragment) whole 2-D shared tiles in the TMA panel
    layout; a register A operand only when it is the accumulator (or its copy) of an earlier wgmma gemm with
    the same M and wn = 1 (any other register A takes the mma.sync or FMA path instead); 16-bit types may be
    K- or MN-major, 8-bit floats only K-major (wgmma has no transpose for them); the block's warpgroups split
    M first (row statistics then stay inside one warp)."""
    s, k, pinned = q.s, q.kernel, q.pinned_warps
    c_buf, a, b = s.c.buffer, s.a.buffer, s.b.buffer
    eight_bit = a.dtype in (D.F8E4M3, D.F8E5M2)
    if not (c_buf.scope == "fragment" and c_buf.dtype == D.F32 and len(c_buf.shape) == 2
            and s.c.const_extents is not None and a.dtype in WGMMA.operand_types
            and a.dtype == b.dtype and b.scope == "shared" and k.threads % WGMMA.lanes == 0 and not s.transpose_a):
        return None
    if eight_bit and (not s.transpose_b or a.scope != "shared"):
        return None
    if not (_whole(s.b) and _panel_ok(b)) or (a.scope == "shared" and not (_whole(s.a) and _panel_ok(a))):
        return None
    if a.scope not in ("shared", "fragment"):
        return None
    la = q.a_layout
    if a.scope == "fragment" and not (isinstance(la, WgmmaTiled) and la.wn == 1 and la.m == c_buf.const_shape[0]):
        return None
    m, n = c_buf.const_shape
    if q.k % WGMMA.step_k(a.dtype) or q.col_reduced:
        return None
    groups = k.threads // WGMMA.lanes
    panel_n = panel_span(b.const_shape[-1] * b.dtype.bytes) // b.dtype.bytes
    for wm in [g for g in (groups, *range(groups - 1, 0, -1)) if groups % g == 0]:
        wn = groups // wm
        if pinned is not None and (wm, wn) != tuple(pinned):
            continue
        if m % (WGMMA.m * wm) or n % (WGMMA.n * wn) or n // wn > WGMMA.max_n:
            continue
        if (a.scope == "fragment" or q.rows_projected) and wn != 1:
            continue  # row statistics and reductions are lowered for warpgroups stacked along M only
        if a.scope == "fragment" and wm != la.wm:
            continue
        if wn > 1 and not s.transpose_b and (n // wn) % panel_n:
            continue  # an MN-major B is addressed in whole swizzle panels per warpgroup
        return WgmmaTiled(m, n, wm, wn)
    return None


class WgmmaGemm(GemmImpl):
    name = "wgmma"
    instruction = WGMMA
    backend = "cuda"
    intrinsics = ("wgmma", "wgmma_fence", "wgmma_commit", "wgmma_wait", "wgmma_fence_regs")
    unit = "warpgroups"
    warp_tiled = False
    warpgroup_async = True
    operand_layouts_beat_annotations = True
    zeroes_accumulator = True
    stored_as = "a wgmma operand (stored in swizzled panels)"

    def accumulator_layout(self, q: gemm.GemmQuery) -> WgmmaTiled | None:
        return accumulator_layout(q)

    def register_a_error(self, s: T.Gemm, la, lc) -> str | None:
        if (isinstance(la, WgmmaTiled) and isinstance(lc, WgmmaTiled) and la.wn == 1 and lc.wn == 1
                and la.wm == lc.wm and la.m == lc.m):
            return None
        return (f"the register operand '{s.a.buffer.name}' of this gemm does not have the wgmma operand "
                f"layout ({la}); stage it through shared memory")

    def shared_operand_layouts(self, gemms: list[T.Gemm]) -> dict[T.Buffer, SharedLayout]:
        """Whole TMA panels, 128-byte-swizzled (checked by accumulator_layout: a swizzle span exists)."""
        return {r.buffer: SharedLayout(r.buffer.const_shape, r.buffer.dtype.bytes, swizzle=True, panel=True)
                for s in gemms for r in (s.a, s.b) if r.buffer.scope == "shared"}

    def instr_n(self, lay: WgmmaTiled) -> int:
        return lay.instr_n

    def lower(self, cx: GemmContext, s: T.Gemm) -> None:
        lower_wgmma = getattr(cx.extension, "lower_wgmma", None)
        if lower_wgmma is None:
            raise cx.fail(f"internal error: wgmma on {cx.target.name} without sm90's lowering extension", s.span)
        lower_wgmma(s)
