"""rich Consoles that follow tilec's colour rule (tilec.cli.common.color_wanted: --color, --no-color, NO_COLOR,
a terminal). rich is imported here, so only code that renders something (help, tables, progress) loads it."""

from __future__ import annotations

import sys

from rich.console import Console

from .common import color_wanted


def console(args, stderr: bool = True) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    color = color_wanted(args, stream)
    # force_terminal only for --color=always on a pipe; no_color strips colour but keeps bold and boxes
    return Console(file=stream, force_terminal=True if color and not stream.isatty() else None,
                   no_color=not color, highlight=False, soft_wrap=False)
