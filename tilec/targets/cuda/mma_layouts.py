"""Register fragment layouts of ``mma.sync`` m16n8k16 and ``ldmatrix`` (PTX ISA).

These functions are the single description tilec uses of which lane holds
which matrix element for the warp-level tensor-core path on sm_80+.  They
follow the PTX ISA sections

* "Matrix Fragments for mma.m16n8k16 with floating point type"
  (under "Warp-level Matrix Multiply-Accumulate Instructions" /
  "Matrix shape"), for ``.f16`` / ``.bf16`` multiplicands and ``.f32``
  accumulators, and
* "Warp-level matrix load instruction: ldmatrix" (``.m8n8``, ``.b16``,
  ``.x1`` / ``.x2`` / ``.x4``, optional ``.trans``).

Vocabulary used throughout, as in the ISA: ``groupID = lane >> 2`` and
``threadID_in_group = lane % 4``.  A fragment *element index* ``i`` counts the
16-bit (or 32-bit accumulator) values a lane holds, low to high; for 16-bit
operands element ``i`` lives in 32-bit register ``i // 2``, in its low half
when ``i`` is even.

The module needs nothing beyond the standard library at import; the
``pack``/``unpack``/``simulate`` helpers import numpy lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

WARP_SIZE = 32

__all__ = [
    "WARP_SIZE",
    "FragmentLayout",
    "mma_m16n8k16_a",
    "mma_m16n8k16_b",
    "mma_m16n8k16_c",
    "MMA_M16N8K16_A",
    "MMA_M16N8K16_B",
    "MMA_M16N8K16_C",
    "ldmatrix_address_lane",
    "ldmatrix_row_of_lane",
    "ldmatrix_dest",
    "ldmatrix_x4_tile_address",
    "simulate_ldmatrix",
    "pack_fragments",
    "unpack_fragments",
    "pack_registers",
]


def _check_lane(lane: int) -> None:
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"lane must be in [0, {WARP_SIZE}), got {lane}")


def _check_index(i: int, n: int, what: str) -> None:
    if not 0 <= i < n:
        raise ValueError(f"{what} must be in [0, {n}), got {i}")


# ---------------------------------------------------------------------------
# mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
# ---------------------------------------------------------------------------


def mma_m16n8k16_a(lane: int, i: int) -> tuple[int, int]:
    """(row, col) in the 16x16 A operand of element ``a_i`` held by ``lane``.

    PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type",
    multiplicand A (.f16/.bf16): four .f16x2 registers, elements a0..a7.
    Element pairs (a0,a1), (a2,a3), (a4,a5), (a6,a7) share a register and sit
    in adjacent columns of one row, so each register is one aligned 32-bit
    word of a row-major tile.  Registers 0..3 cover the four 8x8 quadrants in
    the order (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
    (rows 8-15, k 8-15).
    """
    _check_lane(lane)
    _check_index(i, 8, "A element index")
    group, tig = lane >> 2, lane & 3
    row = group + 8 * ((i >> 1) & 1)
    col = 2 * tig + (i & 1) + 8 * (i >> 2)
    return row, col


def mma_m16n8k16_b(lane: int, i: int) -> tuple[int, int]:
    """(row k, col n) in the 16x8 B operand of element ``b_i`` held by ``lane``.

    PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type",
    multiplicand B (.f16/.bf16): two .f16x2 registers, elements b0..b3.
    A register pairs two consecutive k of one column n, i.e. it is a 32-bit
    word of B stored column-major (N x K row-major), which is why the
    instruction is spelled ``.col`` for B.  Register 0 covers k 0-7,
    register 1 covers k 8-15.
    """
    _check_lane(lane)
    _check_index(i, 4, "B element index")
    group, tig = lane >> 2, lane & 3
    row = 2 * tig + (i & 1) + 8 * (i >> 1)
    col = group
    return row, col


def mma_m16n8k16_c(lane: int, i: int) -> tuple[int, int]:
    """(row, col) in the 16x8 C/D accumulator of element ``c_i`` held by ``lane``.

    PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type",
    accumulators C/D (.f32): four .f32 registers c0..c3.  c0,c1 are in row
    ``groupID``, c2,c3 in row ``groupID + 8``, both at columns
    ``2*threadID_in_group + {0, 1}``.  Consequently each row of the tile is
    spread over the four consecutive lanes ``4*r .. 4*r+3``, so a row
    reduction is a local reduction plus shfl.xor with offsets 1 and 2.
    """
    _check_lane(lane)
    _check_index(i, 4, "C/D element index")
    group, tig = lane >> 2, lane & 3
    row = group + 8 * (i >> 1)
    col = 2 * tig + (i & 1)
    return row, col


@dataclass(frozen=True)
class FragmentLayout:
    """A warp fragment layout: ``coord(lane, i) -> (row, col)``.

    ``elems_per_reg`` is 2 for packed 16-bit operands and 1 for f32
    accumulators; element ``i`` lives in register ``i // elems_per_reg``.
    """

    name: str
    rows: int
    cols: int
    elems_per_lane: int
    elems_per_reg: int
    coord: Callable[[int, int], tuple[int, int]]

    @property
    def regs_per_lane(self) -> int:
        return self.elems_per_lane // self.elems_per_reg

    def reg_of(self, i: int) -> tuple[int, int]:
        """(register, position within register) of element ``i``."""
        _check_index(i, self.elems_per_lane, f"{self.name} element index")
        return divmod(i, self.elems_per_reg)

    def items(self):
        """Yield ``(lane, i, row, col)`` for every element of the fragment."""
        for lane in range(WARP_SIZE):
            for i in range(self.elems_per_lane):
                row, col = self.coord(lane, i)
                yield lane, i, row, col

    def inverse(self) -> dict[tuple[int, int], tuple[int, int]]:
        """Map ``(row, col) -> (lane, i)``; raises if the layout is not a bijection."""
        inv: dict[tuple[int, int], tuple[int, int]] = {}
        for lane, i, row, col in self.items():
            if not (0 <= row < self.rows and 0 <= col < self.cols):
                raise ValueError(f"{self.name}: ({lane}, {i}) -> ({row}, {col}) out of range")
            if (row, col) in inv:
                raise ValueError(f"{self.name}: ({row}, {col}) held twice")
            inv[(row, col)] = (lane, i)
        if len(inv) != self.rows * self.cols:
            raise ValueError(f"{self.name}: covers {len(inv)} of {self.rows * self.cols} elements")
        return inv


MMA_M16N8K16_A = FragmentLayout("mma.m16n8k16.A", 16, 16, 8, 2, mma_m16n8k16_a)
MMA_M16N8K16_B = FragmentLayout("mma.m16n8k16.B", 16, 8, 4, 2, mma_m16n8k16_b)
MMA_M16N8K16_C = FragmentLayout("mma.m16n8k16.C", 16, 8, 4, 1, mma_m16n8k16_c)


# ---------------------------------------------------------------------------
# ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16
# ---------------------------------------------------------------------------

_NUM = (1, 2, 4)


def ldmatrix_address_lane(matrix: int, row: int) -> int:
    """Lane that supplies the shared address of ``row`` of ``matrix``.

    PTX ISA, "Warp-level matrix load instruction: ldmatrix": lanes 0-7 give
    the eight row addresses of matrix 0, lanes 8-15 of matrix 1, 16-23 of
    matrix 2 and 24-31 of matrix 3.  Each row is 8 contiguous b16 values
    (16 bytes, 16-byte aligned); rows may be anywhere in shared memory.
    """
    _check_index(matrix, 4, "matrix")
    _check_index(row, 8, "row")
    return 8 * matrix + row


def ldmatrix_row_of_lane(lane: int, num: int) -> tuple[int, int] | None:
    """``(matrix, row)`` whose address ``lane`` supplies for ``.x{num}``.

    ``None`` when the instruction ignores the lane's address (lanes >= 8 for
    ``.x1``, lanes >= 16 for ``.x2``); such lanes must still pass a valid
    shared pointer.
    """
    _check_lane(lane)
    if num not in _NUM:
        raise ValueError(f"num must be one of {_NUM}, got {num}")
    if lane >= 8 * num:
        return None
    return lane >> 3, lane & 7


def ldmatrix_dest(lane: int, reg: int, half: int, trans: bool = False) -> tuple[int, int, int]:
    """Where the 16-bit value in ``half`` (0 = low) of ``reg`` of ``lane`` comes from.

    Returns ``(matrix, row, col)``: ``row`` is the row index within the matrix
    (i.e. which supplied address, see :func:`ldmatrix_address_lane`) and
    ``col`` the b16 element within that 16-byte row.  Destination register
    ``reg`` always receives matrix ``reg``.

    Without ``.trans`` lane ``l`` receives row ``l // 4``, elements
    ``2*(l % 4) + {0, 1}`` -- the same per-8x8 arrangement as the mma A and
    C fragments.  With ``.trans`` the matrix is delivered transposed: lane
    ``l`` receives element ``l // 4`` of rows ``2*(l % 4) + {0, 1}``.
    """
    _check_lane(lane)
    _check_index(reg, 4, "register")
    _check_index(half, 2, "half")
    group, tig = lane >> 2, lane & 3
    if trans:
        return reg, 2 * tig + half, group
    return reg, group, 2 * tig + half


def ldmatrix_x4_tile_address(lane: int) -> tuple[int, int]:
    """(row, col) of a 16x16 b16 tile whose address ``lane`` passes to ``.x4``.

    The standard usage: lane ``l`` points at row ``l % 16``, column
    ``(l // 16) * 8``.  The four 8x8 matrices are then the quadrants
    (r0-7,c0-7), (r8-15,c0-7), (r0-7,c8-15), (r8-15,c8-15), so

    * without ``.trans`` on a row-major M x K tile, registers 0..3 are
      exactly the mma m16n8k16 A fragment;
    * with ``.trans`` on a row-major K x N tile (N = 16), registers 0,1 are
      the B fragment of columns n 0-7 and registers 2,3 that of n 8-15.
    """
    _check_lane(lane)
    return lane % 16, (lane // 16) * 8


def simulate_ldmatrix(memory, row_offsets: Sequence[int], num: int, trans: bool = False):
    """Reference model of ``ldmatrix``: returns a ``(32, num, 2)`` array.

    ``memory`` is a 1-D array of 16-bit elements standing for shared memory;
    ``row_offsets[lane]`` is the element offset that lane passes (only lanes
    ``< 8*num`` are read).  Entry ``[lane, reg, half]`` is the value that ends
    up in that half of that register.
    """
    import numpy as np

    mem = np.asarray(memory)
    if len(row_offsets) != WARP_SIZE:
        raise ValueError("row_offsets needs one offset per lane")
    out = np.empty((WARP_SIZE, num, 2), dtype=mem.dtype)
    for lane in range(WARP_SIZE):
        for reg in range(num):
            for half in range(2):
                matrix, row, col = ldmatrix_dest(lane, reg, half, trans)
                base = row_offsets[ldmatrix_address_lane(matrix, row)]
                out[lane, reg, half] = mem[base + col]
    return out


# ---------------------------------------------------------------------------
# numpy helpers: distribute a matrix into per-lane fragments and back.
# ---------------------------------------------------------------------------


def pack_fragments(matrix, layout: FragmentLayout):
    """Return a ``(32, elems_per_lane)`` array: element ``i`` of each lane."""
    import numpy as np

    m = np.asarray(matrix)
    if m.shape != (layout.rows, layout.cols):
        raise ValueError(f"{layout.name}: expected shape {(layout.rows, layout.cols)}, got {m.shape}")
    frags = np.empty((WARP_SIZE, layout.elems_per_lane), dtype=m.dtype)
    for lane, i, row, col in layout.items():
        frags[lane, i] = m[row, col]
    return frags


def unpack_fragments(frags, layout: FragmentLayout):
    """Inverse of :func:`pack_fragments`."""
    import numpy as np

    f = np.asarray(frags)
    if f.shape != (WARP_SIZE, layout.elems_per_lane):
        raise ValueError(f"{layout.name}: expected shape {(WARP_SIZE, layout.elems_per_lane)}, got {f.shape}")
    m = np.empty((layout.rows, layout.cols), dtype=f.dtype)
    for lane, i, row, col in layout.items():
        m[row, col] = f[lane, i]
    return m


def pack_registers(frags16):
    """Pack ``(32, 2*n)`` 16-bit fragments into ``(32, n)`` uint32 registers.

    Element ``2*r`` goes to the low half of register ``r`` (the order both
    mma and ldmatrix use).  Accepts float16 or any 16-bit-wide dtype (for
    bf16 pass the raw uint16 bits).
    """
    import numpy as np

    f = np.ascontiguousarray(frags16)
    if f.dtype.itemsize != 2 or f.ndim != 2 or f.shape[1] % 2:
        raise ValueError("expected a (32, even) array of 16-bit elements")
    bits = f.view(np.uint16).astype(np.uint32)
    return bits[:, 0::2] | (bits[:, 1::2] << 16)
