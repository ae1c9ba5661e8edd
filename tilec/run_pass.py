"""Run compiler passes alone on IR text: `python -m tilec.run_pass PASS[,PASS...] FILE [--target T]`.

The input is IR as `--emit-ir` prints it: Tile IR (tilec/ir/reader.py) or SIMT IR (tilec/ir/simt_reader.py,
text starting with `simt kernel`); lines starting with `#` are comments (a test's RUN-ARGS and CHECK lines), as
is `--emit-ir`'s `// ----- IR after PASS` heading, and `-` reads standard input (`tilec k.tile --target sm80
--emit-ir=after:pipeline-planning | python -m tilec.run_pass lower-to-simt - --target sm80`). The passes are
named as `--emit-ir=after:PASS` names them: the target-neutral ones (driver.FRONT_PASSES) and, with `--target`,
those of the target's back end (`Backend.pipeline`). Each runs as the driver runs it, on the module the previous
one returned; the output is what the last one produced, printed as the back end prints it
(`--emit-ir=after:PASS`). Several passes are for a stage whose IR has no reader (the AscendC back end's programs
print only as C++): run the lowering that makes them first (`ascend-lower,ascend-sync`).

Diagnostics go to standard error as `FILE:LINE:COL: error: ...` at the IR text's lines; the exit status is 1
when the text cannot be read or a pass reports an error, 2 for a bad command line, 3 when a pass or a verifier
fails with an exception (an internal error; `--debug` shows its traceback). `--verify` runs the IR
verifier of the level (tilec/ir/verify.py, tilec/ir/simt_verify.py) on the input and after each pass, so a test
also checks that the pass keeps the IR well-formed. `--disable F` records F in every kernel's disabled features
(as `tilec --disable` does; read by the target passes).

Tests: tests/passes/<pass>/*.ir, one file per behaviour, each with `# RUN-ARGS: PASS [--target T]` and FileCheck
lines (tests/filecheck.py); tests/test_passes_ir.py runs them (docs/architecture.md, "Testing a pass").
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Step:
    name: str
    run: Callable  # (module, rep) or (module, rep, target)
    prints: Callable  # module -> text
    level: str  # what it reads: "tile", "simt" (SIMT IR) or "other" (an IR with no reader)
    verify: Callable | None = None  # (module, target, after) for SIMT passes


def steps_for(target) -> list[Step]:
    """Every pass the driver can run for `target` (None: the target-neutral ones), in pipeline order."""
    from .driver import FRONT_PASSES
    from .ir.printer import module_str

    steps = [Step(name, lambda m, rep, t, run=run: run(m, rep), module_str, "tile") for name, run in FRONT_PASSES]
    if target is None:
        return steps
    from .targets.registry import get_backend

    backend = get_backend(target.backend)
    level = "tile"
    for st in backend.pipeline(target):
        steps.append(Step(st.name, st.run, st.prints, level, st.verify))
        if st.prints is not module_str:  # the step's output is another IR: the next step reads that
            level = "simt" if st.verify is not None else "other"
    return steps


def attr_types(steps: list[Step]) -> dict[str, type]:
    """Dataclasses defined by the passes' modules, by name: the values passes record in kernel attributes
    (printed as their repr) that the Tile IR reader rebuilds."""
    out: dict[str, type] = {}
    for st in steps:
        mod = sys.modules.get(getattr(st.run, "__module__", ""))
        for obj in vars(mod).values() if mod is not None else ():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == mod.__name__:
                out.setdefault(obj.__name__, obj)
    return out


def read_ir(text: str, file: str, types: dict[str, type]):
    """(level, module) of IR text; comment lines (`#`) are blanked so line numbers stay."""
    from .ir.reader import read_module
    from .ir.simt_reader import read_simt

    text = "\n".join("" if line.lstrip().startswith("#") or line.startswith("// ----- IR after ") else line
                     for line in text.splitlines()) + "\n"
    if text.lstrip().startswith("simt kernel"):
        return "simt", read_simt(text, file)
    return "tile", read_module(text, file, types)


def run(pass_names: list[str], text: str, file: str = "<ir>", target_name: str | None = None,
        disable: frozenset[str] = frozenset(), verify: bool = False) -> str:
    """The IR text the passes make of `text`. Raises CompileError (diagnostics at the text's lines) or
    ir.reader.ReadError."""
    from .diagnostics import CompileError, Diagnostic, Reporter, Span
    from .driver import lookup_target

    target = lookup_target(target_name)[0] if target_name is not None else None
    if target is not None:  # IR text names its loops' copy mechanisms, which the back end registers on import
        from .ir import copy_mechanisms

        copy_mechanisms.load(target)
    steps = steps_for(target)
    by_name = {st.name: st for st in steps}
    unknown = [n for n in pass_names if n not in by_name]
    if unknown:
        known = ", ".join(by_name)
        hint = "" if target is not None else " (a target's passes need --target)"
        raise CompileError([Diagnostic("error", f"unknown pass(es) {', '.join(unknown)}; known: {known}{hint}")])
    level, module = read_ir(text, file, attr_types(steps))
    first = by_name[pass_names[0]]
    if first.level != level:
        raise CompileError([Diagnostic("error", f"pass {first.name} reads {first.level} IR, not {level} IR",
                                       Span(file, 1, 1))])
    for k in module.kernels:
        if disable:
            k.attrs["disabled"] = k.disabled | disable
    try:
        _verify(module, level, target, "the input", verify)
    except AssertionError as e:  # the text is not well-formed IR: the input's fault, not a pass's
        raise CompileError([Diagnostic("error", str(e), Span(file, 1, 1))]) from None
    rep = Reporter()
    prints = None
    for name in pass_names:
        st = by_name[name]
        module = st.run(module, rep, target)
        rep.check()
        prints = st.prints
        level = "simt" if st.verify is not None else ("tile" if prints.__name__ == "module_str" else "other")
        _verify(module, level, target, name, verify)
    for d in rep.diagnostics:  # warnings
        print(_render(d), file=sys.stderr)
    return prints(module)


def _verify(module, level: str, target, after: str, on: bool) -> None:
    if not on:
        return
    if level == "tile":
        from .ir.verify import VerifyError, verify

        try:
            verify(module)
        except VerifyError as e:
            raise AssertionError(f"IR verification failed after {after}: {e}") from e
    elif level == "simt":
        from .targets.backend import verify_simt

        verify_simt(module, target, after)


def _render(d) -> str:
    from .diagnostics import render

    return render(d)


def main(argv: list[str] | None = None) -> int:
    from .diagnostics import CompileError
    from .ir.reader import ReadError

    ap = argparse.ArgumentParser(prog="python -m tilec.run_pass",
                                 description="Run passes alone on IR text (as --emit-ir prints it).")
    ap.add_argument("passes", help="PASS or PASS,PASS,... (the names --emit-ir=after: takes)")
    ap.add_argument("file", help="the IR text ('-': standard input)")
    ap.add_argument("--target", help="the target whose back end's passes to run (sm80, sm90, gfx942, ...)")
    ap.add_argument("--disable", action="append", default=[], help="a feature to disable (tma, wgmma, ...)")
    ap.add_argument("--verify", action="store_true", help="verify the IR before and after each pass")
    ap.add_argument("--debug", action="store_true", help="an internal error's traceback")
    args = ap.parse_args(argv)
    file = "<stdin>" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as e:
        print(f"{file}: error: {e.strerror}", file=sys.stderr)
        return 1
    if sys.getrecursionlimit() < 20_000:
        sys.setrecursionlimit(20_000)
    try:
        out = run(args.passes.split(","), text, file, args.target, frozenset(args.disable), args.verify)
    except ReadError as e:
        print(f"{file}:{e.line}:{e.col}: error: {e.message}", file=sys.stderr)
        return 1
    except CompileError as e:
        for d in e.diagnostics:
            print(_render(d), file=sys.stderr)
        return 1
    except Exception as e:  # a pass (or a verifier) failed on IR it was given: an internal error, as tilec's exit 3
        if args.debug:
            raise
        print(f"{file}: internal compiler error: {type(e).__name__}: {e} (rerun with --debug for a traceback)",
              file=sys.stderr)
        return 3
    try:
        sys.stdout.write(out)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the rest goes nowhere
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
