"""Testing aids that sit above the compiler's layers: the SIMT-level interpreter (simt_interp)."""
