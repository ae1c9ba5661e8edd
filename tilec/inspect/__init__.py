"""Looking inside a compiled kernel: layout plots (`tilec layout`), shared-memory access patterns and their bank
conflicts, and the remarks that explain the compiler's choices.

Above the compiler: these modules read what tilec.compile produced (the kernel's schedule, its SIMT IR) and
never change it; tilec/ir, tilec/passes and tilec/targets do not import them.

* views.py    -- the grids a plot shows, from the layouts the compiler inferred (tilec/ir/layout.py) and the
                 instruction tables it lowers with, which each back end hands over (Backend.operand_tables,
                 Backend.placed_tiles);
* access.py   -- the shared-memory accesses one block really makes (the SIMT interpreter runs the lowered
                 code) and the bank conflicts among them;
* layout.py   -- compile a kernel and build its views (what `tilec layout` calls);
* svg.py      -- SVG, standard library only; raster.py -- PNG/PDF through matplotlib (the `tilec[plot]` extra);
* remarks.py  -- the remarks that need the kernel run (bank conflicts);
* isa.py      -- a binary's disassembly (SASS, AMD ISA): its main loop's instruction mix, for the resource baseline
                 (scripts/resource_baseline.py).
"""
