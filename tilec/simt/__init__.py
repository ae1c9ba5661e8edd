"""The SIMT interpreter: SIMT IR executed lane by lane on numpy arrays (interp.py; thread groups and clusters in
groups.py; a back end's instructions by the semantics their definitions name, in the back end's folder).
`tilec tune` checks each configuration's lowering with it, `tilec layout` and `-R` trace a block's shared-memory
accesses with it, and the tests check every lowering against the Tile IR interpreter (tilec/interp) with it."""
