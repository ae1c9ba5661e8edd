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
SOURCE_KIND = {"sm80": "cu", "sm90": "cu", "gfx942": "hip", "webgpu": "wgsl", "ascend910b": "cpp"}


@dataclass
class Figures:
    command_lines: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    cache_rechecks: int = 0
    concurrent_batches: int = 0
    findings: list[str] = field(default_factory=list)
    by_category: dict[str, dict[int, int]] = field(default_factory=dict)
    forked: int = 0
    execed: int = 0
    rename_checks: int = 0

    def table(self) -> str:
        status = ", ".join(f"exit {k}: {v}" for k, v in sorted(self.by_status.items()))
        return (f"command lines: {self.command_lines} ({status}); cache entries re-built fresh and compared: "
                f"{self.cache_rechecks}; re-run under a plain name: {self.rename_checks}; concurrent batches: "
                f"{self.concurrent_batches}; findings: "
                f"{len(self.findings)}")

    def by_category_table(self) -> str:
        rows = [f"{'category':14}{'lines':>7}{'exit 0':>8}{'exit 1':>8}{'exit 2':>8}{'other':>7}"]
        for cat, st in sorted(self.by_category.items()):
            other = sum(v for k, v in st.items() if k not in (0, 1, 2))
            rows.append(f"{cat:14}{sum(st.values()):>7}{st.get(0, 0):>8}{st.get(1, 0):>8}{st.get(2, 0):>8}"
                        f"{other:>7}")
        return "\n".join(rows)


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
        self.lib = rng.choice([n for n in ["lib.tile", "lib.cu", "l i b.tile", "k.tilec-keep.tile"] if n != self.name])
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
    if rng.random() < 0.05:
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
    if not slow_ok and os.path.splitext(out)[1] not in SOURCE_KINDS:  # (a bare name builds the target's source)
        out = os.path.splitext(out)[0] + ".cu"
    special = {project.name, project.lib, "link.tile", "out/lib-link.cu", "/dev/null", "-", "/proc/x.cu", "out"}
    if target in SOURCE_KIND and out not in special and rng.random() < 0.6:
        # mostly a suffix the target emits: a random one is refused at once 3 times in 4 (1 run in 10 000 reached
        # the depfile, manifest and cache checks for each mismatch that stopped there)
        out = os.path.splitext(out)[0] + "." + SOURCE_KIND[target]
    if rng.random() < 0.85 or (not slow_ok and "," in target):
        args += ["-o", out]
        declared |= {out, out + ".json", out + ".d"}
    else:
        if not slow_ok:  # the default output of a GPU target is a binary: its source instead
            args += ["--emit", SOURCE_KIND.get(target if "--target" in args else "sm90", "cu")]
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
            kinds = ["cu", "ptx", "hip", "wgsl", "cpp", "header", "bogus"]
            args += ["--emit", rng.choice(kinds if slow_ok else [k for k in kinds if k not in ("ptx", "header")])]
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


HANG_CPU_S = 60.0  # a command line that uses more CPU time than this is a hang (a compile of its kernel: 0.1 s)
HANG_WALL_S = 600.0  # ... and one that runs this long, whatever the load (a hang that sleeps uses no CPU)


@dataclass
class Started:
    """A command line started: a child process (exec'd or forked) writing its stdout / stderr to files."""
    pid: int
    popen: subprocess.Popen | None
    err_path: str
    t0: float


class Launcher:
    """Starts command lines. Most run as a fork of this process with tilec's modules already imported, calling
    tilec/__main__.py in the child (`run_as_main`) as `python -m tilec` does after its start-up (the same argv,
    environment, working directory, standard streams, exit status and uncaught-exception traceback); a fraction
    `exec_fraction` (and every `program=` other than tilec) run as a real `python -m tilec` subprocess, so that
    the start-up itself stays fuzzed. Forking saves Python's start-up and tilec's imports, which were most of a
    command line's cost (a compile of the tiny kernels takes about 0.1 s). The children share one byte-code cache
    (PYTHONPYCACHEPREFIX) so that an exec'd tilec does not recompile its modules where the environment says
    PYTHONDONTWRITEBYTECODE."""

    def __init__(self, scratch: Path | None = None, exec_fraction: float = 1.0, rng: random.Random | None = None):
        self.exec_fraction = exec_fraction
        self.rng = rng or random.Random(0)
        self.scratch = scratch or Path(tempfile.gettempdir())
        self.pycache = str(self.scratch / "tilec-cli-fuzz-pycache")
        self.forked = self.execed = 0
        self.n = 0
        self.token = os.urandom(4).hex()  # tells apart launchers in one process in the stderr file names
        if exec_fraction < 1.0:
            preload()

    def env(self, env: dict) -> dict:
        env = dict(env, PYTHONPYCACHEPREFIX=self.pycache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def start(self, cwd: Path, args: list[str], env: dict, program: list[str] = TILEC) -> Started:
        self.n += 1
        err_path = str(self.scratch / f"tilec-cli-fuzz-stderr-{os.getpid()}-{self.token}-{self.n}")
        env = self.env(env)
        if program is not TILEC or self.rng.random() < self.exec_fraction:
            self.execed += 1
            with open(err_path, "wb") as err:
                p = subprocess.Popen([*program, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=err)
            return Started(p.pid, p, err_path, time.monotonic())
        self.forked += 1
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(cwd, args, env, err_path)
        return Started(pid, None, err_path, time.monotonic())

    @staticmethod
    def finish(s: Started, timeout: float = HANG_CPU_S) -> tuple[int | None, str]:
        """(exit status, or None for a hang: killed after `timeout` seconds of CPU time, its own and its reaped
        children's, or after HANG_WALL_S of wall time; stderr). Mostly CPU time: on a machine shared with other
        jobs at `nice`, a `tilec run --target webgpu` of 3 s of CPU took over 120 s of wall time."""
        status: int | None = None
        while True:
            if s.popen is not None:
                code = s.popen.poll()
                if code is not None:
                    status = code
                    break
            else:
                pid, raw = os.waitpid(s.pid, os.WNOHANG)
                if pid:
                    status = os.waitstatus_to_exitcode(raw)
                    break
            if _cpu_seconds(s.pid) > timeout or time.monotonic() > s.t0 + HANG_WALL_S:
                os.kill(s.pid, 9)
                if s.popen is not None:
                    s.popen.wait()
                else:
                    os.waitpid(s.pid, 0)
                status = None
                break
            time.sleep(0.005)
        err = Path(s.err_path).read_bytes().decode(errors="replace")
        os.unlink(s.err_path)
        return status, err


def _cpu_seconds(pid: int) -> float:
    """CPU time of a running process and of the children it has reaped (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _child(cwd: Path, args: list[str], env: dict, err_path: str) -> None:
    """In a forked child: become `python -m tilec ARGS` and exit with its status."""
    code = 1
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        # fresh streams on fds 0-2, encoded as the interpreter's own (a test harness may have replaced sys.stderr)
        for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
            like = getattr(sys, f"__{name}__", None)
            setattr(sys, name, open(fd, mode, encoding=getattr(like, "encoding", None) or "utf-8",
                                    errors=getattr(like, "errors", None) or "strict", closefd=False))
        code = run_as_main(args)
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:  # what the interpreter does with an uncaught exception: a traceback, status 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF if isinstance(code, int) else 1)


_PRELOADED = False


def run_as_main(args: list[str]):
    """What `python -m tilec ARGS` does once Python has started: tilec/__main__.py run as the main module with
    that argv (it raises SystemExit with the CLI's status). Returns SystemExit's code."""
    import runpy

    sys.argv = [str(ROOT / "tilec" / "__main__.py"), *args]
    try:
        runpy.run_module("tilec", run_name="__main__", alter_sys=False)
    except SystemExit as e:  # what the interpreter does with an uncaught SystemExit
        return e.code
    return None


def preload() -> None:
    """Import tilec's modules in this process and warm what a first build computes once (the grammar, the
    fingerprint of tilec's own files), by building the fuzzer's kernel for each target here and running `tilec
    targets`, `run` and `layout` once, so that forked children start where a long-running tilec would be (the
    exec'd fraction covers a cold start). numpy is imported with one BLAS thread: a fork copies no thread."""
    global _PRELOADED
    if _PRELOADED:
        return
    _PRELOADED = True
    import contextlib
    import io

    def main(args: list[str]) -> None:
        run_as_main(args)
        sys.argv = argv

    argv = sys.argv
    cwd, saved = os.getcwd(), dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="tilec-cli-fuzz-warm-") as d:
        try:
            os.chdir(d)
            os.environ.update(TILEC_CACHE_DIR=str(Path(d) / "cache"), TILEC_TUNE_DB="")
            Path(d, "lib.tile").write_text(LIBRARY)
            Path(d, "k.tile").write_text(SOURCE.format(lib="lib.tile"))
            # numpy (tilec run) without its BLAS threads, so that a fork after its import is safe
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = saved.setdefault(var, "1")
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                for t, o in [("sm80", "o.cu"), ("gfx942", "o.hip"), ("webgpu", "o.wgsl"), ("ascend910b", "o.cpp")]:
                    main(["k.tile", "--target", t, "-o", o])
                main(["k.tile", "--emit-ir"])
                main(["targets"])
                main(["run", "k.tile", "--size", "N=100"])
                main(["layout", "k.tile", "--target", "sm80", "-o", "l.svg"])
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)


def rename_check(tmp: Path, project: Project, args: list[str], status: int, env: dict,
                 launcher: Launcher, program: list[str] = TILEC) -> list[str] | None:
    """The same command line on the same source under a plain name (its suffix kept) in a fresh project must end
    the same way: a build that fails (or succeeds) only because of its file's name is a finding -- nvcc's shell
    expanded `$x` in `k$x.tile`. Command lines whose outcome may rightly depend on the name (one naming the
    source or the import elsewhere, --keep, a depfile of a name with a line break) are not compared."""
    rest = args[args.index(project.name) + 1:] if project.name in args else None
    if (rest is None or args[0] in ("run", "layout", "targets") or "--keep" in args
            or any(project.name in a or project.lib in a for a in rest)
            or ("\n" in project.name and any(a.startswith("-M") for a in args))):
        return None  # not compared
    plain = "plain" + os.path.splitext(project.name)[1]
    root = tmp / "renamed"
    shutil.rmtree(root, ignore_errors=True)
    (root / "out").mkdir(parents=True)
    (root / project.lib).write_text(LIBRARY)
    (root / plain).write_text(SOURCE.format(lib=project.lib))
    os.symlink(plain, root / "link.tile")
    os.symlink(project.lib, root / "out" / "lib-link.cu")
    i = args.index(project.name)
    renamed = [*args[:i], plain, *args[i + 1:]]
    got, err = launcher.finish(launcher.start(root, renamed, env, program))
    shutil.rmtree(root, ignore_errors=True)
    if got != status:
        return [f"exit {status} under the name {project.name!r} but {got} under {plain!r}: tilec {args!r}: "
                f"{err.strip().splitlines()[-1:] or ''}"]
    return []


def _inputs_and_stray(root: Path, project: Project, args: list[str], declared: set[str],
                      before: dict[str, str], after: dict[str, str]) -> list[str]:
    findings = []
    for name, digest in project.inputs.items():
        if after.get(name) != digest:
            findings.append(f"input {name!r} changed by: tilec {args!r}")
    declared = {d if d.endswith("/") else os.path.normpath(d) for d in declared} | (
        {"./"} if "--keep" in args and args[args.index("--keep") + 1:args.index("--keep") + 2] == ["."] else set())
    for name, digest in after.items():
        if before.get(name) != digest and not _allowed(name, declared):
            findings.append(f"{'wrote' if name in before else 'created'} {name!r} outside the declared outputs: "
                            f"tilec {args!r}")
    return findings


def _status_findings(args: list[str], status: int | None, err: str) -> list[str]:
    if status is None:
        return [f"hang (over {HANG_CPU_S:.0f} s of CPU time): tilec {args!r}"]
    if status not in (0, 1, 2) or "Traceback" in err:
        return [f"exit {status}: tilec {args!r}: {err.strip().splitlines()[-1:] or ''}"]
    return []


def check_one(root: Path, project: Project, args: list[str], declared: set[str], env: dict,
              program: list[str] = TILEC, launcher: Launcher | None = None) -> tuple[int, list[str]]:
    """Run one command line in the project; (its exit status, findings). `program`: tilec (a test plants bugs)."""
    launcher = launcher or Launcher()
    before = _tree(root)
    status, err = launcher.finish(launcher.start(root, args, env, program))
    findings = _status_findings(args, status, err)
    findings += _inputs_and_stray(root, project, args, declared, before, _tree(root))
    return -1 if status is None else status, findings


def recheck_cache(root: Path, args: list[str], env: dict, launcher: Launcher,
                  program: list[str] = TILEC) -> list[str]:
    """A build that succeeded, built again (a hit) and then without the cache into the same output: the bytes the
    cache served (the first build, or a hit) must equal the fresh ones."""
    if "-o" not in args or "--dryrun" in args:
        return []
    out = root / args[args.index("-o") + 1]
    if not out.is_file():
        return []
    served = out.read_bytes()
    launcher.finish(launcher.start(root, args, env, program))
    hit = out.read_bytes() if out.is_file() else b""
    fresh_args = [a for a in args if a != "--no-cache"] + ["--no-cache"]
    launcher.finish(launcher.start(root, fresh_args, env, program))
    fresh = out.read_bytes() if out.is_file() else b""
    if not (served == hit == fresh):
        which = "the first build" if hit == fresh else "a cache hit" if served == fresh else "both builds"
        return [f"the cache served bytes that differ from a fresh build ({which}): tilec {args!r}"]
    return []


def _shared_output(args: list[str], others: set[str]) -> bool:
    """Whether another command line of the same concurrent batch declares this one's -o too (it may have written
    it last: what the re-check would read is not this build's)."""
    if "-o" not in args or args.index("-o") + 1 >= len(args):
        return False
    out = os.path.normpath(args[args.index("-o") + 1])
    return out in {os.path.normpath(d) for d in others} or any(
        d.endswith("/") and (out + "/").startswith(d) for d in others)


def category(args: list[str]) -> str:
    """The kind of command line, for the figures: the subcommand, or what a build makes."""
    if args and args[0] in ("run", "layout", "targets"):
        return args[0]
    if "--emit-ir" in args:
        return "emit-ir"
    if "--dryrun" in args:
        return "dryrun"
    if "-M" in args:
        return "depfile-only"
    if "-o" not in args:
        return "default-output"
    out = args[args.index("-o") + 1] if "-o" in args and args.index("-o") + 1 < len(args) else ""
    suffix = os.path.splitext(out)[1].lower()
    if suffix in (".cubin", ".o", ".ptx", ".hsaco", ".h") or "-c" in args or "--keep" in args:
        return "toolchain"
    return "source"


def run(seed: int, budget_s: float, slow_ok: bool = False, jobs: int = 4, log=None, exec_fraction: float = 1.0,
        max_lines: int | None = None, slow_fraction: float = 1.0, progress_s: float = 0, progress=None,
        rename_fraction: float = 0.2, should_stop=None) -> Figures:
    """Fuzz for `budget_s` seconds (or `max_lines` command lines); `slow_ok` adds device toolchain builds (cubin,
    hsaco, objects, --keep) to a `slow_fraction` of the builds; `exec_fraction` of the command lines run as a
    real `python -m tilec` (the others fork this process, see Launcher). Batches of up to `jobs` command lines
    run at once over one compile cache, shared by every project of the run (a source of the same name and
    import is the same file, so a later project's build is a hit, and the re-check compares it with a fresh
    build)."""
    rng = random.Random(seed)
    figures = Figures()
    t0 = time.monotonic()
    deadline = t0 + budget_s
    next_progress = t0 + progress_s
    env = dict(os.environ, PYTHONPATH=str(ROOT), TILEC_TUNE_DB="")
    env.pop("TILEC_CACHE_DIR", None)
    with tempfile.TemporaryDirectory(prefix="tilec-cli-fuzz-") as tmp:
        launcher = Launcher(Path(tmp), exec_fraction, random.Random(seed + 1))
        t0 = time.monotonic()  # the budget starts after the warm-up (preload)
        deadline = t0 + budget_s
        next_progress = t0 + progress_s
        env["TILEC_CACHE_DIR"] = str(Path(tmp) / "cache")
        n = 0
        while time.monotonic() < deadline and (max_lines is None or figures.command_lines < max_lines) and not (
                should_stop and should_stop()):
            root = Path(tmp) / f"p{n}"
            root.mkdir()
            n += 1
            project = Project(root, rng)
            batch = [command_line(rng, project, slow_ok and rng.random() < slow_fraction)
                     for _ in range(rng.choice([1, 1, 2, jobs]))]
            declared_all = set().union(*(d for _, d in batch))
            if len(batch) > 1:  # several builds at once over one cache
                figures.concurrent_batches += 1
            n_before = len(figures.findings)
            before = _tree(root)
            started = [launcher.start(root, args, env) for args, _ in batch]
            results = [launcher.finish(s) for s in started]
            after = _tree(root)
            stray = _inputs_and_stray(root, project, [a for args, _ in batch for a in [*args, ";"]][:-1]
                                      if len(batch) > 1 else batch[0][0], declared_all, before, after)
            figures.findings += stray
            for (args, _), (status, err) in zip(batch, results, strict=True):
                found = _status_findings(args, status, err)
                figures.command_lines += 1
                key = -1 if status is None else status
                figures.by_status[key] = figures.by_status.get(key, 0) + 1
                cat = category(args)
                figures.by_category.setdefault(cat, {})
                figures.by_category[cat][key] = figures.by_category[cat].get(key, 0) + 1
                others = set().union(set(), *(d for a, d in batch if a is not args))
                if status == 0 and rng.random() < 0.3 and not _shared_output(args, others):
                    figures.cache_rechecks += 1
                    found = found + recheck_cache(root, args, env, launcher)
                if status in (0, 1) and rng.random() < rename_fraction:
                    more = rename_check(Path(tmp), project, args, status, env, launcher)
                    if more is not None:
                        figures.rename_checks += 1
                        found = found + more
                figures.findings += found
            if log and len(figures.findings) > n_before:
                log("\n".join(figures.findings[n_before:]))
            shutil.rmtree(root, ignore_errors=True)
            if progress_s and time.monotonic() >= next_progress:
                next_progress += progress_s
                figures.forked, figures.execed = launcher.forked, launcher.execed
                if log:
                    log(f"[{time.monotonic() - t0:.0f} s] {figures.table()}")
                if progress:
                    progress(figures)
        figures.forked, figures.execed = launcher.forked, launcher.execed
    return figures
