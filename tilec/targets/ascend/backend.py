"""The AscendC back end (ascend910b). Not a SIMT target: its pipeline starts from checked Tile IR —

- placement and queue planning over Tile IR, then `ascend-lower` turns each kernel into a KernelProgram (lower.py),
  then the event-id fit, capacity checks and sync insertion over the programs (the passes/ folder);
- `generate` prints the programs as AscendC C++; `build` writes the source (.cpp), the ACL launcher header (.h)
  or a kernel object through CANN's bisheng (.o, toolchain.py);
- the manifest's kernel entries add the kernel type, the block-count rule and the on-chip bytes per memory;
- `tilec run` runs the generated source on tilec's CPU model of the AscendC API (model/, model_run.py).
"""

from __future__ import annotations

from ..backend import ArtifactInfo, Backend, Built, PassStep, Unit

# Import-light on purpose (the command line loads every back end to read its output kinds, also on a cache hit):
# passes, lowering and code generation are imported inside the methods that use them.
MODEL_CORES = 8  # model cores: fewer than the chip's, so that each core loops over several tiles


def manifest_fields(programs) -> dict:
    return {"ascend": {p.name: {"kernel_type": p.kernel_type, "grid": p.grid,
                                "block_dim": "min(grid_x * grid_y * grid_z, cores)",
                                "workspace_bytes_per_block": p.workspace_bytes,
                                "on_chip_bytes": {m: sum(a.bytes for a in p.allocs if a.memory == m)
                                                  for m in ("UB", "L1", "L0A", "L0B", "L0C")}}
                       for p in programs}}


class AscendBackend(Backend):
    name = "ascend"
    output_kinds = {"cpp": ".cpp", "header": ".h", "object": ".o"}
    default_kind = "cpp"
    source_kind = "cpp"
    driver_api = "ACL (aclrtLaunchKernel through the NAME_do launch functions)"
    last_planning_pass = "ascend-queues"
    host_model = "tilec's CPU model of the AscendC API"

    def pipeline(self, target) -> list[PassStep]:
        from ...ir.printer import module_str
        from .codegen import generate
        from .lower import lower_module
        from .passes import capacity, event_ids, placement, queues, sync

        # split_rows runs inside the lowering, on the AIV side's copy of a mixed kernel
        tile_passes = [(placement.NAME, placement.run), (queues.NAME, queues.run)]
        program_passes = [(event_ids.NAME, event_ids.run), (capacity.NAME, capacity.run), (sync.NAME, sync.run)]

        def programs_text(name):
            return lambda programs: generate(programs, f"tilec, after {name}")

        steps = [PassStep(n, run, module_str) for n, run in tile_passes]
        steps.append(PassStep("ascend-lower", lambda module, rep, target: lower_module(module),
                              programs_text("ascend-lower")))
        steps += [PassStep(n, run, programs_text(n)) for n, run in program_passes]
        return steps

    def generate(self, lowered, target, banner):
        from .codegen import generate

        return generate(lowered, banner)

    def kernel_entries(self, result) -> list[dict]:
        from ...ir import tile as T
        from ...ir.cost import kernel_costs
        from ...ir.formula import formula

        fields = manifest_fields(result.simt)["ascend"]
        kernels = []
        for k in result.module.kernels:
            params = []
            for p in k.params:
                if isinstance(p, T.Buffer):
                    params.append({"name": p.name, "kind": "tensor", "dtype": p.dtype.name, "output": p.is_output,
                                   "shape": [int(d.value) if isinstance(d, T.Const) else d.name if isinstance(d, T.Var)
                                             else formula(d) for d in p.shape]})
                else:
                    params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
            costs = kernel_costs(k)
            entry = {"name": k.name, "params": params, "sizes": [v.name for v in k.size_vars],
                     "grid": [formula(g) for g in k.grid], "flops": costs.get("flops", "0"),
                     "bytes": costs.get("bytes", "0"), **fields.get(k.name, {})}
            if k.launch_checks:  # conditions on the sizes tested before each launch (views; docs/deploy.md)
                entry["launch_checks"] = k.launch_checks
            kernels.append(entry)
        return kernels

    def toolchain_identity(self, targets, kind, options):
        if kind in ("cpp", "header"):
            return "none"
        from ...cache import executable_fingerprint
        from .toolchain import find_cann

        _, bisheng = find_cann()
        return None if bisheng is None else executable_fingerprint(bisheng)

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        (unit,) = units
        if kind == "cpp":
            return Built(unit.source.encode(), "none")
        if kind == "header":
            from .launcher import generate_header

            return Built(generate_header(unit.lowered, options.header_prefix,
                                         getattr(unit.lowered, "launches", [])).encode(), "none")
        from .toolchain import compile_object, find_cann

        data = compile_object(unit.source, info.stem, [(p.name, p.kernel_type) for p in unit.lowered])
        return Built(data, f"bisheng {find_cann()[1]}")

    def placed_tiles(self, kernel):
        """Each cube operand's L1 tile: the NZ fractals (16 rows x 32 bytes) Nd2Nz writes (layout.nz_offset); every
        other 1-D or 2-D on-chip tile but a gemm accumulator: its UB rows, padded (layout.layout_of)."""
        from ...ir import tile as T
        from ...ir.visit import walk_stmts
        from ..backend import PlacedTile
        from .layout import kernel_row_elems, layout_of, nz_offset, row_padding

        out = []
        row_elems = kernel_row_elems(kernel)
        accumulators = set()
        for s in walk_stmts(kernel.body):
            if not isinstance(s, T.Gemm):
                continue
            accumulators.add(s.c.buffer.name)
            for r in (s.a, s.b):
                b, shape = r.buffer, r.buffer.const_shape
                if not shape or len(shape) != 2 or any(p.name == b.name for p in out):
                    continue
                c0 = 32 // b.dtype.bytes
                rows_pad, col_blocks = -(-shape[0] // 16) * 16, -(-shape[1] // c0)
                out.append(PlacedTile(
                    b.name, f"L1 {b.name}: {shape[0]}x{shape[1]} (NZ fractals of 16 x {c0})", shape[0], shape[1],
                    lambda i, j, rp=rows_pad, c0=c0: nz_offset(i, j, rp, c0),
                    lambda i, j, n=col_blocks, c0=c0: (i // 16) * n + j // c0, (rows_pad // 16) * col_blocks,
                    "cell: element offset in L1, fractal; Nd2Nz DataCopy writes this layout, LoadData moves whole "
                    "fractals to L0A/L0B"))
        for s in walk_stmts(kernel.body):
            if not isinstance(s, T.Alloc) or s.buffer.scope in ("global", "var"):  # var: a scalar-unit variable
                continue
            b, shape = s.buffer, s.buffer.const_shape
            if not shape or len(shape) > 2 or b.name in accumulators or any(p.name == b.name for p in out):
                continue
            with row_padding(row_elems):
                lay = layout_of(tuple(shape))
            rows, cols = (shape[0], shape[1]) if lay.is_2d else (1, shape[0])
            per_block = 32 // b.dtype.bytes
            out.append(PlacedTile(
                b.name, f"UB {b.name}: {'x'.join(map(str, shape))} (rows padded to {lay.cols_pad} elements)"
                if lay.is_2d else f"UB {b.name}: {shape[0]}", rows, cols,
                lambda i, j, cp=lay.cols_pad: i * cp + j,
                lambda i, j, cp=lay.cols_pad, n=per_block: (i * cp + j) // n,
                -(-lay.count // per_block),
                "cell: element offset in UB, 32-byte block; vector calls run over whole 256-byte repeats of it"))
        return out

    def model_errors(self):
        from .model_run import ModelError

        return (ModelError,)

    def run_on_model(self, result, kernel: str, arrays: dict, sizes: dict[str, int]) -> str:
        """A kernel, or a function of several launches end to end through its launcher header's NAME_launch (one
        scratch buffer of NAME_scratch_bytes, the stages in order: model_run.build_sequence_runner)."""
        from .model_run import build_runner, build_sequence_runner, run_on_model, run_sequence_on_model

        seq = next((s for s in getattr(result.simt, "launches", []) if s.name == kernel), None)
        if seq is not None:
            exe = build_sequence_runner(result.source, result.simt, seq)
            err, scratch = run_sequence_on_model(exe, seq, {**sizes, **arrays}, cores=MODEL_CORES)
            self._scratch_bytes[kernel] = scratch
            return err
        program = next(p for p in result.simt if p.name == kernel)
        exe = build_runner(result.source, program)
        return run_on_model(exe, program, {**sizes, **arrays}, cores=MODEL_CORES)

    _scratch_bytes: dict[str, int] = {}  # of the last run of each function of several launches (describe_run)

    def describe_run(self, result, kernel: str) -> str:
        seq = next((s for s in getattr(result.simt, "launches", []) if s.name == kernel), None)
        if seq is not None:
            types = ", ".join(next(p.kernel_type for p in result.simt if p.name == st) for st in seq.stages)
            return (f"AscendC on {self.host_model}: {kernel}_launch, {len(seq.stages)} launches ({types}), "
                    f"{self._scratch_bytes.get(kernel, '?')} bytes of scratch")
        program = next(p for p in result.simt if p.name == kernel)
        return f"AscendC on {self.host_model}, {program.kernel_type}"


BACKEND = AscendBackend()
