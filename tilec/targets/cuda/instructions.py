"""The CUDA back end's gemm implementations, registered with tilec/ops/gemm_impl.py when a CUDA target first asks
(Target.implementations). One line per instruction: the implementation, the targets it serves, its rank (lower is
preferred where both fit)."""

from __future__ import annotations

from ...ops.gemm_impl import register_gemm_impl
from .gemm_mma import MMA, MmaGemm
from .gemm_wgmma import WGMMA, WgmmaGemm

register_gemm_impl(WgmmaGemm(), WGMMA.offered_by, rank=10)
register_gemm_impl(MmaGemm(), MMA.offered_by, rank=20)
