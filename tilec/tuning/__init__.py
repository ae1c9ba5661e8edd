"""Autotuning: the tuner that compiles, checks and times the candidates of a source's search space (tilec tune:
plan, worker in tilec.runtime.tune_worker, collect), the tuning database (database) and the build of one artifact
that picks its configuration per shape around the plain build (multi). The search spaces themselves, `tune()`
consts, are language: tilec/parser/tune.py."""
