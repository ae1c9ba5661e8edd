"""How a tile sits in UB: rows padded to 32 bytes (16 elements, so that f16 and f32 tiles of one shape share a
row stride and element-wise calls can run over both with one count), and the whole tile rounded up to 128
elements (a whole number of 256-byte vector repeats for f16 and f32, which Compare needs)."""

from __future__ import annotations

from dataclasses import dataclass

from .chip import round_up

ROW_ELEMS = 16
COUNT_ELEMS = 128


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
        return TileLayout(shape[0], shape[1], round_up(shape[1], ROW_ELEMS))
    raise ValueError("AscendC tiles are 1-D or 2-D")


def nz_offset(row: int, col: int, rows_pad: int, c0: int = ROW_ELEMS) -> int:
    """Where element (row, col) of a cube operand sits in its L1 tile: the NZ layout that lower_cube.load_l1's
    Nd2Nz DataCopy writes (dstNzC0Stride = the padded row count, dstNzNStride = 1): column blocks of c0 elements
    (32 bytes) one after the other, each rows_pad x c0 row-major, so every 16 x c0 fractal is contiguous."""
    return (col // c0) * rows_pad * c0 + row * c0 + col % c0
