"""The HIP back end's own intrinsics (tilec/ir/intrinsics.py `define`): AMD's MFMA, with their semantics in the SIMT
interpreter (tilec/targets/hip/simt_semantics.py), spelled in tilec/targets/hip/codegen.py and implemented in
include/tilec_hip.h."""

from __future__ import annotations

from ...ir.intrinsics import IntrinsicDef, define

_SEMANTICS = "tilec.targets.hip.simt_semantics:mfma"

define(
    IntrinsicDef("mfma", {"dtype": str}, "mfma.16x16x16",
                 key=lambda p: "mfma_f32_16x16x16f16" if p["dtype"] == "f16" else "mfma_f32_16x16x16bf16_1k",
                 pattern=r"mfma_f32_16x16x16(?P<dtype>f16|bf16)(_1k)?", semantics=_SEMANTICS),
    IntrinsicDef("mfma_fp8", {"dtype": str}, "mfma.16x16x32.fp8",
                 key=lambda p: f"mfma_f32_16x16x32_{p['dtype']}", pattern=r"mfma_f32_16x16x32_(?P<dtype>f8e4m3|f8e5m2)",
                 doc="8 fp8 values of A and B per lane (OCP e4m3/e5m2 in memory, FNUZ in the instruction)",
                 semantics=_SEMANTICS),
)
