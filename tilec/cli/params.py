"""The typer options the subcommands share (`-D`, `-I`, `--kernel`, `--target`, the sm90 switches, colour,
--quiet, --debug), declared once as Annotated types, and `namespace()`, which turns a subcommand's parameters into
the attributes the shared code reads (tilec.cli.common). Imports typer: only the subcommands load this module.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated, Literal

import typer

from .flags import DIAGNOSTICS, HOPPER, PREPROCESSING, TARGETS

File = Annotated[str, typer.Argument(metavar="FILE", help="The .tile source.",
                                     show_default=False)]
Target = Annotated[str | None, typer.Option("--target", "-t", metavar="T", help="Target (default sm90); "
                                            "`tilec targets` lists them.", rich_help_panel=TARGETS, show_default=False)]
Sizes = Annotated[list[str] | None, typer.Option("--size", metavar="M=1000,N=...", help="Runtime sizes (default 256 "
                                                 "each; repeatable).", show_default=False)]
Seed = Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the random inputs.")]
Defines = Annotated[list[str] | None, typer.Option("-D", "--define-macro", metavar="NAME=VALUE",
                                                   help="Override a `const` (repeatable).",
                                                   rich_help_panel=PREPROCESSING, show_default=False)]
Includes = Annotated[list[str] | None, typer.Option("-I", "--include-path", metavar="DIR", help="Add a directory to "
                                                    "the `import` search path (repeatable).",
                                                    rich_help_panel=PREPROCESSING, show_default=False)]
Kernel = Annotated[str | None, typer.Option("--kernel", metavar="NAME", help="Only this kernel (default: all).",
                                            show_default=False)]
NoTma = Annotated[bool, typer.Option("--no-tma", help="sm90: cp.async instead of TMA + mbarriers.",
                                     rich_help_panel=HOPPER)]
NoWgmma = Annotated[bool, typer.Option("--no-wgmma", help="sm90: mma.sync instead of wgmma.", rich_help_panel=HOPPER)]
NoWarpSpecialize = Annotated[bool, typer.Option("--no-warp-specialize", help="sm90: no producer warpgroup.",
                                                rich_help_panel=HOPPER)]
Color = Annotated[Literal["auto", "always", "never"], typer.Option(
    "--color", metavar="WHEN", help="Colour: auto (on a terminal, unless NO_COLOR is set), always, never.",
    rich_help_panel=DIAGNOSTICS)]
NoColor = Annotated[bool, typer.Option("--no-color", help="Same as --color=never.", rich_help_panel=DIAGNOSTICS)]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.", rich_help_panel=DIAGNOSTICS)]
Debug = Annotated[bool, typer.Option("--debug", help="Python tracebacks for internal errors.",
                                     rich_help_panel=DIAGNOSTICS)]

def namespace(**params) -> SimpleNamespace:
    """A subcommand's parameters as the attributes tilec.cli.common and the commands read: lists for the repeatable
    options, `disable` for the sm90 switches."""
    for name in ("defines", "include_dirs", "size", "shapes", "size_rule"):
        if name in params:
            params[name] = list(params[name] or [])
    switches = {"no_tma": "tma", "no_wgmma": "wgmma", "no_warp_specialize": "warp_specialize"}
    params["disable"] = [feature for name, feature in switches.items() if params.pop(name, False)]
    return SimpleNamespace(**params)


def finish(rc: int) -> None:
    """End a typer command with tilec's exit status (typer's standalone mode exits 0 on a plain return)."""
    if rc:
        raise typer.Exit(rc)
