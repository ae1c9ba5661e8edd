"""A module whose specialized build is still compiling: `tilec.load(..., background=True)`.

Calls run a fallback -- a prebuilt artifact of the same kernels, or their quick generic configuration compiled
beside the specialized one -- until the specialized module is ready, then the specialized one. Both launch on the
caller's stream, so the switch needs no synchronization: the stream orders every launch after the ones before it,
whichever module they came from. The switch never happens while the caller's stream is capturing a CUDA graph: a
graph captures the module that was serving when its capture began, and the specialized module is loaded (its first
cuModuleLoadData, which a capture forbids) by the first call after the capture.

This module compiles nothing itself: its builders are callables that tilec.load gives it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable


class BackgroundModule:
    """Kernels as attributes, as a Module's; `serving` says which module the next call runs ("fallback" or
    "specialized"); `wait()` blocks until the specialized module is built and returns it."""

    def __init__(self, build: Callable[[], object], fallback: Callable[[], object] | None, name: str = "<module>"):
        self.name = name
        self._cond = threading.Condition()
        self._built = threading.Event()  # the specialized build finished (a module, or an error)
        self._fallback_done = threading.Event()
        self._specialized = None
        self._fallback_module = None
        self._error: BaseException | None = None
        self._in_use = None  # the module calls run now
        # The caller waits for one thread's start, nothing else: that thread starts the fallback's and then builds.
        threading.Thread(target=self._start, args=(build, fallback), daemon=True, name=f"tilec build {name}").start()

    def _start(self, build, fallback) -> None:
        # Give the GIL back at once: a new thread holds it until the switch interval (5 ms) while it imports the
        # compiler, and the caller, returning from tilec.load, would wait that long for it (measured: a background
        # load returned in 28-121 ms on a loaded 2-core machine before this; bench/RESULTS.md).
        time.sleep(0.001)
        if fallback is not None:
            threading.Thread(target=self._run, args=(fallback, self._fallback_done, "_fallback_module", None),
                             daemon=True, name=f"tilec fallback {self.name}").start()
        self._run(build, self._built, "_specialized", "_error")

    def _run(self, make, done: threading.Event, slot: str, error_slot: str | None) -> None:
        try:
            value, error = make(), None
        except BaseException as e:  # noqa: BLE001 -- reported by the calls and wait(); a failed fallback is skipped
            value, error = None, e
        with self._cond:
            setattr(self, slot, value)
            if error_slot:
                setattr(self, error_slot, error)
            done.set()
            self._cond.notify_all()

    @property
    def serving(self) -> str:
        """Which module the calls run now: "specialized", "fallback", or "none" before the first call."""
        if self._in_use is None:
            return "none"
        return "specialized" if self._in_use is self._specialized else "fallback"

    def wait(self, timeout: float | None = None):
        """The specialized module, once built (its compile error, raised, if the build failed)."""
        if not self._built.wait(timeout):
            raise TimeoutError(f"{self.name}: the specialized build is still running")
        if self._error is not None:
            raise self._error
        return self._specialized

    def module_for_call(self, capturing: bool):
        """The module a call runs: the specialized one once it is built, unless the caller's stream is capturing a
        graph (the module in use then stays); before anything has served, the first of the fallback and the
        specialized module to be ready (the specialized build's error, raised, when it failed and no fallback
        loaded)."""
        with self._cond:
            if self._built.is_set() and self._error is None and not capturing:
                self._in_use = self._specialized
            while self._in_use is None:
                if self._fallback_module is not None:
                    self._in_use = self._fallback_module
                elif self._built.is_set():
                    if self._error is not None:
                        raise self._error
                    self._in_use = self._specialized
                else:
                    self._cond.wait()
            return self._in_use

    def __getattr__(self, kernel: str):
        if kernel.startswith("_"):
            raise AttributeError(kernel)
        return BackgroundKernel(self, kernel)


class BackgroundKernel:
    def __init__(self, owner: BackgroundModule, name: str):
        self.owner, self.name = owner, name

    def __call__(self, *args, **kwargs):
        mod = self.owner.module_for_call(stream_is_capturing(kwargs.get("stream")))
        return getattr(mod, self.name)(*args, **kwargs)


def stream_is_capturing(stream) -> bool:
    """Whether the stream a call launches on is capturing a CUDA graph: torch's current stream (when torch is in
    use and no stream is given), or the given stream as the driver reports it."""
    if stream is None:
        torch = sys.modules.get("torch")
        return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    from .cuda_driver import Driver

    handle = getattr(stream, "cuda_stream", stream)  # a torch.cuda.Stream, or a CUstream as an integer
    return Driver.get().is_capturing(int(handle or 0))
