"""The semantics of AMD's MFMA (tilec/targets/hip/intrinsics.py) in the SIMT-level interpreter
(tilec/simt/interp.py), per 64-lane wave from the lane tables of mfma_layouts.py. The function takes the block run
(tilec.simt.interp._BlockRun), the statement and the active threads' mask."""

from __future__ import annotations

import numpy as np

from ...ir import dtypes as D
from ...ir import simt as S
from . import mfma_layouts as ML
from .gemm_mfma import MFMA


def _tables(run, eight_bit: bool) -> dict[str, np.ndarray]:
    """The lane tables, made once per run of the interpreter."""
    key = ("mfma_tables", eight_bit)
    if key not in run.sim.memo:
        run.sim.memo[key] = ML.tables(eight_bit=eight_bit)
    return run.sim.memo[key]


def mfma(run, s: S.SCall, mask) -> None:
    """v_mfma_f32_16x16x16{f16,bf16_1k} (and 16x16x32 for 8-bit floats): per 64-lane wave, A/B/C gathered from
    each lane's 4 (8) registers per tilec/targets/hip/mfma_layouts.py, D = A @ B + C in f32 (8-bit: A @ B / 4 + C,
    as gfx942 reads tilec's OCP bytes as FNUZ), scattered back to the lanes' accumulators."""
    if run.sim.warp_size != MFMA.warp_size:
        raise run.err(f"{s.name} exists only on {MFMA.warp_size}-lane wavefronts", s.span)
    run.warp_check(mask, s.name, s.span)
    run.whole_warps_only(mask, s.name, s.span)
    act = run.active(mask)
    (cb, ci), (ab, ai), (bb, bi) = (run.addr(a, mask) for a in s.args)
    want = D.lookup(s.params["dtype"])
    if ab.dtype != want or bb.dtype != want or cb.dtype != D.F32:
        raise run.err(f"{s.name} takes {want} A/B registers and f32 accumulators", s.span)
    eight_bit = s.op == "mfma_fp8"
    per, k = (ML.ELEMS_8BIT, 32) if eight_bit else (ML.ELEMS, 16)
    a = run.read(ab, ai, mask, per, s.span).astype(np.float32)  # (n, per)
    b = run.read(bb, bi, mask, per, s.span).astype(np.float32)
    c = run.read(cb, ci, mask, 4, s.span).astype(np.float32)
    w = run.n // ML.WAVE
    t = _tables(run, eight_bit)
    A = np.zeros((w, 16, k), np.float32)
    B = np.zeros((w, k, 16), np.float32)
    C = np.zeros((w, 16, 16), np.float32)
    A[:, t["a_row"], t["a_col"]] = a.reshape(w, ML.WAVE, per)
    B[:, t["b_row"], t["b_col"]] = b.reshape(w, ML.WAVE, per)
    C[:, t["c_row"], t["c_col"]] = c.reshape(w, ML.WAVE, 4)
    # the fp8 instruction reads tilec's OCP bytes as FNUZ, at half their value (tilec_hip.h)
    Dm = np.matmul(A, B) * (0.25 if eight_bit else 1.0) + C
    d = Dm[:, t["c_row"], t["c_col"]].reshape(run.n, 4)
    run.write(cb, ci, run.to_storage(d, cb.dtype), act if mask is not None else None, s.span)
