"""`tilec` — the command line, as nvcc users write it.

    tilec FILE [options]            compile (tilec/cli/compile.py: its option table, parsed without typer)
    tilec SUBCOMMAND [options]      run, bench, tune, targets, cache: typer commands, one module each (app.py)

What comes before either: `--version`/`-V` anywhere on the line, and the hidden `__complete` entry point the shell
completion scripts call (completion.py). A bad command line exits with status 2; errors in the source, a file or a
toolchain with 1 (tilec/cli/common.guarded). Import-light: `tilec --help` and a compile-cache hit load neither typer
nor the compiler.

Adding a subcommand: a module tilec/cli/NAME.py with a typer function `command` (its docstring is its help), and
one line in subcommands.py. Adding a compile option: one Flag in compile_flags.py.
"""

from __future__ import annotations

import os
import sys

from ..version import __version__
from .flags import UsageError, before_value, suggest
from .subcommands import SUBCOMMANDS


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["__complete"]:
        from .completion import complete

        return complete(argv[1:])
    if _asks_version(argv):
        print(f"tilec {__version__}")
        return 0
    try:
        if argv and argv[0] in SUBCOMMANDS:
            from .app import run_subcommand

            return run_subcommand(argv[0], argv[1:])
        _check_not_a_misspelt_subcommand(argv)
        from .compile import main as compile_main

        return compile_main(argv)
    except UsageError as e:
        print(f"{e.command}: error: {e.message}\n(`{e.command} --help` shows the usage)", file=sys.stderr)
        return 2


def _asks_version(argv: list[str]) -> bool:
    """--version or -V as an option anywhere before `--` (not as another option's value: `-Xptxas -V`)."""
    from .compile_flags import COMPILE_FLAGS

    for i, word in enumerate(argv):
        if word == "--":
            return False
        if word in ("--version", "-V") and not before_value(COMPILE_FLAGS, argv, i):
            return True
    return False


def _check_not_a_misspelt_subcommand(argv: list[str]) -> None:
    """`tilec tagrets`: a first word that is no file and no .tile name but close to a subcommand's name."""
    if not argv or argv[0].startswith("-") or argv[0].endswith(".tile") or os.path.exists(argv[0]):
        return
    hint = suggest(argv[0], SUBCOMMANDS)
    if hint:
        raise UsageError(f"no such file or subcommand '{argv[0]}'{hint}")
