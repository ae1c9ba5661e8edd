"""`tilec run FILE --target T [--check]` for a back end whose device is out of reach but which has a CPU model of
it (Backend.host_model: AscendC's model of its API): build the generated source against the model, run every kernel
on random inputs and, with --check, compare its outputs with the Tile IR interpreter (or `--reference MOD:FN`'s)."""

from __future__ import annotations

import copy
import sys

from ..diagnostics import CompileError, Diagnostic
from .gpu import _reference_function


def cmd_run_model(args, backend, sizes: dict[str, int]) -> int:
    import numpy as np

    from .. import compile as tilec_compile
    from ..interp.run import DEFAULT_SIZE, public_kernels, random_inputs, run_any
    from ..testing.compare import compare
    from .common import compile_options
    from .sizes import run_sizes

    options = compile_options(args)
    ref_spec = getattr(args, "reference", None)
    ref_fn = _reference_function(ref_spec) if ref_spec and args.check else None
    result = tilec_compile(args.file, options=options)
    reference = tilec_compile(args.file, options=options.replace(targets=()))
    failures = 0
    # what a caller launches: each kernel, and each function of several launches as a whole (its stages in order
    # on one scratch buffer, as the back end's launcher runs them); a stage on inputs of its own only when --kernel
    # names it
    for k in public_kernels(reference.module) or reference.module.kernels:
        try:
            k_sizes = run_sizes(k, sizes)
            arrays = random_inputs(k, k_sizes, seed=args.seed)
        except ValueError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        got = copy.deepcopy(arrays)
        inputs = [copy.deepcopy(arrays[p.name]) for p in k.params if hasattr(p, "kind") or not p.is_output]
        full_sizes = {v.name: k_sizes.get(v.name, DEFAULT_SIZE) for v in k.size_vars}
        try:
            sys.stderr.write(backend.run_on_model(result, k.name, got, full_sizes))
        except backend.model_errors() as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        outs = [p for p in k.params if not hasattr(p, "kind") and p.is_output]
        where = backend.describe_run(result, k.name)
        for p in outs:
            f = got[p.name].astype(np.float64)
            print(f"{k.name}.{p.name}: {p.dtype}{list(f.shape)}  min {np.nanmin(f) if f.size else 0:.6g}  "
                  f"max {np.nanmax(f) if f.size else 0:.6g}  ({where})")
        if not args.check:
            continue
        if ref_fn is not None:
            wanted = _reference_outputs(ref_fn, ref_spec, inputs, outs, k.name)
        else:
            run_any(reference.module, k, arrays)
            wanted = {p.name: arrays[p.name] for p in outs}
        for p in outs:
            c = compare(got[p.name], wanted[p.name], getattr(args, "rtol", None), getattr(args, "atol", None),
                        name=f"{k.name}.{p.name}")
            failures += not c.ok
            source = "--reference" if ref_fn else "the interpreter"
            print(f"  check {p.name} against {source}: " + c.verdict().replace("\n", "\n  "))
    return 1 if failures else 0


def _reference_outputs(ref_fn, spec: str, inputs: list, outs: list, name: str) -> dict:
    """{output name: expected array} from the --reference function called with the kernel's inputs in order."""
    import numpy as np

    try:
        got = ref_fn(*inputs)
    except Exception as e:  # the user's function: its failure is a diagnostic, not an internal error
        raise CompileError([Diagnostic("error", f"--reference {spec} raised {type(e).__name__}: {e}")]) from None
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    if len(got) != len(outs):
        names = ", ".join(p.name for p in outs)
        raise CompileError([Diagnostic("error", f"--reference {spec} returned {len(got)} value(s) for kernel '{name}', "
                                                f"which has {len(outs)} output(s) ({names})")])
    return {p.name: np.asarray(g) for p, g in zip(outs, got, strict=True)}
