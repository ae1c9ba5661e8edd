"""A fuzzer of the real command line: `python -m tilec ...` in a subprocess, on a small project whose files have
hostile names (line breaks, `%`, `$`, spaces, unicode, upper-case suffixes, a leading dash), with random flags,
output locations, `--keep` / `-MD` / `-M` / `-c` / `--emit-ir` combinations, symlinks, and several builds at once
sharing one compile cache.

Each command line is checked for:
- its exit status: 0, 1 (a diagnostic) or 2 (a usage error), never 3 (an internal error) nor a Python traceback;
- the inputs (the source, its import, the files the symlinks point at) byte for byte unchanged;
- no file created or changed outside the outputs the command line declares (`-o`, its manifest and depfile,
  `--manifest`, `-MF`, `--keep`'s directory);
- the cache: a command that succeeded is built again with `--no-cache` into the same path, and what the cache
  served must equal the fresh build byte for byte.

`run(seed, budget_s)` returns the figures; scripts/cli_fuzz.py runs it long, tests/test_cli_fuzz.py for a fixed
small budget.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

SOURCE = """import "{lib}"

kernel vector_add(A: dtype[N], B: dtype[N], C: out dtype[N]):
    with Kernel(ceildiv(N, block_N), threads=128) as bx:
        for i in Parallel(block_N):
            idx = bx * block_N + i
            if idx < N:
                C[idx] = A[idx] + B[idx]
"""
LIBRARY = "const dtype = f16\nconst block_N = 256\n"
# the source's names: each one a way a name has broken a tool
NAMES = ["k.tile", "k k.tile", "k%d.tile", "k$x.tile", "k#1.tile", "k\nstatic_assert(0);.tile", "ü ñ.tile",
         "K.TILE", "-k.tile", "k.cu", "k.tilec-keep.tile", "a'b\".tile", "k\tt.tile"]
TARGETS = ["sm80", "sm90", "gfx942", "webgpu", "ascend910b", "sm80,sm90"]
SUFFIXES = [".cu", ".hip", ".wgsl", ".cpp", ".ptx", ".h", ".o", ".cubin", ".TILE", ".tile", ".json", ".d", ""]
# kinds that need no device toolchain (fast); the others run nvcc / clang when present
SOURCE_KINDS = (".cu", ".hip", ".wgsl", ".cpp", "")


@dataclass
class Figures:
    command_lines: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    cache_rechecks: int = 0
    concurrent_batches: int = 0
    findings: list[str] = field(default_factory=list)

    def table(self) -> str:
        status = ", ".join(f"exit {k}: {v}" for k, v in sorted(self.by_status.items()))
        return (f"command lines: {self.command_lines} ({status}); cache entries re-built fresh and compared: "
                f"{self.cache_rechecks}; concurrent batches: {self.concurrent_batches}; findings: "
                f"{len(self.findings)}")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    """Every file under root (not following links) and its content's digest ('->target' for a link)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = "->" + os.readlink(p) if p.is_symlink() else _digest(p)
    return out


class Project:
    """A scratch directory: the source under a hostile name, its import, links to both, an output subdirectory."""

    def __init__(self, root: Path, rng: random.Random):
        self.root = root
        self.name = rng.choice(NAMES)
        self.lib = rng.choice(["lib.tile", "lib.cu", "l i b.tile", "k.tilec-keep.tile"])
        (root / "out").mkdir()
        (root / self.lib).write_text(LIBRARY)
        (root / self.name).write_text(SOURCE.format(lib=self.lib))
        os.symlink(self.name, root / "link.tile")
        os.symlink(self.lib, root / "out" / "lib-link.cu")
        self.inputs = {self.name: _digest(root / self.name), self.lib: _digest(root / self.lib)}


def _output_name(rng: random.Random, project: Project) -> str:
    stem = rng.choice(["o", "k", "O", "out/o", "missing/o", "ü", "o o", "o%", "-o", "out"])
    if rng.random() < 0.1:
        return rng.choice([project.name, project.lib, "link.tile", "out/lib-link.cu", "/dev/null", "-",
                           "/proc/x.cu", "out"])
    return stem + rng.choice(SUFFIXES)


def command_line(rng: random.Random, project: Project, slow_ok: bool) -> tuple[list[str], set[str]]:
    """(arguments after `tilec`, the paths the command line declares as outputs, relative to the project)."""
    args: list[str] = []
    declared: set[str] = set()
    source = rng.choice([project.name] * 4 + ["link.tile", "./" + project.name, "missing.tile"])
    if rng.random() < 0.08:
        args.append(rng.choice(["run", "layout", "targets"]))
        if args[0] == "targets":
            return args, declared
    mode = args[0] if args else "build"
    if source.startswith("-"):
        args.append("--")  # a file named like an option, after the end of the options
    args.append(source)
    if mode == "run":
        args += rng.choice([[], ["--size", "N=100"], ["--size", "N=-1"], ["--seed", rng.choice(["0", "-1", "x"])],
                            ["--size", "N=100", "--target", "webgpu", "--check"], ["--atol", "nan"]])
        return args, declared
    if mode == "layout":
        args += ["--target", rng.choice(["sm80", "webgpu"]), "-o", "out/l.svg"]
        return args, {"out/l.svg"}
    target = rng.choice(TARGETS)
    if rng.random() < 0.9:
        args += ["--target", target]
    if rng.random() < 0.15:
        args += ["--emit-ir"] + rng.choice([[], ["-o", _output_name(rng, project)]])
        if "-o" in args:
            declared.add(args[args.index("-o") + 1])
        return args, declared
    out = _output_name(rng, project)
    if not slow_ok and not out.endswith(SOURCE_KINDS):
        out = out.rsplit(".", 1)[0] + ".cu"
    if rng.random() < 0.85:
        args += ["-o", out]
        declared |= {out, out + ".json", out + ".d"}
    else:
        stem = Path(source).stem  # the default output: the source's stem and the kind's suffix
        declared |= {stem + s for s in SUFFIXES + [".hsaco"]} | {stem + s + x for s in SUFFIXES + [".hsaco"]
                                                                 for x in (".json", ".d")}
    for _ in range(rng.randint(0, 3)):
        flag = rng.choice(["-MD", "-MMD", "-MP", "-MF", "--manifest", "--keep", "-c", "-D", "--no-cache",
                           "--emit", "-M", "-MT", "--dryrun", "-I"])
        if flag in ("-MF", "--manifest"):
            path = _output_name(rng, project)
            args += [flag, path]
            declared.add(path)
        elif flag == "--keep":
            if slow_ok:
                keep = rng.choice([".", "out", "kept"])
                args += ["--keep", keep]
                declared.add(keep + "/")
        elif flag == "-D":
            args += ["-D", rng.choice(["block_N=64", "block_N=0", "block_N=2147483647", "dtype=f32", "nope=1",
                                       "block_N=x"])]
        elif flag == "--emit":
            args += ["--emit", rng.choice(["cu", "ptx", "hip", "wgsl", "cpp", "header", "bogus"])]
        elif flag == "-MT":
            args += ["-MT", rng.choice(["t", "a b", "x%y"])]
        elif flag == "-I":
            args += ["-I", rng.choice(["out", "missing", project.lib])]
        elif flag == "-c" and not slow_ok:
            continue
        else:
            args.append(flag)
    return args, declared


def _allowed(path: str, declared: set[str]) -> bool:
    if path in declared or path.startswith("cache/"):
        return True
    return any(d.endswith("/") and (path.startswith(d) or d == "./") for d in declared) or (
        "./" in declared and "/" not in path and ".tilec-keep." in path)


TILEC = [sys.executable, "-m", "tilec"]


def check_one(root: Path, project: Project, args: list[str], declared: set[str], env: dict,
              program: list[str] = TILEC) -> tuple[int, list[str]]:
    """Run one command line in the project; (its exit status, findings). `program`: tilec (a test plants bugs)."""
    before = _tree(root)
    try:
        proc = subprocess.run([*program, *args], cwd=root, env=env, capture_output=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -1, [f"hang (120 s): tilec {args!r}"]
    findings = []
    err = proc.stderr.decode(errors="replace")
    if proc.returncode not in (0, 1, 2) or "Traceback" in err:
        findings.append(f"exit {proc.returncode}: tilec {args!r}: {err.strip().splitlines()[-1:] or ''}")
    after = _tree(root)
    for name, digest in project.inputs.items():
        if after.get(name) != digest:
            findings.append(f"input {name!r} changed by: tilec {args!r}")
    declared = {d if d.endswith("/") else os.path.normpath(d) for d in declared} | (
        {"./"} if "--keep" in args and args[args.index("--keep") + 1:args.index("--keep") + 2] == ["."] else set())
    for name, digest in after.items():
        if before.get(name) != digest and not _allowed(name, declared):
            findings.append(f"{'wrote' if name in before else 'created'} {name!r} outside the declared outputs: "
                            f"tilec {args!r}")
    return proc.returncode, findings


def recheck_cache(root: Path, args: list[str], env: dict) -> list[str]:
    """A build that succeeded, built again without the cache into the same output: the bytes the cache served
    (the first build, or a hit) must equal the fresh ones."""
    if "-o" not in args or "--dryrun" in args:
        return []
    out = root / args[args.index("-o") + 1]
    if not out.is_file():
        return []
    served = out.read_bytes()
    subprocess.run([sys.executable, "-m", "tilec", *args], cwd=root, env=env, capture_output=True, timeout=120)
    hit = out.read_bytes() if out.is_file() else b""
    fresh_args = [a for a in args if a != "--no-cache"] + ["--no-cache"]
    subprocess.run([sys.executable, "-m", "tilec", *fresh_args], cwd=root, env=env, capture_output=True,
                   timeout=120)
    fresh = out.read_bytes() if out.is_file() else b""
    if not (served == hit == fresh):
        return [f"the cache served bytes that differ from a fresh build: tilec {args!r}"]
    return []


def run(seed: int, budget_s: float, slow_ok: bool = False, jobs: int = 2, log=None) -> Figures:
    """Fuzz for `budget_s` seconds; `slow_ok` adds device toolchain builds (cubin, hsaco, objects, --keep)."""
    rng = random.Random(seed)
    figures = Figures()
    deadline = time.monotonic() + budget_s
    env = dict(os.environ, PYTHONPATH=str(ROOT), TILEC_TUNE_DB="")
    env.pop("TILEC_CACHE_DIR", None)
    with tempfile.TemporaryDirectory(prefix="tilec-cli-fuzz-") as tmp:
        n = 0
        while time.monotonic() < deadline:
            root = Path(tmp) / f"p{n}"
            root.mkdir()
            n += 1
            project = Project(root, rng)
            env["TILEC_CACHE_DIR"] = str(root / "cache")
            batch = [command_line(rng, project, slow_ok) for _ in range(rng.choice([1, 1, 2, 4]))]
            if len(batch) > 1:  # several builds at once over one cache (a check of each sees the others' outputs)
                figures.concurrent_batches += 1
                declared_all = set().union(*(d for _, d in batch))
                with ThreadPoolExecutor(jobs) as pool:
                    results = list(pool.map(check_one, [root] * len(batch), [project] * len(batch),
                                            [a for a, _ in batch], [declared_all] * len(batch),
                                            [dict(env)] * len(batch)))
            else:
                results = [check_one(root, project, batch[0][0], batch[0][1], env)]
            for (args, _), (status, found) in zip(batch, results, strict=True):
                figures.command_lines += 1
                figures.by_status[status] = figures.by_status.get(status, 0) + 1
                if status == 0 and rng.random() < 0.3:
                    figures.cache_rechecks += 1
                    found = found + recheck_cache(root, args, env)
                figures.findings += found
                if found and log:
                    log("\n".join(found))
            shutil.rmtree(root, ignore_errors=True)
    return figures
