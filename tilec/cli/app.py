"""The typer glue of the subcommands: `tilec NAME ...` runs the typer command of tilec/cli/NAME.py.

Each subcommand is a typer app of one command, built when it is invoked (typer, and the pydantic it converts
values with, cost 0.15-0.25 s to import: only these commands pay it). Typer parses the options, prints the help
(grouped in panels by rich_help_panel, rendered by rich); a usage error is one line, as the compile command's
(`tilec run: error: No such option: --targte Did you mean --target?`, exit status 2); the command returns its
status through typer.Exit.
"""

from __future__ import annotations

import importlib
import os
import sys
from contextlib import contextmanager

from .subcommands import SUBCOMMANDS


def load(name: str):
    """The module of subcommand `name` (its typer function `command`)."""
    assert name in SUBCOMMANDS, name
    return importlib.import_module(f"{__package__}.{name.replace('-', '_')}")


def click_command(name: str):
    """The click command typer builds for subcommand `name` (help, parsing, completion)."""
    import typer

    module = load(name)
    app = typer.Typer(add_completion=False, rich_markup_mode="rich", pretty_exceptions_enable=False,
                      context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
    app.command(name=name, help=_paragraphs(module.command.__doc__ or ""), short_help=SUBCOMMANDS[name])(module.command)
    command = typer.main.get_command(app)
    command.context_settings["token_normalize_func"] = _unique_prefixes(command)
    _show_no_types_of_switches(command)
    return command


def _show_no_types_of_switches(command) -> None:
    """typer's help gives each parameter a type column: `<bool>` after a switch, which takes no value, and `<str>`
    after FILE, which its name already says. Those show nothing there, as in the compile command's help; an
    option with a value keeps its metavar (T, NAME=VALUE)."""
    get_params = command.get_params

    def params(ctx):
        found = get_params(ctx)  # (the help option among them, made here)
        for p in found:
            plain_argument = p.param_type_name == "argument" and p.display_type_rich(ctx) == "<str>"
            if getattr(p, "is_flag", False) or plain_argument:
                p.display_type_rich = _no_type
        return found

    command.get_params = params


def _no_type(ctx) -> None:
    return None


def _unique_prefixes(command):
    """A unique prefix of a `--` option's name stands for it (`--dev` for `--device`), as argparse allowed. click
    normalizes the declared names and the words given alike, so a name maps to itself and a prefix to its name."""
    names = [o[2:] for param in command.params for o in getattr(param, "opts", []) + getattr(param, "secondary_opts",
                                                                                           []) if o.startswith("--")]

    def normalize(name: str) -> str:
        if len(name) == 1 or name in names:  # -t: a one-letter option (click passes the name without its dashes)
            return name
        found = [n for n in names if n.startswith(name)]
        return found[0] if len(found) == 1 else name

    return normalize


def _paragraphs(doc: str) -> str:
    """A docstring as help text: each paragraph on one line (rich wraps it to the terminal)."""
    return "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n") if p.strip())


def run_subcommand(name: str, argv: list[str]) -> int:
    """Run `tilec NAME argv...`; its exit status."""
    from typer import Abort
    from typer._click.exceptions import UsageError  # typer 0.29 carries its own copy of click

    command = click_command(name)
    with _color_environment(argv):
        try:
            status = command.main(args=argv, prog_name=f"tilec {name}", standalone_mode=False)
        except UsageError as e:
            # one line, as the compile command's (flags.UsageError), not typer's boxed panel
            print(f"tilec {name}: error: {e.format_message()}\n(`tilec {name} --help` shows the usage)",
                  file=sys.stderr)
            return 2
        except Abort:  # Ctrl-C
            return 130
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return status if isinstance(status, int) else 0


ENV_KEYS = ("NO_COLOR", "FORCE_COLOR", "_TYPER_FORCE_DISABLE_TERMINAL")


@contextmanager
def _color_environment(argv: list[str]):
    """typer renders its help and errors with its own rich console, which follows NO_COLOR, FORCE_COLOR and
    _TYPER_FORCE_DISABLE_TERMINAL (read when typer.rich_utils is imported, so its FORCE_TERMINAL is set too when
    it already is): set them from --color/--no-color for the length of the command, and restore them after
    (tests run commands in one process)."""
    mode = "auto"
    for i, word in enumerate(argv):
        if word == "--no-color":
            mode = "never"
        elif word.startswith("--color="):
            mode = word.partition("=")[2]
        elif word == "--color" and i + 1 < len(argv):
            mode = argv[i + 1]
    saved = {k: os.environ.get(k) for k in ENV_KEYS}
    rich_utils = sys.modules.get("typer.rich_utils")
    saved_force = getattr(rich_utils, "FORCE_TERMINAL", None)
    if mode in ("always", "never"):
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        os.environ.update({"FORCE_COLOR": "1"} if mode == "always" else {"NO_COLOR": "1",
                                                                        "_TYPER_FORCE_DISABLE_TERMINAL": "1"})
        if rich_utils is not None:
            rich_utils.FORCE_TERMINAL = mode == "always"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if rich_utils is not None:
            rich_utils.FORCE_TERMINAL = saved_force
        elif "typer.rich_utils" in sys.modules:  # imported during the command, under our environment: as typer
            forced = True if any(os.environ.get(k) for k in ("GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS")) else None
            sys.modules["typer.rich_utils"].FORCE_TERMINAL = False if os.environ.get(ENV_KEYS[2]) else forced
