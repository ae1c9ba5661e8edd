"""Lane layouts of AMD's `v_mfma_f32_16x16x16f16` (and `v_mfma_f32_16x16x16bf16_1k`) on CDNA2/CDNA3 (wave64).

D = A @ B + C with A 16x16 (M x K), B 16x16 (K x N), C/D 16x16 (M x N). Each of the 64 lanes holds 4 elements of
A (a 64-bit VGPR pair of four 16-bit values, element i in bits [16i, 16i+16)), 4 of B and 4 f32 of C/D (4 VGPRs
or AGPRs). Lanes are grouped in four 16-lane blocks g = lane / 16:

* A: lane holds row lane % 16, columns (k) 4g .. 4g+3;
* B: lane holds column lane % 16, rows (k) 4g .. 4g+3;
* C/D: lane holds column lane % 16, rows 4g .. 4g+3.

Sources (checked for this file): the CDNA3 M16N16K16 layout tables of AMD's HIP port of flashinfer
(`gpu_iface/mma` for HIP: A "RowMajor", T0 owns row 0 cols 0-3, T16 row 0 cols 4-7; B and C/D "ColumnMajor",
T0 owns rows 0-3 of col 0, T16 rows 4-7), and a register dump of v_mfma_f32_16x16x16f16 (A[0][0..3] in lane 0,
A[0][4..7] in lane 16). The CDNA2/CDNA3 ISA guides and AMD's matrix instruction calculator were not read here
directly; the 16x16x16 f16 layout is the same on gfx90a and gfx942. The bf16_1k variant uses the
same layout (4 bf16 per lane). No AMD hardware is reachable here: these functions are the reference that
layout inference, lowering and the SIMT interpreter all follow.
"""

from __future__ import annotations

import numpy as np

WAVE = 64
ELEMS = 4  # per lane, for each of A, B, C/D


def mfma_16x16x16_a(lane: int, i: int) -> tuple[int, int]:
    """(row m, column k) of A held by `lane` as its element i (0..3)."""
    return lane % 16, 4 * (lane // 16) + i


def mfma_16x16x16_b(lane: int, i: int) -> tuple[int, int]:
    """(row k, column n) of B held by `lane` as its element i (0..3)."""
    return 4 * (lane // 16) + i, lane % 16


def mfma_16x16x16_c(lane: int, i: int) -> tuple[int, int]:
    """(row m, column n) of C/D held by `lane` as its accumulator register i (0..3)."""
    return 4 * (lane // 16) + i, lane % 16


# v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8} (gfx942): the same C/D layout, twice the k per lane. Each lane holds 8
# one-byte elements of A and of B (a 64-bit VGPR pair, element i in bits [8i, 8i+8)): A row lane % 16 and B column
# lane % 16, k = 8 * (lane / 16) + i -- the 16x16x16 pattern with 8 k-values per lane group. (The lowering relies
# only on A and B sharing one lane -> k map: the instruction sums over k, so any common map gives A @ B.)
ELEMS_8BIT = 8


def mfma_16x16x32_a(lane: int, i: int) -> tuple[int, int]:
    """(row m, column k) of A held by `lane` as its element i (0..7)."""
    return lane % 16, 8 * (lane // 16) + i


def mfma_16x16x32_b(lane: int, i: int) -> tuple[int, int]:
    """(row k, column n) of B held by `lane` as its element i (0..7)."""
    return 8 * (lane // 16) + i, lane % 16


def tables(eight_bit: bool = False) -> dict[str, np.ndarray]:
    """{a,b,c}_{row,col}: (64, elements) index arrays of the three layouts (16x16x16, or 16x16x32 for 8-bit)."""
    out = {}
    a, b, n = (mfma_16x16x32_a, mfma_16x16x32_b, ELEMS_8BIT) if eight_bit else (mfma_16x16x16_a, mfma_16x16x16_b,
                                                                                 ELEMS)
    for name, fn, count in (("a", a, n), ("b", b, n), ("c", mfma_16x16x16_c, ELEMS)):
        coords = np.array([[fn(lane, i) for i in range(count)] for lane in range(WAVE)])
        out[f"{name}_row"], out[f"{name}_col"] = coords[..., 0], coords[..., 1]
    return out


def simulate(a_regs: np.ndarray, b_regs: np.ndarray, c_regs: np.ndarray) -> np.ndarray:
    """One MFMA over a wave, lane by lane: (64, 4) register values of A, B, C -> (64, 4) of D (f32)."""
    t = tables()
    A = np.zeros((16, 16), np.float32)
    B = np.zeros((16, 16), np.float32)
    C = np.zeros((16, 16), np.float32)
    A[t["a_row"], t["a_col"]] = a_regs
    B[t["b_row"], t["b_col"]] = b_regs
    C[t["c_row"], t["c_col"]] = c_regs
    D = A @ B + C
    return D[t["c_row"], t["c_col"]]
