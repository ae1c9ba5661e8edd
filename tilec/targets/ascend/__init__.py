"""The AscendC back end (Ascend 910B): its own pipeline from checked Tile IR, AscendC C++ source, a CPU model
of the AscendC API to run that source on, and the bisheng toolchain adapter. Entry points: backend.py."""
