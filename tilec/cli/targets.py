"""`tilec targets`: the targets tilec knows, whether it has their back end, and the toolchains found (a rich table
on a terminal, plain aligned text otherwise, for scripts)."""

from __future__ import annotations

from . import params as p


def command(color: p.Color = "auto", no_color: p.NoColor = False, debug: p.Debug = False) -> None:
    """List the targets (name, architecture, hardware, back end) and where each toolchain was found."""
    from .common import guarded

    p.finish(guarded(p.namespace(**locals()), run))


def kind_rows() -> list[tuple[str, str, str]]:
    """(back end, output kind, the toolchain that builds it here) for every back end that says."""
    from ..targets.registry import BACKENDS, get_backend

    return [(name, kind, how) for name in BACKENDS for kind, how in get_backend(name).kind_toolchains().items()]


def rows() -> tuple[list[tuple[str, ...]], list[tuple[str, str]]]:
    from ..targets.registry import TARGETS, backend_available, find_toolchains

    targets = [(t.name, t.arch, t.description, t.backend,
                "back end available" if backend_available(t.backend) else "no back end yet") for t in TARGETS.values()]
    tools = [(name, where or "not found") for name, where in find_toolchains().items()]
    return targets, tools


def run(args) -> int:
    import sys

    targets, tools = rows()
    if sys.stdout.isatty():
        from rich.table import Table

        from .console import console

        out = console(args, stderr=False)
        table = Table("target", "arch", "hardware", "back end", title="targets", title_justify="left")
        for name, arch, desc, backend, status in targets:
            table.add_row(name, arch, desc, backend if status == "back end available" else f"{backend} (none yet)")
        out.print(table)
        tool_table = Table("toolchain", "where", title="toolchains", title_justify="left")
        for name, where in tools:
            tool_table.add_row(name, where)
        out.print(tool_table)
        kind_table = Table("back end", "output", "built by", title="outputs", title_justify="left")
        for row in kind_rows():
            kind_table.add_row(*row)
        out.print(kind_table)
        return 0
    print("targets:")
    for name, arch, desc, backend, status in targets:
        print(f"  {name:<11} {arch:<10} {desc:<30} [{backend}: {status}]")
    print("toolchains:")
    for name, where in tools:
        print(f"  {name:<9} {where}")
    last = None
    for backend, kind, how in kind_rows():
        if backend != last:
            print(f"{backend} outputs, built by:")
            last = backend
        print(f"  {kind:<8} {how}")
    return 0
