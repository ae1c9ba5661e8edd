"""The AscendC back end behind one small interface, for the driver (and the Backend objects it grows into):

- PASSES: its pipeline over checked Tile IR (placement, queue planning), then LOWERED_PASSES over the lowered
  kernel programs (capacity check, sync insertion);
- compile_module(module, rep, target, want, ir_after) -> source: runs both and generates the C++;
- OUTPUT_KINDS and build(source, kind, options) -> bytes: the source itself, the ACL launcher header, or a
  kernel object through bisheng (toolchain.py);
- manifest_fields(module): what the manifest adds for Ascend (kernel type, block dim rule, on-chip bytes).
"""

from __future__ import annotations

from ...diagnostics import Reporter
from ...ir import tile as T
from .passes import capacity, placement, queues, sync

PASSES = [(placement.NAME, placement.run), (queues.NAME, queues.run)]
LOWERED_PASSES = [(capacity.NAME, capacity.run), (sync.NAME, sync.run)]
# split_rows runs inside the lowering, on the AIV side's copy of a mixed kernel.
PASS_NAMES = [n for n, _ in PASSES] + ["ascend-lower"] + [n for n, _ in LOWERED_PASSES]
OUTPUT_KINDS = {".cpp": "cpp", ".h": "header", ".o": "obj"}


def lower_module(module: T.Module, rep: Reporter, target, want: set[str] | None = None,
                 ir_after: dict[str, str] | None = None):
    """Tile IR -> synchronised KernelPrograms (the AscendC pipeline)."""
    from ...ir.printer import module_str
    from .lower import lower_kernel

    want = want or set()
    for name, run in PASSES:
        module = run(module, rep, target)
        if ir_after is not None and name in want:
            ir_after[name] = module_str(module)
    from .codegen import generate

    programs = [lower_kernel(k) for k in module.kernels]
    if ir_after is not None and "ascend-lower" in want:
        # after the lowering the IR is the AscendC program itself (no synchronisation yet)
        ir_after["ascend-lower"] = generate(programs, "tilec, after ascend-lower")
    for name, run in LOWERED_PASSES:
        programs = run(programs, rep, target)
        if ir_after is not None and name in want:
            ir_after[name] = generate(programs, f"tilec, after {name}")
    return programs


def compile_module(module: T.Module, rep: Reporter, target, banner: str, want=None, ir_after=None) -> str:
    from .codegen import generate

    programs = lower_module(module, rep, target, want, ir_after)
    module.attrs_ascend = programs  # type: ignore[attr-defined]
    return generate(programs, banner)


def manifest(result, kind: str, toolchain: str, options: dict, binary: str | None) -> dict:
    """The artifact manifest: parameters, runtime sizes and grid formulas as for the other back ends, plus the
    kernel type, the block-count rule and the on-chip bytes per memory."""
    from ... import __version__
    from ...artifacts import MANIFEST_VERSION, source_hash
    from ...ir.formula import formula

    sources_text = {f: result.sources.text(f) or "" for f in result.module.files}
    fields = manifest_fields(result.module)["ascend"]
    kernels = []
    for k in result.module.kernels:
        params = []
        for p in k.params:
            if isinstance(p, T.Buffer):
                params.append({"name": p.name, "kind": "tensor", "dtype": p.dtype.name, "output": p.is_output,
                               "shape": [int(d.value) if isinstance(d, T.Const) else d.name for d in p.shape]})
            else:
                params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
        kernels.append({"name": k.name, "params": params, "sizes": [v.name for v in k.size_vars],
                        "grid": [formula(g) for g in k.grid], **fields.get(k.name, {})})
    return {"manifest_version": MANIFEST_VERSION, "tilec_version": __version__, "target": result.target.name,
            "backend": "ascend", "archs": [result.target.arch], "kind": kind, "binary": binary,
            "toolchain": toolchain, "driver_api": "ACL (aclrtLaunchKernel through the NAME_do launch functions)",
            "source_hash": source_hash(result.module.files, sources_text, options), "kernels": kernels}


def manifest_fields(module: T.Module) -> dict:
    programs = getattr(module, "attrs_ascend", [])
    return {"ascend": {p.name: {"kernel_type": p.kernel_type, "grid": p.grid,
                                "block_dim": "min(grid_x * grid_y * grid_z, cores)",
                                "workspace_bytes_per_block": p.workspace_bytes,
                                "on_chip_bytes": {m: sum(a.bytes for a in p.allocs if a.memory == m)
                                                  for m in ("UB", "L1", "L0A", "L0B", "L0C")}}
                       for p in programs}}


def build(source: str, kind: str, options: dict) -> bytes:
    """The artifact of `kind` (cpp, header, obj) for generated `source`."""
    if kind == "cpp":
        return source.encode()
    if kind == "header":
        from .launcher import generate_header

        return generate_header(options["programs"], options.get("prefix", "")).encode()
    if kind == "obj":
        from .toolchain import compile_object

        return compile_object(source, options.get("name", "kernel"))
    raise ValueError(f"the AscendC back end emits {', '.join(OUTPUT_KINDS)}, not {kind}")
