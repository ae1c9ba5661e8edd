"""Views (views.py) as one SVG document, with the standard library only.

Each view is a titled grid: row and column indices around it, one rectangle per element filled with its colour
group's colour and its text lines written inside, a red frame on highlighted cells, a tooltip (`<title>`) with the
full description, then the legend and the notes below. Views are stacked top to bottom.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from .views import View

CELL_W = 36
CELL_H = 22
MARGIN = 36  # room for the row indices
TITLE_H = 28
LINE_H = 14
LEGEND_COLS = 4
LEGEND_W = 260
MAX_TOOLTIP_CELLS = 4096  # beyond this many cells a view has no per-cell tooltips (they would triple the file)


def colour(group: int, groups: int) -> str:
    """A light colour per group, neighbours far apart on the colour wheel (the golden angle)."""
    if group < 0:
        return "#ffffff"
    hue = (group * 137.508) % 360
    light = 82 if (group // 8) % 2 == 0 else 70
    return f"hsl({hue:.1f},70%,{light}%)"


def _legend_rows(view: View) -> int:
    return -(-len(view.legend) // LEGEND_COLS)


def view_height(view: View) -> int:
    return TITLE_H + LINE_H + view.rows * CELL_H + 10 + (_legend_rows(view) + len(view.notes)) * LINE_H + 20


def view_width(view: View) -> int:
    return max(MARGIN + view.cols * CELL_W + 10, LEGEND_COLS * LEGEND_W + MARGIN)


def render_view(view: View, top: int) -> list[str]:
    out = [f'<g transform="translate(0,{top})">',
           f'<text x="{MARGIN}" y="18" class="title">{escape(view.title)}</text>']
    y0 = TITLE_H + LINE_H
    step = 1 if view.cols <= 64 else 4  # index every column while they fit, else every 4th
    for j in range(0, view.cols, step):
        out.append(f'<text x="{MARGIN + j * CELL_W + CELL_W / 2}" y="{y0 - 4}" class="idx">{j}</text>')
    rstep = 1 if view.rows <= 64 else 4
    tooltips = view.rows * view.cols <= MAX_TOOLTIP_CELLS
    for i in range(view.rows):
        y = y0 + i * CELL_H
        if i % rstep == 0:
            out.append(f'<text x="{MARGIN - 4}" y="{y + CELL_H / 2 + 3}" class="idx" text-anchor="end">{i}</text>')
        for j, cell in enumerate(view.cells[i]):
            x = MARGIN + j * CELL_W
            if cell is None:
                out.append(f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" class="empty"/>')
                continue
            cls = ' class="hot"' if cell.highlight else ""
            text = "".join(f'<tspan x="{x + CELL_W / 2}" dy="{0 if n == 0 else 9}">{escape(line)}</tspan>'
                           for n, line in enumerate(cell.shown()))
            tip = f"<title>{escape(cell.title)}</title>" if tooltips else ""
            out.append(f'<g{cls} data-row="{i}" data-col="{j}">{tip}'
                       f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" '
                       f'fill="{colour(cell.group, view.groups)}"/>'
                       f'<text x="{x + CELL_W / 2}" y="{y + 9}" class="cell">{text}</text></g>')
    y = y0 + view.rows * CELL_H + 10
    for n, (group, label) in enumerate(view.legend):
        lx = MARGIN + (n % LEGEND_COLS) * LEGEND_W
        ly = y + (n // LEGEND_COLS) * LINE_H
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{colour(group, view.groups)}" '
                   f'stroke="#888"/><text x="{lx + 14}" y="{ly + 9}" class="note">{escape(label)}</text>')
    y += _legend_rows(view) * LINE_H
    for n, note in enumerate(view.notes):
        out.append(f'<text x="{MARGIN}" y="{y + n * LINE_H + 10}" class="note">{escape(note)}</text>')
    out.append("</g>")
    return out


STYLE = """
text { font-family: monospace; }
.title { font-size: 14px; font-weight: bold; }
.idx { font-size: 8px; fill: #555; text-anchor: middle; }
.cell { font-size: 8px; text-anchor: middle; }
.note { font-size: 11px; }
rect { stroke: #999; stroke-width: 0.5; }
.empty { fill: #f4f4f4; }
.hot rect { stroke: #d00000; stroke-width: 2.5; }
"""


def render(views: list[View], title: str = "") -> str:
    """The SVG document of `views`, stacked."""
    width = max([view_width(v) for v in views] + [400])
    height = sum(view_height(v) for v in views) + (30 if title else 0) + 10
    body: list[str] = []
    top = 10
    if title:
        body.append(f'<text x="{MARGIN}" y="24" class="title">{escape(title)}</text>')
        top += 30
    for v in views:
        body += render_view(v, top)
        top += view_height(v)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">\n<title>{escape(title or "tilec layout")}</title>\n'
            f'<style>{STYLE}</style>\n<rect x="0" y="0" width="{width}" height="{height}" fill="white" '
            f'stroke="none"/>\n' + "\n".join(body) + "\n</svg>\n")


__all__ = ["render", "colour"]
