"""Convenience layer over the interpreter: random arguments from a signature, run, summarize."""

from __future__ import annotations

import numpy as np

from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, fold
from ..ir.visit import rewrite_expr
from .tile_interp import Interpreter, storage_dtype

DEFAULT_SIZE = 256


def shape_of(param: T.Buffer, sizes: dict[str, int]) -> tuple[int, ...]:
    def value(e: T.Expr) -> T.Expr | None:
        if isinstance(e, T.Var) and e.kind == "size":
            return T.Const(D.I32, e.span, sizes.get(e.name, DEFAULT_SIZE))
        return None

    dims = []
    for d in param.shape:
        n = as_int(fold(rewrite_expr(d, value)))
        assert n is not None, "a tensor dimension is a formula of the runtime sizes"
        dims.append(n)
    return tuple(dims)


def random_array(dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    np_dt = storage_dtype(dtype)
    if dtype.is_float:
        return rng.standard_normal(shape, dtype=np.float32).astype(np_dt)
    if dtype.is_bool:
        return rng.integers(0, 2, shape).astype(bool)
    lo, hi = (0, 8) if dtype.kind == "uint" else (-8, 8)
    return rng.integers(lo, hi, shape).astype(np_dt)


def random_inputs(kernel: T.Kernel, sizes: dict[str, int], seed: int = 0) -> dict[str, object]:
    """Arguments for `kernel`: random normal inputs, zeroed outputs, runtime sizes from `sizes`."""
    unknown = set(sizes) - {v.name for v in kernel.size_vars}
    if unknown:
        known = ", ".join(v.name for v in kernel.size_vars) or "none"
        raise ValueError(f"kernel '{kernel.name}' has no runtime size {', '.join(sorted(unknown))} "
                         f"(its sizes: {known})")
    rng = np.random.default_rng(seed)
    args: dict[str, object] = {}
    for p in kernel.params:
        if isinstance(p, T.Var):
            args[p.name] = float(rng.uniform(0.5, 1.5)) if p.dtype.is_float else int(rng.integers(1, 8))
        elif p.is_output:
            args[p.name] = np.zeros(shape_of(p, sizes), dtype=storage_dtype(p.dtype))
        else:
            args[p.name] = random_array(p.dtype, shape_of(p, sizes), rng)
    return args


def run_kernel(kernel: T.Kernel, args: dict[str, object], stdout=None) -> dict[str, object]:
    """Execute `kernel` on `args` (numpy arrays in the declared dtypes); outputs are updated in place."""
    Interpreter(kernel, args, stdout).run()
    return args


def summarize(kernel: T.Kernel, args: dict[str, object]) -> str:
    lines = [f"kernel {kernel.name}:"]
    for p in kernel.params:
        if isinstance(p, T.Buffer) and p.is_output:
            a = np.asarray(args[p.name]).astype(np.float64)
            finite = a[np.isfinite(a)]
            stats = (f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}  "
                     f"sum {finite.sum():.6g}" if finite.size else "no finite values")
            nan = int(np.isnan(a).sum())
            lines.append(f"  {p.name}: {p.dtype}{list(a.shape)}  {stats}" + (f"  NaN {nan}" if nan else ""))
    return "\n".join(lines)
