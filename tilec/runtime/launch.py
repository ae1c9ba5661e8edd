"""Launching a kernel: `kernel(*args, stream=None, sync=None)` with a few microseconds of Python.

What a launch costs is decided here. Everything that depends only on the manifest is done once
per kernel (`_Layout`): the tensor and scalar parameters, the compiled grid formulas, and one
argument block — an 8-byte slot per parameter and size, and the `kernelParams` array of pointers
to them (then to the tensor maps) — that every launch rewrites in place and hands to
cuLaunchKernel by address. Everything that depends on the arguments' shapes (and, for TMA
kernels, the tensors' addresses) — sizes, grid, which kernel runs (TMA or its fallback), the
encoded CUtensorMaps, the CUfunction — is one `_Plan`, cached by (device, shapes, addresses).
A launch with a cached plan reads each tensor's pointer, shape and device, resolves the stream,
writes the slots and calls the driver; nothing else. The driver copies the parameters when the
launch is enqueued, so the block can be rewritten for the next launch at once (a lock keeps
concurrent launches of one kernel from interleaving their writes).

A TMA kernel's launch whose tensor rows are not a multiple of 16 bytes (odd K or N) runs the kernel's no-TMA
fallback, except where the tensors are torch tensors and the manifest says the kernel reaches the offending ones
through their tensor maps alone ("tma_only"): then each such tensor is copied into a workspace whose rows are padded
to 16 bytes (an output: written there, then copied out), on the launch's stream, and the TMA kernel runs with maps
that describe the padded rows (`_Padding`). Those plans are kept apart from the fast paths' cache, so the generated
fast path and the compiled launcher never launch one without its copies. Where TMA cannot address a tensor the kernel
stores (fp8_gemm's C at an odd N) and the kernel has a direct-stores twin (TMA loads, the threads' stores), the twin
runs instead, by the same rules for its loads: no copy of the output.

Device arrays are launched asynchronously on the caller's stream (arrays.py says which); numpy
host arrays are staged through device memory, and that path synchronizes, as it must to copy the
outputs back.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import re
import struct
import sys
import threading
from collections.abc import Callable
from typing import NamedTuple

from ..manifest import (
    PAD_BATCH,
    PAD_BATCH_HELPER,
    PAD_ROWS,
    PAD_ROWS_KEY,
    WRITTEN_IN_FULL_KEY,
    ManifestError,
    cluster_dims,
    launch_check_holds,
    launch_checks,
)
from .arrays import (
    _ADAPTERS,
    HOST,
    ArgumentError,
    TensorParam,
    adapter,
    register_adapter,
    stream_handle,
    torch_problem,
)
from .fastlaunch import IF_ALLOCATED, UNLESS_ALLOCATED, Step, held, remember, remember_steps
from .formulas import compile_formulas, evaluate
from .tensor_maps import TMA_ALIGN, TMA_MAX_STRIDE, NoTma, TensorMapArgs, tensor_map_args, tensor_map_specs

SLOT_BYTES = 8  # every parameter and size gets one 8-byte slot (kernel arguments are at most 8-byte aligned)
PLAN_CACHE_LIMIT = 1024  # plans kept per kernel; past that the cache starts over
INT32_MAX = 2**31 - 1
# padding misaligned rows for a TMA kernel (Kernel._padding_pays): the least work (the manifest's flops, whole
# tiles) per block of the fallback at which it beat the fallback on the H200, and a floor for the whole launch
PAD_MIN_FLOPS = 5e7
# with a misaligned input, whose loads the fallback narrows (8e6 until the deep 64-row tiles of s18, whose cp.async
# twins lost to padding by 1.8-2.7x at 127x4096x515 and 127x4099x515 with 5e6 a block: bench/RESULTS.md, s18)
PAD_MIN_BLOCK_FLOPS = 4e6
PAD_MIN_BLOCK_FLOPS_STORES = 1e7  # with only outputs misaligned: the fallback narrows its stores alone
PAD_FLOPS_PER_COPIED_BYTE = 500  # copies this small against the launch's work pay at any block size
# TILEC_PADDING=always / never: pad wherever TMA can take the padded tensors / run the fallback instead (A/B timing)
_PADDING = os.environ.get("TILEC_PADDING", "auto")

_INT_RANGES = {"i8": (-(2**7), 2**7 - 1), "u8": (0, 2**8 - 1), "i16": (-(2**15), 2**15 - 1), "u16": (0, 2**16 - 1),
               "i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-(2**63), 2**63 - 1),
               "u64": (0, 2**64 - 1)}
_SCALAR_CTYPES = {"i8": ctypes.c_int8, "u8": ctypes.c_uint8, "i16": ctypes.c_int16, "u16": ctypes.c_uint16,
                  "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
                  "f32": ctypes.c_float, "f64": ctypes.c_double, "bool": ctypes.c_bool,
                  "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16}  # 16-bit floats travel as their bits


def _f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def _bf16_bits(x: float) -> int:
    """bfloat16 bits of x, rounded to nearest even (NaN stays a NaN)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class _Scalar:
    """A scalar parameter: checks a Python value and writes it into its slot."""

    __slots__ = ("kernel", "name", "dtype", "index", "cell", "convert", "plain_float")

    def __init__(self, kernel: str, index: int, p: dict, slots, slot: int) -> None:
        self.kernel, self.index, self.name, self.dtype = kernel, index, p["name"], p["dtype"]
        ct = _SCALAR_CTYPES.get(self.dtype)
        if ct is None:
            raise ArgumentError(f"{kernel}: scalar '{self.name}' of type {self.dtype} cannot be passed from Python")
        self.cell = ct.from_buffer(slots, slot * SLOT_BYTES)
        self.convert = {"f16": _f16_bits, "bf16": _bf16_bits}.get(self.dtype)
        self.plain_float = self.dtype in ("f32", "f64")

    def check(self, value):
        """The value to store, or ArgumentError naming the parameter."""
        d = self.dtype
        if d in _INT_RANGES:
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise ArgumentError(f"{self.kernel}: scalar '{self.name}' is {d}: pass an integer, got "
                                    f"{type(value).__name__} {value!r}")
            value = value.__index__()
            lo, hi = _INT_RANGES[d]
            if not lo <= value <= hi:
                raise ArgumentError(f"{self.kernel}: scalar '{self.name}' = {value} does not fit {d} ({lo}..{hi})")
            return value
        if d == "bool":
            if type(value).__name__ not in ("bool", "bool_"):  # Python or numpy booleans
                raise ArgumentError(f"{self.kernel}: scalar '{self.name}' is bool: pass True or False, got "
                                    f"{type(value).__name__} {value!r}")
            return bool(value)
        if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
            raise ArgumentError(f"{self.kernel}: scalar '{self.name}' is {d}: pass a number, got "
                                f"{type(value).__name__} {value!r}")
        value = float(value)
        return self.convert(value) if self.convert else value

    def store(self, value) -> None:
        # the common cases without check()'s dispatch: a Python float for a 32/64-bit float, an int in range
        if self.plain_float and type(value) is float:
            self.cell.value = value
        else:
            self.cell.value = self.check(value)


class _Layout:
    """What a kernel's launches share, built once from its manifest entry (and its fallback's, which
    takes the same parameters and sizes, so both use one argument block)."""

    def __init__(self, kernel: Kernel) -> None:
        entry = kernel.entry
        params = entry["params"]
        self.nparams = len(params)
        self.tensors = [TensorParam(kernel.name, i, p) for i, p in enumerate(params) if p["kind"] == "tensor"]
        self.inputs = [i for i, p in enumerate(params) if not (p["kind"] == "tensor" and p.get("output"))]
        self.outputs = [t.index for t in self.tensors if t.output]
        self.size_names = list(entry["sizes"])
        self.param_names = [p["name"] for p in params]
        grid_names = set(re.findall(r"[A-Za-z_]\w*", " ".join(entry["grid"])))
        self.grid_scalars = [i for i, p in enumerate(params) if p["kind"] == "scalar" and p["name"] in grid_names
                             and p["dtype"][0] in "iu"]
        self.tmaps = tensor_map_specs(entry)
        self.checks = launch_checks(entry)
        self.tma_params = sorted({s.param_index for s in self.tmaps})
        self.key_has_pointers = bool(self.tmaps)  # encoded tensor maps hold the addresses: so does a plan
        # Slots: the tensors' pointers first (one slice assignment writes them all), then the scalars,
        # then the sizes; kernelParams lists them in the kernel's parameter order, then the maps.
        nslots = self.nparams + len(self.size_names)
        self.ntensors = len(self.tensors)
        self.slots = (ctypes.c_uint64 * max(1, nslots))()
        self.params = (ctypes.c_void_p * max(1, nslots + len(self.tmaps)))()
        base = ctypes.addressof(self.slots)
        scalar_params = [i for i, p in enumerate(params) if p["kind"] == "scalar"]
        slot_of = {t.index: k for k, t in enumerate(self.tensors)}
        slot_of.update({i: self.ntensors + j for j, i in enumerate(scalar_params)})
        for i in range(nslots):
            self.params[i] = base + slot_of.get(i, i) * SLOT_BYTES
        self.params_address = ctypes.addressof(self.params)
        self.first_map = nslots
        self.scalars = [_Scalar(kernel.name, i, params[i], self.slots, slot_of[i]) for i in scalar_params]
        self.size_cells = [ctypes.c_int32.from_buffer(self.slots, (self.nparams + j) * SLOT_BYTES)
                           for j in range(len(self.size_names))]
        # where each size is first seen: (tensor position, axis); and every dimension to check
        self.dims: list[tuple[int, int, int | str]] = []
        for t_pos, t in enumerate(self.tensors):
            for axis, d in enumerate(t.shape):
                self.dims.append((t_pos, axis, d))
        self.plans: dict[tuple, _Plan] = {}
        self.padded: dict[tuple, _Plan] = {}  # plans that pad tensors (never seen by the fast paths)
        self.written: _Plan | None = None  # the plan whose sizes and maps the block holds
        self.lock = threading.Lock()

    def bind(self, args, explicit):
        """(pointers, plan key, device, adapter of the first tensor) of a call, every tensor checked
        by its adapter. The key is the shapes, then for a TMA kernel the pointers, then the device:
        what a plan depends on. The first tensor's framework gives the stream when none is passed.
        The first call generates the binder (knowing now whether torch is imported) in its place."""
        self.bind = self._make_binder()
        return self.bind(args, explicit)

    def _make_binder(self):
        """The function that reads a call's tensor arguments: straight-line code for this kernel's
        tensors (what a loop over them would do, without the loop's per-call bookkeeping, which
        costs as much as the reading itself). Generated from the parameter count alone."""
        tensors = self.tensors
        n = len(tensors)
        if n == 0:
            fallback = adapter(int)
            return lambda args, explicit: ((), (0,), 0, fallback)
        env = {"get": _ADAPTERS.get, "adapter": adapter, "mixed": self._mixed_devices}
        torch = sys.modules.get("torch")
        if torch is not None:  # torch tensors are read inline, without a call to their adapter
            env.update(Tensor=torch.Tensor, TORCH=adapter(torch.Tensor), torch_problem=torch_problem)
        lines = ["def bind(args, explicit):"]
        for k, t in enumerate(tensors):
            env[f"T{k}"] = t
            generic = [f"v{k} = get(type(a{k})) or adapter(type(a{k}))",
                       f"p{k}, s{k}, d{k} = v{k}.view(a{k}, T{k}, explicit)"]
            lines.append(f"    a{k} = args[{t.index}]")
            if torch is not None and t.torch_dtype() is not None:
                env[f"D{k}"] = t.torch_dtype()
                lines += [f"    if type(a{k}) is Tensor:",
                          f"        d{k} = a{k}.get_device()",
                          f"        if d{k} < 0 or a{k}.dtype is not D{k} or not a{k}.is_contiguous():",
                          f"            torch_problem(a{k}, T{k})",
                          f"        p{k}, s{k}, v{k} = a{k}.data_ptr(), a{k}.shape, TORCH",
                          "    else:"] + [f"        {line}" for line in generic]
            else:
                lines += [f"    {line}" for line in generic]
        devices = ", ".join(f"d{k}" for k in range(n))
        if n > 1:
            lines.append(f"    if {' or '.join(f'd{k} != d0' for k in range(1, n))}:")
            lines.append(f"        mixed(({devices},))")
        ptrs = "".join(f"p{k}, " for k in range(n))
        key = "".join(f"s{k}, " for k in range(n)) + (ptrs if self.key_has_pointers else "") + "d0"
        lines.append(f"    return ({ptrs}), ({key}), d0, v0")
        exec("\n".join(lines), env)  # straight-line code over this kernel's parameter positions only
        return env["bind"]

    def _mixed_devices(self, devices: tuple) -> None:
        def where(d):
            return "the host" if d == HOST else f"GPU {d}"

        k = next(k for k, d in enumerate(devices) if d != devices[0])
        t = self.tensors[k]
        raise ArgumentError(f"{t.kernel}: '{t.name}' is on {where(devices[k])} but '{self.tensors[0].name}' is on "
                            f"{where(devices[0])}; pass all tensors on one device (numpy arrays are staged only when "
                            "every tensor is numpy)")


_MISS = object()  # what the fast path returns when the general path must handle a call


def _make_fast_path(layout: _Layout):
    """A launch of torch tensors with a plan and a stream launcher already made, as straight-line code for this
    kernel: the tensors read inline and checked (device, dtype, contiguity), the plan found by the same key the
    general path files it under, the argument block written and cuLaunchKernel called — with none of the general
    path's calls in between. Anything else returns _MISS, and the general path (which also reports every error)
    takes the call (bench/launch_overhead.py measures both)."""
    torch = sys.modules["torch"]
    tensors = layout.tensors
    dtypes = [t.torch_dtype() for t in tensors]
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if not tensors or any(d is None for d in dtypes) or raw_stream is None:
        return lambda args: _MISS
    env = {"Tensor": torch.Tensor, "MISS": _MISS, "plans_get": layout.plans.get, "current_stream": raw_stream}
    n = len(tensors)
    lines = ["def fast(args):", f"    if len(args) != {layout.nparams}:", "        return MISS"]
    lines += [f"    a{k} = args[{t.index}]" for k, t in enumerate(tensors)]
    lines.append(f"    if {' or '.join(f'type(a{k}) is not Tensor' for k in range(n))}:")
    lines.append("        return MISS")
    lines.append("    d0 = a0.get_device()")
    for k in range(n):
        env[f"D{k}"] = dtypes[k]
        device = "d0 < 0" if k == 0 else f"a{k}.get_device() != d0"
        lines += [f"    if {device} or a{k}.dtype is not D{k} or not a{k}.is_contiguous():", "        return MISS"]
    ptrs = "".join(f"a{k}.data_ptr(), " for k in range(n))
    lines.append(f"    ptrs = ({ptrs})")
    key = "".join(f"a{k}.shape, " for k in range(n))
    key += "".join(f"ptrs[{k}], " for k in range(n)) if layout.key_has_pointers else ""
    key += "d0, " + "".join(f"args[{i}], " for i in layout.grid_scalars)
    lines += [f"    plan = plans_get(({key}))", "    if plan is None:", "        return MISS",
              "    launch = plan.launchers.get(current_stream(d0))", "    if launch is None:", "        return MISS",
              "    block = plan.layout", "    block.lock.acquire()", "    try:",
              f"        block.slots[:{n}] = ptrs", "        for s in block.scalars:",
              "            s.store(args[s.index])", "        if block.written is not plan:",
              "            plan.write(block)", "        if launch():",
              "            plan.driver.launch_packed(plan.fn, plan.grid, plan.threads, plan.shared, "
              "current_stream(d0), block.params_address, plan.cluster)",
              "    finally:", "        block.lock.release()"]
    outs = layout.outputs
    if len(outs) == 1:
        lines.append(f"    return args[{outs[0]}]")
    else:
        lines.append("    return (" + "".join(f"args[{i}], " for i in outs) + ")" if outs else "    return None")
    exec("\n".join(lines), env)  # straight-line code over this kernel's parameter positions only
    return env["fast"]


def _torch_tensor(args, index: int) -> bool:
    torch = sys.modules.get("torch")
    return args is not None and torch is not None and isinstance(args[index], torch.Tensor)


def padded_map_args(spec, shape) -> TensorMapArgs | None:
    """The tensor map of a `shape` tensor held in a workspace whose innermost rows are padded to a multiple of 16
    bytes: the tensor's own dims (TMA fills what lies past them with zeros, and clips stores there), the padded
    rows' strides; None when a stride would reach TMA's limit."""
    shape = [int(d) for d in shape]
    if any(d < 1 for d in shape) or len(shape) != len(spec.box):
        return None
    dims = tuple(reversed(shape))
    stride = -(-dims[0] * spec.elem_bytes // TMA_ALIGN) * TMA_ALIGN
    strides = []
    for d in dims[1:]:
        if stride >= TMA_MAX_STRIDE:
            return None
        strides.append(stride)
        stride *= d
    return TensorMapArgs(spec.dtype, len(shape), dims, tuple(strides), tuple(reversed(spec.box)), spec.swizzle)


class _Padding:
    """A TMA launch of torch tensors whose rows are not a multiple of 16 bytes: each such tensor (one the kernel
    reaches through its tensor maps alone) goes through a workspace whose rows are padded to 16 bytes -- copied in
    before the launch, an output also copied out after it, on the launch's stream -- and the kernel's maps
    describe the workspace (its tensor's dims, the padded strides).

    Each copy is one launch of the artifact's pitched copy (tilec_pad_rows: 16 bytes a thread, in loads and stores
    as wide as both sides' alignment allows), or cuMemcpy2DAsync in an artifact without it. The workspaces
    are one block of bytes, kept by the kernel per device and stream (Kernel._padding_workspace) where the call is
    on torch's current stream and not captured, else taken from torch's stream-ordered allocator for the call; the
    maps are encoded again only when its address changes."""

    def __init__(self, name: str, layout: _Layout, shapes: dict[int, tuple], modes: dict[int, str], maps, drv,
                 written_in_full: set[int] = frozenset()):
        self.name, self.drv = name, drv
        self.written_in_full = written_in_full  # tensor positions of outputs the kernel overwrites everywhere
        self.maps = maps  # (map position, tensor position, TensorMapArgs, spec) of each map over a padded tensor
        elem = {k: s.elem_bytes for _, k, _, s in maps}
        # (tensor position, argument index, output?, rows, workspace pitch, offset in the workspace, row bytes)
        self.tensors, offset = [], 0
        for k, (shape, padded) in shapes.items():
            rows = math.prod(shape[:-1])
            pitch = padded[-1] * elem[k]
            self.tensors.append((k, layout.tensors[k].index, modes[k] == "store", rows, pitch, offset,
                                 shape[-1] * elem[k]))
            offset += -(-rows * pitch // 256) * 256
        self.total = max(offset, 1)
        self._offset = {k: off for k, *_, off, _ in self.tensors}  # tensor position -> its place in the workspace
        self.encoded: dict[int, list] = {}  # workspace address -> its encoded maps
        self.copies: dict[tuple, list] = {}  # (workspace address, tensor addresses) -> _prepare_copies

    def launch(self, kernel: Kernel, plan: _Plan, args, ptrs, handle: int, explicit: bool,
               fresh_outputs: bool = False):
        """Copy in, launch, copy out. An output is copied in too (the kernel need not store every element of it, and
        what it leaves must stay the caller's), unless the runtime allocated it for this call (`fresh_outputs`) or
        the kernel writes all of it (the manifest's written_in_full).
        One call's copies and launch stay together (a kept workspace serves one call at a time). Returns the
        workspace when it is the one kept for the stream (None: one for this call alone)."""
        torch = sys.modules["torch"]
        like = args[self.tensors[0][1]]
        with kernel._padding_lock, held():
            if explicit or torch.cuda.is_current_stream_capturing():
                ws = torch.empty(self.total, dtype=torch.uint8, device=like.device)
                if explicit:  # the caching allocator must not hand the bytes out before that stream is done
                    ws.record_stream(torch.cuda.ExternalStream(handle, device=like.device))
                kept = None
            else:
                ws = kept = kernel._padding_workspace(like, handle, self.total)
            base = ws.data_ptr()
            slots = list(ptrs)
            for k, *_, offset, _ in self.tensors:
                slots[k] = base + offset
            key = (base, *ptrs)
            copies = self.copies.get(key) or self._prepare_copies(kernel, like.get_device(), ptrs, base, key)
            for copy in copies.ins_fresh if fresh_outputs and copies.ins_fresh is not None else copies.ins:
                copy.run(handle)
            maps = self._maps(base)
            block = plan.layout
            with block.lock:
                block.slots[:block.ntensors] = slots
                for s in block.scalars:
                    s.store(args[s.index])
                plan.write(block)  # the sizes and the other maps, in order; then the padded maps in their places
                addresses = iter(plan.map_addresses)
                padded = {j: m for (j, *_), m in zip(self.maps, maps, strict=True)}
                nmaps = len(plan.map_addresses) + len(maps)
                for j in range(nmaps):
                    block.params[block.first_map + j] = (ctypes.addressof(padded[j]) if j in padded
                                                         else next(addresses))
                block.written = None  # the padded maps change with the workspaces
                if (plan.launchers.get(handle) or plan.launcher(handle))():
                    plan.driver.launch_packed(plan.fn, plan.grid, plan.threads, plan.shared, handle,
                                              block.params_address, plan.cluster)
            for copy in copies.outs:
                copy.run(handle)
        return kept

    def _maps(self, base: int) -> list:
        """The padded tensors' maps over the workspace at `base`, encoded once per workspace address."""
        maps = self.encoded.get(base)
        if maps is None:
            if len(self.encoded) >= 16:
                self.encoded.clear()
            maps = self.encoded[base] = [
                self.drv.encode_tensor_map(t.dtype, t.rank, base + self._offset[k], t.dims, t.strides, t.box,
                                           t.swizzle, what=f"{self.name}: {s.describe()} (padded rows)")
                for _, k, t, s in self.maps]
        return maps

    def steps(self, kernel: Kernel, plan: _Plan, ptrs, workspace, device: int, keep: list) -> list[Step] | None:
        """What launch() queues for these tensors and this workspace, as the compiled launcher's steps: the copies
        in (an output's skipped where the launcher allocated it), the kernel with the workspace's pointers and
        maps in the padded tensors' places, the copies out. None where the copies are the driver's
        cuMemcpy2DAsync (an artifact without tilec_pad_rows): not a kernel launch."""
        base = workspace.data_ptr()
        key = (base, *ptrs)
        copies = self.copies.get(key) or self._prepare_copies(kernel, device, ptrs, base, key)
        if any(c.step is None for c in (*copies.ins, *copies.outs)):
            return None
        maps = self._maps(base)
        keep += [workspace, copies, maps]
        main = _plan_step(plan, keep, {index: base + offset for _, index, *_, offset, _ in self.tensors},
                          {j: ctypes.addressof(m) for (j, *_), m in zip(self.maps, maps, strict=True)})
        if copies.ins_fresh is None:  # no output copied in: the same copies whether or not the launcher made it
            ins = [c.step for c in copies.ins]
        else:
            ins = ([c.step._replace(when=UNLESS_ALLOCATED) for c in copies.ins]
                   + [c.step._replace(when=IF_ALLOCATED) for c in copies.ins_fresh])
        return [*ins, main, *(c.step for c in copies.outs)]

    def _prepare_copies(self, kernel: Kernel, device: int, ptrs, base: int, key) -> _Copies:
        """The copies in and out for these tensors and this workspace, their arguments packed once (a plan's tensors
        keep their addresses, a kept workspace its): the module's tilec_pad_batch launches, each moving up to
        PAD_BATCH tensors, else a launch of tilec_pad_rows (or the driver's cuMemcpy2DAsync) per tensor."""
        if len(self.copies) >= 16:
            self.copies.clear()
        ins, outs = [], []  # (src, src pitch, dst, dst pitch, width, rows), and for ins whether it is an output's
        for k, _, output, rows, pitch, offset, width in self.tensors:
            work = base + offset
            if k not in self.written_in_full:  # (an output the kernel writes everywhere has nothing to keep)
                ins.append(((ptrs[k], width, work, pitch, width, rows), output))
            if output:
                outs.append((work, pitch, ptrs[k], width, width, rows))
        batch_fn = kernel.module.pad_function(device, PAD_BATCH_HELPER)
        rows_per_thread = kernel.module.manifest.get(PAD_ROWS_KEY, 1)

        def launches(group: list) -> list[_Copy]:
            if batch_fn is not None:
                return [self._batch(batch_fn, group[i:i + PAD_BATCH], rows_per_thread)
                        for i in range(0, len(group), PAD_BATCH)]
            return [self._copy(kernel, device, *c) for c in group]

        every = [c for c, _ in ins]
        inputs = [c for c, output in ins if not output]
        out = self.copies[key] = _Copies(launches(every), launches(inputs) if len(inputs) < len(every) else None,
                                         launches(outs))
        return out

    def _copy(self, kernel: Kernel, device: int, src: int, src_pitch: int, dst: int, dst_pitch: int, width: int,
              rows: int) -> _Copy:
        """The copy of `rows` rows of `width` bytes from `src` to `dst`: a launch of the artifact's own pitched copy
        (tilec_pad_rows, tilec/targets/cuda/include/tilec_pad.h) with its arguments packed here, else the driver's
        cuMemcpy2DAsync."""
        drv = self.drv
        fn = kernel.module.pad_function(device)
        if fn is None:
            return _Copy(lambda handle: drv.copy_rows(dst, dst_pitch, src, src_pitch, width, rows, handle), None)
        threads, gx, gy = _copy_grid(width, rows, kernel.module.manifest.get(PAD_ROWS_KEY, 1))
        grid = (gx, gy, 1)
        args = (ctypes.c_uint64(src), ctypes.c_uint64(dst), ctypes.c_int64(rows), ctypes.c_int64(width),
                ctypes.c_int64(src_pitch), ctypes.c_int64(dst_pitch), ctypes.c_int(_unit(src, src_pitch)),
                ctypes.c_int(_unit(dst, dst_pitch)))
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        address = ctypes.addressof(params)

        def launch(handle):
            drv.launch_packed(fn, grid, threads, 0, handle, address)
        step = Step(fn, grid, threads, 0, None, (-1,) * len(args), tuple(ctypes.addressof(a) for a in args))
        return _Copy(launch, step, (args, params))

    def _batch(self, fn: int, group: list, rows_per_thread: int) -> _Copy:
        """One launch of tilec_pad_batch moving each copy of `group` (at most PAD_BATCH), its blocks in turn
        (_batch_grid)."""
        threads, grid, places = _batch_grid([(width, rows) for *_, width, rows in group], rows_per_thread)
        copies = _PadCopies(count=len(group))
        for j, ((src, src_pitch, dst, dst_pitch, width, rows), place) in enumerate(zip(group, places, strict=True)):
            copies.copy[j] = _PadCopy(src, dst, rows, width, src_pitch, dst_pitch, _unit(src, src_pitch),
                                      _unit(dst, dst_pitch), *place)
        params = (ctypes.c_void_p * 1)(ctypes.addressof(copies))
        address, drv = ctypes.addressof(params), self.drv

        def launch(handle):
            drv.launch_packed(fn, grid, threads, 0, handle, address)
        return _Copy(launch, Step(fn, grid, threads, 0, None, (-1,), (ctypes.addressof(copies),)), (copies, params))


def _copy_grid(width: int, rows: int, rows_per_thread: int = PAD_ROWS) -> tuple[int, int, int]:
    """(threads, grid x, grid y) of a pitched copy of `rows` rows of `width` bytes: 16 bytes a thread and row, blocks
    of 32 to 256 threads over a row, grid y over the rows, `rows_per_thread` of them a thread (the artifact's
    PAD_ROWS_KEY; at most 65535 blocks: the kernel strides over the rest). A row's blocks share its chunks evenly:
    a 4097-byte row (257 chunks) takes two blocks of 160 threads, not one of 256 and one with a single busy warp."""
    chunks = -(-width // 16)
    blocks_x = -(-chunks // 256)
    per_block = -(-chunks // blocks_x)
    threads = max(32, -(-per_block // 32) * 32)
    return threads, blocks_x, min(-(-rows // rows_per_thread), 65535)


def _batch_grid(copies: list[tuple[int, int]], rows_per_thread: int = PAD_ROWS
                ) -> tuple[int, tuple[int, int, int], list[tuple[int, int, int]]]:
    """(threads, grid, per copy (blocks x, blocks y, first block)) of a tilec_pad_batch launch of copies of (row
    bytes, rows): the widest block any of them takes, and each copy's own grid for that block laid out in turn on
    one line of blocks."""
    threads = max(_copy_grid(width, rows)[0] for width, rows in copies)
    places, first = [], 0
    for width, rows in copies:
        chunks = -(-width // 16)
        blocks_x, blocks_y = -(-chunks // threads), min(-(-rows // rows_per_thread), 65535)
        places.append((blocks_x, blocks_y, first))
        first += blocks_x * blocks_y
    return threads, (first, 1, 1), places


class _PadCopy(ctypes.Structure):
    """tilec_pad.h's tilec_pad_copy."""

    _fields_ = [("src", ctypes.c_uint64), ("dst", ctypes.c_uint64), ("rows", ctypes.c_int64),
                ("width", ctypes.c_int64), ("src_pitch", ctypes.c_int64), ("dst_pitch", ctypes.c_int64),
                ("src_unit", ctypes.c_int), ("dst_unit", ctypes.c_int), ("blocks_x", ctypes.c_int),
                ("blocks_y", ctypes.c_int), ("first_block", ctypes.c_int64)]


class _PadCopies(ctypes.Structure):
    """tilec_pad.h's tilec_pad_copies: tilec_pad_batch's one parameter, by value."""

    _fields_ = [("copy", _PadCopy * PAD_BATCH), ("count", ctypes.c_int)]


class _Copies(NamedTuple):
    """A padded launch's copies for one workspace: `ins` before the kernel; `ins_fresh` instead where the runtime
    allocated the outputs for the call (the inputs' alone; None when no output is copied in); `outs` after it."""

    ins: list
    ins_fresh: list | None
    outs: list


class _Copy(NamedTuple):
    """One pitched copy of a padded launch: `run(stream)` queues it; `step` is the same launch for the compiled
    launcher (None for the driver's cuMemcpy2DAsync); `storage` holds the packed arguments both read."""

    run: Callable[[int], None]
    step: Step | None
    storage: object = None


def _plan_step(plan: _Plan, keep: list, pointers: dict[int, int] | None = None,
               padded_maps: dict[int, int] | None = None) -> Step:
    """A plan's launch as a compiled-launcher step: each parameter the call's, except the tensors of `pointers`
    (parameter index -> a fixed address: a workspace's), then the plan's sizes and tensor maps (`padded_maps`:
    map position -> the address of a map over a workspace, in place of the plan's). Its storage goes to `keep`."""
    n, pointers, padded_maps = plan.layout.nparams, pointers or {}, padded_maps or {}
    cells = (ctypes.c_uint64 * max(1, n + len(plan.sizes)))()  # a fixed pointer or an int32 size in each
    base = ctypes.addressof(cells)
    sources, fixed = [], []
    for i in range(n):
        if i in pointers:
            cells[i] = pointers[i]
        sources.append(-1 if i in pointers else i)
        fixed.append(base + i * SLOT_BYTES if i in pointers else 0)
    for j, v in enumerate(plan.sizes):
        ctypes.c_int32.from_buffer(cells, (n + j) * SLOT_BYTES).value = v
        sources.append(-1)
        fixed.append(base + (n + j) * SLOT_BYTES)
    addresses = iter(plan.map_addresses)
    for j in range(len(plan.map_addresses) + len(padded_maps)):
        sources.append(-1)
        fixed.append(padded_maps[j] if j in padded_maps else next(addresses))
    keep += [cells, plan]
    return Step(plan.fn, tuple(plan.grid), plan.threads, plan.shared, plan.cluster, tuple(sources), tuple(fixed))


def _unit(address: int, pitch: int) -> int:
    """The widest access (16, 8, 4, 2 or 1 bytes) that every row of a pitched tensor is aligned to."""
    bits = address | pitch | 16
    return bits & -bits


class _Plan:
    """One launch configuration: the kernel that runs (TMA or fallback), its CUfunction on the
    device, grid, block, dynamic shared memory, the sizes and the encoded tensor maps."""

    __slots__ = ("kernel", "layout", "driver", "fn", "grid", "threads", "shared", "sizes", "maps", "map_addresses",
                 "empty", "launchers", "cluster", "padding")

    def __init__(self, kernel, layout: _Layout, driver, fn, grid, threads, shared, sizes, maps) -> None:
        self.kernel, self.layout, self.driver, self.fn = kernel, layout, driver, fn
        self.grid, self.threads = grid, threads
        self.shared, self.sizes, self.maps = shared, sizes, maps
        self.map_addresses = [ctypes.addressof(m) for m in maps]
        self.empty = any(g <= 0 for g in grid)
        self.launchers: dict[int, functools.partial] = {}  # CUstream handle -> this plan's launch on it
        self.padding: _Padding | None = None  # tensors this plan passes as copies with 16-byte rows
        # thread-block cluster (sm90): launched by cuLaunchKernelEx; the grid formulas give whole clusters
        self.cluster = cluster_dims(kernel.entry)
        if self.cluster is not None and not self.empty and any(g % c for g, c in zip(grid, self.cluster, strict=True)):
            raise ManifestError(f"kernel '{kernel.entry['name']}': grid {grid} is not a whole number of its "
                                f"{'x'.join(map(str, self.cluster))} clusters")

    def launcher(self, handle: int) -> functools.partial:
        """cuLaunchKernel with every argument of this plan on this stream bound: a launch is one call with no
        arguments to convert but the bound ones (measured: a third cheaper than passing them per call)."""
        if len(self.launchers) >= 64:
            self.launchers.clear()
        drv, (gx, gy, gz) = self.driver, self.grid
        if self.cluster is not None:  # cuLaunchKernelEx, the cluster dimension as its launch attribute
            launch = self.launchers[handle] = functools.partial(
                drv.launch_cluster, self.fn, self.grid, self.threads, self.shared, handle,
                self.layout.params_address, self.cluster)
            return launch
        launch = self.launchers[handle] = functools.partial(
            drv.raw_launch, drv.pointer_arg(self.fn), gx, gy, gz, self.threads, 1, 1, self.shared,
            drv.pointer_arg(handle), drv.pointer_arg(self.layout.params_address), None)
        return launch

    def write(self, layout: _Layout) -> None:
        """Store this plan's sizes and tensor-map addresses in the argument block."""
        for cell, v in zip(layout.size_cells, self.sizes, strict=True):
            cell.value = v
        j = layout.first_map
        for address in self.map_addresses:
            layout.params[j] = address
            j += 1
        layout.written = self


class Kernel:
    """A kernel of a loaded module. Call it with its parameters in order:

        C = gemm(A, B, C)        # device arrays: asynchronous on the caller's current stream
        C = gemm(A, B)           # outputs may be left out: allocated like the first tensor argument
        gemm(A, B, C, stream=s)  # an explicit stream (int handle, torch / cupy stream)
        gemm(a, b, c)            # numpy arrays: staged through the GPU, synchronous

    It returns the output tensor (a tuple when there are several, None when there are none)."""

    def __init__(self, module, entry: dict):
        self.module = module
        self.entry = entry
        self.name = entry["name"]
        self._fns: dict[int, int] = {}  # device ordinal -> CUfunction handle
        self._arguments: _Layout | None = None
        self._fallback: Kernel | None = None
        # the direct-stores twin (TMA loads, the threads' stores) and the tensors it has no maps for
        self._direct_stores: tuple[Kernel, frozenset[str]] | None = None
        self._grid = None  # compiled grid formulas
        self._num_sms: dict[int, int] = {}
        self._native = None  # the compiled launcher (fastlaunch.py), once the first call made it
        self._padding_kept: dict[tuple[int, int], object] = {}  # (device, stream) -> padded launches' workspace
        self._padding_lock = threading.Lock()

    def __repr__(self) -> str:
        sig = ", ".join(f"{p['name']}: {'out ' if p.get('output') else ''}{p['dtype']}"
                        + (f"[{', '.join(map(str, p['shape']))}]" if p["kind"] == "tensor" else "")
                        for p in self.entry["params"])
        return f"<tilec kernel {self.name}({sig})>"

    def release_workspaces(self) -> None:
        """Give back device memory this kernel keeps between calls (the workspaces of its padded launches, per
        device and stream; Launches: a multi-launch kernel's). The next call allocates again."""
        with self._padding_lock:
            self._padding_kept.clear()  # torch's allocator reuses the bytes in stream order
            if self._native is not None:  # its plans of padded launches hold the workspaces too
                self._native.forget()

    def steps_for(self, args, device: int, handle: int, keep: list) -> list[Step] | None:
        """What a call with these arguments on the stream `handle` queues (the plan an earlier call made: the
        launch, with a padded one's copies on the workspace kept for the stream) as the compiled launcher's steps;
        their storage goes to `keep`. None where no such plan is cached or its copies are not kernel launches."""
        layout = self._layout()
        ptrs, key = self._plan_key(layout, args)
        plan = layout.plans.get(key) or layout.padded.get(key)
        if plan is None:
            return None
        if plan.empty:
            return []
        if plan.padding is None:
            return [_plan_step(plan, keep)]
        workspace = self._padding_kept.get((device, handle))
        return None if workspace is None else plan.padding.steps(self, plan, ptrs, workspace, device, keep)

    def _file_steps(self, args, steps: list[Step], keep: list, handle: int) -> None:
        """File a call's launches in this kernel's compiled launcher, under the key its C code computes for
        these arguments; bound to the stream `handle`, whose kept workspaces they use."""
        layout = self._layout()
        remember_steps(self._native, layout, self._plan_key(layout, args)[1], steps, keep, handle)

    @staticmethod
    def _plan_key(layout: _Layout, args) -> tuple:
        """(pointers, the plan key) of a call, as _call computes them (and fastlaunch.c its key)."""
        ptrs, key, _, _ = layout.bind(args, None)
        if layout.grid_scalars:  # the grid depends on these scalars' values: so does the plan
            key = (*key, *(args[i] for i in layout.grid_scalars))
        return ptrs, key

    def _padding_workspace(self, like, handle: int, nbytes: int):
        """The bytes padded launches on torch's current stream `handle` use, kept per device and stream and grown
        when a call needs more (the caller holds _padding_lock)."""
        key = (like.get_device(), handle)
        ws = self._padding_kept.get(key)
        if ws is None or ws.numel() < nbytes:
            torch = sys.modules["torch"]
            ws = self._padding_kept[key] = torch.empty(nbytes, dtype=torch.uint8, device=like.device)
        return ws

    # ------------------------------------------------------------ the call

    def __call__(self, *args, stream=None, sync: bool | None = None):
        if stream is None and not sync:
            out = self._fast(args)
            if out is not _MISS:
                return out
        return self._call(args, stream, sync)

    def _fast(self, args):
        """The first call: put the compiled launcher, else the generated fast path, in this method's place (once torch
        or cupy is imported)."""
        if "torch" not in sys.modules and "cupy" not in sys.modules:
            return _MISS
        layout = self._arguments or self._make_layout()
        from .fastlaunch import launcher_for

        self._native = launcher_for(self, layout, _MISS)  # the compiled launcher, where it builds
        if self._native is not None:
            self._fast = self._native.fast
            if hasattr(self, "_attach"):  # a native_class kernel: its calls enter the launcher with no Python frame
                self._attach(self._native)
        elif "torch" in sys.modules:
            self._fast = self._python_fast_path(layout)
        else:
            return _MISS  # cupy alone, no compiled launcher: the general path (asked again at the next call)
        return self._fast(args)

    def _python_fast_path(self, layout: _Layout):
        """The fast path where the compiled launcher is not available: generated Python for torch tensors."""
        return _make_fast_path(layout)

    def _call(self, args, stream, sync):
        """Every call the fast path leaves: the first of a shape or a stream, explicit streams, synchronous calls,
        arrays other than torch tensors, outputs left out, and every error."""
        layout = self._arguments or self._make_layout()
        fresh = len(args) != layout.nparams  # the outputs left out: allocated here, nothing in them to keep
        if fresh:
            args = self._with_outputs(args, layout)
        explicit = None if stream is None else stream_handle(stream)
        ptrs, key, device, first = layout.bind(args, explicit)
        if layout.grid_scalars:  # the grid depends on these scalars' values: so does the plan
            key = (*key, *(args[i] for i in layout.grid_scalars))
        if device == HOST:
            self._run_staged(args, layout, key[:len(layout.tensors)], explicit)
        else:
            plan = layout.plans.get(key) or layout.padded.get(key) or self._new_plan(layout, key, ptrs, device, args)
            handle = explicit if explicit is not None else first.stream(device)
            if plan.padding is not None:
                kept = plan.padding.launch(self, plan, args, ptrs, handle, explicit is not None, fresh)
                if kept is not None and self._native is not None:  # the copies and the launch, filed in C
                    keep: list = []
                    steps = plan.padding.steps(self, plan, ptrs, kept, device, keep)
                    if steps:
                        remember_steps(self._native, layout, key, steps, keep, handle)
            elif plan.empty:
                self._launch(plan, args, ptrs, handle)
            else:  # _launch's body, inline: this is the path every launch takes
                block = plan.layout  # the argument block the plan's kernel reads (a tuned variant's own)
                with block.lock:
                    block.slots[:block.ntensors] = ptrs
                    for s in block.scalars:
                        s.store(args[s.index])
                    if block.written is not plan:
                        plan.write(block)
                    if (plan.launchers.get(handle) or plan.launcher(handle))():
                        plan.driver.launch_packed(plan.fn, plan.grid, plan.threads, plan.shared, handle,
                                                  block.params_address, plan.cluster)
                if self._native is not None and explicit is None and plan.padding is None:  # the compiled launcher
                    remember(self._native, layout, key, plan, args)
            if sync:
                plan.driver.synchronize(handle)
        outs = layout.outputs
        if len(outs) == 1:
            return args[outs[0]]
        return tuple(args[i] for i in outs) if outs else None

    def _launch(self, plan: _Plan, args, ptrs, handle: int) -> None:
        layout = plan.layout
        if plan.empty:
            for s in layout.scalars:  # still refuse a bad scalar
                s.check(args[s.index])
            return
        with layout.lock:
            layout.slots[:layout.ntensors] = ptrs
            for s in layout.scalars:
                s.store(args[s.index])
            if layout.written is not plan:  # sizes and tensor maps change only with the plan
                plan.write(layout)
            # a failure (no current context on this thread, say) takes the careful path, which reports errors
            if (plan.launchers.get(handle) or plan.launcher(handle))():
                plan.driver.launch_packed(plan.fn, plan.grid, plan.threads, plan.shared, handle,
                                          layout.params_address, plan.cluster)

    # ------------------------------------------------------------ building a plan (once per shape)

    def _layout(self) -> _Layout:
        return self._arguments or self._make_layout()

    def _make_layout(self) -> _Layout:
        from .tensor_maps import direct_stores_entry, fallback_entry

        layout = _Layout(self)
        if layout.tmaps:
            entries = self.module.manifest["kernels"]
            fb = fallback_entry(self.entry, entries)
            if fb is not None:
                self._fallback = self.module._internal.get(fb["name"]) or self.module.kernels[fb["name"]]
            twin = direct_stores_entry(self.entry, entries)
            if twin is not None:
                mapped = {s.param["name"] for s in tensor_map_specs(twin[0])}
                self._direct_stores = (self.module._internal[twin[0]["name"]],
                                       frozenset(s.param["name"] for s in layout.tmaps) - mapped)
        self._arguments = layout
        return layout

    def sizes_of(self, args) -> dict[str, int]:
        """The runtime sizes the arguments imply (ArgumentError when their shapes disagree)."""
        layout = self._arguments or self._make_layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        return self._sizes_from_shapes(layout, [tuple(args[t.index].shape) for t in layout.tensors], args)

    def _sizes_from_shapes(self, layout: _Layout, shapes, args=None) -> dict[str, int]:
        sizes: dict[str, int] = {}
        formulas = []
        for t, shape in zip(layout.tensors, shapes, strict=True):
            if len(shape) != len(t.shape):
                raise ArgumentError(f"{self.name}: '{t.name}' has {len(shape)} dimension(s), expected "
                                    f"{len(t.shape)} ({t.shape})")
        for t_pos, axis, want in layout.dims:
            got = int(shapes[t_pos][axis])
            name = layout.tensors[t_pos].name
            if isinstance(want, int):
                if want != got:
                    raise ArgumentError(f"{self.name}: dimension {axis} of '{name}' must be {want}, got {got}")
            elif not want.isidentifier():  # a formula of sizes: checked once every size is known
                formulas.append((name, axis, want, got))
            elif sizes.setdefault(want, got) != got:
                raise ArgumentError(f"{self.name}: size {want} is {sizes[want]} from an earlier argument but "
                                    f"{got} from '{name}'")
        for name, axis, want, got in formulas:
            if evaluate(want, sizes) != got:
                raise ArgumentError(f"{self.name}: dimension {axis} of '{name}' must be {want} = "
                                    f"{evaluate(want, sizes)}, got {got}")
        if args is not None:  # integer scalars a grid formula names: Kernel(nblocks, ...)
            for i in layout.grid_scalars:
                sizes[layout.param_names[i]] = int(args[i])
        for name in layout.size_names:
            if name not in sizes:
                raise ArgumentError(f"{self.name}: no tensor argument gives the size {name}")
            if sizes[name] > INT32_MAX:
                raise ArgumentError(f"{self.name}: size {name} = {sizes[name]} exceeds the kernel's 32-bit sizes")
        for c in layout.checks:  # conditions the compiler could not prove (a view must fit its tensor)
            lhs, rhs = evaluate(c["lhs"], sizes), evaluate(c["rhs"], sizes)
            if not launch_check_holds(c["op"], lhs, rhs):
                shown = ", ".join(f"{k}={v}" for k, v in sizes.items() if k in layout.size_names)
                raise ArgumentError(f"{self.name}: {c['message']}: {c['lhs']} = {lhs}, {c['rhs']} = {rhs} "
                                    f"(sizes {shown})")
        return sizes

    def launch_config(self, sizes: dict[str, int], device: int = 0) -> tuple[tuple[int, int, int], int]:
        """(grid, threads per block) for these runtime sizes."""
        names = list(self.entry["sizes"]) + [p["name"] for p in self.entry["params"]
                                             if p["kind"] == "scalar" and p["name"] in sizes]
        if self._grid is None:
            persistent = any("num_sms" in g for g in self.entry["grid"])
            self._grid = (compile_formulas(self.entry["grid"], names + (["num_sms"] if persistent else [])),
                          persistent)
        fn, persistent = self._grid
        values = [sizes[n] for n in names]
        if persistent:  # a persistent kernel: one block per SM at most
            if device not in self._num_sms:
                from .cuda_driver import Driver

                self._num_sms[device] = Driver.get(device).multiprocessor_count()
            values.append(self._num_sms[device])
        grid = tuple(max(0, g) for g in fn(*values))
        return grid, self.entry["threads"]  # type: ignore[return-value]

    def _new_plan(self, layout: _Layout, key, ptrs, device: int, args) -> _Plan:
        plan = self._plan(layout, ptrs, key[:len(layout.tensors)], device, args)
        cache = layout.plans if plan.padding is None else layout.padded
        if len(cache) >= PLAN_CACHE_LIMIT:
            cache.clear()
        cache[key] = plan
        return plan

    def _plan(self, layout: _Layout, ptrs, shapes, device: int, args=None) -> _Plan:
        sizes = self._sizes_from_shapes(layout, shapes, args)
        grid, threads = self.launch_config(sizes, device)
        kernel, maps, padding = self, [], None
        if layout.tmaps and all(g > 0 for g in grid):  # an empty launch encodes nothing
            kernel, grid, threads, maps, padding = self._choose_tma(layout, ptrs, shapes, sizes, grid, threads,
                                                                    device, args)
        from .cuda_driver import Driver

        drv = Driver.get(device)
        fn = kernel._function(drv, device)
        plan = _Plan(kernel, layout, drv, fn, grid, threads, kernel.entry["shared_bytes"],
                     tuple(sizes[n] for n in layout.size_names), maps)
        plan.padding = padding
        return plan

    def _choose_tma(self, layout: _Layout, ptrs, shapes, sizes, grid, threads, device: int, args=None):
        """The encoded tensor maps of this launch (and the tensors it pads, _Padding), or the fallback kernel (and
        its launch configuration) when TMA cannot address the tensors."""
        position = {t.index: k for k, t in enumerate(layout.tensors)}
        encoded_args = []
        padded: dict[int, tuple] = {}  # tensor position -> (the tensor's shape, the padded workspace's shape)
        elem_bytes: dict[int, int] = {}
        only = self.entry.get("tma_only") or {}
        refused = None  # the first map TMA cannot take even padded: (spec, why)
        for spec in layout.tmaps:
            k = position[spec.param_index]
            shape = shapes[k] if spec.view_shape is None else [  # a view of the tensor: its own dims
                d if type(d) is int else evaluate(d, sizes) for d in spec.view_shape]
            targs = tensor_map_args(spec, spec.param, shape, ptrs[k])
            if isinstance(targs, NoTma):
                why = targs.reason
                if spec.param["name"] in only and _torch_tensor(args, spec.param_index):
                    targs = padded_map_args(spec, shape)
                    if targs is not None:
                        elem_bytes[k] = spec.elem_bytes
                        padded[k] = (tuple(shape), tuple(shape[:-1]) + (
                            -(-shape[-1] * spec.elem_bytes // TMA_ALIGN) * TMA_ALIGN // spec.elem_bytes,))
                if targs is None or isinstance(targs, NoTma):
                    refused = refused or (spec, why)
            encoded_args.append((spec, targs))
        twin = self._direct_stores
        if twin is not None and (refused is not None and refused[0].param["name"] in twin[1] or _PADDING != "always"
                                 and any(layout.tensors[k].name in twin[1] for k in padded)):
            # TMA cannot address a tensor the kernel stores (TILEC_PADDING=always: unless padded): the twin whose
            # threads store it, its loads still TMA's (padded or falling back by the same rules)
            kernel = twin[0]
            grid, threads = kernel.launch_config(sizes, device)
            return kernel._choose_tma(kernel._layout(), ptrs, shapes, sizes, grid, threads, device, args)
        modes = {k: only[layout.tensors[k].name] for k in padded}
        full = set(self.entry.get(WRITTEN_IN_FULL_KEY) or ())  # outputs that go out alone: not copied in first
        trips = {k: 2 if modes[k] == "store" and layout.tensors[k].name not in full else 1 for k in padded}
        copied = sum(math.prod(shape) * elem_bytes[k] * trips[k] for k, (shape, _) in padded.items())
        if refused is None and padded and not self._padding_pays(sizes, device, "load" in modes.values(), copied):
            refused = (None, None)
        if refused is not None:
            spec, why = refused
            if self._fallback is None:
                raise ArgumentError(f"{self.name}: TMA cannot read '{spec.param['name']}': {why}; "
                                    "this kernel has no fallback, so pass 16-byte aligned tensors whose rows "
                                    "are a multiple of 16 bytes")
            fgrid, fthreads = self._fallback.launch_config(sizes, device)
            return self._fallback, fgrid, fthreads, [], None
        from .cuda_driver import Driver

        drv = Driver.get(device)
        maps = [None if position[s.param_index] in padded else
                drv.encode_tensor_map(t.dtype, t.rank, ptrs[position[s.param_index]], t.dims, t.strides, t.box,
                                      t.swizzle, what=f"{self.name}: {s.describe()}") for s, t in encoded_args]
        if not padded:
            return self, grid, threads, maps, None
        padding = _Padding(self.name, layout, padded, modes,
                           [(j, position[s.param_index], t, s) for j, (s, t) in enumerate(encoded_args)
                            if position[s.param_index] in padded], drv,
                           {k for k in padded if layout.tensors[k].name in full})
        return self, grid, threads, [m for m in maps if m is not None], padding

    def _padding_pays(self, sizes, device: int, inputs: bool = True, copied: int = 0) -> bool:
        """Whether padding the misaligned tensors for the TMA kernel beats the fallback at these sizes. The copies
        (`copied` bytes moved) and their host time are paid once a launch, while the fallback falls behind the TMA
        kernel in proportion to each block's work (the manifest's `flops`, which counts whole tiles, over the
        fallback's blocks), more so where it narrows its loads (a misaligned input, `inputs`) than where it narrows
        only its stores. Fitted to the H200's A/B (bench/RESULTS.md, 2026-12-03 s11, issue #26: every gemm and fp8
        sweep shape both ways); without a fallback, padding is the only way."""
        if self._fallback is None:
            return True
        if _PADDING in ("always", "never"):
            return _PADDING == "always"
        flops = evaluate(self.entry.get("flops") or "0", sizes)
        if flops < PAD_MIN_FLOPS:
            return False
        if copied * PAD_FLOPS_PER_COPIED_BYTE <= flops:
            return True
        gx, gy, gz = self._fallback.launch_config(sizes, device)[0]
        return flops >= (PAD_MIN_BLOCK_FLOPS if inputs else PAD_MIN_BLOCK_FLOPS_STORES) * max(1, gx * gy * gz)

    def _function(self, drv, device: int) -> int:
        fn = self._fns.get(device)
        if fn is None:
            mod = self.module.cuda_module(device)
            handle = drv.function(mod, self.name)
            if self.entry["shared_bytes"] > 48 * 1024:
                drv.set_dynamic_shared(handle, self.entry["shared_bytes"])
            fn = self._fns[device] = getattr(handle, "value", handle)
        return fn

    def launch_plan(self, *args, stream=None) -> _Plan:
        """What `kernel(*args)` would launch — the kernel (a TMA kernel or its fallback), grid,
        block, sizes — without launching; device arrays only."""
        layout = self._arguments or self._make_layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        explicit = None if stream is None else stream_handle(stream)
        ptrs, key, device, _ = layout.bind(args, explicit)
        if device == HOST:
            raise ArgumentError(f"{self.name}: launch_plan needs device arrays (numpy arrays are staged per call)")
        return self._plan(layout, ptrs, key[:len(layout.tensors)], device, args)

    # ------------------------------------------------------------ outputs left out; numpy staging

    def _with_outputs(self, args, layout: _Layout) -> tuple:
        """The full argument list when the outputs were left out: each output allocated with the
        dtype and shape its parameter declares (sizes from the inputs), like the first tensor input."""
        params = self.entry["params"]
        if len(args) != len(layout.inputs) or not layout.outputs:
            names = ", ".join(p["name"] for p in params)
            ins = ", ".join(params[i]["name"] for i in layout.inputs)
            raise ArgumentError(f"{self.name} takes {len(params)} argument(s) ({names})"
                                + (f", or {len(layout.inputs)} without its outputs ({ins})" if layout.outputs else "")
                                + f", got {len(args)}")
        full: list = [None] * layout.nparams
        for i, a in zip(layout.inputs, args, strict=True):
            full[i] = a
        sizes: dict[str, int] = {}
        like = None
        for t in layout.tensors:
            if t.output:
                continue
            a = full[t.index]
            like = like if like is not None else a
            shape = tuple(a.shape)
            if len(shape) != len(t.shape):
                raise ArgumentError(f"{self.name}: '{t.name}' has {len(shape)} dimension(s), expected "
                                    f"{len(t.shape)} ({t.shape})")
            for want, got in zip(t.shape, shape, strict=True):
                if isinstance(want, str):
                    sizes.setdefault(want, int(got))
        if like is None:
            raise ArgumentError(f"{self.name}: pass the outputs (no tensor input shows where to allocate them)")
        for t in layout.tensors:
            if t.output:
                missing = [d for d in t.shape if isinstance(d, str) and d not in sizes]
                if missing:
                    raise ArgumentError(f"{self.name}: output '{t.name}' needs the size {missing[0]}, which no input "
                                        "gives; pass the output")
                shape = tuple(d if isinstance(d, int) else sizes[d] if d.isidentifier() else evaluate(d, sizes)
                              for d in t.shape)
                full[t.index] = allocate_like(like, shape, t)
        return tuple(full)

    def _run_staged(self, args, layout: _Layout, shapes, explicit) -> None:
        """numpy arguments: copy in, launch, wait, copy the outputs back, free (synchronous)."""
        for s in layout.scalars:  # every argument is checked before the driver is touched
            s.check(args[s.index])
        self._sizes_from_shapes(layout, shapes, args)
        from .cuda_driver import Driver

        drv = Driver.get(0)
        handle = explicit or 0
        staged: list[int] = []  # device copies, in layout.tensors order
        # the device's context stays current throughout, so the launch takes its fast path (not a failed
        # cuLaunchKernel on a thread with no context first, which compute-sanitizer reports as an API error)
        with drv.current():
            try:
                for t in layout.tensors:
                    arr = args[t.index]
                    staged.append(drv.alloc(arr.nbytes))
                    drv.htod(staged[-1], arr.ctypes.data, arr.nbytes)
                plan = self._plan(layout, staged, shapes, 0, args)
                self._launch(plan, args, staged, handle)
                drv.synchronize(handle)
                for t, ptr in zip(layout.tensors, staged, strict=True):
                    if t.output:
                        arr = args[t.index]
                        drv.dtoh(arr.ctypes.data, ptr, arr.nbytes)
            finally:
                for ptr in staged:
                    drv.free(ptr)

    # ------------------------------------------------------------ timing

    def bench(self, *args, warmup: int = 10, iters: int = 50, stream=None) -> dict:
        """Median time of `iters` calls through the public call path (CUDA events around each),
        after `warmup` calls. numpy arguments are copied to the device once, first."""
        from .cuda_driver import Driver

        layout = self._arguments or self._make_layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        drv = Driver.get(0)
        device_args = list(args)
        staged = []
        start = end = None
        try:
            for t in layout.tensors:
                a = args[t.index]
                if adapter(type(a)).kind == "numpy":
                    staged.append(drv.alloc(a.nbytes))
                    drv.htod(staged[-1], a.ctypes.data, a.nbytes)
                    device_args[t.index] = _DeviceBuffer(staged[-1], a.shape)
            _, _, device, first = layout.bind(device_args, None)
            drv = Driver.get(device)
            handle = stream_handle(stream) if stream is not None else first.stream(device)
            for _ in range(warmup):
                self(*device_args, stream=handle)
            start, end = drv.event(), drv.event()
            times = []
            for _ in range(iters):
                drv.record(start, handle)
                self(*device_args, stream=handle)
                drv.record(end, handle)
                times.append(drv.elapsed_ms(start, end))
        finally:
            for ev in (start, end):
                if ev is not None:
                    drv.destroy_event(ev)
            if staged:
                drv.synchronize()
            for ptr in staged:
                drv.free(ptr)
        times.sort()
        ms = times[len(times) // 2]
        sizes = self.sizes_of(args)
        flops = evaluate(self.entry.get("flops", "0"), sizes)
        nbytes = evaluate(self.entry.get("bytes", "0"), sizes)
        return {"ms": ms, "tflops": flops / ms / 1e9, "gbps": nbytes / ms / 1e6, "flops": flops, "bytes": nbytes}


class _DeviceBuffer:
    """Device memory tilec.runtime allocated itself: a device copy of a checked numpy argument (for `bench`, on
    GPU 0), a multi-launch kernel's scratch tensor in its workspace (tilec/runtime/sequence.py)."""

    def __init__(self, ptr: int, shape, device: int = 0) -> None:
        self.ptr, self.shape, self.device = ptr, tuple(shape), device


register_adapter(_DeviceBuffer, "device_buffer", lambda a, p, stream: (a.ptr, a.shape, a.device))


def allocate_like(like, shape: tuple, t: TensorParam):
    """An uninitialized array for output `t`, of the kind (and device) of the input `like`."""
    from .arrays import NP_NAMES

    kind = adapter(type(like)).kind
    if kind == "torch":
        import torch

        return torch.empty(shape, dtype=t.torch_dtype(), device=like.device)
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=NP_NAMES[t.dtype])
    if kind == "numpy":
        import numpy as np

        if t.dtype in ("bf16", "f8e4m3", "f8e5m2"):
            import ml_dtypes  # noqa: F401  (registers these dtypes with numpy)
        return np.empty(shape, dtype=NP_NAMES[t.dtype])
    raise ArgumentError(f"{t.kernel}: cannot allocate output '{t.name}' next to a {type(like).__name__}; pass it")
