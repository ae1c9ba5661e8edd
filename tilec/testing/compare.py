"""Comparing a kernel's output with a reference, the way kernel tests need it reported.

    from tilec.testing import assert_close, check_kernel
    assert_close(y, y_ref)                              # tolerances from the dtype (DEFAULT_TOLERANCE)
    assert_close(y, y_ref, rtol=1e-3, atol=1e-3, max_mismatch_ratio=1e-4)
    check_kernel(mod.softmax, torch.softmax_ref, x)     # run the kernel, call the reference, compare

An element matches when |actual - expected| <= atol + rtol * |expected| (NaN matches only NaN, an
infinity only the same infinity). A comparison passes when the fraction of mismatching elements is at
most `max_mismatch_ratio` (default 0: every element). The failure message gives the mismatch count
and ratio, the largest absolute and relative errors, and the worst elements with their indices,
actual and expected values. Arrays may be numpy, torch (any device, any dtype including bf16 and
fp8), cupy or anything numpy can read; they are compared in float64 on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# rtol, atol per tilec dtype: half of the format's precision and a little, for outputs accumulated in f32
DEFAULT_TOLERANCE = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 3e-2), "f32": (1e-4, 1e-4), "f64": (1e-8, 1e-8),
                     "f8e4m3": (0.125, 0.125), "f8e5m2": (0.25, 0.25)}
_DTYPE_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
                "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
WORST_SHOWN = 5


class MismatchError(AssertionError):
    def __init__(self, message: str, comparison: Comparison):
        super().__init__(message)
        self.comparison = comparison


@dataclass
class Comparison:
    name: str
    shape: tuple
    rtol: float
    atol: float
    mismatches: int
    total: int
    max_abs: float
    max_rel: float
    worst: list = field(default_factory=list)  # (index tuple, actual, expected, abs error)
    max_mismatch_ratio: float = 0.0

    @property
    def ratio(self) -> float:
        return self.mismatches / self.total if self.total else 0.0

    @property
    def ok(self) -> bool:
        return self.ratio <= self.max_mismatch_ratio

    def verdict(self) -> str:
        """PASS or FAIL with the counts, the tolerances and the worst elements (one per line)."""
        text = (f"{'PASS' if self.ok else 'FAIL'} ({self.mismatches} of {self.total} elements outside rtol "
                f"{self.rtol:g}, atol {self.atol:g}: {self.ratio:.3%}; max |err| {self.max_abs:.3g}, max rel err "
                f"{self.max_rel:.3g})")
        if self.mismatches and self.max_mismatch_ratio:
            text += f"; at most {self.max_mismatch_ratio:.3%} allowed"
        for index, got, want, err in self.worst:
            text += f"\n  at {list(index)}: got {got:.6g}, expected {want:.6g} (|err| {err:.3g})"
        return text

    def report(self) -> str:
        return f"{self.name}: {self.verdict()}"


def to_numpy(x) -> np.ndarray:
    """A host numpy copy (or view) of a numpy, torch, cupy or array-like value, in a dtype numpy has."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        x = x.detach()
        if x.dtype.is_floating_point and x.element_size() < 4:  # bf16 / fp8: numpy cannot hold them
            x = x.float()
        return x.cpu().numpy()
    if mod == "cupy":
        return x.get()
    return np.asarray(x)


def _dtype_name(x) -> str:
    name = str(getattr(x, "dtype", "")).removeprefix("torch.")
    return _DTYPE_NAMES.get(name, name)


def tolerance(dtype: str, rtol: float | None = None, atol: float | None = None) -> tuple[float, float]:
    """(rtol, atol): the given ones, else the dtype's defaults (0 for integer and unknown types)."""
    d_rtol, d_atol = DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


def compare(actual, expected, rtol: float | None = None, atol: float | None = None,
            max_mismatch_ratio: float = 0.0, name: str = "output") -> Comparison:
    """The Comparison of two arrays (see the module docstring); tolerances default by `actual`'s dtype."""
    rtol, atol = tolerance(_dtype_name(actual), rtol, atol)
    a = to_numpy(actual).astype(np.float64)
    e = to_numpy(expected).astype(np.float64)
    if a.shape != e.shape:
        raise MismatchError(f"{name}: shape {list(a.shape)} differs from the expected {list(e.shape)}",
                            Comparison(name, a.shape, rtol, atol, a.size, a.size, float("inf"), float("inf")))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a - e)
        bad = ~(err <= atol + rtol * np.abs(e))  # NaN in either makes the test false: a mismatch ...
        bad |= (np.isinf(a) | np.isinf(e)) & (a != e)  # (an infinite tolerance would accept any infinity)
        same_special = (np.isnan(a) & np.isnan(e)) | (np.isinf(a) & (a == e))
        bad &= ~same_special  # ... unless both are NaN, or the same infinity
        err = np.where(same_special, 0.0, np.where(np.isnan(err), np.inf, err))
        rel = err / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    mismatches = int(bad.sum())
    worst = []
    if mismatches:
        flat = np.where(bad.ravel(), err.ravel(), -1.0)
        count = min(WORST_SHOWN, mismatches)
        for i in np.argsort(flat, kind="stable")[::-1][:count]:
            index = tuple(int(v) for v in np.unravel_index(int(i), a.shape))
            worst.append((index, float(a[index]), float(e[index]), float(err[index])))
    return Comparison(name, a.shape, rtol, atol, mismatches, int(a.size),
                      float(err.max()) if err.size else 0.0, float(rel.max()) if rel.size else 0.0,
                      worst, max_mismatch_ratio)


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None,
                 max_mismatch_ratio: float = 0.0, name: str = "output") -> Comparison:
    """Raise MismatchError (an AssertionError) with the report unless `actual` matches `expected`;
    `expected` may also be a callable returning it. Returns the Comparison when it passes."""
    if callable(expected) and not hasattr(expected, "shape"):
        expected = expected()
    c = compare(actual, expected, rtol, atol, max_mismatch_ratio, name)
    if not c.ok:
        raise MismatchError(c.report(), c)
    return c


def check_kernel(kernel, reference: Callable, *inputs, rtol: float | None = None, atol: float | None = None,
                 max_mismatch_ratio: float = 0.0, **launch) -> list[Comparison]:
    """Run `kernel(*inputs)` (its outputs allocated by the runtime), call `reference(*inputs)` and
    assert_close each output against the reference's result (one value, or a tuple in the kernel's
    output order). Returns the comparisons."""
    got = kernel(*inputs, **launch)
    want = reference(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    names = [p["name"] for p in kernel.entry["params"] if p["kind"] == "tensor" and p.get("output")]
    if len(want) != len(got):
        raise MismatchError(f"{kernel.name}: the reference returned {len(want)} value(s) for {len(got)} output(s) "
                            f"({', '.join(names)})", Comparison(kernel.name, (), 0, 0, 1, 1, 0, 0))
    return [assert_close(g, w, rtol, atol, max_mismatch_ratio, f"{kernel.name}.{n}")
            for g, w, n in zip(got, want, names, strict=True)]
