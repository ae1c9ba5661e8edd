"""Looking inside a compiled kernel: layout plots (`tilec layout`), shared-memory access patterns and their bank
conflicts, and the remarks that explain the compiler's choices.

Above the compiler: these modules read what tilec.compile produced (the kernel's schedule, its SIMT IR) and
never change it; tilec/ir, tilec/passes and tilec/targets do not import them.

* views.py    -- the grids a plot shows, from the layouts the compiler inferred (tilec/ir/layout.py) and the
                 instruction tables it lowers with (targets/cuda/mma_layouts.py, targets/hip/mfma_layouts.py,
                 targets/ascend/layout.py);
* access.py   -- the shared-memory accesses one block really makes (the SIMT interpreter runs the lowered
                 code) and the bank conflicts among them;
* layout.py   -- compile a kernel and build its views (what `tilec layout` calls);
* svg.py      -- SVG, standard library only; raster.py -- PNG/PDF through matplotlib (the `tilec[plot]` extra);
* remarks.py  -- the remarks that need a compiled kernel (bank conflicts) and their text form.
"""
