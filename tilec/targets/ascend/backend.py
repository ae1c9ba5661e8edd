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
    programs = [lower_kernel(k) for k in module.kernels]
    for name, run in LOWERED_PASSES:
        programs = run(programs, rep, target)
    return programs


def compile_module(module: T.Module, rep: Reporter, target, banner: str, want=None, ir_after=None) -> str:
    from .codegen import generate

    programs = lower_module(module, rep, target, want, ir_after)
    module.attrs_ascend = programs  # type: ignore[attr-defined]
    return generate(programs, banner)


def manifest_fields(module: T.Module) -> dict:
    programs = getattr(module, "attrs_ascend", [])
    return {"ascend": {p.name: {"kernel_type": p.kernel_type, "grid": p.grid,
                                "block_dim": "min(grid_x * grid_y * grid_z, cores)",
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
