"""What a back end is: one object per tilec/targets/<name>/ that owns everything after checked Tile IR.

A `Backend` declares its pass pipeline (starting from the checked, target-neutral Tile IR), the checks its
language needs, its code generator, its toolchain build (one signature for every back end), the output kinds
it can write, the fields it adds to the manifest and the runtime loader that opens its artifacts. The driver
runs whatever pipeline the back end declares and knows no back end by name; `BACKENDS` in
tilec/targets/registry.py maps a back-end name to the module holding its object.

Import-light on purpose: the command line asks a back end for its output kinds and toolchain identity (the
compile cache's key) before the compiler is imported, so passes, code generators and toolchains are
imported inside the methods that use them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PassStep:
    """One pass of a back end's pipeline: `run(module, rep, target) -> module`, how its result prints (for
    `--emit-ir=after:NAME`) and, where its IR has a verifier, `verify(module, target)` (run under verify=True;
    raises AssertionError)."""

    name: str
    run: Callable
    prints: Callable[[object], str]
    verify: Callable | None = None


@dataclass
class Unit:
    """One target's generated code, as `Backend.build` receives it."""

    target: object  # tilec.targets.registry.Target
    source: str  # the generated source text
    kernels: list[dict]  # the manifest's kernel entries for this target (tilec.artifacts.kernel_entry)
    lowered: object = None  # what the pipeline lowered the module to (what `generate` printed)


@dataclass(frozen=True)
class ArtifactInfo:
    """Names a build may need: for intermediate files, and what an artifact that quotes them (a C header) says."""

    stem: str  # the source file's stem: intermediate files are named after it
    output_name: str  # the artifact's file name (no directory)
    source_name: str  # the .tile file's name (no directory)
    source_hash: str  # the manifest's source_hash
    # A tuned artifact's dispatch table, the manifest's "dispatch" mapping (public name -> table): a C launcher
    # generates each public name's dispatcher over its variants from it (tilec/targets/c_launcher/dispatch.py).
    dispatch: dict | None = None
    # The manifest's multi-launch kernels (tilec.artifacts.launch_entries), which a C launcher gets functions for.
    launches: tuple = ()
    # The Unit whose PTX the artifact carries for GPUs newer than its binaries (Backend.forward_ptx_target): one of
    # the targets' units, or the generic target's compiled for it alone; None for none.
    forward_ptx: object = None


@dataclass
class Built:
    """What `Backend.build` produced: the artifact's bytes and what the manifest and the user learn about it."""

    data: bytes
    toolchain: str  # the toolchain that built it, with its version ("none" when the artifact is the source)
    commands: list[str] = field(default_factory=list)  # the toolchain commands run (printed by --dryrun)
    manifest: dict = field(default_factory=dict)  # fields the back end adds to the manifest
    report: str = ""  # text for the user (--resource-usage's table)
    diagnostics: list = field(default_factory=list)  # warnings about the binary (tilec.diagnostics.Diagnostic): spills


@dataclass(frozen=True)
class OperandTable:
    """One operand of a matrix instruction as its lanes hold it, for `tilec layout` (tilec/inspect): lane `l`'s
    element `i` is at `coord(l, i)` of a rows x cols tile; `lane_group` lanes share a colour."""

    title: str
    rows: int
    cols: int
    lanes: int
    elems: int  # per lane
    coord: Callable[[int, int], tuple[int, int]]
    elems_per_reg: int  # 2: packed 16-bit values in a 32-bit register
    lane_group: int


@dataclass(frozen=True)
class PlacedTile:
    """A tile as a back end without threads stores it (Ascend's NZ fractals), for `tilec layout`: element (r, c)
    sits at `offset(r, c)` and is coloured by `group(r, c)`."""

    name: str
    title: str
    rows: int
    cols: int
    offset: Callable[[int, int], int]
    group: Callable[[int, int], int]
    groups: int
    note: str


class BuildRefused(Exception):
    """The back end cannot write this output kind for these targets; the message says what to write instead."""


_ABSENT = object()  # (a field of an options record that CompileOptions does not have)


class Backend:
    """The base of every back end. Subclasses set the class attributes and implement `pipeline`, `generate`
    and `build`; `check`, `lower` and `toolchain_identity` have defaults."""

    name: str = ""  # the registry's back-end name: cuda, hip, wgsl, ascendc
    output_kinds: dict[str, str] = {}  # kind -> file suffix, e.g. {"cubin": ".cubin"}
    default_kind: str = ""  # what a build writes when neither -o's suffix nor --emit says
    source_kind: str = ""  # the kind that is the generated source itself (written without a toolchain)
    multi_target_kinds: frozenset[str] = frozenset()  # kinds that can carry several targets at once
    # kind -> suffixes of files written beside the artifact (its suffix replaced), made by `companion`
    companions: dict[str, tuple[str, ...]] = {}
    # kinds whose -o names a directory (a package): kind -> (the suffix of the module the artifact becomes there,
    # the name of the file `directory_index` writes beside it: npm's package.json, listing the directory's modules)
    directory_kinds: dict[str, tuple[str, str]] = {}
    run_kind: str = ""  # what `tilec run` builds and loads (through loader)
    loader: str = ""  # the tilec.runtime loader named in the manifest ("cuda", "wgsl")
    driver_api: str = ""  # the manifest's "driver_api": which host API launches the artifact
    last_planning_pass: str = ""  # the pipeline's decisions are all made after this pass (plan_only stops there)
    host_model: str = ""  # a CPU model `tilec run` executes the generated code on, when the device is out of reach
    assembler: str = ""  # the assembler the -Xptxas arguments (CUDA's ptxas_args) go to; "" when there is none
    # The frozen record of the options this back end's build reads (CUDA: cuda/backend.py CudaOptions), made by
    # `parse_options`; None: the back end has no options of its own and reads the shared CompileOptions.
    options_record: type | None = None

    # ------------------------------------------------------------------ compiling

    def pipeline(self, target) -> list[PassStep]:
        """The passes from checked Tile IR to what `generate` prints, in order."""
        raise NotImplementedError

    def lower(self, module, rep, target, dumps: dict[str, str], want: set[str], verify: bool = False):
        """Run the pipeline on `module` (mutated and extended as the passes please) and return the lowered
        module; `dumps[name]` receives the printed IR after each pass named in `want`."""
        return run_steps(self.pipeline(target), module, rep, target, dumps, want, verify)

    def plan(self, module, rep, target, dumps: dict[str, str], want: set[str]):
        """Run the pipeline up to and including `last_planning_pass`: every decision made, nothing lowered."""
        steps = self.pipeline(target)
        names = [st.name for st in steps]
        if self.last_planning_pass not in names:
            raise NotImplementedError(f"the {self.name} back end has no planning stage to stop after")
        return run_steps(steps[:names.index(self.last_planning_pass) + 1], module, rep, target, dumps, want)

    def check(self, lowered, rep, target) -> None:
        """Report what the back end's language refuses, at the user's lines (`generate` then only spells)."""

    def generate(self, lowered, target, banner: str) -> str:
        """The source text of the lowered module."""
        raise NotImplementedError

    def variant_headers(self) -> tuple[str, tuple[str, ...]]:
        """For one source merged from a tuned kernel's variants (tilec.outputs.merged_source): the text of the
        device header every generated source carries, and the texts of headers only some variants carry, which go
        once after it at file scope instead of inside a variant's namespace. None by default."""
        return "", ()

    # ------------------------------------------------------------------ building

    def parse_options(self, options):
        """The options this back end's build reads, parsed once per artifact (tilec.outputs) and handed to
        `build`, `toolchain_identity`, `forward_ptx_target` and `manifest_options`: `options_record` made from the
        shared CompileOptions fields of the same names and the back end's own `backend_options`; the
        CompileOptions itself for a back end without a record. A back-end option no back end has is an error;
        another back end's options are left to it."""
        from ..diagnostics import CompileError, Diagnostic

        if self.options_record is not None and isinstance(options, self.options_record):
            return options
        unknown = sorted({name for name, _ in options.backend_options} - backend_option_names())
        if unknown:
            raise CompileError([Diagnostic("error", f"unknown option(s) {', '.join(unknown)} (no back end has them)")])
        if self.options_record is None:
            return options
        import dataclasses

        names = {f.name for f in dataclasses.fields(self.options_record)}
        shared = {n: v for n in names if (v := getattr(options, n, _ABSENT)) is not _ABSENT}
        own = {n: v for n, v in options.backend_options if n in names}
        try:
            return self.options_record.parse(shared, own)
        except (TypeError, ValueError) as e:
            raise CompileError([Diagnostic("error", f"{self.name} options: {e}")]) from None

    def check_kind(self, targets: list, kind: str) -> None:
        """Raise BuildRefused when `kind` cannot be written for `targets` (all of this back end)."""
        if kind not in self.output_kinds:
            names = ", ".join(t.name for t in targets)
            suffix = self.output_kinds[self.default_kind]
            others = ", ".join(f"{s}" for k, s in self.output_kinds.items() if k != self.default_kind)
            raise BuildRefused(f"the {names} target emits {', '.join(self.output_kinds)}, not {kind}: use -o "
                               f"NAME{suffix}" + (f" (or {others})" if others else ""))
        if len(targets) > 1 and kind not in self.multi_target_kinds:
            names = ", ".join(t.name for t in targets)
            if not self.multi_target_kinds:
                raise BuildRefused(f"several targets ({names}): the {self.name} back end builds one target at a time")
            kinds = sorted(self.multi_target_kinds)
            ways = ", ".join(f"-o x{self.output_kinds[k]}" for k in kinds)
            either = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
            article = "an" if either[0] in "aeiou" else "a"
            raise BuildRefused(f"several targets ({names}) need {article} {either} output ({ways})")

    def forward_ptx_target(self, targets: list, kind: str, options) -> str | None:
        """The target whose portable code (CUDA: PTX) an artifact of `kind` carries besides its binaries, so that a
        newer GPU runs it through the driver's JIT; None for none."""
        return None

    def toolchain_identity(self, targets: list, kind: str, options) -> str | None:
        """A cheap identity (paths, sizes, mtimes; no subprocess) of the toolchain that would build `kind`, for
        the compile cache's key; None when there is none (the build then reports it, and nothing is cached)."""
        return "none" if kind == self.source_kind else None

    def companion(self, kind: str, suffix: str, manifest: dict) -> bytes:
        """The file with `suffix` (one of companions[kind]) beside an artifact, from its manifest alone."""
        raise NotImplementedError

    def directory_index(self, kind: str, directory: str, modules: list[str]) -> bytes:
        """The file that lists the modules (file names) of a directory_kinds package (directory_kinds[kind][1])."""
        raise NotImplementedError

    def kind_toolchains(self) -> dict[str, str]:
        """Output kind -> the toolchain that builds it here, in words, with the command line's default choice
        (`tilec targets`); {} where the back end does not say."""
        return {}

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        """Turn the generated code of one or several targets (see multi_target_kinds) into an artifact of
        `kind`. `options` is the compile's tilec.options.CompileOptions.
        Errors of the toolchain on generated code are CompileErrors that say it is a tilec bug."""
        raise NotImplementedError

    def manifest_options(self, options) -> dict:
        """Back-end options recorded in the manifest's "options" (and so in its source hash)."""
        return {}

    def helper_functions(self, kernels: list[dict]) -> list[str]:
        """The functions the binary of these kernel entries carries beside them for the runtime's own use (the
        manifest's "helpers"); none by default."""
        return []

    def operand_tables(self, family: str) -> list[OperandTable]:
        """The operand layouts of one instruction of matrix-instruction `family` that this back end lowers with
        (the tables its lowering and the SIMT interpreter use), for `tilec layout`; [] when it has none."""
        return []

    def placed_tiles(self, kernel) -> list[PlacedTile]:
        """How a back end that is not SIMT stores the tiles of Tile IR `kernel`, for `tilec layout`."""
        return []

    def model_errors(self) -> tuple[type[BaseException], ...]:
        """Exceptions of this back end's CPU model (`host_model`) that `tilec run` reports as plain errors (not
        internal ones). (The runtime's own, where `loader` names one, are tilec.runtime.loader.launch_errors':
        a back end never imports the runtime.)"""
        return ()

    def kernel_entries(self, result) -> list[dict] | None:
        """The manifest's kernel entries, for a back end whose lowered form is not SIMT IR; None: the SIMT ones."""
        return None

    def run_on_model(self, result, kernel: str, arrays: dict, sizes: dict[str, int]) -> str:
        """Run `kernel` of a compile result on `host_model`, updating the numpy `arrays` (by parameter name) in
        place; returns the model's warnings."""
        raise NotImplementedError(f"the {self.name} back end has no CPU model")

    def describe_run(self, result, kernel: str) -> str:
        """What `tilec run` prints after a kernel's outputs: where it ran."""
        return self.host_model


def backend_option_names() -> frozenset[str]:
    """The names of every registered back end's own options (the fields of their records that CompileOptions does
    not have)."""
    import dataclasses

    from ..options import CompileOptions
    from .registry import BACKENDS, get_backend

    shared = {f.name for f in dataclasses.fields(CompileOptions)}
    return frozenset(f.name for b in BACKENDS for rec in [get_backend(b).options_record] if rec is not None
                     for f in dataclasses.fields(rec) if f.name not in shared)


def run_steps(steps: list[PassStep], module, rep, target, dumps: dict[str, str], want: set[str],
              verify: bool = False):
    for step in steps:
        module = step.run(module, rep, target)
        if verify and step.verify is not None:
            step.verify(module, target, step.name)
        if step.name in want:
            dumps[step.name] = step.prints(module)
    return module


def simt_pipeline() -> list[PassStep]:
    """The passes every SIMT back end (CUDA, HIP, WGSL) shares: Tile IR decisions, then lowering to SIMT IR and
    the SIMT IR passes. Their order is fixed by what each pass assumes (see each pass's docstring)."""
    from ..ir.printer import module_str
    from ..ir.simt_printer import simt_module_str
    from ..passes import (
        layout_inference,
        lower_to_simt,
        partition_boundaries,
        pipeline_planning,
        rasterization,
        simplify,
        simplify_indices,
        storage_planning,
    )

    tile = [rasterization, layout_inference, pipeline_planning]
    simt = [lower_to_simt, partition_boundaries, simplify_indices, simplify, storage_planning]
    return [PassStep(p.NAME, p.run, module_str) for p in tile] + [PassStep(p.NAME, p.run, simt_module_str,
                                                                           verify_simt) for p in simt]


SIMT_LAST_PLANNING_PASS = "pipeline-planning"


class SimtBackend(Backend):
    """A back end on the shared SIMT pipeline (CUDA, HIP, WGSL): its code generator, the module named by `codegen`,
    is a dialect of tilec/ir/simt_printer.py with `generate(module, banner)` and, where the language refuses
    something at the user's lines, `check(module, rep, target)`."""

    codegen: str = ""  # the module of the dialect's code generator
    last_planning_pass = SIMT_LAST_PLANNING_PASS

    def pipeline(self, target) -> list[PassStep]:
        return simt_pipeline()

    def check(self, lowered, rep, target) -> None:
        import importlib

        check = getattr(importlib.import_module(self.codegen), "check", None)
        if check is not None:
            check(lowered, rep, target)

    def generate(self, lowered, target, banner: str) -> str:
        import importlib

        return importlib.import_module(self.codegen).generate(lowered, banner)


def verify_simt(module, target, after: str) -> None:
    from ..ir.simt_verify import VerifyError, verify

    try:
        verify(module, target)
    except VerifyError as e:
        raise AssertionError(f"SIMT IR verification failed after {after}: {e}") from e
