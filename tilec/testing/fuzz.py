"""A fuzzer for tilec: grammar-aware generation plus mutation of the repository's .tile files.

Every input is compiled to each requested output -- "ir" (the Tile IR passes, as --emit-ir), "sm90"
(.cu), "gfx942" (.hip), "webgpu" (.wgsl) -- in this process, through `tilec.compile`. The only
acceptable outcomes are success or a CompileError whose diagnostics are well formed (`file:line:col:
severity: message` quoting a line that exists, or one `tilec: severity: message` line). Anything
else is a finding:

* "internal": any other exception (what the command line shows as an internal compiler error);
* "malformed": a diagnostic pointing outside the file, or an error-free CompileError;
* "slow": a compile over `slow_s` seconds (2 by default) of this process's CPU time -- not wall
  time, so that a loaded machine (CI on two shared cores) does not make a finding of a fast
  compile; a compile is interrupted at `hang_s` seconds of wall time.

Inputs come from `Source`s: `generate()` writes a fresh kernel from a small grammar of tile
programs (allocations, copies, Parallel/Pipelined/Serial loops, reductions, gemm, conditionals,
random expressions); the mutators edit a corpus file by tokens (delete, duplicate, swap, replace,
insert), by syntax-preserving swaps (a number for a number, a dtype for a dtype, a name for a name,
an operator for an operator), by lines (delete, duplicate, swap, re-indent), by bytes, by deep
nesting, or by `-D` overrides of its consts with extreme values. A mutant that only changes consts
is also checked differentially (`differential()`): the Tile IR interpreter against the SIMT
interpreter running the sm80 and gfx90a lowerings at small, ragged sizes.

Used by tests/test_fuzzer.py (a fixed budget in CI, and the replay of tests/fuzz_corpus/) and by
scripts/fuzz.py (long runs, figures printed). Needs no toolchain: only source generation runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
OUTPUTS = ("ir", "sm90", "gfx942", "webgpu")
SLOW_S = 2.0
HANG_S = 20.0


def corpus_files(root: Path = ROOT) -> list[Path]:
    """The .tile files mutations start from: samples/, tests/ir/, and the crash corpus."""
    found = {*root.glob("samples/*.tile"), *root.glob("samples/*/*.tile"), *root.glob("tests/ir/*.tile"),
             *root.glob("tests/ir/inputs/*.tile"), *root.glob("tests/fuzz_corpus/*.tile")}
    return sorted(found)


def include_dirs(root: Path = ROOT) -> list[str]:
    return [str(root / "samples"), str(root / "tests/ir/inputs"), str(root / "tests/ir")]


# ---------------------------------------------------------------------------- inputs


@dataclasses.dataclass
class Case:
    """One fuzz input: source text (compiled under `name`), -D values, and how it was made."""

    name: str
    text: str
    defines: dict[str, str] = dataclasses.field(default_factory=dict)  # -D NAME=VALUE, VALUE as typed
    how: str = ""
    consts_only: bool = False  # the source is a corpus file unchanged; only -D values differ

    def parsed_defines(self) -> dict[str, object]:
        from tilec.driver import define_value
        from tilec.options import DefineText

        return {k: define_value(DefineText(v)) for k, v in self.defines.items()}

    def key(self) -> str:
        blob = json.dumps([self.text, sorted(self.defines.items())])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


TOKEN = re.compile(r"""
      [ \t]+ | \n | \#[^\n]*
    | "(?:\\.|[^"\\\n])*" | '(?:\\.|[^'\\\n])*'
    | [A-Za-z_][A-Za-z0-9_]* | \d[\w.]*(?:[eE][-+]?\d+)?
    | \*\*=? | //=? | <<=? | >>=? | [-+*/%&|^<>=!]=? | .
""", re.VERBOSE | re.DOTALL)
NUMBERS = ["0", "1", "2", "3", "7", "8", "16", "17", "31", "32", "33", "63", "64", "65", "100", "128", "129", "256",
           "1024", "1025", "4096", "65536", "0.5", "-1", "1e9", "1e400", "2147483648", "99999999999999999999"]
OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "<", "<=", "==", "!=", ">=", ">"]
DTYPES = ["f16", "bf16", "f32", "f64", "i8", "u8", "i32", "i64", "bool", "f8e4m3", "f8e5m2"]
KEYWORDS = ["(", ")", "[", "]", ":", ",", ".", "=", "\n", "    ", "\t", "out", "T.", "import", "const", "def",
            "kernel", "with", "for", "in", "if", "elif", "else", "return", "pass", "and", "or", "not", "Kernel",
            "alloc_shared", "alloc_fragment", "alloc_local", "alloc_var", "Parallel", "Pipelined", "Serial",
            "Unroll", "range", "ceildiv", "if_then_else", "infinity", "copy", "gemm", "fill", "clear", "reduce_sum",
            "reduce_max", "atomic_add", "num_stages", "threads", "dim", "transpose_B", "exp2", "max", "min"]
# -D values as typed on the command line (read by tilec.driver.define_value, as the CLI's are)
EXTREME = ["0", "-1", "1", "2", "3", "5", "7", "8", "16", "31", "33", "48", "64", "96", "100", "127", "129", "256",
           "512", "1024", "1025", "4096", "65536", "1048576", "2147483648", "1099511627776", "0.5", "-2.5", "inf",
           "nan", "1e400", "true", "False", "f16", "bf16", "f32", "i8", "i64", "bool", "f8e4m3", "f8e5m2", "nosuch",
           "", "0x7fffffff"]
CONST = re.compile(r"^const\s+([A-Za-z_]\w*)", re.M)


class Fuzzer:
    """Draws Cases from a seeded random generator: the same seed gives the same sequence."""

    MUTATORS = ("tokens", "semantic", "lines", "bytes", "nesting", "defines", "generate", "threads")

    def __init__(self, seed: int = 0, root: Path = ROOT):
        self.rng = random.Random(seed)
        self.files = [p for p in corpus_files(root) if p.stat().st_size < 64 * 1024]
        self.texts = [p.read_text(errors="replace") for p in self.files]
        self.vocab = sorted({t for text in self.texts for t in TOKEN.findall(text)
                             if t.strip() and not t.startswith("#")} | set(KEYWORDS))
        self.with_consts = [i for i, t in enumerate(self.texts) if CONST.search(t) and "kernel" in t]

    def cases(self) -> Iterator[Case]:
        while True:
            kind = self.rng.choice(self.MUTATORS)
            yield getattr(self, f"_{kind}")()

    def _pick(self) -> tuple[int, str]:
        i = self.rng.randrange(len(self.files))
        p = self.files[i]
        return i, str(p.parent / f"fuzz_{p.name}")  # beside the original, so relative imports resolve

    def _tokens(self) -> Case:
        i, name = self._pick()
        toks = TOKEN.findall(self.texts[i]) or [""]
        for _ in range(self.rng.randint(1, 4)):
            k = self.rng.randrange(len(toks))
            op = self.rng.choice(["delete", "duplicate", "swap", "replace", "replace", "insert"])
            if op == "delete" and len(toks) > 1:
                del toks[k]
            elif op == "duplicate":
                toks.insert(k, toks[k])
            elif op == "swap":
                j = self.rng.randrange(len(toks))
                toks[k], toks[j] = toks[j], toks[k]
            elif op == "replace":
                toks[k] = self.rng.choice(self.vocab)
            else:
                toks.insert(k, self.rng.choice(self.vocab) + self.rng.choice(["", " "]))
        return Case(name, "".join(toks), how="tokens")

    def _semantic(self) -> Case:
        i, name = self._pick()
        toks = TOKEN.findall(self.texts[i])
        names = sorted({t for t in toks if re.fullmatch(r"[A-Za-z_]\w*", t)}) or ["x"]
        spots = [k for k, t in enumerate(toks) if t.strip() and not t.startswith(("#", '"'))]
        for _ in range(self.rng.randint(1, 3)):
            if not spots:
                break
            k = self.rng.choice(spots)
            t = toks[k]
            if t[0].isdigit():
                toks[k] = self.rng.choice(NUMBERS)
            elif t in DTYPES:
                toks[k] = self.rng.choice(DTYPES)
            elif t in OPERATORS:
                toks[k] = self.rng.choice(OPERATORS)
            elif re.fullmatch(r"[A-Za-z_]\w*", t):
                toks[k] = self.rng.choice(names)
        return Case(name, "".join(toks), how="semantic")

    def _lines(self) -> Case:
        i, name = self._pick()
        lines = self.texts[i].split("\n")
        for _ in range(self.rng.randint(1, 3)):
            k = self.rng.randrange(len(lines))
            op = self.rng.choice(["delete", "duplicate", "swap", "indent", "dedent", "tab"])
            if op == "delete" and len(lines) > 1:
                del lines[k]
            elif op == "duplicate":
                lines.insert(k, lines[k])
            elif op == "swap":
                j = self.rng.randrange(len(lines))
                lines[k], lines[j] = lines[j], lines[k]
            elif op == "indent":
                lines[k] = " " * self.rng.randint(1, 9) + lines[k]
            elif op == "dedent":
                lines[k] = lines[k][self.rng.randint(1, 9):]
            else:
                lines[k] = "\t" + lines[k].lstrip(" ")
        return Case(name, "\n".join(lines), how="lines")

    def _bytes(self) -> Case:
        i, name = self._pick()
        data = bytearray(self.texts[i].encode())
        for _ in range(self.rng.randint(1, 6)):
            k = self.rng.randrange(len(data) + 1)
            op = self.rng.choice(["flip", "insert", "delete"])
            if op == "flip" and k < len(data):
                data[k] ^= 1 << self.rng.randrange(8)
            elif op == "insert":
                data[k:k] = bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 4)))
            elif k < len(data):
                del data[k:k + self.rng.randint(1, 8)]
        return Case(name, data.decode("utf-8", "replace"), how="bytes")

    def _nesting(self) -> Case:
        i, name = self._pick()
        toks = TOKEN.findall(self.texts[i]) or [""]
        k = self.rng.randrange(len(toks))
        open_, close = self.rng.choice([("(", ")"), ("A[", "]"), ("max(0, ", ")"), ("f32(", ")"), ("-", ""),
                                        ("not ", ""), ("1 + ", ""), ("2 ** ", ""), ("0 < ", "")])
        depth = self.rng.choice([10, 100, 199, 201, 260, 600, 3000])
        toks[k] = open_ * depth + toks[k] + close * depth
        return Case(name, "".join(toks), how="nesting")

    def _defines(self) -> Case:
        if not self.with_consts:
            return self._tokens()
        i = self.rng.choice(self.with_consts)
        names = CONST.findall(self.texts[i])
        chosen = self.rng.sample(names, min(len(names), self.rng.randint(1, 3)))
        defines = {n: self.rng.choice(EXTREME) for n in chosen}
        return Case(str(self.files[i]), self.texts[i], defines, how="defines", consts_only=True)

    def _generate(self) -> Case:
        return Case(str(ROOT / "samples" / "fuzz_generated.tile"), generate(self.rng), how="generate")

    def _threads(self) -> Case:
        """Per-thread code (checked differentially, as a const-only case is): issue #27's class."""
        return Case(str(ROOT / "samples" / "fuzz_threads.tile"), generate_threads(self.rng), how="threads",
                    consts_only=True)


# ---------------------------------------------------------------------------- generation from a grammar


def generate(rng: random.Random) -> str:
    """A random tile program from a small grammar of the language: mostly valid, so that it gets
    past the parser and the checks into layout inference, lowering and code generation."""
    dt = rng.choice(["f16", "f32", "bf16", "f16", "f32", "i32", "f8e4m3"])
    acc = rng.choice(["f32", "f32", "f16", "i32", dt])
    bm, bn, bk = (rng.choice([1, 4, 16, 32, 64, 128]) for _ in range(3))
    threads = rng.choice([32, 64, 128, 128, 256, 96, 1, 512])
    stages = rng.choice([1, 2, 3, 4])
    lines = [f"const bm = {bm}", f"const bn = {bn}", f"const bk = {bk}", ""]
    shape = rng.choice(["[M, N]", "[M, K]", "[N]", "[M, N]"])
    lines.append(f"kernel k(A: {dt}[M, K], B: {dt}[K, N], X: {dt}{shape}, C: out {acc}[M, N]):")
    lines.append(f"    with Kernel(ceildiv(N, bn), ceildiv(M, bm), threads={threads}) as (bx, by):")
    body: list[str] = []
    ind = "        "
    body.append(f"{ind}a_s = alloc_shared((bm, bk), {dt})")
    body.append(f"{ind}b_s = alloc_shared((bk, bn), {dt})")
    body.append(f"{ind}acc = alloc_fragment((bm, bn), {acc})")
    body.append(f"{ind}row = alloc_fragment((bm,), {acc})")
    body.append(f"{ind}" + rng.choice(["clear(acc)", "fill(acc, 0)", f"fill(acc, {_expr(rng, [], 1)})"]))
    loop = rng.choice(["Pipelined(ceildiv(K, bk), num_stages={s})", "range(ceildiv(K, bk))", "Serial(2)",
                       "Pipelined(ceildiv(K, bk), num_stages={s})"]).format(s=stages)
    body.append(f"{ind}for ko in {loop}:")
    inner = ind + "    "
    body.append(f"{inner}copy(A[by * bm, ko * bk], a_s)")
    body.append(f"{inner}copy(B[ko * bk, bx * bn], b_s)")
    body.append(f"{inner}" + rng.choice(["gemm(a_s, b_s, acc)", "gemm(a_s, b_s, acc)",
                                         "gemm(a_s, b_s, acc, transpose_B=False)"]))
    for _ in range(rng.randint(0, 3)):
        body.extend(_statement(rng, ind))
    body.append(f"{ind}copy(acc, C[by * bm, bx * bn])")
    return "\n".join(lines + body) + "\n"


def generate_threads(rng: random.Random) -> str:
    """A random kernel of per-thread code: per-thread buffers (alloc_local) filled by copies and by thread-indexed
    loops, a per-thread mask read from one guarding element stores or block-wide tile operations, thread-indexed
    shared memory, and an accumulator per thread."""
    threads = rng.choice([32, 64, 128])
    w = rng.choice([1, 2, 4, 8])
    lines = [f"const th = {threads}", f"const w = {w}", f"const bm = {rng.choice([1, 2])}", "",  # (_expr uses bm)
             "kernel k(M: i32[N, w], X: f32[N, w], Y: f32[N, th], O: out f32[N, th]):",
             "    with Kernel(N, threads=th) as bx:",
             "        tx = get_thread_binding()",
             "        m = alloc_local((w,), i32)",
             "        v = alloc_local((w,), f32)",
             "        s = alloc_shared((th,), f32)",
             "        acc = alloc_var(f32, 0.0)"]
    ind = "        "
    lines.append(ind + rng.choice(["copy(M[bx, 0:w], m)", "copy(M[bx, 0], m)"]))
    if rng.random() < 0.5:
        lines.append(ind + "copy(X[bx, 0:w], v)")
    else:
        lines += [ind + "for i in serial(w):", ind + f"    v[i] = X[bx, i] * {_expr(rng, ['f32(tx)', 'f32(i)'], 1)}"]
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["mask", "masked_tile", "shared", "loop"])
        if kind == "mask":
            lines += [ind + "for i in serial(w):",
                      ind + f"    if m[i] {rng.choice(['>', '<', '!='])} {rng.randint(-2, 2)}:",
                      ind + f"        acc += v[(i + tx) % w] * {_expr(rng, ['f32(tx)', 'f32(i)', 'acc'], 1)}"]
        elif kind == "masked_tile":  # a mask read from a per-thread buffer guards block-wide work (barriers)
            lines += [ind + f"if m[{rng.randrange(w)}] % 2 != 0:",
                      ind + "    copy(Y[bx, 0:th], s)",
                      ind + "    for i in Parallel(th):",
                      ind + "        s[i] = s[i] * 2.0",
                      ind + "acc += s[tx]"]
        elif kind == "shared":
            lines += [ind + "s[tx] = acc + v[tx % w]",
                      ind + f"acc += s[(tx + {rng.randint(1, threads - 1)}) % th]"]
        else:
            lines += [ind + f"for i in serial(tx % {rng.choice([1, 3, 5])}):",
                      ind + f"    acc += v[i % w] * {_expr(rng, ['f32(i)'], 1)}"]
    lines.append(ind + "O[bx, tx] = acc + v[tx % w] + f32(m[tx % w])")
    return "\n".join(lines) + "\n"


def _expr(rng: random.Random, names: list[str], depth: int) -> str:
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(names + ["1", "2.0", "0.5", "bm", "bx", "3"]) if names else rng.choice(["1", "2.0", "0.5"])
    op = rng.choice(["+", "-", "*", "/", "max", "min", "exp2", "if", "cast", "neg"])
    a, b = _expr(rng, names, depth - 1), _expr(rng, names, depth - 1)
    if op in ("max", "min"):
        return f"{op}({a}, {b})"
    if op == "exp2":
        return f"exp2({a})"
    if op == "if":
        return f"if_then_else({a} < {b}, {a}, {b})"
    if op == "cast":
        return f"{rng.choice(['f32', 'f16', 'i32'])}({a})"
    if op == "neg":
        return f"-({a})"
    return f"({a} {op} {b})"


def _statement(rng: random.Random, ind: str) -> list[str]:
    kind = rng.choice(["parallel", "reduce", "if", "serial", "local"])
    if kind == "parallel":
        return [f"{ind}for i, j in Parallel(bm, bn):",
                f"{ind}    acc[i, j] = {_expr(rng, ['acc[i, j]', 'i', 'j', 'row[i]'], 3)}"]
    if kind == "reduce":
        op = rng.choice(["reduce_sum", "reduce_max", "reduce_min", "reduce_absmax", "reduce_abssum"])
        return [f"{ind}{op}(acc, row, dim={rng.choice([1, -1, 0, 2])}, clear={rng.choice(['True', 'False'])})",
                f"{ind}for i, j in Parallel(bm, bn):",
                f"{ind}    acc[i, j] = acc[i, j] - row[i]"]
    if kind == "if":
        return [f"{ind}if bx {rng.choice(['<', '>', '=='])} {rng.randint(0, 3)}:",
                f"{ind}    fill(acc, {_expr(rng, [], 2)})"]
    if kind == "serial":
        return [f"{ind}for t in range({rng.choice([1, 2, 4, 'bk'])}):",
                f"{ind}    for i, j in Parallel(bm, bn):",
                f"{ind}        acc[i, j] = acc[i, j] * {_expr(rng, ['t'], 1)}"]
    return [f"{ind}tmp = alloc_local(({rng.choice([1, 4, 8])},), f32)",
            f"{ind}for i in Serial({rng.choice([1, 4])}):",
            f"{ind}    tmp[i] = {_expr(rng, ['i'], 2)}"]


# ---------------------------------------------------------------------------- running


class _Hang(Exception):
    pass


@dataclasses.dataclass
class Outcome:
    output: str
    status: str  # "ok" | "rejected" | "internal" | "malformed" | "slow" | "hang"
    seconds: float  # CPU time of the compile
    message: str = ""
    wall: float = 0.0


def _alarm(signum, frame):
    raise _Hang()


def run_case(case: Case, output: str, slow_s: float = SLOW_S, hang_s: float = HANG_S) -> Outcome:
    """Compile `case` to one output and classify what happened."""
    import tilec
    from tilec.diagnostics import CompileError, render

    target = None if output == "ir" else output
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_s)
    t, cpu = time.perf_counter(), time.process_time()

    def spent() -> float:
        return time.process_time() - cpu

    try:
        try:
            result = tilec.compile(case.name, text=case.text, include_dirs=include_dirs(),
                                   defines=case.parsed_defines(), target=target)
            result.ir()
            diags, sources, status = result.diagnostics, result.sources, "ok"
            if any(d.severity == "error" for d in diags):
                return Outcome(output, "malformed", spent(), "errors reported without failing")
        except CompileError as e:
            diags, sources, status = e.diagnostics, getattr(e, "sources", None), "rejected"
            if not any(d.severity == "error" for d in diags):
                return Outcome(output, "malformed", spent(), f"CompileError without an error: {diags}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        seconds = spent()
        for d in diags:
            first = render(d, sources).splitlines()[0]
            if not re.match(r"^(tilec|.+?:\d+:\d+): (error|warning|note): \S", first):
                return Outcome(output, "malformed", seconds, first)
            if d.span is not None and d.span.line > 0 and (sources is None or
                                                            sources.line(d.span.file, d.span.line) is None):
                return Outcome(output, "malformed", seconds, f"points at a line that does not exist: {first}")
        wall = time.perf_counter() - t
        if seconds > slow_s:
            return Outcome(output, "slow", seconds, diags[0].message[:200] if diags else "", wall)
        return Outcome(output, status, seconds, diags[0].message[:200] if diags and status == "rejected" else "",
                       wall)
    except _Hang:
        return Outcome(output, "hang", spent(), f"interrupted after {hang_s} s", time.perf_counter() - t)
    except RecursionError as e:
        return Outcome(output, "internal", spent(), f"RecursionError: {e}", time.perf_counter() - t)
    except Exception as e:  # noqa: BLE001 - exactly what the fuzzer looks for
        return Outcome(output, "internal", spent(), f"{type(e).__name__}: {e}"[:300], time.perf_counter() - t)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


BAD = ("internal", "malformed", "slow", "hang")


# ---------------------------------------------------------------------------- differential checks


def differential(case: Case, targets=("sm80", "gfx90a"), seed: int = 0, max_threads_x_blocks: int = 4096,
                 ascend: bool = False) -> str:
    """For a case that only changes consts and compiles: the Tile IR interpreter against the SIMT
    interpreter on each target's lowering, at small random sizes (some not a multiple of a tile), and with
    `ascend` against tilec's CPU model of the AscendC API running the ascend910b source, where that back end
    accepts the kernel (it refuses per-thread code: it has no threads; the model needs g++).
    Returns "" when they agree (or the case is out of scope), else a description."""
    import numpy as np

    import tilec
    from tilec.diagnostics import CompileError
    from tilec.interp import random_inputs, run_kernel
    from tilec.simt.interp import SimtInterpreterError, run_simt
    from tilec.targets.registry import lookup
    from tilec.testing.differential import mismatches, prepare_outputs

    if case.how == "threads":  # per-thread code: every SIMT target's lowering (issue #27's class)
        targets = ("sm80", "sm90", "gfx942", "webgpu")
    try:
        base = tilec.compile(case.name, text=case.text, include_dirs=include_dirs(), defines=case.parsed_defines())
    except CompileError:
        return ""
    rng = random.Random(seed)
    problems = []
    for target in targets:
        try:
            lowered = tilec.compile(case.name, text=case.text, include_dirs=include_dirs(),
                                    defines=case.parsed_defines(), target=target)
        except CompileError:
            continue
        for tk, sk in zip(base.module.kernels, lowered.simt.kernels, strict=False):
            if sk.attrs.get("internal") or tk.name != sk.name:
                continue
            sizes = {v.name: rng.choice([1, 7, 16, 33, 50, 64]) for v in tk.size_vars}
            try:
                args = random_inputs(tk, sizes, seed)
            except Exception:  # noqa: BLE001 - dtypes the interpreter does not hold: out of scope
                continue
            prepare_outputs(tk, args, seed)  # NaN, or the same finite values where the kernel accumulates
            want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
            try:
                run_kernel(tk, want)
            except Exception:  # noqa: BLE001 - the oracle refuses (e.g. an out-of-bounds access): no reference
                continue
            try:
                grid = run_grid_size(sk, sizes)
            except Exception:  # noqa: BLE001
                continue
            if grid * sk.threads > max_threads_x_blocks:
                continue
            try:
                run_simt(sk, args, sizes, warp_size=lookup(target).warp_size)
            except SimtInterpreterError as e:
                problems.append(f"{target} {tk.name} {sizes}: SIMT interpreter: {e}")
                continue
            problems += [f"{target} {tk.name} {sizes}: {m}" for m in mismatches(tk, args, want, sizes)]
    if ascend:
        problems += _ascend_differential(case, base, rng, seed)
    return "; ".join(problems)


def _ascend_differential(case: Case, base, rng: random.Random, seed: int, max_blocks: int = 32) -> list[str]:
    """The interpreter against the AscendC model (tilec/targets/ascend/model_run.py) on each kernel the ascend910b
    back end builds: outputs start as NaN (accumulated ones from the same finite values), compared by
    tilec/testing/differential.py. A kernel the model refuses (a compile error against the API, a failed check,
    a deadlock) is a finding too."""
    import numpy as np

    import tilec
    from tilec.diagnostics import CompileError
    from tilec.interp import random_inputs, run_kernel
    from tilec.targets.ascend.model_run import ModelError, build_runner, run_on_model
    from tilec.testing.differential import mismatches, prepare_outputs

    try:
        lowered = tilec.compile(case.name, text=case.text, include_dirs=include_dirs(),
                                defines=case.parsed_defines(), target="ascend910b")
    except CompileError:
        return []
    problems = []
    for tk in base.module.kernels:
        program = next((p for p in lowered.simt if p.name == tk.name), None)
        if program is None:
            continue
        for _ in range(8):  # sizes of at most `max_blocks` blocks: the model runs them on four threads, under ASan
            sizes = {v.name: rng.choice([1, 7, 16, 33, 50, 64]) for v in tk.size_vars}
            try:
                if run_grid_size(tk, sizes) <= max_blocks:
                    break
            except Exception:  # noqa: BLE001 - a grid the formulas cannot evaluate: out of scope
                break
        else:
            continue
        try:
            args = random_inputs(tk, sizes, seed)
        except Exception:  # noqa: BLE001 - dtypes the interpreter does not hold: out of scope
            continue
        prepare_outputs(tk, args, seed)
        want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
        try:
            run_kernel(tk, want)
        except Exception:  # noqa: BLE001 - the oracle refuses (a contract, an out-of-bounds access): no reference
            continue
        try:
            run_on_model(build_runner(lowered.source, program), program, {**sizes, **args}, cores=4)
        except ModelError as e:
            problems.append(f"ascend910b {tk.name} {sizes}: AscendC model: {str(e)[:500]}")
            continue
        problems += [f"ascend910b {tk.name} {sizes}: {m}" for m in mismatches(tk, args, want, sizes)]
    return problems


def run_grid_size(sk, sizes: dict[str, int]) -> int:
    """The number of blocks a SIMT kernel launches at these sizes (by evaluating its grid formulas)."""
    from tilec.ir.formula import formula
    from tilec.runtime.formulas import evaluate

    n = 1
    for g in sk.grid:
        n *= max(1, int(evaluate(formula(g), {**sizes, "num_sms": 3})))
    return n


# ---------------------------------------------------------------------------- the crash corpus


CORPUS_DIR = ROOT / "tests" / "fuzz_corpus"


def save_finding(case: Case, outcome: Outcome, directory: Path = CORPUS_DIR) -> Path:
    """Keep a finding for replay: NAME.tile (the input) and NAME.json (how to compile it)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{outcome.status}_{case.key()}"
    (directory / f"{stem}.tile").write_text(case.text)
    (directory / f"{stem}.json").write_text(json.dumps({
        "outputs": [outcome.output], "defines": case.defines,
        "compiled_as": str(Path(case.name).relative_to(ROOT)) if Path(case.name).is_relative_to(ROOT) else case.name,
        "found": f"{outcome.status}: {outcome.message}", "how": case.how}, indent=1) + "\n")
    return directory / f"{stem}.tile"


def load_corpus(directory: Path = CORPUS_DIR) -> list[tuple[Case, list[str]]]:
    """Every saved finding, as a Case compiled where it was found, with the outputs to replay."""
    out = []
    for meta_path in sorted(directory.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        text = meta_path.with_suffix(".tile").read_text()
        defines = dict(meta.get("defines", {}))
        name = str(ROOT / meta.get("compiled_as", meta_path.with_suffix(".tile").name))
        out.append((Case(name, text, defines, how="corpus"), list(meta.get("outputs", OUTPUTS))))
    return out
