"""rich Consoles that follow tilec's colour rule (tilec.cli.common.color_wanted: --color, --no-color, NO_COLOR,
a terminal). rich is imported here, so only code that renders something (help, tables, progress) loads it."""

from __future__ import annotations

import sys

from rich.console import Console

from .common import color_wanted


def console(args, stderr: bool = True) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    color = color_wanted(args, stream)
    # force_terminal only for --color=always on a pipe; without colour, no styles at all (bold, italics)
    return Console(file=stream, force_terminal=True if color and not stream.isatty() else None,
                   color_system="auto" if color else None, highlight=False, width=width(stream))


def width(stream) -> int | None:
    """The terminal's width, or $COLUMNS (else 120) where the output is no terminal."""
    import os

    return None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 120
