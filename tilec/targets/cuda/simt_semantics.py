"""The semantics of mma.sync and ldmatrix (tilec/targets/cuda/intrinsics.py) in the SIMT-level interpreter
(tilec/simt/interp.py): modelled lane by lane from the PTX ISA fragment layouts of mma_layouts.py; 16-bit register
halves are packed into u32 registers exactly as on the hardware (low half first). Each function takes the block run
(tilec.simt.interp._BlockRun), the statement or expression, and the active threads' mask."""

from __future__ import annotations

import functools
import itertools

import ml_dtypes
import numpy as np

from ...ir import simt as S
from . import mma_layouts as L
from .gemm_mma import MMA


@functools.cache
def _ldmatrix_table(num: int, trans: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per destination lane / register / half: the lane supplying the row address and the column within that row."""
    src = np.zeros((32, num, 2), np.int64)
    col = np.zeros((32, num, 2), np.int64)
    for lane, reg, h in itertools.product(range(32), range(num), range(2)):
        matrix, row, cc = L.ldmatrix_dest(lane, reg, h, trans)
        src[lane, reg, h] = L.ldmatrix_address_lane(matrix, row)
        col[lane, reg, h] = cc
    return src, col


@functools.cache
def _mma_tables() -> dict[str, np.ndarray]:
    t = {}
    for name, fn, count in (("a", L.mma_m16n8k16_a, 8), ("b", L.mma_m16n8k16_b, 4), ("c", L.mma_m16n8k16_c, 4)):
        coords = np.array([[fn(lane, i) for i in range(count)] for lane in range(32)])  # (32, count, 2)
        t[f"{name}_row"], t[f"{name}_col"] = coords[..., 0], coords[..., 1]
    return t


def _row_addresses(run, s: S.SCall, mask, buf, idx, num: int, does: str) -> tuple[np.ndarray, np.ndarray]:
    """The checks ldmatrix and stmatrix share (whole 32-lane warps, a 16-bit shared buffer, 16-byte aligned row
    addresses from the lanes that give one); returns the active lanes and those whose address is used."""
    if run.sim.warp_size != MMA.warp_size:
        raise run.err(f"{s.name} exists only on {MMA.warp_size}-lane warps", s.span)
    run.warp_check(mask, s.name, s.span)
    run.whole_warps_only(mask, s.name, s.span)
    if buf.scope != "shared" or buf.dtype.bytes != 2:
        raise run.err(f"{does} 16-bit elements {'from' if 'reads' in does else 'to'} shared memory", s.span)
    act = run.active(mask)
    rows_used = (run.tid % 32) < 8 * num
    if np.any(act & rows_used & ((idx * 2) % 16 != 0)):
        raise run.err(f"{s.name}: a row address into '{buf.name}' is not 16-byte aligned", s.span)
    return act, rows_used


def ldmatrix(run, s: S.SCall, mask) -> None:
    """ldmatrix_x{2,4}[_trans]: each lane's registers from the rows whose addresses the lanes of its warp give."""
    num, trans = s.params["count"], s.params["trans"]
    db, di = run.addr(s.args[0], mask)
    sb, si = run.addr(s.args[1], mask)
    act, rows_used = _row_addresses(run, s, mask, sb, si, num, "ldmatrix reads")
    src_lane, col = _ldmatrix_table(num, trans)  # (32, num, 2)
    warp_base = (run.tid // 32) * 32
    provider = warp_base[:, None, None] + src_lane[run.tid % 32]  # (n, num, 2)
    elem = si[provider] + col[run.tid % 32]
    live = act[:, None, None] & np.ones_like(elem, bool)
    run.check_index(sb, np.where(act & rows_used, si, 0), act & rows_used, 8, "ldmatrix read", s.span)
    data = run.shared[sb].data
    e = np.where(live, elem, 0)
    run.track_read(sb, e[live].ravel(), provider[live].ravel(), s.span)
    bits = data[e].view(np.uint16).astype(np.uint32)  # (n, num, 2)
    regs = bits[:, :, 0] | (bits[:, :, 1] << 16)
    run.write(db, di, regs.astype(np.uint32), mask, s.span)

def stmatrix(run, s: S.SCall, mask) -> None:
    """stmatrix_x{2,4}, ldmatrix's inverse: each lane's registers (packed halves, low first) into the rows whose
    addresses the lanes of its warp give. The lane holding the data counts as the writer (for the race checks)."""
    num = s.params["count"]
    if len(s.args) != 1 + num:
        raise run.err(f"{s.name} takes a shared address and {num} registers, got {len(s.args)} arguments", s.span)
    db, di = run.addr(s.args[0], mask)
    act, rows_used = _row_addresses(run, s, mask, db, di, num, "stmatrix writes")
    run.check_index(db, np.where(act & rows_used, di, 0), act & rows_used, 8, "stmatrix write", s.span)
    regs = np.stack([run.full(run.eval(a, mask)).astype(np.int64) & 0xFFFFFFFF for a in s.args[1:]], axis=1)
    src_lane, col = _ldmatrix_table(num, False)  # (32, num, 2): the row's lane and the column, per register half
    warp_base = (run.tid // 32) * 32
    provider = warp_base[:, None, None] + src_lane[run.tid % 32]
    elem = di[provider] + col[run.tid % 32]  # (n, num, 2)
    halves = (regs[:, :, None] >> np.array([0, 16])) & 0xFFFF
    flat = elem[act].ravel()
    run.track_write(db, flat, np.repeat(run.tid[act], 2 * num), s.span)
    if len(np.unique(flat)) != len(flat):
        raise run.err(f"{s.name}: lanes store to the same element of '{db.name}' (overlapping rows)", s.span)
    data = run.shared[db].data
    data[flat] = halves[act].ravel().astype(np.uint16).view(data.dtype)


def mma(run, s: S.SCall, mask) -> None:
    """mma_f16 / mma_bf16 (m16n8k16, f32 accumulators), per warp: A, B, C gathered from the lanes' registers by
    the PTX ISA fragment layouts, D = A @ B + C scattered back."""
    if run.sim.warp_size != MMA.warp_size:
        raise run.err(f"mma.sync exists only on {MMA.warp_size}-lane warps", s.span)
    run.warp_check(mask, s.name, s.span)
    run.whole_warps_only(mask, s.name, s.span)
    act = run.active(mask)
    (cb, ci), (ab, ai), (bb, bi) = (run.addr(a, mask) for a in s.args)
    a = run.read(ab, ai, mask, 4, s.span).astype(np.uint32)  # (n, 4) registers
    b = run.read(bb, bi, mask, 2, s.span).astype(np.uint32)
    c = run.read(cb, ci, mask, 4, s.span).astype(np.float32)
    half = np.float16 if s.params["dtype"] == "f16" else ml_dtypes.bfloat16

    def unpack(regs):  # (n, r) u32 -> (n, 2r) values, low half first
        lo = (regs & 0xFFFF).astype(np.uint16)
        hi = (regs >> 16).astype(np.uint16)
        return np.stack([lo, hi], axis=-1).reshape(regs.shape[0], -1).view(half).astype(np.float32)

    av, bv = unpack(a), unpack(b)
    w = run.n // 32
    t = _mma_tables()
    A = np.zeros((w, 16, 16), np.float32)
    B = np.zeros((w, 16, 8), np.float32)
    C = np.zeros((w, 16, 8), np.float32)
    A[:, t["a_row"], t["a_col"]] = av.reshape(w, 32, 8)
    B[:, t["b_row"], t["b_col"]] = bv.reshape(w, 32, 4)
    C[:, t["c_row"], t["c_col"]] = c.reshape(w, 32, 4)
    Dm = np.matmul(A, B) + C
    d = Dm[:, t["c_row"], t["c_col"]].reshape(run.n, 4)
    run.write(cb, ci, run.to_storage(d, cb.dtype), act if mask is not None else None, s.span)


def _pack(run, e, mask, dt) -> np.ndarray:
    lo = run.full(run.eval(e.args[0], mask)).astype(np.float32).astype(dt).view(np.uint16)
    hi = run.full(run.eval(e.args[1], mask)).astype(np.float32).astype(dt).view(np.uint16)
    return lo.astype(np.int64) | (hi.astype(np.int64) << 16)


def pack_half2(run, e, mask) -> np.ndarray:
    """Two values rounded to f16, side by side in a u32 (low half first)."""
    return _pack(run, e, mask, np.float16)


def pack_bf162(run, e, mask) -> np.ndarray:
    return _pack(run, e, mask, ml_dtypes.bfloat16)
