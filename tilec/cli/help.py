"""`tilec --help`: the compile command's options in panels, as nvcc groups its own (targets, outputs,
preprocessing, toolchain, ...), the subcommands, and examples; rendered with rich from the option table
(tilec/cli/compile_flags.py) in the style typer gives the subcommands' help, without importing typer (its import and
help renderer would take `tilec --help` past 0.2 s)."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .flags import PANELS, Flag

USAGE = "tilec [OPTIONS] FILE\n       tilec COMMAND [OPTIONS] ...   (tilec COMMAND --help)"
DESCRIPTION = ("Compile the kernels of a .tile file for a GPU, as nvcc does: CUDA, HIP, WGSL or AscendC source, "
               "PTX, a cubin, a fatbin, a C launcher header or an object, with a JSON manifest beside it. The "
               "suffix of -o says what to write. No GPU is needed to build.")
EXAMPLES = [
    ("tilec gemm.tile -arch=sm_90 -o gemm.cubin", "an H100/H200 binary, and its manifest gemm.cubin.json"),
    ("tilec gemm.tile -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -o g.fatbin",
     "one binary for A100 and H100"),
    ("tilec gemm.tile -t sm90 -o gemm.h -Dblock_K=64 -MD -MP", "a C launcher header and gemm.h.d for Make"),
    ("tilec gemm.tile --emit-ir=after:lower-to-simt -t sm90", "the IR after a pass, for a target"),
    ("tilec run softmax.tile --size M=100,N=1000", "run a kernel in the reference interpreter (no GPU)"),
    ("tilec --completion bash > ~/.local/share/bash-completion/completions/tilec", "shell completion (also zsh, fish)"),
]


SHOWN_NAME = 22  # longer spellings (nvcc's --generate-dependencies-with-compile) go after the help text


def _shown(flag: Flag) -> list[str]:
    """The spellings in the left column: the first, and one more if short; the others follow the help text."""
    return [flag.names[0], *[n for n in flag.names[1:] if len(n) <= SHOWN_NAME][:1]]


def _spellings(flag: Flag) -> Text:
    names = ", ".join(_shown(flag))
    text = Text(names, style="bold cyan")
    if flag.takes == "optional":
        text.append(f"[={flag.metavar}]", style="yellow")
    elif flag.takes_value:
        text.append(f" {flag.metavar or 'VALUE'}", style="yellow")
    return text


def _explanation(flag: Flag) -> Text:
    text = Text(flag.help)
    if flag.choices:
        text.append(f" [{'|'.join(flag.choices)}]", style="yellow")
    also = [n for n in flag.names if n not in _shown(flag)]
    if also:
        text.append(f" Also {', '.join(also)}.", style="dim")
    return text


def _panel(title: str, rows: list[tuple[Text, Text | str]]) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    for left, right in rows:
        grid.add_row(left, right)
    return Panel(grid, title=title, title_align="left", border_style="dim", box=box.ROUNDED)


def compile_help(flags: list[Flag], subcommands: dict[str, str]) -> Group:
    parts: list = [Text.assemble(("Usage: ", "bold"), USAGE), Text(""), Text(DESCRIPTION), Text("")]
    parts.append(_panel("Commands", [(Text(name, style="bold cyan"), line) for name, line in subcommands.items()]))
    parts.append(_panel("Input", [(Text("FILE", style="bold yellow"), "The .tile source (options may come before "
                                   "or after it; `--` ends the options).")]))
    for title in PANELS:
        rows = [(_spellings(f), _explanation(f)) for f in flags if f.panel == title]
        if rows:
            parts.append(_panel(title, rows))
    examples = Text()
    for cmd, what in EXAMPLES:
        examples.append(f"# {what}\n", style="dim")
        examples.append(f"{cmd}\n", style="green")
    examples.rstrip()
    parts.append(Panel(examples, title="Examples", title_align="left", border_style="dim", box=box.ROUNDED))
    parts.append(Text("Exit status: 0 success, 1 errors reported (source, files, toolchain), 2 bad command line, "
                      "3 internal compiler error. See docs/cli.md.", style="dim"))
    return Group(*parts)


def print_compile_help(args, flags: list[Flag]) -> None:
    from .console import console
    from .subcommands import SUBCOMMANDS

    console(args, stderr=False).print(compile_help(flags, SUBCOMMANDS))
