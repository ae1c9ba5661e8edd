"""The AscendC pipeline's passes over checked Tile IR, in order (see backend.PASSES)."""
