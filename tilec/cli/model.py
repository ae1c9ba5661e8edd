"""`tilec run FILE --target T [--check]` for a back end whose device is out of reach but which has a CPU model of
it (Backend.host_model: AscendC's model of its API): build the generated source against the model, run every kernel
on random inputs and, with --check, compare its outputs with the Tile IR interpreter."""

from __future__ import annotations

import copy
import sys

from ..diagnostics import CompileError, Diagnostic


def cmd_run_model(args, backend, sizes: dict[str, int]) -> int:
    import numpy as np

    from .. import compile as tilec_compile
    from ..interp.run import DEFAULT_SIZE, random_inputs, run_kernel
    from ..testing.compare import compare
    from .common import compile_options
    from .run import run_sizes

    options = compile_options(args)
    result = tilec_compile(args.file, options=options)
    reference = tilec_compile(args.file, options=options.replace(targets=()))
    failures = 0
    for k in reference.module.kernels:
        try:
            k_sizes = run_sizes(k, sizes)
            arrays = random_inputs(k, k_sizes, seed=args.seed)
        except ValueError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        got = copy.deepcopy(arrays)
        full_sizes = {v.name: k_sizes.get(v.name, DEFAULT_SIZE) for v in k.size_vars}
        try:
            sys.stderr.write(backend.run_on_model(result, k.name, got, full_sizes))
        except backend.runtime_errors() as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        outs = [p for p in k.params if not hasattr(p, "kind") and p.is_output]
        where = backend.describe_run(result, k.name)
        for p in outs:
            f = got[p.name].astype(np.float64)
            print(f"{k.name}.{p.name}: {p.dtype}{list(f.shape)}  min {np.nanmin(f) if f.size else 0:.6g}  "
                  f"max {np.nanmax(f) if f.size else 0:.6g}  ({where})")
        if not args.check:
            continue
        run_kernel(k, arrays)
        for p in outs:
            c = compare(got[p.name], arrays[p.name], getattr(args, "rtol", None), getattr(args, "atol", None),
                        name=f"{k.name}.{p.name}")
            failures += not c.ok
            print(f"  check {p.name} against the interpreter: " + c.verdict().replace("\n", "\n  "))
    return 1 if failures else 0
