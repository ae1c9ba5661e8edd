"""How a tile sits in UB: rows padded to 32 bytes (16 elements, so that f16 and f32 tiles of one shape share a
row stride and element-wise calls can run over both with one count), and the whole tile rounded up to 128
elements (a whole number of 256-byte vector repeats for f16 and f32, which Compare needs). A kernel with a
1-byte tile (i8, u8, bool) pads every row to 32 elements instead, so that the byte tile's rows start at 32-byte
boundaries too and all tiles of one shape still share their row stride (`row_elems`)."""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

from .chip import round_up

ROW_ELEMS = 16
BYTE_ROW_ELEMS = 32
COUNT_ELEMS = 128
_row_elems: contextvars.ContextVar[int] = contextvars.ContextVar("ascend_row_elems", default=ROW_ELEMS)


def kernel_row_elems(k) -> int:
    """The row padding (elements) of a kernel's UB tiles: 32 when it has a 1-byte tile, else 16."""
    from ...ir import tile as T
    from ...ir.visit import walk_stmts

    byte = any(isinstance(s, T.Alloc) and s.buffer.scope not in ("global", "var") and s.buffer.dtype.bytes == 1
               for s in walk_stmts(k.body))
    return BYTE_ROW_ELEMS if byte else ROW_ELEMS


@contextlib.contextmanager
def row_padding(elems: int):
    """Lay out tiles with rows padded to `elems` elements inside the block."""
    token = _row_elems.set(elems)
    try:
        yield
    finally:
        _row_elems.reset(token)


@dataclass(frozen=True)
class TileLayout:
    rows: int  # 1-D tiles: the length
    cols: int | None  # None: a 1-D tile
    cols_pad: int  # elements between rows (1-D: 1)

    @property
    def count(self) -> int:
        """Elements an element-wise call covers (the padding included)."""
        return round_up(self.rows * self.cols_pad, COUNT_ELEMS)

    @property
    def is_2d(self) -> bool:
        return self.cols is not None


def layout_of(shape: tuple[int, ...]) -> TileLayout:
    if len(shape) == 1:
        return TileLayout(shape[0], None, 1)
    if len(shape) == 2:
        return TileLayout(shape[0], shape[1], round_up(shape[1], _row_elems.get()))
    raise ValueError("AscendC tiles are 1-D or 2-D")


def nz_offset(row: int, col: int, rows_pad: int, c0: int = ROW_ELEMS) -> int:
    """Where element (row, col) of a cube operand sits in its L1 tile: the NZ layout that lower_cube.load_l1's
    Nd2Nz DataCopy writes (dstNzC0Stride = the padded row count, dstNzNStride = 1): column blocks of c0 elements
    (32 bytes) one after the other, each rows_pad x c0 row-major, so every 16 x c0 fractal is contiguous."""
    return (col // c0) * rows_pad * c0 + row * c0 + col % c0
