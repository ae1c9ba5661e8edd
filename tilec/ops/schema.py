"""What the tile ops' checks share: squeezed extents, compile-time tile extents of a region, printing a shape."""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import tile as T
from ..ir.fold import as_int


def squeeze(extents: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(e for e in extents if e != 1) or (1,)


def extents(r: T.Region, rep: Reporter, span) -> tuple[int, ...] | None:
    ext = r.const_extents
    if ext is None:
        rep.error(f"the tile extent of '{r.buffer.name}' must be a compile-time constant", r.span or span)
        return None
    if r.buffer.scope != "global":
        shape = r.buffer.const_shape
        if shape is not None:
            for axis, (start, e, dim) in enumerate(zip(r.starts, ext, shape, strict=True)):
                s = as_int(start)
                if s is not None and (s < 0 or s + e > dim):
                    rep.error(f"region [{s}:{s + e}] is outside dimension {axis} of '{r.buffer.name}' "
                              f"(size {dim})", r.span or span)
                    return None
                if e > dim:
                    rep.error(f"a tile of extent {e} does not fit dimension {axis} of '{r.buffer.name}' "
                              f"(size {dim})", r.span or span)
                    return None
    return ext


def fmt(ext: tuple[int, ...]) -> str:
    return "x".join(str(e) for e in ext)
