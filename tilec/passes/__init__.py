"""Tile IR passes, one per file, in the order of shared/DESIGN.md.

Each pass is a function `run(module, ctx) -> module` and a docstring saying what it assumes and
what it guarantees. `PIPELINE` lists them in order; `tilec --emit-ir=after:NAME` prints the IR
after the pass called NAME.
"""
