"""Views (views.py) as PNG or PDF through matplotlib, the optional `tilec[plot]` extra.

The same picture as svg.py: one axes per view, stacked, cells filled by colour group with their text, red frames
on highlighted cells, the legend and notes under each grid. matplotlib is imported only here, only when asked for.
"""

from __future__ import annotations

import dataclasses

from ..errors import UserFacingError
from .views import View

INCH_PER_CELL_W = 0.42
INCH_PER_CELL_H = 0.26
MAX_TEXT_CELLS = 2048  # larger views are drawn as colours only (matplotlib text is slow)
MAX_WIDTH_IN = 40


class PlotDependencyMissing(UserFacingError):
    pass


def _hsl(group: int) -> tuple[float, float, float]:
    import colorsys

    if group < 0:
        return (1.0, 1.0, 1.0)
    hue = ((group * 137.508) % 360) / 360
    light = 0.82 if (group // 8) % 2 == 0 else 0.70
    return colorsys.hls_to_rgb(hue, light, 0.70)


def render(views: list[View], path: str, fmt: str, title: str = "") -> None:
    """Write `views` to `path` as `fmt` ("png" or "pdf")."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        raise PlotDependencyMissing(f"writing {fmt.upper()} needs matplotlib: pip install 'tilec[plot]' "
                                    "(or write .svg, which needs nothing)") from None
    extra = [len(v.notes) + -(-len(v.legend) // 4) + 3 for v in views]
    heights = [v.rows * INCH_PER_CELL_H + e * 0.2 for v, e in zip(views, extra, strict=True)]
    width = min(MAX_WIDTH_IN, max(6.0, max(v.cols for v in views) * INCH_PER_CELL_W + 1))
    fig, axes = plt.subplots(len(views), 1, figsize=(width, sum(heights) + 0.5), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    if title:
        fig.suptitle(title, fontsize=12, fontfamily="monospace")
    for ax, view in zip(axes[:, 0], views, strict=True):
        ax.set_xlim(0, view.cols)
        ax.set_ylim(view.rows, 0)
        ax.set_aspect("auto")
        ax.set_title(view.title, fontsize=10, fontfamily="monospace", loc="left")
        ax.tick_params(labelsize=5)
        import numpy as np

        rgb = np.ones((view.rows, view.cols, 3))
        for i, row in enumerate(view.cells):
            for j, cell in enumerate(row):
                if cell is not None:
                    rgb[i, j] = _hsl(cell.group)
        ax.imshow(rgb, extent=(0, view.cols, view.rows, 0), interpolation="nearest", aspect="auto")
        texts = view.rows * view.cols <= MAX_TEXT_CELLS
        for i, row in enumerate(view.cells):
            for j, cell in enumerate(row):
                if cell is not None and cell.highlight:
                    ax.add_patch(Rectangle((j, i), 1, 1, fill=False, edgecolor="#d00000", linewidth=1.2))
                if cell is not None and texts:
                    ax.text(j + 0.5, i + 0.5, "\n".join(cell.shown()), ha="center", va="center", fontsize=3.5,
                            fontfamily="monospace")
        if not texts:
            view = dataclasses.replace(view, notes=[*view.notes, "(cell text: in the SVG only, for tiles this large)"])
        legend = "   ".join(label for _, label in view.legend[:16])
        ax.set_xlabel("\n".join([legend, *view.notes]), fontsize=6, fontfamily="monospace", loc="left")
    fig.tight_layout()
    fig.savefig(path, format=fmt, dpi=150)
    plt.close(fig)
