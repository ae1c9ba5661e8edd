"""One artifact that picks its configuration per shape: the build side of a tuning database entry.

When a database entry applies to a compile (tilec.tuning.database.entry_for), `plan_for` selects the few
configurations that win across its shapes. With one, the artifact is simply that configuration. With several,
each is compiled as its own kernel (`gemm__cfg0`, `gemm__cfg1`, ...) and the sources are merged into one C++
translation unit (CUDA and HIP; a WGSL build takes the configuration that alone serves the tuned shapes best).
The manifest gains a dispatch table that tilec.runtime (tilec/runtime/dispatch.py) and the generated C launcher
evaluate at launch: the public name runs the configuration of the tuned shape nearest to the launch's sizes
(distance: the sum over the tuned sizes of |log2 a - log2 b|).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import database

# Generated languages whose sources merge into one translation unit (C++: a namespace per variant)
MERGEABLE_SOURCES = ("cu", "hip")


def suffix(i: int) -> str:
    return f"__cfg{i}"


@dataclass
class DispatchPlan:
    entry: dict
    configs: list[dict]
    per_shape: list[int]

    def variants(self, opts, source_kind: str) -> list[tuple[object, str]]:
        """(options, kernel-name suffix) of each kernel variant the artifact holds."""
        def with_config(config):
            return opts.replace(defines=tuple(sorted({**dict(opts.defines), **config}.items())))

        if len(self.configs) == 1 or source_kind not in MERGEABLE_SOURCES:
            return [(with_config(self.configs[0]), "")]
        return [(with_config(c), suffix(i)) for i, c in enumerate(self.configs)]

    def manifest(self, kernel: str, variants: int, sequences: set[str] = frozenset()) -> dict:
        """The manifest's "tuning" record and, with several variants, the "dispatch" table; a variant named in
        `sequences` is a multi-launch kernel (its config says "launches": true: the manifest's "launches" entry of
        that name runs it)."""
        e = self.entry
        out: dict = {"tuning": {"gpu": e.get("gpu"), "date": e.get("date"), "source_hash": e.get("source_hash"),
                                "shapes": len(e["shapes"]), "configs": self.configs[:variants]}}
        if variants > 1:
            names = sorted({n for s in e["shapes"] for n in s["sizes"]})
            out["dispatch"] = {kernel: {
                "sizes": names,
                "configs": [{"kernel": kernel + suffix(i), "consts": c,
                             **({"launches": True} if kernel + suffix(i) in sequences else {})}
                            for i, c in enumerate(self.configs)],
                "rules": [{"at": s["sizes"], "config": ci} for s, ci in zip(e["shapes"], self.per_shape,
                                                                             strict=True)],
            }}
        return out


def plan_for(source, opts) -> DispatchPlan | None:
    """The configurations a build of `source` with `opts` carries, from the tuning database; None without one."""
    entry = database.entry_for(source, opts)
    if entry is None or not entry.get("shapes"):
        return None
    configs, per_shape = database.select(entry)
    return DispatchPlan(entry, configs, per_shape)


def compile_variant(compile_ir, source, target: str, opts, kernel_suffix: str, text):
    """One variant's CompileResult: `compile_ir` (tilec.driver.compile) with its kernels renamed."""
    from .space import TuneContext, building

    with building((), TuneContext(kernel_suffix=kernel_suffix)):
        return compile_ir(source, opts.replace(targets=(target,)), text=text)


def header_dispatch(text: str, kernel: str, table: dict, sizes: list[str], api, prefix: str = "") -> str:
    """Add `<prefix><kernel>_launch` to a C launcher holding the variants' launchers: it computes the same choice as
    tilec.runtime.dispatch.choose (`<prefix><kernel>_config`) and calls the chosen variant's launcher. When a
    variant is a multi-launch kernel (its config says "launches"), `<prefix><kernel>_workspace_bytes` and
    `<prefix><kernel>_launch_with_workspace` are added too, as a multi-launch kernel has them. `sizes`: the runtime
    sizes the launch functions take last, in order; `api`: the launcher's spellings (the SequenceApi the back end's
    C launcher defines: CUDA's header and object, HIP's object)."""
    import re

    from ..runtime.dispatch import log2_approx

    first = f"{prefix}{table['configs'][0]['kernel']}_launch"
    m = re.search(r"^(?:static inline )?" + re.escape(api.result) + " " + re.escape(first) + r"\(([^)]*)\)", text,
                  re.M)
    if m is None:
        return text
    params = [a.strip() for a in m.group(1).split(",")]
    names = [a.split()[-1] for a in params]
    size_c = dict(zip(sizes, names[len(names) - len(sizes):], strict=True))  # the launchers end with the sizes
    if not set(table["sizes"]) <= set(size_c):
        return text
    tuned = [size_c[n] for n in table["sizes"]]
    q, ok, bad = api.qualifier, api.success, api.invalid
    fname = f"{prefix}{kernel}_launch"
    cname = f"{prefix}{kernel}_config"
    at = ", ".join("{" + ", ".join(f"{log2_approx(r['at'][n])!r}" for n in table["sizes"]) + "}"
                   for r in table["rules"])
    picks = ", ".join(str(r["config"]) for r in table["rules"])

    def switch(call) -> str:
        cases = "\n".join(f"    case {i}: return {call(i, c)};" for i, c in enumerate(table["configs"]))
        return (f"  switch ({cname}({', '.join(tuned)})) {{\n{cases}\n    default: return {bad};\n  }}")

    def plain(i, c):
        return f"{prefix}{c['kernel']}_launch({', '.join(names)})"

    code = f"""
/* {cname}: the index of the tuned configuration that serves a launch of '{kernel}' with these sizes: that of the
 * tuned shape nearest to them (sum over {', '.join(table['sizes'])} of |log2 a - log2 b|, log2 linear between
 * powers of two), as the manifest's "dispatch" table and tilec.runtime choose it. */
#ifndef TILEC_DISPATCH_LOG2_
#define TILEC_DISPATCH_LOG2_
static inline double tilec_dispatch_log2_(int v) {{
  double x = v > 1 ? (double)v : 1.0;
  int e = 0;
  while (x >= 2.0) {{ x /= 2.0; e++; }}
  return e + (x - 1.0);
}}
#endif
{q}int {cname}({', '.join(f'int {n}' for n in tuned)}) {{
  static const double at[{len(table['rules'])}][{len(tuned)}] = {{{at}}};
  static const int pick[{len(table['rules'])}] = {{{picks}}};
  const double here[{len(tuned)}] = {{{', '.join(f'tilec_dispatch_log2_({n})' for n in tuned)}}};
  double best = 1e300;
  int chosen = 0;
  for (int r = 0; r < {len(table['rules'])}; r++) {{
    double d = 0;
    for (int s = 0; s < {len(tuned)}; s++) d += here[s] > at[r][s] ? here[s] - at[r][s] : at[r][s] - here[s];
    if (d < best) {{ best = d; chosen = pick[r]; }}
  }}
  return chosen;
}}
/* {fname}: launch '{kernel}' in the configuration {cname} chooses; the arguments are those of {first}. */
{q}{api.result} {fname}({', '.join(params)}) {{
{switch(plain)}
}}
"""
    if any(c.get("launches") for c in table["configs"]):
        all_sizes = [size_c[n] for n in sizes]
        ws_name = f"{prefix}{kernel}_workspace_bytes"
        with_name = f"{prefix}{kernel}_launch_with_workspace"

        def bytes_of(i, c):
            if c.get("launches"):
                return f"{prefix}{c['kernel']}_workspace_bytes({', '.join([*all_sizes, 'bytes'])})"
            return f"(bytes == NULL ? {bad} : (*bytes = 0, {ok}))"

        def with_ws(i, c):
            if c.get("launches"):
                return f"{prefix}{c['kernel']}_launch_with_workspace({', '.join([names[0], 'workspace', *names[1:]])})"
            return plain(i, c)

        code += f"""/* {ws_name}: the bytes of device memory a launch of '{kernel}' with these sizes needs as its
 * workspace (0 when {cname} chooses a configuration of one launch). */
{q}{api.result} {ws_name}({', '.join([*(f'int {n}' for n in all_sizes), 'size_t* bytes'])}) {{
{switch(bytes_of)}
}}
/* {with_name}: {fname} with the caller's workspace, for a configuration of several launches: at
 * least {ws_name} bytes, 256-byte aligned (unused, and may be null, when that is 0). */
{q}{api.result} {with_name}({', '.join([params[0], f'{api.ptr} workspace', *params[1:]])}) {{
{switch(with_ws)}
}}
"""
    check = f"{prefix}{table['configs'][0]['kernel']}_check_device"
    if re.search(r"^static inline " + re.escape(api.result) + " " + re.escape(check) + r"\(", text, re.M):
        code += f"""/* {prefix}{kernel}_check_device: as {check} (the variants share the images). */
static inline {api.result} {prefix}{kernel}_check_device(CUdevice dev, char* message, size_t message_size) {{
  return {check}(dev, message, message_size);
}}
"""
    if text.rstrip().rsplit("\n", 1)[-1].startswith("#endif"):  # a header: inside its include guard
        end = text.rstrip().rfind("#endif")
        return text[:end] + code.lstrip("\n") + "\n" + text[end:]
    return text.rstrip("\n") + "\n" + code  # a launcher compiled into an object


def variants_unit(unit_type, results: list, suffixes: list[str], kernel_entries):
    """The back end's Unit for one target from its variants' CompileResults: the merged source and every variant's
    kernel entries. The results' Tile IR kernels get their public names back, so that a caller comparing the
    artifact's public kernel with the interpreter (`tilec run --check`) finds it."""
    entries = [e for r in results for e in kernel_entries(r)]
    source = merged_source([r.source for r in results], [r.module.kernels[0].name for r in results])
    for r, sfx in zip(results, suffixes, strict=True):
        if sfx:
            public_names(r.module, sfx)
    return unit_type(results[0].target, source, entries, results[0].simt if len(results) == 1 else None)


def public_names(module, sfx: str) -> None:
    """Undo tilec.tuning.space.rename_kernels on a variant's Tile IR module: its kernels, stages and multi-launch
    functions get their public names back."""
    for k in module.kernels:
        of = k.stage_of
        if of:
            base = of.removesuffix(sfx)
            k.name = base + k.name[len(of):]
            k.attrs["stage_of"] = base
        else:
            k.name = k.name.removesuffix(sfx)
    for seq in module.launches:
        base = seq.name.removesuffix(sfx)
        for st in seq.stages:
            st.kernel = base + st.kernel[len(seq.name):]
        seq.name = base


def merged_source(sources: list[str], kernels: list[str]) -> str:
    """One translation unit from the sources of several variants of a kernel: the first whole, then of each
    other what follows the text it shares with the first (the device header and common helpers), inside a
    namespace of its own, so that helpers the variants both generate (`tl_wgmma_ss_n128_f16_t1`) do not clash.
    The kernels are `extern "C"`, so their symbol names stay unqualified."""
    if len(sources) == 1:
        return sources[0]
    first = sources[0].split("\n")
    parts = [sources[0]]
    for i, (text, name) in enumerate(zip(sources[1:], kernels[1:], strict=True), start=1):
        lines = text.split("\n")
        shared = 0
        while shared < min(len(first), len(lines)) and first[shared] == lines[shared] and name not in lines[shared]:
            shared += 1
        # back up to a blank line so that a declaration the two share only in part is repeated whole
        while shared > 0 and lines[shared - 1].strip():
            shared -= 1
        own = "\n".join(lines[shared:])
        parts.append(f"namespace tilec_variant{i} {{\n{own}\n}}  // namespace tilec_variant{i}\n")
    return "\n".join(parts)
