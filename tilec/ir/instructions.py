"""The matrix instructions tile gemms run on, as data: one descriptor per instruction family.

layout-inference reads a descriptor to know whether a target offers the family (Target.matrix_instructions
lists it by `target_name`), which operand types it takes, the atom it tiles the accumulator with and how
many threads execute one instruction; the schedule reports its shape; the lowering of each family
(tilec/ops/gemm_<family>.py, sm90's wgmma in targets/cuda/hopper_lowering.py) and the SIMT interpreter read
the same numbers. The per-lane placement of the elements is the accumulator class in tilec/ir/layout.py
(`coords`), checked against the vendor's tables in targets/cuda/mma_layouts.py and
targets/hip/mfma_layouts.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as D
from .layout import MfmaTiled, MmaTiled, WgmmaTiled


@dataclass(frozen=True)
class MatrixInstruction:
    family: str  # the schedule's name for it: GemmSchedule.instruction
    target_name: str  # how Target.matrix_instructions lists it
    m: int  # rows of one instruction's accumulator tile
    n: int  # columns of one accumulator atom (wgmma: the step of its variable N)
    k: int  # reduction depth of one instruction for 16-bit operands
    lanes: int  # threads that execute one instruction together (warp, warpgroup, wave)
    warp_size: int  # the width of the hardware's warps (wavefronts) it runs on
    operand_types: tuple[D.DType, ...]
    accumulator: type  # its accumulator's Fragment layout (tilec/ir/layout.py)
    max_n: int | None = None  # wgmma: the largest N of one instruction
    k_8bit: int | None = None  # reduction depth for 8-bit float operands, where taken

    def offered_by(self, target) -> bool:
        return self.target_name in target.matrix_instructions and target.warp_size == self.warp_size

    def step_k(self, dtype: D.DType) -> int:
        return self.k_8bit if dtype.bits == 8 and self.k_8bit else self.k


WGMMA = MatrixInstruction("wgmma", "wgmma.m64nNk16", 64, 8, 16, 128, 32,
                          (D.F16, D.BF16, D.F8E4M3, D.F8E5M2), WgmmaTiled, max_n=256, k_8bit=32)
MMA = MatrixInstruction("mma", "mma.sync.m16n8k16", 16, 8, 16, 32, 32, (D.F16, D.BF16), MmaTiled)
# (8-bit floats: v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8}, gfx942 only; the others refuse those types up front.)
MFMA = MatrixInstruction("mfma", "mfma.16x16x16", 16, 16, 16, 64, 64, (D.F16, D.BF16, D.F8E4M3, D.F8E5M2),
                         MfmaTiled, k_8bit=32)

FAMILIES = {i.family: i for i in (WGMMA, MMA, MFMA)}
