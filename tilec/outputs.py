"""An artifact and its manifest, through the compile cache, for every back end: the plain build under
`tilec.compile(..., emit=KIND)`, which tilec/tuning/multi.py calls with the variants a tuning database selects.

The cache (tilec/cache.py) is consulted before anything heavy is imported: the key is made from the source
file's bytes, the CompileOptions, the output kind and name, tilec's own sources and the identity of the back
end's toolchain (Backend.toolchain_identity: paths and mtimes, no subprocess). A hit returns the stored bytes
without importing the parser, the passes, numpy or a toolchain. A miss compiles every target through the
driver, hands the generated code to the back end's `build`, writes the manifest and stores the result, with
the files the compile read and the import candidates that were absent (so that a later edit or a new file
on the import path is a miss).

Variants (several configurations of the kernels in one artifact, each compiled under its own kernel names and
merged into one translation unit per target) come from above, as data (`Variants`): this module knows no tuning
database.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .diagnostics import CompileError, Diagnostic
from .manifest import (
    ALIGNED_KEY,
    COST_KEY,
    DISPATCH_KEY,
    MS_KEY,
    SCALE_KEY,
    TUNING_KEY,
    WHEN_KEY,
    condition_holds,
    rows_aligned_condition,
)
from .options import CompileOptions, resolve


@dataclass
class Artifact:
    """What a compile with `emit` produced (or found in the cache)."""

    kind: str
    data: bytes  # the artifact: a binary, or the generated source for source kinds
    manifest: bytes  # the manifest's JSON text
    deps: list[str]  # the files the compile read (the main file first), for dependency files
    warnings: str  # the compile's diagnostics, rendered without colour ("" for none)
    from_cache: bool = False
    commands: list[str] | None = None  # the toolchain commands (what --dryrun prints); None on a cache hit
    report: str = ""  # text the back end has for the user (--resource-usage)
    result: object | None = None  # the tilec.driver.CompileResult of the first target; None on a cache hit
    toolchain_warnings: list = dataclasses.field(default_factory=list)  # about the binary (spills); in `warnings` too


# Generated languages whose sources merge into one translation unit (C++: a namespace per variant)
MERGEABLE_SOURCES = ("cu", "hip")


@dataclass(frozen=True)
class Variants:
    """The configurations an artifact carries (tilec/tuning/multi.py makes them from a tuning database entry) and
    what the build records of them. With no configurations the build is the options' own."""

    configs: tuple = ()  # per variant: (CompileOptions, the suffix its kernels' names get: "" for one variant)
    key: str | None = None  # what the cache key records of where they come from (the database entry's digest)
    inputs: tuple[str, ...] = ()  # the files read to choose them (the database), for the dependency list
    # the manifest's records of them: "tuning" and, with several variants, "dispatch" (public name -> table, whose
    # configs the build marks "launches": true where the variant is a multi-launch kernel)
    records: dict = dataclasses.field(default_factory=dict)
    # makes the configurations and records when a build needs them (a cache miss): the database's selection takes
    # a tenth of a second that a cache hit, keyed by the entry's digest alone, need not pay
    pending: Callable[[], Variants] | None = None

    def resolved(self) -> Variants:
        return self.pending() if self.pending is not None else self


class NotCached(Exception):
    """compile_artifact(cached_only=True) found no cache entry: the artifact would have to be compiled."""


def compile_artifact(source: str | os.PathLike, options: CompileOptions | None = None, *, emit: str,
                     output_name: str | None = None, text: str | None = None,
                     on_compiled: Callable[[object], None] | None = None, cached_only: bool = False) -> Artifact:
    """Build the artifact of kind `emit` for the options' targets (DEFAULT_TARGET when none), through the cache: the
    plain build, the options' own configuration (tilec.compile adds a tuning database's variants: build_artifact).

    `output_name` is the artifact's file name as the manifest records it (default: the source's stem with the
    kind's suffix). `on_compiled(result)` is called with the first target's CompileResult as soon as the
    source compiled (the command line prints its warnings then, before a slow toolchain runs); a cache hit compiles
    nothing and calls it not at all. `text`
    compiles that text instead of the file's (never cached). `cached_only`: raise NotCached rather than compile
    (the no-JIT guarantee of tilec.load).
    """
    opts = resolved_options(None, options)
    targets, backend = targets_and_backend(source, opts, text)
    return build_artifact(source, opts, targets, backend, emit, output_name, text, on_compiled, cached_only)


def build_artifact(source, opts: CompileOptions, targets, backend, emit: str, output_name: str | None = None,
                   text: str | None = None, on_compiled: Callable[[object], None] | None = None,
                   cached_only: bool = False, variants: Variants | None = None) -> Artifact:
    """compile_artifact once the options are resolved (resolved_options) and their targets and back end known
    (targets_and_backend); `variants`: the configurations the artifact carries (None: the options' own)."""
    own = backend.parse_options(opts)  # the back end's own options, checked before the cache is consulted
    from .targets.backend import BuildRefused

    variants = variants or Variants()

    try:
        backend.check_kind(targets, emit)
    except BuildRefused as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    name = output_name or f"{Path(source).stem}{backend.output_kinds[emit]}"
    key = cache_key(source, opts, targets, backend, emit, name, variants.key, own) \
        if opts.cacheable and text is None else None
    if key is not None:
        from .cache import Cache

        # an entry missing an output, or whose record is not what _store writes, is rebuilt (never an error)
        entry = Cache().lookup(key, require=("artifact", "manifest"), check_info=_usable_info)
        if entry is not None:
            info = entry.meta["info"]
            return Artifact(emit, entry.outputs["artifact"], entry.outputs["manifest"], info["deps"],
                            info.get("warnings", ""), from_cache=True)
    if cached_only:
        raise NotCached(f"{source}: no compile-cache entry for {', '.join(opts.targets)} ({emit})")
    artifact = _build(source, opts, own, targets, backend, emit, name, text, on_compiled, variants.resolved())
    if key is not None:
        _store(key, artifact, list(opts.include_dirs))
    return artifact


def resolved_options(target=None, options: CompileOptions | None = None, **overrides) -> CompileOptions:
    """The options of a compile to an artifact: `options` with `target` and the keywords applied, and the default
    target when none is named."""
    return with_default_target(resolve(target, options, **overrides))


def with_default_target(opts: CompileOptions) -> CompileOptions:
    """The options, naming the default target when they name none."""
    from .targets.registry import DEFAULT_TARGET

    return opts if opts.targets else opts.replace(targets=(DEFAULT_TARGET,))


def targets_and_backend(source, opts: CompileOptions, text: str | None):
    """The Target objects of the options and their one Backend; CompileError for an unknown target, targets of
    several back ends, or a back end this tilec does not have (after checking the source, so that the user
    also learns about errors in it)."""
    from .targets.registry import UnknownTarget, backend_available, get_backend, lookup

    try:
        targets = [lookup(t) for t in opts.targets]
    except UnknownTarget as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    backends = sorted({t.backend for t in targets})
    if len(backends) > 1:
        raise CompileError([Diagnostic("error", f"targets {', '.join(opts.targets)} belong to different back ends "
                                                f"({', '.join(backends)}); build one artifact per back end")])
    first = targets[0]
    if not backend_available(first.backend):
        from .driver import compile as compile_ir

        checked = compile_ir(source, opts.replace(targets=()), text=text)
        err = CompileError([*checked.diagnostics, Diagnostic(
            "error", f"target '{first.name}' ({first.description}) needs the {first.backend} back end, "
            "which this tilec does not have yet; the source was checked and is valid (use --emit-ir to see it)")])
        err.sources = checked.sources  # type: ignore[attr-defined]
        raise err
    if opts.limits:
        try:
            targets = [t.with_limits(**opts.limits_dict) for t in targets]
        except ValueError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
    return targets, get_backend(first.backend)


def _build(source, opts: CompileOptions, own, targets, backend, kind: str, output_name: str, text, on_compiled,
           tuned: Variants) -> Artifact:
    """The artifact: every target's variants compiled, the back end's build, the manifest. `own`: what the back end
    parsed of `opts` (Backend.parse_options), parsed once per artifact."""
    from .artifacts import kernel_entries, launch_entries, manifest, manifest_options, source_hash
    from .diagnostics import render
    from .targets.backend import ArtifactInfo

    variants = list(tuned.configs) or [(opts, "")]
    results, units, launches = [], [], []

    def entries(r):
        return backend.kernel_entries(r) or kernel_entries(r)

    for i, t in enumerate(opts.targets):
        per_variant = [compile_variant(source, t, o, sfx, text) for o, sfx in variants]
        results.append(per_variant[0])
        if i == 0 and opts.werror:
            _refuse_warnings(per_variant[0].diagnostics, per_variant[0].sources)
        if i == 0 and on_compiled is not None:
            on_compiled(results[0])
        if i == 0:  # every variant's multi-launch kernels, under their variant names (before variants_unit)
            launches = [e for r in per_variant if r.module.launches for e in launch_entries(r.module, entries(r))]
            when = {sfx: r.launch_when for r, (_, sfx) in zip(per_variant, variants, strict=True)}
        units.append(variants_unit(per_variant, [sfx for _, sfx in variants], entries, backend.variant_headers()))
    first = results[0]
    forward_ptx, ptx_warnings = _forward_ptx_unit(source, own, targets, backend, kind, units, variants, entries, text)
    if opts.remarks:  # the remarks that need the kernel run: bank conflicts of its shared accesses
        from .inspect.remarks import bank_conflict_remarks

        first.remarks.extend(bank_conflict_remarks(first))
    warnings = "".join(render(d, first.sources, False) + "\n" for d in first.diagnostics)
    deps = unique_paths(first.module.files + list(tuned.inputs))  # with the files the variants were chosen from
    recorded = manifest_options(opts, kind, backend, own)
    tuning = _variant_records(tuned.records, {e["name"] for e in launches}, when)
    _mark_row_alignment(tuning, units[0].kernels)
    _fit_dispatch_costs(tuning, units[0].kernels, launches)

    stem = intermediate_stem(Path(source).stem)
    if opts.keep_dir:  # the toolchain's intermediates stay in DIR: under names no input of this build has
        stem = keep_stem(stem)
        refuse_keep_over_inputs(opts.keep_dir, stem, deps)
    info = ArtifactInfo(stem, output_name, os.path.basename(str(source)),
                        source_hash(first, recorded), tuning.get(DISPATCH_KEY), tuple(launches), forward_ptx)
    built = backend.build(units, kind, own, info)
    built.diagnostics = ptx_warnings + built.diagnostics
    if opts.werror:
        _refuse_warnings(built.diagnostics, first.sources)
    warnings += "".join(render(d, first.sources, False) + "\n" for d in built.diagnostics)
    if opts.dryrun:
        return Artifact(kind, b"", b"", deps, warnings, commands=built.commands, result=first)
    m = manifest(first, kind, [t.arch for t in targets], built.toolchain, recorded, output_name, units[0].kernels,
                 launches)
    m.update(tuning)
    m.update(built.manifest)
    return Artifact(kind, built.data, _dumps(m), deps, warnings, commands=built.commands, report=built.report,
                    result=first, toolchain_warnings=built.diagnostics)


def _forward_ptx_unit(source, own, targets, backend, kind: str, units, variants, entries, text):
    """The Unit whose PTX the artifact carries for newer GPUs (Backend.forward_ptx_target: one of `units`, or the
    generic target compiled for it alone), and a warning when that target cannot compile the kernels (the
    artifact then goes without: its own targets are unaffected)."""
    name = backend.forward_ptx_target(targets, kind, own)
    if name is None:
        return None, []
    for t, u in zip(targets, units, strict=True):
        if t.name == name:
            return u, []
    try:
        per_variant = [compile_variant(source, name, o, sfx, text) for o, sfx in variants]
    except CompileError as e:
        first = e.diagnostics[0].message.splitlines()[0] if e.diagnostics else "?"
        return None, [Diagnostic("warning", f"no forward-compatible PTX in this artifact: the kernels do not compile "
                                            f"for {name} ({first}); GPUs newer than "
                                            f"{', '.join(t.name for t in targets)} will not run it (--no-ptx "
                                            "silences this)")]
    return variants_unit(per_variant, [sfx for _, sfx in variants], entries, backend.variant_headers()), []


# ---------------------------------------------------------------------------- variants


def _variant_records(records: dict, sequences: set[str], when: dict[str, object]) -> dict:
    """The manifest's records of the variants, each dispatch table's configs marked "launches": true where the
    variant is a multi-launch kernel (one of `sequences`: its "launches" entry runs it), and given its "when"
    condition where the variant's build has one (`when`: kernel-name suffix -> CompileResult.launch_when)."""
    out = json.loads(json.dumps(records))  # a copy: the caller's stays as it was
    for name, table in out.get(DISPATCH_KEY, {}).items():
        for c in table["configs"]:
            if c["kernel"] in sequences:
                c["launches"] = True
            condition = when.get(c["kernel"][len(name):], True)
            if condition is not True:
                c[WHEN_KEY] = condition
    return out


def _mark_row_alignment(records: dict, kernels: list[dict]) -> None:
    """Give each dispatch table whose tuned shapes include both 16-byte aligned rows and rows that are not (an odd
    row length) the kernel's alignment condition and each rule its class (tilec.manifest.ALIGNED_KEY), so that the
    dispatch serves a launch from the tuned shapes of its own class first. Tables of one class stay as they were."""
    by_name = {k["name"]: k for k in kernels}
    for table in (records.get(DISPATCH_KEY) or {}).values():
        entry = by_name.get(table["configs"][0]["kernel"])
        if entry is None:
            continue
        tree = rows_aligned_condition(entry["params"])
        try:
            classes = [condition_holds(tree, r["at"]) for r in table["rules"]]
        except ValueError:  # a tuned shape lacks a size the condition reads
            continue
        if len(set(classes)) > 1:
            table[ALIGNED_KEY] = tree
            for rule, aligned in zip(table["rules"], classes, strict=True):
                rule[ALIGNED_KEY] = aligned


def _fit_dispatch_costs(records: dict, kernels: list[dict], launches: list[dict]) -> None:
    """Fit each dispatch table's cost model (tilec/runtime/cost_model.py) to the times its rules carry, from the
    compiled kernels' formulas, for the GPU the database entry was tuned on; a table without every configuration's
    times, for an unknown GPU, or over formulas the model cannot read keeps its nearest-shape dispatch."""
    tuning = records.get(TUNING_KEY) or {}
    tables = [t for t in (records.get(DISPATCH_KEY) or {}).values() if all(MS_KEY in r for r in t["rules"])]
    if not tables or not tuning.get("sms"):
        return
    from .runtime.cost_model import SHARED_PER_SM, fit_dispatch_costs

    sms, shared = tuning["sms"], SHARED_PER_SM.get(str(tuning.get("cc")))
    if not shared:
        return
    by_name, sequences = {k["name"]: k for k in kernels}, {e["name"]: e for e in launches}
    for table in tables:
        try:
            fit_dispatch_costs(table, by_name, sequences, sms, shared)
        except (KeyError, ValueError):  # a formula over a size the tuned shapes do not give, a config not built
            for c in table["configs"]:
                c.pop(COST_KEY, None)
            for r in table["rules"]:
                r.pop(SCALE_KEY, None)


def compile_variant(source, target: str, opts: CompileOptions, kernel_suffix: str, text):
    """One variant's tilec.driver.CompileResult: the source's kernels named with `kernel_suffix` (a tune() build
    context, tilec/parser/tune.py, which the driver's build reads)."""
    from .driver import compile as compile_ir
    from .parser.tune import TuneContext, building

    with building((), TuneContext(kernel_suffix=kernel_suffix)):
        return compile_ir(source, opts.replace(targets=(target,)), text=text)


def variants_unit(results: list, suffixes: list[str], kernel_entries, headers=("", ())):
    """The back end's Unit for one target from its variants' CompileResults: the merged source and every variant's
    kernel entries (`headers`: the back end's variant_headers). The results' Tile IR kernels get their public names
    back, so that a caller comparing the artifact's public kernel with the interpreter (`tilec run --check`) finds
    it."""
    from .targets.backend import Unit

    entries = [e for r in results for e in kernel_entries(r)]
    source = merged_source([r.source for r in results], [r.module.kernels[0].name for r in results], headers)
    for r, sfx in zip(results, suffixes, strict=True):
        if sfx:
            public_names(r.module, sfx)
    return Unit(results[0].target, source, entries, results[0].simt if len(results) == 1 else None)


def public_names(module, sfx: str) -> None:
    """Undo tilec.parser.tune.rename_kernels on a variant's Tile IR module: its kernels, stages and multi-launch
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


def merged_source(sources: list[str], kernels: list[str], headers: tuple[str, tuple[str, ...]] = ("", ())) -> str:
    """One translation unit from the sources of several variants of a kernel: the first whole, then of each
    other what follows the text it shares with the first (the device header and common helpers), inside a
    namespace of its own, so that helpers the variants both generate (`tl_wgmma_ss_n128_f16_t1`) do not clash.
    The kernels are `extern "C"`, so their symbol names stay unqualified."""
    if len(sources) == 1:
        return sources[0]
    # A device header that only some variants' sources carry (CUDA's tilec_cluster.h, for a configuration on a
    # thread-block cluster) would land inside that variant's namespace, where its `namespace tl` hides the
    # device header's: it is taken out of every variant and put once after the device header, at file scope.
    head, optional = headers
    hoisted = [h for h in optional if any(h in s for s in sources)]
    for h in hoisted:
        sources = [s.replace(h + "\n", "", 1) for s in sources]
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
    merged = "\n".join(parts)
    if hoisted:
        at = merged.index(head) + len(head) + 1  # generate() joins its parts with a newline
        merged = merged[:at] + "".join(h + "\n" for h in hoisted) + merged[at:]
    return merged


def intermediate_stem(stem: str) -> str:
    """The source's stem as the toolchains' intermediate files are named: the characters a POSIX shell still reads
    between double quotes (`$`, a backquote, a backslash, a double quote) and control characters become `_`. nvcc
    runs its own steps through a shell: a source named `k$x.tile` had nvcc look for `k.cu` and fail."""
    return "".join("_" if ch in '$`\\"' or ch < " " or ch == "\x7f" else ch for ch in stem)


def keep_stem(stem: str) -> str:
    """The stem of the intermediates `--keep` leaves (`k.tilec-keep.cu`, nvcc's `k.tilec-keep.cpp1.ii`, ...): never
    the source's own name, so that `tilec k.cu --keep` cannot write its generated CUDA over k.cu."""
    return f"{stem}.tilec-keep"


def refuse_keep_over_inputs(keep_dir: str, stem: str, inputs: list[str]) -> None:
    """Refuse `--keep DIR` before the toolchain runs when an input of the build (the source, an import, a tuning
    database) lies in DIR under the intermediates' stem, where the toolchain would write over it."""
    where = os.path.realpath(keep_dir)
    for f in inputs:
        if os.path.dirname(os.path.realpath(f)) == where and os.path.basename(os.path.realpath(f)).startswith(
                stem + "."):
            raise CompileError([Diagnostic("error", f"--keep '{keep_dir}' would write the toolchain's intermediate "
                                                    f"files ({stem}.*) over '{f}', an input of this build; keep them "
                                                    "in another directory")])


def _refuse_warnings(diagnostics, sources) -> None:
    """-Werror: the warnings, if any, as errors."""
    warned = [d for d in diagnostics if d.severity == "warning"]
    if warned:
        err = CompileError([Diagnostic("error", f"{d.message} [-Werror{f',-W{d.category}' if d.category else ''}]",
                                       d.span, d.notes) for d in warned])
        err.sources = sources  # type: ignore[attr-defined]
        raise err


def _dumps(m: dict) -> bytes:
    return (json.dumps(m, indent=2, sort_keys=True) + "\n").encode()


def unique_paths(paths: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for p in paths:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# ---------------------------------------------------------------------------- the cache


def cache_key(source, opts: CompileOptions, targets, backend, kind: str, output_name: str,
              variants_key: str | None = None, own=None) -> str | None:
    """key1 of the cache (see tilec.cache), or None when this compile cannot be cached (no toolchain to
    identify, an unreadable file: the compile then reports what is wrong). `variants_key`: Variants.key; `own`:
    what the back end parsed of `opts` (Backend.parse_options; parsed here when not given)."""
    from .cache import sha256_bytes, tilec_fingerprint
    from .version import __version__

    try:
        data = Path(source).read_bytes()
    except OSError:
        return None
    tool = backend.toolchain_identity(targets, kind, own if own is not None else backend.parse_options(opts))
    if tool is None:
        return None
    key = {
        "tilec": __version__,
        "tilec_sources": tilec_fingerprint(),
        "toolchain": tool,
        "file": str(source),
        "file_abs": os.path.abspath(source),
        "file_sha256": sha256_bytes(data),
        "include_dirs_abs": [os.path.abspath(d) for d in opts.include_dirs],
        "kind": kind,
        "output_name": output_name,
        "options": opts.key(),
        "tune_db": variants_key,  # where the variants come from (the tuning database's entry for this compile)
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _usable_info(info: dict) -> bool:
    """What _store records beside the outputs, in the types a cache hit needs."""
    deps = info.get("deps")
    return (isinstance(deps, list) and all(isinstance(d, str) for d in deps)
            and isinstance(info.get("warnings", ""), str))


def _store(key: str, artifact: Artifact, include_dirs: list[str]) -> None:
    from .cache import Cache

    sources = artifact.result.sources if artifact.result is not None else None
    digests = dep_digests(artifact.deps, sources)
    if digests is None:
        return
    Cache().store(key, artifact.deps, absent_candidates(artifact.deps, include_dirs),
                  {"artifact": artifact.data, "manifest": artifact.manifest},
                  {"deps": artifact.deps, "warnings": artifact.warnings}, digests=digests)


_IMPORT = re.compile(r'^[ \t]*import[ \t]+"([^"\n]+)"', re.M)


def absent_candidates(files: list[str], include_dirs: list[str]) -> list[str]:
    """For each import in the compiled files, the candidate paths searched *before* the one that
    was found (the importing file's directory, then each -I directory). They did not exist at
    compile time; if one appears later, the import would resolve to it, so the entry is stale."""
    found = {os.path.abspath(f) for f in files}
    absent = []
    for f in files:
        try:
            text = Path(f).read_text(errors="replace")
        except OSError:
            continue
        for rel in _IMPORT.findall(text):
            for c in [Path(f).parent / rel] + [Path(d) / rel for d in include_dirs]:
                if os.path.abspath(c) in found:
                    break
                if not c.exists():
                    absent.append(str(c))
    return absent


def dep_digests(deps: list[str], sources) -> dict[str, str] | None:
    """SHA-256 of each input file, or None when one is unreadable or no longer what the compiler read
    (`sources`, the compile's SourceManager): a file edited during the compile is not cached under its new
    contents."""
    from .cache import sha256_bytes

    out = {}
    for d in deps:
        try:
            data = Path(d).read_bytes()
        except OSError:
            return None
        seen = sources.text(d) if sources is not None else None
        if seen is not None and data.decode("utf-8", "replace") != seen:
            return None
        out[d] = sha256_bytes(data)
    return out
