"""The artifact manifest's schema: the keys the compiler writes and the runtimes and C launcher read.

One leaf module (standard library only) that tilec.artifacts (which writes manifests), the back ends
(tilec/targets/*: their manifest fields, the CUDA C launcher) and tilec.runtime (which reads them) all import,
so that none of them imports another for the schema.

A manifest (OUT.json beside the binary) is a JSON object:

    manifest_version, tilec_version, target, backend, loader, archs, kind, binary, toolchain, driver_api,
    source_hash, options, kernels: [entry...], remarks: [{category, message, file, line, column}...] (why the
    compiler chose what it chose; docs/inspect.md), and per back end extra fields (CUDA: driver_api_version;
    a header: header; several architectures in one binary: arch_kernels; binaries: resources, arch -> kernel ->
    registers and spills as the toolchain reports them)

Multi-launch kernels (a kernel function with several `with Kernel(...)` blocks and `alloc_global` scratch):
"launches": [{name, params, sizes (like a kernel entry's: the user's signature), scratch: [{name, dtype, shape,
offset, bytes[, zeroed]}] (offsets into one workspace, WORKSPACE_ALIGN-aligned; formulas of the sizes; the zeroed
tensors first), workspace_bytes, zeroed_bytes (only with a zeroed tensor: the workspace's first bytes, which must be
zero when the first stage starts), stages: [{kernel, args, grid}] (in launch order: the internal kernel entry
launched, and per parameter of it the name of the public parameter or scratch tensor it receives), flops,
bytes}]. Its stage kernels are "internal".

A tuned artifact (tilec/tuning/multi.py): "tuning" {gpu, date, source_hash, shapes, configs} and, with several
variants, "dispatch": {public name: {sizes, configs: [{kernel, consts, launches?, when?, cost?}], rules: [{at, config,
ms?, scale?}]}};
a config with "launches": true names a "launches" entry (a multi-launch variant: split-K), the others a kernel
entry. A config's "when" (its source's tune(..., when=...) with the consts folded in) is a condition tree over the
kernel's sizes: an int, a size name, or [op, operand...] with op one of + - * // % < <= > >= == != and or not (and
unary -); the dispatch passes over a config whose condition is false at a launch's sizes (condition_holds). With
"cost" and "scale" (tilec/runtime/cost_model.py) it runs the config of least predicted time near the nearest rule.

A kernel entry: name, params [{name, kind: tensor|scalar, dtype, output, shape}], sizes, grid (formulas over
the sizes), threads, shared_bytes, flops, bytes; optionally tensor_maps + fallback (Hopper TMA),
launch_checks (conditions on the sizes, `[{lhs, op, rhs, message}...]`: a view must fit its storage), internal,
abi (the back end's binding interface: WGSL), profile (an instrumented build: tilec/ir/profile.py), cluster
([x, y, z] blocks of a thread-block cluster: the kernel must be launched with cuLaunchKernelEx and
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; its grid formulas are whole clusters).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from .errors import UserFacingError

MANIFEST_VERSION = 1

BACKEND_KEY = "backend"
LOADER_KEY = "loader"  # which tilec.runtime module loads the artifact ("cuda", "wgsl"); absent: from BACKEND_KEY
KERNELS_KEY = "kernels"
ARCHS_KEY = "archs"
# Several architectures in one binary (a fatbin) whose kernels launch differently (threads, shared memory,
# TMA twins): arch -> that architecture's kernel entries. KERNELS_KEY then holds the first architecture's.
ARCH_KERNELS_KEY = "arch_kernels"
# A fatbin's forward-compatible PTX (the CUDA back end writes it): {"arch": "compute_80", "target": "sm80",
# "kernels_arch": "sm_80"}; absent when it carries none (--no-ptx).
PTX_KEY = "ptx"
LAUNCHES_KEY = "launches"  # multi-launch kernels: their public entries (stages, scratch); absent when there are none
# functions the binary carries beside the kernels, for the runtime's own use (CUDA: "tilec_pad_rows", the padded
# launches' pitched copy); absent when there are none
HELPERS_KEY = "helpers"
PAD_HELPER = "tilec_pad_rows"  # CUDA: the padded launches' pitched copy (tilec/targets/cuda/include/tilec_pad.h)
PAD_BATCH_HELPER = "tilec_pad_batch"  # CUDA: up to PAD_BATCH of those copies in one launch
PAD_BATCH = 4
# the rows a thread of those copies moves at a time (tilec_pad.h's TILEC_PAD_ROWS), which the runtime sizes their grids
# by; absent in an artifact built before the copy took several (one row a thread)
PAD_ROWS_KEY = "pad_rows_per_thread"
PAD_ROWS = 2
WORKSPACE_ALIGN = 256  # bytes: where each scratch tensor of a multi-launch kernel starts in its workspace


TUNING_KEY = "tuning"  # a tuned artifact's record of its database entry
DISPATCH_KEY = "dispatch"  # public name -> the table that picks its variant per launch (dispatch_distance)


WHEN_KEY = "when"  # a dispatch config's condition on the sizes (condition_holds)
# the dispatch's cost model (tilec/runtime/cost_model.py): a rule's measured time of each config ("ms", null where
# untimed) and its measured over predicted time ("scale", null where the config does not serve near that shape); a
# config's {"terms": [compute, traffic, footprint formulas], "coef": [a, b, c, d]}
MS_KEY = "ms"
SCALE_KEY = "scale"
COST_KEY = "cost"
# a condition tree's two-operand operators (besides "and" and "or", which take two or more, and "not" and "neg")
CONDITION_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
                    "%": operator.mod, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
                    "==": operator.eq, "!=": operator.ne}


def condition_value(tree, sizes: dict[str, int]) -> int:
    """The value of a condition tree (WHEN_KEY) at these sizes (a size it names and `sizes` lacks: ManifestError).
    // and % round toward minus infinity, as in the source; a division by zero makes the condition false (0)."""
    if isinstance(tree, bool | int):
        return int(tree)
    if isinstance(tree, str):
        if tree not in sizes:
            raise ManifestError(f"a dispatch condition names the size '{tree}', which the launch does not have")
        return int(sizes[tree])
    op, *args = tree
    if op == "and":
        return int(all(condition_value(a, sizes) for a in args))
    if op == "or":
        return int(any(condition_value(a, sizes) for a in args))
    values = [condition_value(a, sizes) for a in args]
    if op == "not":
        return int(not values[0])
    if op == "neg":
        return -values[0]
    a, b = values
    if op in ("//", "%") and b == 0:
        return 0
    return int(CONDITION_BINARY[op](a, b))


def condition_holds(tree, sizes: dict[str, int]) -> bool:
    return bool(condition_value(tree, sizes))


def condition_names(tree) -> set[str]:
    """The size names a condition tree reads."""
    if isinstance(tree, str):
        return {tree}
    if isinstance(tree, list):
        return set().union(*(condition_names(a) for a in tree[1:]))
    return set()


# A dispatch table whose tuned shapes include rows that are not 16-byte aligned (an odd row length of 16-bit
# elements) and rows that are: "aligned", the condition tree that a launch's rows are (every tensor's innermost
# extent times its element size a multiple of 16), and on each rule that condition's value at its tuned sizes. A
# launch is served from the tuned shapes of its own class (rule_classes_match): a variant that won at an odd row
# length takes another copy path there (element by element) than at the nearest aligned shape. On the H200's
# `--variants` sweep of s23 this took the dispatch's mean regret from 1.031 to 1.026 (rmsnorm) and 1.035 to 1.027
# (layernorm), and rmsnorm's worst from 2.03 to 1.31; a distance penalty of 0.5-2 doublings instead was mixed.
ALIGNED_KEY = "aligned"


def rows_aligned_condition(params: list[dict]) -> object:
    """The condition tree (WHEN_KEY's form) that the rows of a kernel entry's tensors are 16-byte aligned: for each
    tensor whose innermost extent is a size, (size * element bytes) % 16 == 0; False when a fixed extent is not."""
    terms: list = []
    for prm in params:
        shape = prm.get("shape") or []
        if prm.get("kind") != "tensor" or not shape:
            continue
        nbytes = ELEM_BYTES[prm["dtype"]]
        inner = shape[-1]
        if isinstance(inner, str):
            term = ["==", ["%", ["*", inner, nbytes] if nbytes > 1 else inner, 16], 0]
            if term not in terms:
                terms.append(term)
        elif isinstance(inner, int) and inner * nbytes % 16:
            return False
    if not terms:
        return True
    return terms[0] if len(terms) == 1 else ["and", *terms]


def rule_classes_match(table: dict, sizes: dict[str, int]) -> list[bool]:
    """Per rule of a dispatch table: whether it may serve a launch with these sizes by its alignment class (every
    rule when the table has no ALIGNED_KEY)."""
    tree = table.get(ALIGNED_KEY)
    if tree is None:
        return [True] * len(table["rules"])
    here = condition_holds(tree, sizes)
    return [bool(r.get(ALIGNED_KEY, True)) == here for r in table["rules"]]


def log2_approx(x: int) -> float:
    """log2 of a size, linear between powers of two (no libm): the dispatch table's measure of sizes, which
    tilec.runtime.dispatch and the C launcher's dispatcher (tilec/targets/c_launcher/dispatch.py) both compute, so
    that both pick the same variant: the rule whose tuned sizes are nearest in the sum of |log2 a - log2 b|."""
    x = float(max(x, 1))
    e = 0
    while x >= 2.0:
        x /= 2.0
        e += 1
    return e + (x - 1.0)


class ManifestError(UserFacingError, ValueError):
    """A manifest entry the runtime (or the C launcher) cannot serve: a compiler bug or a damaged file."""


# ---------------------------------------------------------------- launch checks
#
# A kernel entry's "launch_checks" are conditions on its runtime sizes that the compiler could not prove (a view
# of a tensor, `T.reshape(A, (M * N,))`, must cover or fit inside A's memory): `lhs op rhs`, two size formulas and
# op "==" or "<=". tilec.runtime and the C launcher test them before every launch and refuse a launch that breaks
# one (an ArgumentError naming `message`; CUDA_ERROR_INVALID_VALUE), so that a view never reads past its tensor.

LAUNCH_CHECKS_KEY = "launch_checks"
LAUNCH_CHECK_OPS = ("==", "<=")


def launch_checks(entry: dict) -> list[dict]:
    """The entry's launch checks, validated (ManifestError otherwise)."""
    checks = entry.get(LAUNCH_CHECKS_KEY) or []
    for j, c in enumerate(checks):
        if not (isinstance(c, dict) and c.get("op") in LAUNCH_CHECK_OPS
                and all(isinstance(c.get(x), str) for x in ("lhs", "rhs", "message"))):
            raise ManifestError(f"kernel '{entry.get('name', '?')}': launch check {j} must be {{\"lhs\": FORMULA, "
                                f"\"op\": \"==\" or \"<=\", \"rhs\": FORMULA, \"message\": TEXT}}, got {c!r}")
    return checks


def launch_check_holds(op: str, lhs: int, rhs: int) -> bool:
    return lhs == rhs if op == "==" else lhs <= rhs


# ---------------------------------------------------------------- TMA tensor maps (Hopper)
#
# A kernel entry with "tensor_maps" takes, after its params and sizes, one CUtensorMap (by value,
# __grid_constant__) per map, encoded at each launch with cuTensorMapEncodeTiled; when a launch's
# tensors do not meet TMA's alignment rules, its "fallback" entry (internal, same params and sizes,
# no maps) is launched instead -- or, where only tensors it stores do not, its "direct_stores" entry (TMA
# loads, the threads' stores). tilec/targets/c_launcher/header.py generates the same logic in C from
# tensor_map_specs below.

TENSOR_MAPS_KEY = "tensor_maps"
CLUSTER_KEY = "cluster"  # [x, y, z] blocks per thread-block cluster (sm90); absent: no cluster


def cluster_dims(entry: dict) -> tuple[int, int, int] | None:
    """A kernel entry's thread-block cluster, or None; ManifestError for a malformed one."""
    value = entry.get(CLUSTER_KEY)
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(x, int) and x >= 1 for x in value)):
        raise ManifestError(f"kernel '{entry.get('name')}': malformed cluster {value!r} (expected [x, y, z] >= 1)")
    dims = (value[0], value[1], value[2])
    return None if dims == (1, 1, 1) else dims
FALLBACK_KEY = "fallback"
# {tensor param: "load" | "store"}: tensors the kernel reaches through its tensor maps alone (never through their
# pointers), so a launch may pass a copy whose rows are padded to 16 bytes instead of falling back (tilec.runtime)
TMA_ONLY_KEY = "tma_only"
# [output param]: the "store" tensors of tma_only that every launch writes in full (tilec/ir/coverage.py), so a padded
# launch copies them back from the workspace but not into it first
WRITTEN_IN_FULL_KEY = "written_in_full"
INTERNAL_KEY = "internal"
# the internal entry launched when TMA cannot address only tensors the kernel stores (an output whose rows are not a
# multiple of 16 bytes): same params and sizes, TMA loads through a subset of the kernel's own tensor maps, the
# threads' stores
DIRECT_STORES_KEY = "direct_stores"

# CUtensorMapDataType: TMA copies bits, so every 1-byte type is UINT8 and i16/u16 are UINT16.
TMA_DTYPES = {"bool": 0, "i8": 0, "u8": 0, "f8e4m3": 0, "f8e5m2": 0, "i16": 1, "u16": 1, "u32": 2, "i32": 3,
              "u64": 4, "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9}
ELEM_BYTES = {"bool": 1, "i8": 1, "u8": 1, "f8e4m3": 1, "f8e5m2": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2,
              "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}
TMA_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
TMA_MAX_RANK = 5
TMA_MAX_DIM = 1 << 32
TMA_MAX_STRIDE = 1 << 40  # exclusive
TMA_ALIGN = 16  # global address and every global stride


@dataclass(frozen=True)
class TensorMapSpec:
    """One validated "tensor_maps" item: what is fixed by the manifest (shape sizes come at launch)."""
    index: int  # position among the entry's tensor maps
    param: dict  # the tensor's param entry
    param_index: int  # its position in params
    dtype: int  # CUtensorMapDataType
    elem_bytes: int
    box: tuple[int, ...]  # outermost first, like the shape
    swizzle: int  # CUtensorMapSwizzle
    swizzle_bytes: int
    # a view of the tensor (`T.reshape`): its dims (ints, size names, size formulas), outermost first; None: the
    # tensor's own shape. The map then reads the tensor's memory with these dims and the view's dtype.
    view_shape: tuple | None = None

    def describe(self) -> str:
        return f"tensor map {self.index} ('{self.param['name']}', box {list(self.box)}, swizzle {self.swizzle_bytes})"


def tensor_map_specs(entry: dict) -> list[TensorMapSpec]:
    """The entry's tensor maps, checked against TMA's static rules (ManifestError otherwise)."""
    maps = entry.get(TENSOR_MAPS_KEY) or []
    name = entry.get("name", "?")
    by_name = {p["name"]: (i, p) for i, p in enumerate(entry["params"])}
    out = []
    for j, m in enumerate(maps):
        where = f"kernel '{name}': tensor map {j}"
        if not isinstance(m, dict) or not isinstance(m.get("tensor"), str):
            raise ManifestError(f"{where} names no tensor (expected {{\"tensor\": NAME, \"box\": [...], "
                                f"\"swizzle\": BYTES}}, got {m!r})")
        if m["tensor"] not in by_name or by_name[m["tensor"]][1]["kind"] != "tensor":
            raise ManifestError(f"{where} refers to '{m['tensor']}', which is not a tensor parameter")
        pi, p = by_name[m["tensor"]]
        dtype, shape, view = p["dtype"], p["shape"], m.get("view")
        if view is not None:  # {"dtype": ..., "shape": [...]}: a view of the tensor's memory
            if not (isinstance(view, dict) and isinstance(view.get("shape"), list) and view["shape"]
                    and all(type(d) is int or isinstance(d, str) for d in view["shape"])
                    and view.get("dtype") in ELEM_BYTES):
                raise ManifestError(f"{where}: view {view!r} must be {{\"dtype\": DTYPE, \"shape\": [DIM...]}}")
            dtype, shape = view["dtype"], view["shape"]
        if dtype not in TMA_DTYPES:
            raise ManifestError(f"{where}: TMA cannot copy '{p['name']}' of type {dtype}")
        ndim = len(shape)
        box = m.get("box")
        if not isinstance(box, list) or len(box) != ndim or not all(type(b) is int and 1 <= b <= 256 for b in box):
            raise ManifestError(f"{where}: box {box!r} must have one entry in 1..256 per dimension of "
                                f"'{p['name']}' ({ndim})")
        if not 1 <= ndim <= TMA_MAX_RANK:
            raise ManifestError(f"{where}: '{p['name']}' has {ndim} dimensions; TMA takes 1 to {TMA_MAX_RANK}")
        sw = m.get("swizzle", 0)
        if sw not in TMA_SWIZZLES or type(sw) is not int:
            raise ManifestError(f"{where}: swizzle {sw!r} must be 0, 32, 64 or 128 (bytes)")
        inner = box[-1] * ELEM_BYTES[dtype]
        if inner % TMA_ALIGN:
            raise ManifestError(f"{where}: the box's inner extent ({inner} bytes) must be a multiple of 16 bytes")
        if sw and inner > sw:
            raise ManifestError(f"{where}: the box's inner extent ({inner} bytes) exceeds the {sw}-byte swizzle")
        out.append(TensorMapSpec(j, p, pi, TMA_DTYPES[dtype], ELEM_BYTES[dtype], tuple(box), TMA_SWIZZLES[sw], sw,
                                 tuple(shape) if view is not None else None))
    return out


def _named_entry(entry: dict, name: str | None, entries: list[dict], role: str) -> dict | None:
    """The entry of `entries` called `name` (None when name is None); ManifestError when there is none."""
    if name is None:
        return None
    for e in entries:
        if e["name"] == name:
            return e
    raise ManifestError(f"kernel '{entry['name']}': its {role} '{name}' is not in the manifest")


def fallback_entry(entry: dict, entries: list[dict]) -> dict | None:
    """The entry's "fallback" kernel entry among `entries` (checked), or None when it names none."""
    fb = entry.get(FALLBACK_KEY)
    e = _named_entry(entry, fb, entries, "fallback")
    if e is None:
        return None
    if e.get(TENSOR_MAPS_KEY) or e["params"] != entry["params"] or e["sizes"] != entry["sizes"]:
        raise ManifestError(f"kernel '{entry['name']}': its fallback '{fb}' must take the same params and sizes "
                            "and no tensor maps")
    return e


def direct_stores_entry(entry: dict, entries: list[dict]) -> tuple[dict, list[int]] | None:
    """The entry's "direct_stores" twin among `entries` (checked) and, for each of the twin's tensor maps, the
    index of the same map among the entry's; None when it names none."""
    name = entry.get(DIRECT_STORES_KEY)
    twin = _named_entry(entry, name, entries, "direct-stores twin")
    if twin is None:
        return None
    mine, theirs = entry.get(TENSOR_MAPS_KEY) or [], twin.get(TENSOR_MAPS_KEY) or []
    if twin["params"] != entry["params"] or twin["sizes"] != entry["sizes"] or not theirs or any(
            m not in mine for m in theirs) or len(theirs) >= len(mine):
        raise ManifestError(f"kernel '{entry['name']}': its direct-stores twin '{name}' must take the same params "
                            "and sizes and some of the kernel's own tensor maps")
    return twin, [mine.index(m) for m in theirs]


def loader_name(manifest: dict) -> str:
    """The runtime loader an artifact needs: the manifest's "loader", or (manifests written before it existed,
    and back ends without a runtime) its back end's name."""
    return manifest.get(LOADER_KEY) or manifest.get(BACKEND_KEY) or "cuda"


def compute_capability(arch: str) -> int:
    """sm_90a -> 90 (compute_80 -> 80): the compute capability (major*10+minor) a CUDA architecture name stands
    for."""
    return int(arch.removeprefix("sm_").removeprefix("compute_").rstrip("af"))


def arch_runs_on(arch: str, kind: str, device_cc: int) -> bool:
    """Whether code built for `arch` as `kind` runs on a GPU of compute capability `device_cc`: PTX on that one
    and newer, an arch-specific (sm_90a) binary on exactly that one, other binaries within the major version."""
    cc = compute_capability(arch)
    if kind == "ptx":
        return device_cc >= cc
    if arch.endswith(("a", "f")):
        return device_cc == cc
    return device_cc // 10 == cc // 10 and device_cc >= cc


def for_device(manifest: dict, device_cc: int) -> dict:
    """The manifest as the GPU of compute capability `device_cc` sees it: with ARCH_KERNELS_KEY, KERNELS_KEY
    replaced by the entries of the image the driver loads there (choose_image). Other manifests come back
    unchanged."""
    per_arch = manifest.get(ARCH_KERNELS_KEY)
    if not per_arch:
        return manifest
    chosen = choose_image(manifest, device_cc)
    if chosen is None or chosen.kernels_arch not in per_arch:
        return manifest  # the runtime's architecture check reports it
    return dict(manifest, **{KERNELS_KEY: per_arch[chosen.kernels_arch]})


@dataclass(frozen=True)
class ImageChoice:
    """Which image of an artifact a GPU runs, and why: `how` is "exact" (built for exactly this compute
    capability), "same_major" (a cubin of an earlier GPU of its major version) or "jit" (PTX the driver
    compiles at load); `kernels_arch` keys the image's entries in ARCH_KERNELS_KEY."""

    image: str  # sm_90a, sm_80, compute_80
    how: str
    kernels_arch: str

    @property
    def why(self) -> str:
        return {"exact": "built for exactly this GPU",
                "same_major": "a cubin runs on later GPUs of its major version",
                "jit": "no cubin runs on this GPU, so the driver JIT-compiles the PTX when it loads it"}[self.how]


def choose_image(manifest: dict, device_cc: int) -> ImageChoice | None:
    """The image the CUDA driver loads from an artifact on a GPU of compute capability `device_cc`, as the C
    launcher picks it too: one built for exactly this GPU (an architecture-specific one first), else the newest cubin
    of its major version, else PTX (a .ptx artifact, or a fatbin's "ptx" image); None when none runs there."""
    kind = manifest.get("kind", "")
    archs = list(manifest.get(ARCHS_KEY, []))
    if kind == "ptx":
        fits = [a for a in archs if device_cc >= compute_capability(a)]
        if not fits:
            return None
        best = max(fits, key=compute_capability)
        return ImageChoice("compute_" + best.removeprefix("sm_").rstrip("af"), "jit", best)
    best = None
    for a in archs:
        if not arch_runs_on(a, kind, device_cc):
            continue
        how = "exact" if compute_capability(a) == device_cc else "same_major"
        rank = (how == "exact", a.endswith(("a", "f")), compute_capability(a))
        if best is None or rank > best[0]:
            best = (rank, ImageChoice(a, how, a))
    if best is not None:
        return best[1]
    ptx = manifest.get(PTX_KEY)
    if ptx and device_cc >= compute_capability(ptx["arch"]):
        return ImageChoice(ptx["arch"], "jit", ptx.get("kernels_arch") or ptx["arch"])
    return None


def launch_entries(manifest: dict) -> list[dict]:
    """The manifest's multi-launch kernels, each checked against its stage kernel entries (ManifestError)."""
    out = manifest.get(LAUNCHES_KEY) or []
    names = {k["name"]: k for k in manifest.get(KERNELS_KEY, [])}
    for seq in out:
        spaces = {p["name"] for p in seq["params"]} | {b["name"] for b in seq["scratch"]}
        for st in seq["stages"]:
            entry = names.get(st["kernel"])
            if entry is None:
                raise ManifestError(f"kernel '{seq['name']}': its stage '{st['kernel']}' is not in the manifest")
            if len(st["args"]) != len(entry["params"]) or not set(st["args"]) <= spaces:
                raise ManifestError(f"kernel '{seq['name']}': stage '{st['kernel']}' takes {len(entry['params'])} "
                                    f"argument(s); the manifest maps {st['args']}")
    return out
