"""Testing aids that sit above the compiler's layers: the SIMT-level interpreter (simt_interp) and
output comparison with reports (compare: assert_close, check_kernel; numpy only)."""

from .compare import DEFAULT_TOLERANCE, Comparison, MismatchError, assert_close, check_kernel, compare

__all__ = ["assert_close", "check_kernel", "compare", "Comparison", "MismatchError", "DEFAULT_TOLERANCE"]
