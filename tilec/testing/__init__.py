"""Testing aids that sit above the compiler's layers: output comparison with reports (compare: assert_close,
check_kernel; numpy only), the fuzzer and its differential checks. (The SIMT interpreter, which `tilec tune`,
`tilec layout` and `-R` use too, is tilec/simt/.)"""

from .compare import DEFAULT_TOLERANCE, Comparison, MismatchError, assert_close, check_kernel, compare

__all__ = ["assert_close", "check_kernel", "compare", "Comparison", "MismatchError", "DEFAULT_TOLERANCE"]
