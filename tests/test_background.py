"""tilec.load(..., background=True) (issue #31, docs/deploy.md#compiling-in-the-background): calls run the fallback
until the specialized build is ready, then the specialized module -- never switching while the caller's stream
captures a CUDA graph -- against stand-in modules and builders (tilec/runtime/background.py compiles nothing)."""

from __future__ import annotations

import threading

import pytest

import tilec
from tilec.runtime import background
from tilec.runtime.background import BackgroundModule


class Stub:
    """A module whose kernel `k` says which module ran it."""

    def __init__(self, tag):
        self.tag = tag

    def k(self, *args, **kwargs):
        return self.tag


def _gated(module, gate: threading.Event):
    def build():
        assert gate.wait(30)
        return module
    return build


def test_calls_run_the_fallback_until_the_build_is_ready(monkeypatch):
    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: False)
    gate = threading.Event()
    mod = BackgroundModule(_gated(Stub("specialized"), gate), lambda: Stub("fallback"), "k.tile")
    assert mod.serving == "none"  # returned before anything was built
    assert mod.k(1) == "fallback" and mod.serving == "fallback"
    assert mod.k(2) == "fallback"  # the build is still waiting at its gate
    gate.set()
    assert mod.wait(30).tag == "specialized"
    assert mod.k(3) == "specialized" and mod.serving == "specialized"


def test_no_switch_while_the_callers_stream_captures_a_graph(monkeypatch):
    capturing = {"now": False}
    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: capturing["now"])
    gate = threading.Event()
    mod = BackgroundModule(_gated(Stub("specialized"), gate), lambda: Stub("fallback"), "k.tile")
    assert mod.k() == "fallback"
    gate.set()
    mod.wait(30)
    capturing["now"] = True  # the build is ready, but a capture is in progress: the graph keeps the fallback
    assert mod.k() == "fallback" and mod.k() == "fallback"
    capturing["now"] = False
    assert mod.k() == "specialized"
    capturing["now"] = True  # once switched, a capture records the specialized module
    assert mod.k() == "specialized"


def test_without_a_fallback_the_first_call_waits_for_the_build(monkeypatch):
    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: False)

    def no_generic():
        raise LookupError("no tuning database")

    gate = threading.Event()
    mod = BackgroundModule(_gated(Stub("specialized"), gate), no_generic, "k.tile")
    threading.Timer(0.2, gate.set).start()
    assert mod.k() == "specialized"


def test_a_failed_build_is_raised_by_the_calls_and_wait(monkeypatch):
    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: False)

    def broken():
        raise ValueError("k.tile:3:5: error: no such thing")

    mod = BackgroundModule(broken, None, "k.tile")
    with pytest.raises(ValueError, match="no such thing"):
        mod.k()
    with pytest.raises(ValueError, match="no such thing"):
        mod.wait(30)
    served = BackgroundModule(broken, lambda: Stub("fallback"), "k.tile")
    with pytest.raises(ValueError):
        served.wait(30)
    assert served.k() == "fallback"  # a fallback that loaded keeps serving


def test_tilec_load_in_the_background(monkeypatch, tmp_path):
    """tilec.load(background=True) returns before compiling; the fallback given (an artifact's path) serves first."""
    import tilec.runtime as rt

    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: False)
    gate = threading.Event()
    built = []

    def slow_compile(path, target, options, kernel, no_jit):
        assert gate.wait(30)
        built.append(options)
        return Stub("specialized")

    monkeypatch.setattr(tilec, "_load_compiled", slow_compile)
    monkeypatch.setattr(rt, "load", lambda path, **kw: Stub(f"prebuilt {path}"))
    mod = tilec.load("samples/vector_add.tile", "sm90", background=True, fallback="prebuilt.cubin")
    assert not built and mod.k() == "prebuilt prebuilt.cubin"
    gate.set()
    mod.wait(30)
    assert mod.k() == "specialized" and built[0].targets == ("sm90",)
    with pytest.raises(ValueError, match="no-JIT guarantee"):
        tilec.load("samples/vector_add.tile", "sm90", background=True, no_jit=True)


def test_the_generic_fallback_is_the_build_without_the_tuning_database(monkeypatch):
    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: False)
    gate = threading.Event()
    seen = []

    def compile_stub(path, target, options, kernel, no_jit):
        seen.append(options.tune_db)
        if options.tune_db != "":
            assert gate.wait(30)
            return Stub("tuned")
        return Stub("generic")

    monkeypatch.setattr(tilec, "_load_compiled", compile_stub)
    # (the tests run with TILEC_TUNE_DB="": no database unless named)
    mod = tilec.load("samples/gemm.tile", "sm90", background=True, tune_db="samples/gemm.tune.json")
    assert mod.k() == "generic" and "" in seen
    gate.set()
    mod.wait(30)
    assert mod.k() == "tuned"
    untuned = tilec.load("samples/transpose.tile", "sm90", background=True)  # no database: no generic build
    untuned.wait(30)
    assert untuned.k() == "tuned" and seen.count("") == 1


def test_the_caller_waits_for_no_option_making_import_or_build(monkeypatch):
    """What the build needs first -- the options (tilec.options), the runtime, the compiler -- is made in its thread:
    with that step held, tilec.load(background=True) still returns, and an error in it reaches wait() and the
    calls, as a compile error does."""
    monkeypatch.setattr(background, "stream_is_capturing", lambda stream: False)
    gate = threading.Event()
    real = tilec._options

    def held_options(target, option_args):
        assert gate.wait(30)
        return real(target, option_args)

    monkeypatch.setattr(tilec, "_options", held_options)
    monkeypatch.setattr(tilec, "_load_compiled", lambda path, target, options, kernel, no_jit: Stub("specialized"))
    mod = tilec.load("samples/vector_add.tile", "sm90", background=True, fallback=Stub("prebuilt"))
    assert not gate.is_set() and mod.k() == "prebuilt"  # returned, and the fallback served, with the options held
    gate.set()
    mod.wait(30)
    assert mod.k() == "specialized"

    def bad_options(target, option_args):
        raise ValueError(f"bad option for {target}")

    monkeypatch.setattr(tilec, "_options", bad_options)
    bad = tilec.load("samples/vector_add.tile", "sm90", background=True, fallback=None)
    with pytest.raises(ValueError, match="bad option for sm90"):
        bad.wait(30)
    with pytest.raises(ValueError, match="bad option for sm90"):
        bad.k()
