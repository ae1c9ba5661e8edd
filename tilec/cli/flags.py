"""The compile command's options (`Flag`) and their parser: standard library only.

`tilec FILE ...` is the hot path (a compile-cache hit must answer in well under 0.2 s), so it is parsed here
rather than by typer, whose import (0.05-0.1 s) plus the pydantic it uses to convert every value (0.1 s) would
alone spend that budget. The subcommands (`tilec run`, `bench`, `tune`, ...) are typer commands
(tilec/cli/app.py). One `Flag` per option (the table: compile_flags.py), with every spelling it has, feeds the
parser, `tilec --help` (help.py) and shell completion (completion.py).

The parser follows nvcc and gcc as well as the usual long options:

* nvcc's single-dash long names are names like any other (`-lineinfo`, `-arch`, `-res-usage`, `-MD`);
* a value follows its option as the next word (`-arch sm_90`, `-Xptxas -v`: the next word is taken even when it
  starts with `-`), after `=` (`-arch=sm_90`, `--target=sm90`), or attached to a one-letter option (`-DNAME=1`,
  `-Iinc`, `-O3`, `-tsm90`);
* options and FILE come in any order; `--` ends the options; a unique prefix of a `--` name stands for it
  (`--resource` is `--resource-usage`), as argparse allowed;
* an unknown option is a usage error (exit status 2) suggesting the closest spellings (`--targte` ->
  `--target`).

Assumes: names are unique across the table. Guarantees: `parse` returns every dest of the table (its default
when not given) plus "file", or raises UsageError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Panels of `tilec --help`, in the order shown (nvcc groups its options the same way).
TARGETS = "Targets"
OUTPUTS = "Outputs"
PREPROCESSING = "Preprocessing and dependencies"
TOOLCHAIN = "Toolchain"
HOPPER = "Hopper code generation"
DIAGNOSTICS = "Diagnostics and display"
PANELS = (TARGETS, OUTPUTS, PREPROCESSING, TOOLCHAIN, HOPPER, DIAGNOSTICS)


class UsageError(Exception):
    """A bad command line: exit status 2."""

    def __init__(self, message: str, command: str = "tilec"):
        super().__init__(message)
        self.message = message
        self.command = command


@dataclass(frozen=True)
class Flag:
    """One option: its spellings, where it goes, and how it is shown and completed.

    takes: "none" (a switch: stores `const`), "one" (a value; the last one given wins), "many" (a value, repeatable:
    a list), "optional" (a value after `=`, or the next word when `accepts` says it is one; given bare, it keeps a value
    given before it), "append-const" (a
    switch appending `const` to a list shared with other switches)."""

    names: tuple[str, ...]
    dest: str
    help: str
    panel: str
    takes: str = "none"
    metavar: str = ""
    choices: tuple[str, ...] = ()
    convert: Callable[[str], object] | None = None  # value -> stored value; ValueError is a usage error
    const: object = True  # stored by a switch (appended by an append-const switch)
    default: object = None
    accepts: Callable[[str], bool] | None = None  # "optional": does the next word count as this option's value
    complete: str = ""  # what completes the value: "target", "file", "dir"; "" for the choices (or nothing)

    @property
    def takes_value(self) -> bool:
        return self.takes in ("one", "many", "optional")

    def initial(self):
        return [] if self.takes in ("many", "append-const") else self.default


def spellings(flags: list[Flag]) -> dict[str, Flag]:
    """Every spelling of every option -> its Flag."""
    return {name: f for f in flags for name in f.names}


def suggest(word: str, names) -> str:
    """`; did you mean X?` for the closest of `names` to `word` ('' when none is close)."""
    import difflib  # only a bad command line needs it

    close = difflib.get_close_matches(word, list(names), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _store(out: dict, flag: Flag, value: str | None, spelled: str, command: str) -> None:
    if flag.takes == "none":
        out[flag.dest] = flag.const
        return
    if flag.takes == "append-const":
        out[flag.dest].append(flag.const)
        return
    if value is None:  # an "optional" option given without its value: its default, unless one was given before
        if out.get(flag.dest) is None:  # (nvcc's `--keep-dir D --keep` keeps in D, as `--keep --keep-dir D` does)
            out[flag.dest] = flag.const
        return
    if flag.choices and value not in flag.choices:
        raise UsageError(f"{spelled} {value!r}: expected one of {', '.join(flag.choices)}", command)
    if flag.convert is not None:
        try:
            converted = flag.convert(value)
        except ValueError as e:
            raise UsageError(f"{spelled} {value!r}: {e}", command) from None
    else:
        converted = value
    if flag.takes == "many":
        out[flag.dest].append(converted)
    else:
        out[flag.dest] = converted


def parse(flags: list[Flag], argv: list[str], command: str = "tilec") -> dict:
    """{dest: value} for every flag of the table, and "file": the one positional argument (None when absent;
    the caller says whether that is an error). Raises UsageError."""
    by_name = spellings(flags)
    out: dict = {f.dest: f.initial() for f in flags}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":
            positional += argv[i:]
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        name, eq, attached = word.partition("=")
        flag = by_name.get(word) or (by_name.get(name) if eq else None)
        if flag is None and len(word) > 2 and word[1] != "-":
            short = by_name.get(word[:2])  # -DNAME=1, -Iinc, -O3
            if short is not None and short.takes_value:
                flag, name, eq, attached = short, word[:2], "=", word[2:]
        if flag is None and word.startswith("--"):
            flag, name = _abbreviation(by_name, name, command)
        if flag is None:
            raise UsageError(f"unknown option '{word}'" + suggest(name, by_name), command)
        spelled = name if eq else word
        if eq and not flag.takes_value:
            raise UsageError(f"{spelled} takes no value (got '{word}')", command)
        value: str | None = attached if eq else None
        if value is None and flag.takes in ("one", "many"):
            if i >= len(argv):
                raise UsageError(f"{spelled} needs a value ({flag.metavar or 'VALUE'})", command)
            value = argv[i]
            i += 1
        elif value is None and flag.takes == "optional" and i < len(argv) and flag.accepts and flag.accepts(argv[i]):
            value = argv[i]
            i += 1
        _store(out, flag, value, spelled, command)
    if len(positional) > 1:
        raise UsageError(f"one FILE at a time; got {', '.join(repr(p) for p in positional)}", command)
    out["file"] = positional[0] if positional else None
    return out


def _abbreviation(by_name: dict[str, Flag], name: str, command: str) -> tuple[Flag | None, str]:
    """A unique prefix of one option's `--` spelling stands for it (`--resource` for `--resource-usage`), as argparse
    allowed; (None, name) when none starts so, a UsageError when several options do."""
    from ..identity import IdentityDict

    # one entry per option (a Flag compares by value; its spellings are the same object)
    found = IdentityDict((f, (f, n)) for n, f in by_name.items() if n.startswith("--") and n.startswith(name))
    if len(found) > 1:
        names = sorted(n for _, n in found.values())
        raise UsageError(f"ambiguous option '{name}': {', '.join(names)}", command)
    return next(iter(found.values()), (None, name))


def before_value(flags: list[Flag], argv: list[str], index: int) -> bool:
    """Whether argv[index] is the value of the option before it (`-Xptxas -V`, `-o --version`), not an option."""
    flag = spellings(flags).get(argv[index - 1]) if index > 0 else None
    return flag is not None and flag.takes in ("one", "many")
