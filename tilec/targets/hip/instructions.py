"""The HIP back end's gemm implementations, registered with tilec/ops/gemm_impl.py when a HIP target first asks
(Target.implementations). One line per instruction: the implementation, the targets it serves, its rank."""

from __future__ import annotations

from ...ops.gemm_impl import register_gemm_impl
from .gemm_mfma import MFMA, MfmaGemm

register_gemm_impl(MfmaGemm(), MFMA.offered_by, rank=30)
