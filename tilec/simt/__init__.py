"""The SIMT interpreter: SIMT IR executed lane by lane on numpy arrays (interp.py; sm90's TMA, mbarriers, wgmma and
thread-block clusters in hopper.py). `tilec tune` checks each configuration's lowering with it, `tilec layout` and
`-R` trace a block's shared-memory accesses with it, and the tests check every lowering against the Tile IR
interpreter (tilec/interp) with it."""
