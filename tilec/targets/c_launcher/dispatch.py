"""A tuned kernel's dispatcher in the C launcher, generated from the manifest's "dispatch" table.

An artifact built with a tuning database holds several variants of a kernel (`gemm__cfg0`, `gemm__cfg1`, ...), each
with the launch functions of any kernel (header.py; HIP's hip/launcher.py). For the public name the launcher adds

    int K_config(int size...);              the index of the variant that serves these sizes
    RESULT K_launch(STREAM stream, ...);    the chosen variant's K__cfgI_launch, with the same arguments

and, when a variant is a multi-launch kernel (its config says "launches": true), `K_workspace_bytes` and
`K_launch_with_workspace` as a multi-launch kernel has them; with CUDA, `K_check_device` as the variants'. The
choice is tilec.runtime.dispatch.choose's: the rule whose tuned sizes are nearest in the sum of
|log2 a - log2 b| (tilec.manifest.log2_approx, computed in C the same way; among the tuned shapes of the
launch's row alignment where the table has both kinds, tilec.manifest.rule_classes_match), among the variants whose
"when"
condition holds (tilec.manifest.condition_value, rendered in C by `c_condition`; K_config also takes the sizes a
condition reads beyond the tuned ones); with a cost model (tilec.runtime.cost_model), the variant of least
predicted time near that rule, its terms' formulas in C (K_config then takes every size they read). Everything is
written from data: the table, the first variant's entry (its
parameters, named as its launch function names them) and the API's spellings (header.SequenceApi).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...manifest import (
    ALIGNED_KEY,
    COST_KEY,
    LAUNCHES_KEY,
    SCALE_KEY,
    WHEN_KEY,
    condition_names,
    log2_approx,
)
from .header import _C_TYPES, SequenceApi, _c_name, formula_names, formula_to_c


@dataclass(frozen=True)
class CFunction:
    """A function the dispatcher defines: its return type, name and parameter declarations."""

    result: str
    name: str
    params: tuple[str, ...]

    def prototype(self) -> str:
        return f"{self.result} {self.name}({', '.join(self.params)});"


_C_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def c_condition(tree, names: dict[str, str]) -> str:
    """A manifest condition tree (tilec.manifest.WHEN_KEY) as a C expression over long long, its sizes by their C
    names; // and % through helpers that round toward minus infinity and give 0 for a zero divisor, as
    tilec.manifest.condition_value does."""
    if isinstance(tree, bool | int):
        return f"{int(tree)}LL"
    if isinstance(tree, str):
        return f"(long long){names[tree]}"
    op, *args = tree
    parts = [c_condition(a, names) for a in args]
    if op in ("and", "or"):
        return "(" + (" && " if op == "and" else " || ").join(parts) + ")"
    if op == "not":
        return f"(!{parts[0]})"
    if op == "neg":
        return f"(-{parts[0]})"
    if op == "//":
        return f"tilec_dispatch_floordiv_({parts[0]}, {parts[1]})"
    if op == "%":
        return f"tilec_dispatch_mod_({parts[0]}, {parts[1]})"
    if op in _C_COMPARISONS or op in ("+", "-", "*"):
        return f"({parts[0]} {op} {parts[1]})"
    raise ValueError(f"a dispatch condition has the unknown operator {op!r}")


_C_CONDITION_HELPERS = """#ifndef TILEC_DISPATCH_DIV_
#define TILEC_DISPATCH_DIV_
static inline long long tilec_dispatch_floordiv_(long long a, long long b) {
  if (b == 0) return 0;
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline long long tilec_dispatch_mod_(long long a, long long b) {
  return b == 0 ? 0 : a - b * tilec_dispatch_floordiv_(a, b);
}
#endif
"""


def launch_parameters(entry: dict, api: SequenceApi, sequence: bool) -> list[tuple[str, str]]:
    """(C type, C name) of each parameter of the launch function of `entry` -- a kernel entry, or a "launches" entry
    when `sequence` -- as the launchers declare it: the stream, the kernel's parameters, its sizes. The names are
    those header.py and hip/launcher.py give (a name C reserves, or the launch function's own, gets a `_`)."""
    taken = {"stream", "workspace", "bytes"} if sequence else {"stream"}
    out = [(api.stream, "stream")]
    for prm in entry["params"]:
        out.append((api.ptr if prm["kind"] == "tensor" else _C_TYPES[prm["dtype"]], _c_name(prm["name"], taken)))
    out += [("int", _c_name(s, taken)) for s in entry["sizes"]]
    return out


def dispatchers(dispatch: dict | None, entries: list[dict], api: SequenceApi, prefix: str,
                check_device: bool) -> tuple[str, list[CFunction]]:
    """The C code of the dispatchers of the manifest's "dispatch" mapping (public name -> table), which a launcher
    places after its kernels' functions, and the functions it defines, in order. `entries`: the artifact's kernel
    entries and "launches" entries (a config with "launches" names one of the latter); `check_device`: the variants
    have `_check_device` functions (CUDA). A table whose first variant is absent, or whose tuned sizes are not among
    its sizes, gets no dispatcher."""
    entries = {e["name"]: e for e in entries}
    code, functions = "", []
    for kernel, table in (dispatch or {}).items():
        c, f = _dispatcher(kernel, table, entries, api, prefix, check_device)
        code += c
        functions += f
    return code, functions


def _cost_code(table: dict, size_c: dict[str, str], guarded: bool) -> str:
    """The cost model's choice near the nearest tuned shape (tilec.runtime.cost_model.cost_choice), in the same
    order of floating-point operations, so that C and Python pick alike."""
    rows = ", ".join("{" + ", ".join(repr(float(x)) if x is not None else "-1.0" for x in r[SCALE_KEY]) + "}"
                     for r in table["rules"])
    lines = ["  if (nearest >= 0) {  /* the cost model: least predicted time, scaled by its error at that shape */",
             f"    static const double scale[{len(table['rules'])}][{len(table['configs'])}] = {{{rows}}};",
             "    const double blend = 1.0 / (1.0 + best);",
             "    double low = 1e300, p;"]
    for i, c in enumerate(table["configs"]):
        a, b, f, d = (repr(float(x)) for x in c[COST_KEY]["coef"])
        t0, t1, t2 = (f"(double)({formula_to_c(t, size_c)})" for t in c[COST_KEY]["terms"])
        allowed = f" && (!any_ || allowed_[{i}])" if guarded else ""  # none holding: all may run, as in choose
        lines += [f"    if (scale[nearest][{i}] >= 0.0{allowed}) {{",
                  f"      p = ({a} * {t0} + {b} * {t1} + {f} * {t2} + {d})"
                  f" * (1.0 + blend * (scale[nearest][{i}] - 1.0));",
                  f"      if (p < low) {{ low = p; chosen = {i}; }}",
                  "    }"]
    return "\n".join(lines) + "\n  }\n"


def _dispatcher(kernel: str, table: dict, entries: dict[str, dict], api: SequenceApi, prefix: str,
                check_device: bool) -> tuple[str, list[CFunction]]:
    head = table["configs"][0]
    entry = entries.get(head["kernel"])
    if entry is None:
        return "", []
    first = f"{prefix}{head['kernel']}_launch"
    signature = launch_parameters(entry, api, bool(head.get(LAUNCHES_KEY)))
    params = [f"{t} {n}" for t, n in signature]
    names = [n for _, n in signature]
    sizes = list(entry["sizes"])
    size_c = dict(zip(sizes, names[len(names) - len(sizes):], strict=True))  # the launchers end with the sizes
    if not set(table["sizes"]) <= set(size_c):
        return "", []
    conditions = [c.get(WHEN_KEY, True) for c in table["configs"]]
    aligned = table.get(ALIGNED_KEY)
    read = set().union(*(condition_names(w) for w in conditions), condition_names(aligned))
    if not read <= set(size_c):
        return "", []
    costed = all(COST_KEY in c for c in table["configs"]) and all(SCALE_KEY in r for r in table["rules"])
    if costed:  # the cost model's terms may read any of the kernel's sizes
        read |= {n for c in table["configs"] for t in c[COST_KEY]["terms"] for n in formula_names(t)}
        if not read <= set(size_c):
            return "", []
    config_sizes = list(table["sizes"]) + [n for n in sizes if n in read and n not in table["sizes"]]
    tuned = [size_c[n] for n in config_sizes]
    q, ok, bad = api.qualifier, api.success, api.invalid
    fname = f"{prefix}{kernel}_launch"
    cname = f"{prefix}{kernel}_config"
    at = ", ".join("{" + ", ".join(f"{log2_approx(r['at'][n])!r}" for n in table["sizes"]) + "}"
                   for r in table["rules"])
    picks = ", ".join(str(r["config"]) for r in table["rules"])
    functions = [CFunction("int", cname, tuple(f"int {n}" for n in tuned)), CFunction(api.result, fname, tuple(params))]

    def switch(call) -> str:
        cases = "\n".join(f"    case {i}: return {call(i, c)};" for i, c in enumerate(table["configs"]))
        return (f"  switch ({cname}({', '.join(tuned)})) {{\n{cases}\n    default: return {bad};\n  }}")

    def plain(i, c):
        return f"{prefix}{c['kernel']}_launch({', '.join(names)})"

    here = ", ".join(f"tilec_dispatch_log2_({size_c[n]})" for n in table["sizes"])
    cost_code = _cost_code(table, size_c, guarded=any(w is not True for w in conditions)) if costed else ""
    guarded = any(w is not True for w in conditions)
    allowed = ""
    if guarded:
        tests = ", ".join(f"!!{c_condition(w, size_c)}" for w in conditions)
        allowed = (f"  const int allowed_[{len(conditions)}] = {{{tests}}};\n"
                   f"  int any_ = 0;\n  for (int c = 0; c < {len(conditions)}; c++) any_ |= allowed_[c];\n")
    skip = "    if (any_ && !allowed_[pick[r]]) continue;\n" if guarded else ""
    fallback = (f"  if (best == 1e300) for (int c = 0; c < {len(conditions)}; c++) if (allowed_[c]) return c;\n"
                if guarded else "")
    alignment = ""
    if aligned is not None:  # tilec.manifest.rule_classes_match: the rules of the launch's class, if any may run
        rules = len(table["rules"])
        classes = ", ".join(str(int(bool(r.get(ALIGNED_KEY, True)))) for r in table["rules"])
        runs = " && (!any_ || allowed_[pick[r]])" if guarded else ""
        alignment = (f"  static const int aligned_at[{rules}] = {{{classes}}};\n"
                     f"  const int aligned_here = !!{c_condition(aligned, size_c)};\n"
                     f"  int class_any_ = 0;\n"
                     f"  for (int r = 0; r < {rules}; r++) if (aligned_at[r] == aligned_here{runs}) class_any_ = 1;\n")
        skip += "    if (class_any_ && aligned_at[r] != aligned_here) continue;\n"
    code = f"""
/* {cname}: the index of the tuned configuration that serves a launch of '{kernel}' with these sizes: that of the
 * tuned shape nearest to them (sum over {', '.join(table['sizes'])} of |log2 a - log2 b|, log2 linear between
 * powers of two){' among the configurations whose when= condition holds (all, when none does)' if guarded else ''},
 * as the manifest's "dispatch" table and tilec.runtime choose it. */
{_C_CONDITION_HELPERS if guarded or aligned is not None else ''}#ifndef TILEC_DISPATCH_LOG2_
#define TILEC_DISPATCH_LOG2_
static inline double tilec_dispatch_log2_(int v) {{
  double x = v > 1 ? (double)v : 1.0;
  int e = 0;
  while (x >= 2.0) {{ x /= 2.0; e++; }}
  return e + (x - 1.0);
}}
#endif
{q}int {cname}({', '.join(f'int {n}' for n in tuned)}) {{
  static const double at[{len(table['rules'])}][{len(table['sizes'])}] = {{{at}}};
  static const int pick[{len(table['rules'])}] = {{{picks}}};
  const double here[{len(table['sizes'])}] = {{{here}}};
{allowed}{alignment}  double best = 1e300;
  int chosen = 0{", nearest = -1" if costed else ""};
  for (int r = 0; r < {len(table['rules'])}; r++) {{
{skip}    double d = 0;
    for (int s = 0; s < {len(table['sizes'])}; s++) d += here[s] > at[r][s] ? here[s] - at[r][s] : at[r][s] - here[s];
    if (d < best) {{ best = d; chosen = pick[r];{" nearest = r;" if costed else ""} }}
  }}
{fallback}{cost_code}  return chosen;
}}
/* {fname}: launch '{kernel}' in the configuration {cname} chooses; the arguments are those of {first}. */
{q}{api.result} {fname}({', '.join(params)}) {{
{switch(plain)}
}}
"""
    if any(c.get(LAUNCHES_KEY) for c in table["configs"]):
        all_sizes = [size_c[n] for n in sizes]
        ws_name = f"{prefix}{kernel}_workspace_bytes"
        with_name = f"{prefix}{kernel}_launch_with_workspace"
        ws_params = [*(f'int {n}' for n in all_sizes), 'size_t* bytes']
        with_params = [params[0], f'{api.ptr} workspace', *params[1:]]
        functions += [CFunction(api.result, ws_name, tuple(ws_params)),
                      CFunction(api.result, with_name, tuple(with_params))]

        def bytes_of(i, c):
            if c.get(LAUNCHES_KEY):
                return f"{prefix}{c['kernel']}_workspace_bytes({', '.join([*all_sizes, 'bytes'])})"
            return f"(bytes == NULL ? {bad} : (*bytes = 0, {ok}))"

        def with_ws(i, c):
            if c.get(LAUNCHES_KEY):
                return f"{prefix}{c['kernel']}_launch_with_workspace({', '.join([names[0], 'workspace', *names[1:]])})"
            return plain(i, c)

        code += f"""/* {ws_name}: the bytes of device memory a launch of '{kernel}' with these sizes needs as its
 * workspace (0 when {cname} chooses a configuration of one launch). */
{q}{api.result} {ws_name}({', '.join(ws_params)}) {{
{switch(bytes_of)}
}}
/* {with_name}: {fname} with the caller's workspace, for a configuration of several launches: at
 * least {ws_name} bytes, 256-byte aligned (unused, and may be null, when that is 0). */
{q}{api.result} {with_name}({', '.join(with_params)}) {{
{switch(with_ws)}
}}
"""
    if check_device:
        check = f"{prefix}{head['kernel']}_check_device"
        device = ("CUdevice dev", "char* message", "size_t message_size")
        functions.append(CFunction(api.result, f"{prefix}{kernel}_check_device", device))
        code += f"""/* {prefix}{kernel}_check_device: as {check} (the variants share the images). */
static inline {api.result} {prefix}{kernel}_check_device(CUdevice dev, char* message, size_t message_size) {{
  return {check}(dev, message, message_size);
}}
"""
    if not any(c.get(LAUNCHES_KEY) for c in table["configs"]):  # K_check_sizes of each variant (size_checks.py)
        all_sizes = [size_c[n] for n in sizes]
        sized = (*(f"int {n}" for n in all_sizes), "char* message", "size_t message_size")
        forwarded = ", ".join([*all_sizes, "message", "message_size"])
        functions.append(CFunction(api.result, f"{prefix}{kernel}_check_sizes", sized))
        code += f"""/* {prefix}{kernel}_check_sizes: that of the configuration {cname} chooses. */
{q}{api.result} {prefix}{kernel}_check_sizes({', '.join(sized)}) {{
{switch(lambda i, c: f"{prefix}{c['kernel']}_check_sizes({forwarded})")}
}}
"""
    return code, functions
