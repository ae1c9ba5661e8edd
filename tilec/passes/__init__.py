"""Tile IR and SIMT IR passes, one per file, in the order of shared/DESIGN.md.

Each pass is a function `run(module, rep[, target]) -> module` and a docstring saying what it assumes
and what it guarantees. The driver (tilec/driver.py) runs them in order; `tilec --emit-ir=after:NAME`
prints the IR after the pass called NAME. The planning passes record their decisions in each kernel's
schedule (tilec/ir/schedule.py); lowering_extension.py is how a target adds its own machinery to
lower-to-simt.
"""
