"""The CUDA back end's instruction implementations -- gemm families (tilec/ops/gemm_impl.py) and Pipelined-loop
copy mechanisms (tilec/ir/copy_mechanisms.py) -- registered when a CUDA target first asks
(Target.implementations). One line per implementation: it, the targets it serves, its rank (lower is preferred
where several fit)."""

from __future__ import annotations

from ...ir.copy_mechanisms import CpAsync, register_mechanism
from ...ops.gemm_impl import register_gemm_impl
from .gemm_mma import MMA, MmaGemm
from .gemm_wgmma import WGMMA, WgmmaGemm
from .tma_pipeline import TmaPipeline

register_gemm_impl(WgmmaGemm(), WGMMA.offered_by, rank=10)
register_gemm_impl(MmaGemm(), MMA.offered_by, rank=20)

register_mechanism(TmaPipeline(), lambda target: target.tma_pipelines, rank=10)
register_mechanism(CpAsync(), lambda target: "cp.async" in target.async_copy, rank=20)
