"""Autotuning: search spaces declared in the source (space), the tuner that compiles, checks and times their
candidates (tilec tune: plan, worker in tilec.runtime.tune_worker, collect), the tuning database (database) and
the build of one artifact that picks its configuration per shape (multi)."""
