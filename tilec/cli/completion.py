"""Shell completion for bash, zsh and fish: `tilec --completion SHELL` prints a script that asks tilec itself
(`tilec __complete INDEX WORD...`) for the candidates of the word being completed, one per line:

* the first word: the subcommands, the compile options, `.tile` files and directories;
* after an option that takes a value: targets (`--target`, `-arch`), the option's choices (`--compiler`,
  `--color`), directories (`-I`), files (`-o`), or nothing to propose (`-D NAME=V`);
* a word starting with `-`: the options of the command (the compile table, or the subcommand's typer options);
  `--target=s` completes to `--target=sm80`...;
* otherwise: `.tile` files and directories.

bash splits `--target=sm` at `=` (COMP_WORDBREAKS): the candidates for the word after `=` are plain values.
Standard library only, except that a subcommand's options are read from its typer command.
"""

from __future__ import annotations

import glob
import os
import sys

BASH = """# bash completion for tilec: `source <(tilec --completion bash)`, or save it as
# ~/.local/share/bash-completion/completions/tilec
_tilec_complete() {
    local IFS=$'\\n'
    COMPREPLY=($(tilec __complete "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null))
}
complete -o filenames -F _tilec_complete tilec
"""

ZSH = """#compdef tilec
# zsh completion for tilec: `source <(tilec --completion zsh)`, or save it as _tilec in a directory of $fpath
_tilec() {
    local -a found dirs
    found=("${(@f)$(tilec __complete $((CURRENT - 1)) "${words[@]}" 2>/dev/null)}")
    dirs=(${(M)found:#*/})
    found=(${found:#*/})
    (( ${#dirs} )) && compadd -S '' -- $dirs
    (( ${#found} )) && compadd -- $found
}
if (( $+functions[compdef] )); then
    compdef _tilec tilec
fi
"""

FISH = """# fish completion for tilec: `tilec --completion fish > ~/.config/fish/completions/tilec.fish`
function __tilec_complete
    set -l words (commandline -opc) (commandline -ct)
    tilec __complete (math (count $words) - 1) $words 2>/dev/null
end
complete -c tilec -f -a '(__tilec_complete)'
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def script(shell: str) -> str:
    return SCRIPTS[shell]


def target_names() -> list[str]:
    from ..targets.registry import TARGETS

    return list(TARGETS)


def paths(prefix: str, suffix: str | None = None) -> list[str]:
    """Directories (with a trailing /) and files starting with `prefix`; files only with `suffix` when given."""
    out = []
    for path in sorted(glob.glob(glob.escape(os.path.expanduser(prefix)) + "*")):
        if os.path.isdir(path):
            out.append(path + "/")
        elif suffix is None or path.endswith(suffix):
            out.append(path)
    return out


def _value_candidates(flag, current: str) -> list[str]:
    if flag.choices:
        values = list(flag.choices)
    elif flag.complete == "target":
        values = target_names()
        if flag.dest == "arch":  # nvcc spellings: sm_80, sm_90a
            from ..targets.registry import TARGETS

            values = [t.arch for t in TARGETS.values() if t.arch.startswith("sm_")]
    elif flag.complete == "dir":
        return [p for p in paths(current) if p.endswith("/")]
    elif flag.complete == "file":
        return paths(current)
    else:
        return []
    return [v for v in values if v.startswith(current)]


def _subcommand_options(name: str) -> list[str]:
    from .app import click_command

    return sorted(opt for param in click_command(name).params for opt in getattr(param, "opts", [])
                  if opt.startswith("-"))


def candidates(words: list[str], index: int) -> list[str]:
    """What may replace words[index] (words[0] is `tilec`; index may be len(words): a new, empty word)."""
    from .compile_flags import COMPILE_FLAGS
    from .flags import spellings
    from .subcommands import SUBCOMMANDS

    current = words[index] if index < len(words) else ""
    before = words[1:index]
    subcommand = before[0] if before and before[0] in SUBCOMMANDS else None
    if subcommand is None:
        by_name = spellings(COMPILE_FLAGS)
        previous = before[-1] if before else ""
        if previous == "=" and len(before) >= 2 and before[-2] in by_name:  # bash: `--target` `=` `sm`
            return _value_candidates(by_name[before[-2]], current)
        if previous in by_name and by_name[previous].takes in ("one", "many"):
            return _value_candidates(by_name[previous], current)
        name, eq, value = current.partition("=")
        if eq and name in by_name and by_name[name].takes_value:
            return [f"{name}={v}" for v in _value_candidates(by_name[name], value)]
        if current.startswith("-"):
            return [n for n in by_name if n.startswith(current)]
        found = paths(current, ".tile")
        if not before:
            found = [s for s in SUBCOMMANDS if s.startswith(current)] + found
        return found
    if current.startswith("-"):
        return [o for o in _subcommand_options(subcommand) if o.startswith(current)]
    previous = before[-1]
    if previous in ("--target", "-t"):
        return [t for t in target_names() if t.startswith(current)]
    return paths(current, ".tile") if subcommand != "cache" else [a for a in ("stats", "clear")
                                                                   if a.startswith(current)]


def complete(argv: list[str]) -> int:
    """`tilec __complete INDEX WORD...`: print the candidates for WORD[INDEX], one per line."""
    try:
        index, words = int(argv[0]), argv[1:]
    except (IndexError, ValueError):
        return 2
    for c in candidates(words, index):
        sys.stdout.write(c + "\n")
    return 0
