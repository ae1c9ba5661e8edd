"""What a matrix instruction is, as data: the descriptor every instruction family's implementation carries.

A back end defines one `MatrixInstruction` per family it offers, next to that family's implementation
(tilec/targets/cuda/gemm_mma.py's MMA, gemm_wgmma.py's WGMMA, tilec/targets/hip/gemm_mfma.py's MFMA), which is
registered with tilec/ops/gemm_impl.py. layout-inference reads the descriptor through the implementation: which
operand types it takes, the atom it tiles the accumulator with and how many threads execute one instruction; the
schedule reports its shape; the lowering and the SIMT interpreter read the same numbers. The per-lane placement of
the elements is the accumulator class in tilec/ir/layout.py (`coords`), checked against the vendor's tables in
targets/cuda/mma_layouts.py and targets/hip/mfma_layouts.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as D


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

