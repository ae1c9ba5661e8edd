"""The C launcher that the CUDA and HIP back ends share: header.py generates a self-contained C source that embeds
the device images and launches each kernel (CUDA's header and object; HIP's object spells the same functions with
its own API, tilec/targets/hip/launcher.py), dispatch.py the dispatcher of a tuned kernel over its variants, from
the manifest's dispatch table. Both work from manifest data only."""
