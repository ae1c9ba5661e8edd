"""The HIP back end for AMD Instinct GPUs (gfx90a, gfx942): codegen, device prelude, toolchain."""
