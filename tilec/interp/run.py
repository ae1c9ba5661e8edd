"""Convenience layer over the interpreter: random arguments from a signature, run, summarize."""

from __future__ import annotations

import numpy as np

from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, fold
from ..ir.visit import rewrite_expr
from .tile_interp import Interpreter, InterpreterError, storage_dtype

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


def random_inputs(kernel: T.Kernel | T.Launches, sizes: dict[str, int], seed: int = 0) -> dict[str, object]:
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


def public_kernels(module: T.Module) -> list[T.Kernel | T.Launches]:
    """What a caller launches by name: the kernels that are not a stage of a multi-launch kernel, then the
    multi-launch kernels (each with a kernel's `name`, `params` and `size_vars`)."""
    return [k for k in module.kernels if k.stage_of is None] + list(module.launches)


def run_launches(module: T.Module, seq: T.Launches, args: dict[str, object], stdout=None) -> dict[str, object]:
    """Execute a multi-launch kernel: fresh scratch tensors (floats NaN, integers their largest value, so that a
    read of an element no launch wrote shows), then every stage kernel in order on the arguments and the scratch.
    Outputs are updated in place; the scratch is dropped."""
    sizes: dict[str, int] = {}
    for p in seq.params:
        if isinstance(p, T.Buffer):
            for d, n in zip(p.shape, np.shape(args[p.name]), strict=False):
                if isinstance(d, T.Var):
                    sizes.setdefault(d.name, int(n))
    space = dict(args)
    for b in seq.scratch:
        space[b.name] = fresh_scratch(b.dtype, shape_of(b, sizes), b.zeroed)
    kernels = {k.name: k for k in module.kernels}
    for st in seq.stages:
        Interpreter(kernels[st.kernel], {a: space[a] for a in st.args}, stdout).run()
    check_zeroed_left_zero(seq, space)
    return args


def check_zeroed_left_zero(seq: T.Launches, space: dict[str, object]) -> None:
    """A zeroed scratch tensor must be zero again when the function ends: the runtimes zero it once and keep it,
    so whatever a call leaves there is what the next call starts from."""
    for b in seq.scratch:
        if b.zeroed:
            left = np.argwhere(np.asarray(space[b.name]) != 0)
            if len(left):
                where = [int(i) for i in left[0]]
                raise InterpreterError(
                    f"'{seq.name}' ends with {len(left)} nonzero element(s) of its zeroed scratch tensor '{b.name}' "
                    f"(first {where}: {np.asarray(space[b.name])[tuple(where)]}); the runtimes zero it once and keep "
                    "it, so the next call would start from these values: set each element back to zero before "
                    "the function's last launch ends", b.span)


def run_any(module: T.Module, unit: T.Kernel | T.Launches, args: dict[str, object], stdout=None):
    """run_kernel or run_launches, whichever `unit` (of public_kernels) needs."""
    if isinstance(unit, T.Launches):
        return run_launches(module, unit, args, stdout)
    return run_kernel(unit, args, stdout)


def fresh_scratch(dtype, shape: tuple[int, ...], zeroed: bool = False) -> np.ndarray:
    np_dt = storage_dtype(dtype)
    if zeroed:
        return np.zeros(shape, dtype=np_dt)
    if dtype.is_float:
        return np.full(shape, np.nan, dtype=np_dt)
    if dtype.is_bool:
        return np.ones(shape, dtype=bool)
    return np.full(shape, np.iinfo(np_dt).max, dtype=np_dt)


def summarize(kernel: T.Kernel | T.Launches, args: dict[str, object]) -> str:
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
