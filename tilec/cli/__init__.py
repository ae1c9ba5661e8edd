"""The `tilec` command line (nvcc conventions)."""
