"""`tilec run FILE --target ascend910b [--check]`: build the generated AscendC source against tilec's CPU model,
run every kernel on random inputs and, with --check, compare its outputs with the Tile IR interpreter."""

from __future__ import annotations

import copy
import sys

from ..diagnostics import CompileError, Diagnostic

MODEL_CORES = 8  # model cores: fewer than the chip's, so that each core loops over several tiles


def cmd_run_ascend(args, defines: dict, sizes: dict[str, int]) -> int:
    import numpy as np

    from .. import compile as tilec_compile
    from ..interp.run import DEFAULT_SIZE, random_inputs, run_kernel
    from ..targets.ascend.model_run import build_runner, run_on_model
    from .gpu import TOLERANCE

    result = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                           target=args.target)
    reference = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel)
    programs = {p.name: p for p in result.module.attrs_ascend}
    failures = 0
    for k in reference.module.kernels:
        try:
            arrays = random_inputs(k, sizes, seed=args.seed)
        except ValueError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        program = programs[k.name]
        exe = build_runner(result.source, program)
        got = copy.deepcopy(arrays)
        full_sizes = {v.name: sizes.get(v.name, DEFAULT_SIZE) for v in k.size_vars}
        warnings = run_on_model(exe, program, {**full_sizes, **got}, cores=MODEL_CORES)
        sys.stderr.write(warnings)
        outs = [p for p in k.params if not hasattr(p, "kind") and p.is_output]
        for p in outs:
            f = got[p.name].astype(np.float64)
            print(f"{k.name}.{p.name}: {p.dtype}{list(f.shape)}  min {np.nanmin(f) if f.size else 0:.6g}  "
                  f"max {np.nanmax(f) if f.size else 0:.6g}  (AscendC on tilec's CPU model, {program.kernel_type})")
        if not args.check:
            continue
        run_kernel(k, arrays)
        for p in outs:
            rtol, atol = TOLERANCE.get(p.dtype.name, (0, 0))
            a, b = got[p.name].astype(np.float64), arrays[p.name].astype(np.float64)
            close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
            err = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
            status = "PASS" if close.all() else "FAIL"
            failures += status == "FAIL"
            print(f"  check {p.name} against the interpreter: {status} (max |err| {err:.3g}, rtol {rtol}, atol {atol}, "
                  f"{int((~close).sum())} of {close.size} outside)")
    return 1 if failures else 0
