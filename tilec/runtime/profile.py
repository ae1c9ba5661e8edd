"""Recording a profiled kernel's timeline on the GPU (the runtime half of `tilec profile`).

An artifact built with `tilec profile` (or `CompileOptions(profile=True)`) carries, per kernel, a manifest entry
`profile` and a module variable `tilec_profile` ({buffer, capacity, blocks}). While that buffer is null the
kernel runs as usual (its marks test a null pointer); `record` points it at a zeroed device buffer for one
launch, reads the marks back and decodes them (tilec/runtime/timeline.py).

    tl = tilec.runtime.profile.record(mod.flash_attention, Q, K, V, O)
    print(tl.summary()); json.dump(tl.chrome_trace(), open("trace.json", "w"))

`TILEC_PROFILE=trace.json` in the environment makes every call of a profiled kernel of a module loaded
afterwards record itself: the trace file is rewritten after each call (all calls so far) and each call's
summary goes to stderr. `python -m tilec.runtime.profile_worker ARTIFACT --size ...` (what `tilec profile`
runs) launches on random inputs, writes the trace and the summary, and measures the instrumentation's overhead
against the same kernel with recording off and, given `--baseline`, against an uninstrumented build.
"""

from __future__ import annotations

import struct
import sys

import numpy as np

from .arrays import ArgumentError
from .timeline import Timeline, decode, write_trace

DEFAULT_CAPACITY = 2048  # marks per warp
DEFAULT_MAX_BYTES = 256 << 20  # blocks past this much record nothing
DEFAULT_BLOCKS = 256  # blocks `record` decodes (the first ones, in linear order): a sample for the summary
_CONFIG = struct.Struct("<QII")  # TilecProfileConfig: buffer, capacity, blocks


class _Recording:
    """The module variable of one kernel's profile, pointed at a device buffer for a launch."""

    def __init__(self, kernel, device_args, capacity: int, max_bytes: int, stream=None,
                 max_blocks: int | None = None) -> None:
        entry = kernel.entry
        if "profile" not in entry:
            raise ArgumentError(f"{kernel.name} was not built for profiling: build it with `tilec profile` or "
                                "`--profile`")
        plan = kernel.launch_plan(*device_args, stream=stream)
        self.kernel, self.plan, self.capacity = plan.kernel, plan, capacity
        self.profile = plan.kernel.entry.get("profile", entry["profile"])
        self.warps = -(-plan.threads // 32)
        slot = int(self.profile["header_words"]) + capacity
        per_block = self.warps * slot * 8
        nblocks = plan.grid[0] * plan.grid[1] * plan.grid[2]
        self.blocks = max(0, min(nblocks, max_bytes // per_block, max_blocks or nblocks))
        if self.blocks == 0:
            raise ArgumentError(f"{kernel.name}: one block's record ({per_block} bytes) exceeds the buffer limit "
                                f"({max_bytes} bytes); lower the capacity")
        drv = plan.driver
        self.nbytes = self.blocks * per_block
        device = next((d for d, v in type(drv)._instances.items() if v is drv), 0)
        self.address, size = drv.global_address(kernel.module.cuda_module(device), self.profile["symbol"])
        if size < _CONFIG.size:
            raise ArgumentError(f"{kernel.name}: the module's {self.profile['symbol']} is {size} bytes")
        self.buffer = drv.alloc(self.nbytes)
        drv.zero(self.buffer, self.nbytes)

    def arm(self, on: bool) -> None:
        import ctypes

        config = ctypes.create_string_buffer(_CONFIG.pack(self.buffer if on else 0, self.capacity, self.blocks))
        self.plan.driver.htod(self.address, config, _CONFIG.size)

    def read(self, clock_ghz: float | None = None) -> Timeline:
        drv = self.plan.driver
        words = np.empty(self.nbytes // 8, dtype=np.uint64)
        drv.synchronize()
        drv.dtoh(words.ctypes.data, self.buffer, self.nbytes)
        return decode(words, self.profile, kernel=self.kernel.name, grid=self.plan.grid, threads=self.plan.threads,
                      capacity=self.capacity, blocks=self.blocks, clock_ghz=clock_ghz)

    def free(self) -> None:
        self.arm(False)
        self.plan.driver.free(self.buffer)


def _on_device(kernel, args):
    """The arguments with numpy arrays copied to GPU 0, the copies (to free) and how to copy outputs back."""
    from .arrays import adapter
    from .cuda_driver import Driver
    from .launch import _DeviceBuffer

    layout = kernel._arguments or kernel._make_layout()
    if len(args) != layout.nparams:
        args = kernel._with_outputs(args, layout)
    drv = Driver.get(0)
    device_args, staged, outputs = list(args), [], []
    for t in layout.tensors:
        a = args[t.index]
        if adapter(type(a)).kind == "numpy":
            ptr = drv.alloc(a.nbytes)
            staged.append(ptr)
            drv.htod(ptr, a.ctypes.data, a.nbytes)
            device_args[t.index] = _DeviceBuffer(ptr, a.shape)
            if t.output:
                outputs.append((a, ptr))
    return device_args, staged, outputs, drv


def record(kernel, *args, capacity: int = DEFAULT_CAPACITY, max_bytes: int = DEFAULT_MAX_BYTES, stream=None,
           clock_ghz: float | None = None, max_blocks: int | None = DEFAULT_BLOCKS) -> Timeline:
    """Launch `kernel(*args)` once with recording on (synchronously) and return its timeline: the first
    `max_blocks` blocks (None: as many as `max_bytes` holds). numpy arguments are staged to the GPU and outputs
    copied back, as a plain call does."""
    device_args, staged, outputs, drv = _on_device(kernel, args)
    rec = None
    try:
        rec = _Recording(kernel, device_args, capacity, max_bytes, stream, max_blocks)
        rec.arm(True)
        kernel(*device_args, stream=stream, sync=True)
        timeline = rec.read(clock_ghz)
        for a, ptr in outputs:
            drv.dtoh(a.ctypes.data, ptr, a.nbytes)
        return timeline
    finally:
        if rec is not None:
            rec.free()
        for ptr in staged:
            drv.free(ptr)


def bench_recording(kernel, *args, on: bool, capacity: int = DEFAULT_CAPACITY, max_bytes: int = DEFAULT_MAX_BYTES,
                    warmup: int = 10, iters: int = 50) -> dict:
    """kernel.bench with the profile buffer armed (on: every block that `max_bytes` holds records) or not: the
    instrumentation's cost."""
    device_args, staged, _, drv = _on_device(kernel, args)
    rec = None
    try:
        rec = _Recording(kernel, device_args, capacity, max_bytes)
        rec.arm(on)
        return kernel.bench(*device_args, warmup=warmup, iters=iters)
    finally:
        if rec is not None:
            rec.free()
        for ptr in staged:
            drv.free(ptr)


class _RecordingKernel:
    """A profiled kernel under TILEC_PROFILE: every call records and rewrites the trace file."""

    def __init__(self, kernel, path: str, timelines: list[Timeline]) -> None:
        self._kernel, self._path, self._timelines = kernel, path, timelines

    def __getattr__(self, item):
        return getattr(self._kernel, item)

    def __call__(self, *args, stream=None, sync=None):
        kernel = self._kernel
        layout = kernel._arguments or kernel._make_layout()
        if len(args) != layout.nparams:
            args = kernel._with_outputs(args, layout)
        tl = record(kernel, *args, stream=stream)
        self._timelines.append(tl)
        write_trace(self._path, self._timelines)
        print(tl.summary(), file=sys.stderr)
        outs = [args[i] for i in layout.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs) if outs else None


def install(module, path: str) -> None:
    """Make the module's profiled kernels record every call into the trace file `path` (TILEC_PROFILE)."""
    timelines: list[Timeline] = []
    for name, k in list(module.kernels.items()):
        if "profile" in k.entry:
            module.kernels[name] = _RecordingKernel(k, path, timelines)
