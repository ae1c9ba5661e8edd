"""The HIP back end's instruction implementations -- gemm families (tilec/ops/gemm_impl.py) and Pipelined-loop
copy mechanisms (tilec/ir/copy_mechanisms.py) -- registered when a HIP target first asks
(Target.implementations). One line per implementation: it, the targets it serves, its rank."""

from __future__ import annotations

from ...ir.copy_mechanisms import RegisterStaged, register_mechanism
from ...ops.gemm_impl import register_gemm_impl
from .gemm_mfma import MFMA, MfmaGemm

register_gemm_impl(MfmaGemm(), MFMA.offered_by, rank=30)

register_mechanism(RegisterStaged(), lambda target: "register_double_buffer" in target.features, rank=30)
