"""What the command line may read and write: the one policy every write site calls.

tilec writes up to three files per compile (the artifact, its manifest, a dependency file) and
`--emit-ir -o` one more. Whatever flag names them, an output is refused -- before anything is
compiled where the path alone tells, and again just before writing, once the imports are known --
when it

* is the `.tile` file being compiled or any file it imports (compared as files: `os.path.samefile`
  and real paths, so a symlink, a hard link or `./x/../g.tile` is caught too),
* ends in `.tile` (generated code never takes a kernel source's name),
* is a directory, or is named twice (`-o x.cu --manifest x.cu`, `-MF` equal to `-o`),
* lies in a missing directory, or cannot be written (read-only, no permission): the message names
  the user's path, never the temporary file written beside it.

Regular files are written atomically (a temporary file in the same directory renamed over the
target: a reader or a parallel build sees the old file or the whole new one). An existing special
file (`/dev/null`, a FIFO, a terminal) is written in place, as gcc does -- renaming over it would
replace the device node.

The inputs get the mirror checks: the compiled file must be a regular file (a FIFO or a device
would block or never end), `-I` directories that do not exist are warned about, and the target
list may not be empty. Import-light (os, stat only): it runs before a cache lookup.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from ..cache import write_atomic
from ..diagnostics import CompileError, Diagnostic

SOURCE_SUFFIX = ".tile"

# Suffixes whose files hold machine code, and the --emit kinds that produce it: text must not be
# written under one of these names, nor a binary under a text kind's name.
BINARY_SUFFIXES = {".cubin", ".fatbin", ".hsaco", ".o"}
BINARY_KINDS = {"cubin", "fatbin", "hsaco", "object"}


def _error(message: str) -> CompileError:
    return CompileError([Diagnostic("error", message)])


def _same_file(a: str, b: str) -> bool:
    """True when the two paths name one file (either may not exist yet)."""
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_output(path: str, flag: str, inputs: Iterable[str], main_file: str | None = None) -> None:
    """Refuse `path` as an output (named by `flag`, e.g. "-o") when it is an input, a `.tile` name, a
    directory or in a missing directory. `inputs` are the files the compile read (the main file
    first when `main_file` is None)."""
    if path == "-":
        return
    inputs = list(inputs)
    main = main_file if main_file is not None else (inputs[0] if inputs else None)
    for src in inputs:
        if _same_file(path, src):
            if main is not None and _same_file(src, main):
                raise _error(f"{flag} '{path}' would overwrite the input file '{src}'")
            raise _error(f"{flag} '{path}' would overwrite '{src}', which {main or 'the input'} imports")
    if path.lower().endswith(SOURCE_SUFFIX):  # (A.TILE is the same file as a.tile on a case-insensitive disk)
        raise _error(f"{flag} '{path}': refusing to write generated output under a .tile name (kernel sources "
                     "are never written)")
    if os.path.isdir(path):
        raise _error(f"{flag} '{path}' is a directory; name a file")
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise _error(f"{flag} '{path}': directory '{parent}' {what}")


def check_outputs(outputs: list[tuple[str, str]], inputs: Iterable[str], main_file: str | None = None) -> None:
    """check_output for each (path, flag), and no two outputs at one path."""
    inputs = list(inputs)
    seen: list[tuple[str, str]] = []
    for path, flag in outputs:
        check_output(path, flag, inputs, main_file)
        if path == "-":
            continue
        for other, other_flag in seen:
            if _same_file(path, other):
                raise _error(f"{flag} '{path}' and {other_flag} '{other}' name the same file")
        seen.append((path, flag))


def is_stream(path: str) -> bool:
    """`-` (standard output) or an existing special file (/dev/null, a FIFO, a terminal)."""
    if path == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not os.path.isdir(path)
    except OSError:
        return False


def write_output(path: str, data: bytes, flag: str = "-o") -> None:
    """Write one output: `-` is standard output, an existing special file is written in place, a
    regular file atomically. Failures become diagnostics naming `path`."""
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        st = os.stat(path)
    except OSError:
        st = None
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                raise _error(f"{flag} '{path}' is a directory; name a file")
            with open(path, "wb") as f:  # /dev/null, a FIFO, a terminal: never renamed over
                f.write(data)
            return
        write_atomic(path, data)
    except PermissionError:
        raise _error(f"cannot write {flag} '{path}': permission denied") from None
    except IsADirectoryError:
        raise _error(f"{flag} '{path}' is a directory; name a file") from None
    except FileNotFoundError as e:
        parent = os.path.dirname(path) or "."
        if os.path.isdir(parent):  # /proc/x.cu: the directory is there, but its file system creates no files
            raise _error(f"cannot write {flag} '{path}': directory '{parent}' does not take new files "
                         f"({e.strerror})") from None
        raise _error(f"cannot write {flag} '{path}': directory '{parent}' does not exist") from None
    except OSError as e:
        raise _error(f"cannot write {flag} '{path}': {e.strerror or e}") from None


def check_keep_dir(path: str) -> None:
    """`--keep DIR`: the toolchain writes its intermediates there; it must be a directory or be
    creatable (its parent exists)."""
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise _error(f"--keep '{path}' is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise _error(f"--keep '{path}': directory '{os.path.dirname(path) or '.'}' does not exist")


# ---------------------------------------------------------------------------- what is asked for


def check_emit_matches_output(output: str | None, emit: str | None, kinds: dict[str, str]) -> None:
    """`--emit KIND -o NAME`: refuse a binary kind under a text suffix and text under a binary
    suffix (`--emit cu -o x.cubin`). Two text kinds may share a name (`--emit cu -o kernel.h`)."""
    if not output or output == "-" or not emit:
        return
    suffix = Path(output).suffix
    named = kinds.get(suffix)
    if named is None or named == emit:
        return
    if emit in BINARY_KINDS or suffix in BINARY_SUFFIXES:
        raise _error(f"--emit {emit} -o '{output}': the suffix {suffix} says {named}; name the output "
                     f"for what it holds")


def check_ir_output(output: str | None, kinds: dict[str, str]) -> None:
    """`--emit-ir -o NAME` writes IR text: refuse a name that says it is an artifact (x.cubin, x.cu)."""
    if not output or output == "-":
        return
    suffix = Path(output).suffix
    if suffix in kinds:
        raise _error(f"--emit-ir -o '{output}': IR text under a {suffix} name (a {kinds[suffix]} artifact); "
                     "use -o NAME.ir or standard output")


def parse_targets(text: str | None, default: str = "sm90") -> list[str]:
    """The comma-separated --target list; None means the default, an empty name is an error."""
    if text is None:
        return [default]
    names = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not n for n in names):
        raise _error(f"--target '{text}': empty target name (targets: see `tilec targets`)")
    return names


# ---------------------------------------------------------------------------- inputs


def check_input(path: str) -> None:
    """The compiled file must be a regular file: reading a FIFO or a device could block forever."""
    try:
        st = os.stat(path)
    except OSError:
        return  # the compiler reports a missing or unreadable file with its own message
    if stat.S_ISDIR(st.st_mode):
        raise _error(f"'{path}' is a directory, not a .tile file")
    if not stat.S_ISREG(st.st_mode):
        raise _error(f"'{path}' is not a regular file (a FIFO, socket or device); give a .tile file")


def include_dir_warnings(dirs: Iterable[str]) -> list[Diagnostic]:
    """A warning for each -I that names no directory (gcc's -Wmissing-include-dirs): a typo there
    would otherwise only show up as an import not found, or silently pick another file."""
    out = []
    for d in dirs:
        if not os.path.isdir(d):
            why = "not a directory" if os.path.exists(d) else "no such directory"
            out.append(Diagnostic("warning", f"-I '{d}': {why}; ignored"))
    return out
