"""A multi-launch kernel: `mod.gqa_decode(Q, K, V, Out)` runs its stage kernels in order on one stream.

The manifest's "launches" entry (tilec/manifest.py) gives the public signature, the scratch tensors (dtype,
shape formulas, offsets in one workspace, 256-byte aligned) and the stages (an internal kernel entry each, and
which public argument or scratch tensor each of its parameters receives). A call checks the arguments like any
kernel's (the same binder), works out the sizes, gets a workspace and calls every stage's Kernel with the
caller's tensors and views of the workspace:

- torch tensors: the workspace is `torch.empty(bytes, dtype=uint8)` on the arguments' device, from torch's
  caching allocator, on the launch's stream (recorded on an explicit stream), and the stages are launched
  asynchronously -- through each stage's own fast path when no stream is given. On the current stream (no
  `stream=`, not capturing a graph) the workspace is kept per device and stream (the largest one asked for; the
  stages on one stream are ordered, so reusing it is safe) and the views of it per argument shapes: a repeated
  call (of a kernel without scalars) checks its tensors' type, shape, dtype, device and contiguity and launches the
  stages, with none of the general path's binding, allocation or slicing (a split-K gemm's host time was 40-60 us
  a call). Where the compiled launcher is available (fastlaunch.py), such a call's launches -- every stage's, a
  padded stage's row copies included -- are filed there as one plan bound to the stream, and a repeated call runs
  them from C; else the stages are called through their own fast paths;
- other device arrays (cupy, __cuda_array_interface__, DLPack): a workspace per device and stream, allocated
  with cuMemAlloc, grown as needed and kept by the kernel for its next calls on that stream;
- numpy arrays: every tensor staged to the GPU once, a workspace allocated, the stages launched, the outputs
  copied back and everything freed (synchronous, like a single kernel's numpy call).

Zeroed scratch (`alloc_global(..., zeroed=True)`: counters that the blocks of a launch meet at, which the function
leaves zero when it ends) comes first in the layout, "zeroed_bytes" long. Where a workspace is kept, those bytes live
in a buffer of their own, zeroed once when it is made and kept with it, so that a call on a kept workspace costs
no memset (the main workspace's bytes change with the shapes: a plane of one call may lie where another call's
counters do). A workspace made for one call has its zeroed bytes cleared on the call's stream.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading

from .arrays import HOST, TORCH_NAMES, ArgumentError, stream_handle
from .fastlaunch import Step, held
from .formulas import evaluate
from .launch import _MISS, Kernel, _DeviceBuffer

_NO_LOCK = contextlib.nullcontext()
MAX_STEPS = 16  # launches in one plan of the compiled launcher (fastlaunch.c's TL_MAX_STEPS)


class Launches(Kernel):
    """A kernel function of several launches; called like a Kernel (outputs may be left out)."""

    def __init__(self, module, entry: dict, stages: dict[str, Kernel]):
        super().__init__(module, {**entry, "grid": [], "threads": 0, "shared_bytes": 0})
        index = {p["name"]: i for i, p in enumerate(entry["params"])}
        scratch = {b["name"]: j for j, b in enumerate(entry["scratch"])}
        # per stage: its Kernel and, per parameter, (True, argument position) or (False, scratch position)
        self.stages = [(stages[st["kernel"]], [(a in index, index[a] if a in index else scratch[a])
                                               for a in st["args"]]) for st in entry["stages"]]
        self._scratch: dict[tuple, tuple] = {}  # shapes key -> (sizes, [(offset, nbytes, shape)], total bytes)
        self._workspaces: dict[tuple[int, int], tuple[int, int]] = {}  # (device, stream) -> (pointer, bytes)
        # held from taking a cached workspace until its stages are queued: another thread growing the workspace
        # of the same stream (which frees the old one) must wait until these launches are on the stream
        self._workspace_lock = threading.Lock()
        self._kept: dict[tuple[int, int], object] = {}  # torch, current stream: (device, stream) -> workspace
        # the zeroed scratch's own kept buffers, per (device, stream): torch tensors, and (pointer, bytes) of cuMemAlloc
        self._kept_zeroed: dict[tuple[int, int], object] = {}
        self._zeroed: dict[tuple[int, int], tuple[int, int]] = {}
        self._has_zeroed = "zeroed_bytes" in entry
        self._fast_views: dict[tuple, list] = {}  # (tensors' (shape, dtype, device)..., stream) -> scratch views

    def __repr__(self) -> str:
        return super().__repr__().replace("<tilec kernel", "<tilec multi-launch kernel", 1)

    def __call__(self, *args, stream=None, sync: bool | None = None):
        if stream is None and not sync:
            out = self._fast(args)
            if out is not _MISS:
                return out
        return self._run(args, stream, sync, self)

    def _python_fast_path(self, layout):
        return self._fast_call

    def _make_layout(self):
        layout = super()._make_layout()
        # a stage's TMA plan (its maps, a padded stage's copies) holds the tensors' addresses: so does a C plan
        layout.key_has_pointers = any(k._layout().key_has_pointers for k, _ in self.stages)
        return layout

    def _run(self, args, stream, sync, filer: Kernel | None):
        """The general path. A call on the kept workspace files its launches in `filer`'s compiled launcher (this
        kernel's, or that of the tuned kernel that chose it)."""
        layout = self._arguments or self._make_layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        explicit = None if stream is None else stream_handle(stream)
        ptrs, key, device, first = layout.bind(args, explicit)
        shapes = key[:len(layout.tensors)]
        _, pieces, total = self._scratch.get(shapes) or self._layout_scratch(layout, shapes, args)
        for s in layout.scalars:  # every argument is checked before anything is launched
            s.check(args[s.index])
        if device == HOST:
            self._run_host(args, layout, pieces, total, explicit)
        else:
            handle = explicit if explicit is not None else first.stream(device)
            kept = False
            if first.kind == "torch":
                torch = sys.modules["torch"]
                kept = explicit is None and not torch.cuda.is_current_stream_capturing()
                if kept:
                    views = self._kept_views(args, layout, device, handle, pieces, total)
                else:
                    views = self._torch_workspace(args[layout.tensors[0].index], pieces, total, explicit)
            else:
                stream = handle
            with self._workspace_lock if first.kind != "torch" else held() if kept else _NO_LOCK:
                if first.kind != "torch":
                    base = self._workspace(device, handle, total)
                    zeroed = self._zeroed_workspace(device, handle, self._zeroed_prefix(pieces))
                    views = [_DeviceBuffer((zeroed if b.get("zeroed") else base) + off, shape, device)
                             for (off, _, shape), b in zip(pieces, self.entry["scratch"], strict=True)]
                for kernel, mapping in self.stages:
                    kernel(*[args[i] if public else views[i] for public, i in mapping], stream=stream)
            if kept and filer is not None and filer._native is not None:
                keep: list = [views]
                steps = self._steps(args, views, device, handle, keep)
                if steps:
                    filer._file_steps(args, steps, keep, handle)
            if sync:
                from .cuda_driver import Driver

                Driver.get(device).synchronize(handle)
        outs = layout.outputs
        if len(outs) == 1:
            return args[outs[0]]
        return tuple(args[i] for i in outs) if outs else None

    def _steps(self, args, views, device: int, handle: int, keep: list) -> list[Step] | None:
        """Every stage's launches for these arguments and workspace views on `handle`, as one list of the compiled
        launcher's steps over this kernel's parameters (a scratch tensor: its view's fixed address); None where a
        stage has none to give (Kernel.steps_for) or there are more than fastlaunch.c takes."""
        steps: list[Step] = []
        for kernel, mapping in self.stages:
            if kernel._layout().grid_scalars:  # a grid of a scalar's value: not in this kernel's plan key
                return None
            sub = kernel.steps_for([args[i] if public else views[i] for public, i in mapping], device, handle, keep)
            if sub is None:
                return None
            sources, fixed = {}, {}
            for j, (public, i) in enumerate(mapping):
                if public:
                    sources[j] = i
                else:
                    cell = ctypes.c_uint64(views[i].data_ptr())
                    keep.append(cell)
                    fixed[j] = ctypes.addressof(cell)
            steps += [st.through(sources, fixed) for st in sub]
        return steps if len(steps) <= MAX_STEPS else None

    def _fast_key(self, args, layout, handle: int):
        torch = sys.modules["torch"]
        key = []
        for t in layout.tensors:
            a = args[t.index]
            if type(a) is not torch.Tensor or not a.is_contiguous():
                return None
            key.append((a.shape, a.dtype, a.get_device()))
        key.append(handle)
        return tuple(key)

    def _fast_call(self, args):
        """A repeated call on the current stream with torch tensors of shapes seen before (the module docstring)."""
        layout = self._arguments
        if layout is None or len(args) != layout.nparams:
            return _MISS
        a0 = args[layout.tensors[0].index]
        torch = sys.modules["torch"]
        if type(a0) is not torch.Tensor or a0.get_device() < 0:
            return _MISS
        raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw_stream is None:
            return _MISS
        key = self._fast_key(args, layout, raw_stream(a0.get_device()))
        views = self._fast_views.get(key) if key is not None else None
        if views is None:
            return _MISS
        for kernel, mapping in self.stages:
            kernel(*[args[i] if public else views[i] for public, i in mapping])
        outs = layout.outputs
        if len(outs) == 1:
            return args[outs[0]]
        return tuple(args[i] for i in outs) if outs else None

    def _kept_views(self, args, layout, device: int, handle: int, pieces, total: int) -> list:
        """Views of the workspace kept for (device, stream), grown when this call needs more; filed for the Python
        fast path under the tensors' shapes, dtypes, devices and the stream (only once this call's checks passed,
        and only for a kernel without scalars, which that path would not check before the first stage)."""
        torch = sys.modules["torch"]
        ws = self._kept.get((device, handle))
        if ws is None or ws.numel() < total:
            ws = torch.empty(max(total, 1), dtype=torch.uint8, device=args[layout.tensors[0].index].device)
            self._kept[(device, handle)] = ws
            self._fast_views.clear()  # views of the old workspace: let it go back to the allocator
        zeroed = None
        if self._has_zeroed:
            need = self._zeroed_prefix(pieces)
            zeroed = self._kept_zeroed.get((device, handle))
            if zeroed is None or zeroed.numel() < need:
                zeroed = torch.zeros(max(need, 1), dtype=torch.uint8, device=ws.device)
                self._kept_zeroed[(device, handle)] = zeroed
                self._fast_views.clear()
        views = []
        for (off, nbytes, shape), b in zip(pieces, self.entry["scratch"], strict=True):
            src = zeroed if b.get("zeroed") else ws
            views.append(src[off:off + nbytes].view(getattr(torch, TORCH_NAMES[b["dtype"]])).view(shape))
        # (the Python fast path checks no scalar before the first stage launches: kernels with scalars stay off it;
        # the compiled launcher converts every scalar first)
        key = None if layout.scalars else self._fast_key(args, layout, handle)
        if key is not None:
            if len(self._fast_views) >= 256:
                self._fast_views.clear()
            self._fast_views[key] = views
        return views

    def release_workspaces(self) -> None:
        """Give back the workspaces kept per (device, stream): a process holding many multi-launch kernels (the
        tuner, one per candidate) would otherwise keep each one's largest workspace at once."""
        for kernel, _ in self.stages:
            kernel.release_workspaces()
        with self._workspace_lock:
            if self._native is not None:  # its plans hold views of the workspaces
                self._native.forget()
            self._fast_views.clear()
            self._kept.clear()  # torch's allocator reuses the bytes in stream order
            self._kept_zeroed.clear()
            if self._workspaces or self._zeroed:
                from .cuda_driver import Driver

                for (device, handle), (ptr, _) in [*self._workspaces.items(), *self._zeroed.items()]:
                    drv = Driver.get(device)
                    drv.synchronize(handle)  # launches still reading it
                    drv.free(ptr)
                self._workspaces.clear()
                self._zeroed.clear()

    def workspace_bytes(self, *args) -> int:
        """The bytes of scratch a call with these arguments needs (the C launcher's NAME_workspace_bytes)."""
        layout = self._arguments or self._make_layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        return self._layout_scratch(layout, [tuple(args[t.index].shape) for t in layout.tensors], args)[2]

    def _layout_scratch(self, layout, shapes, args):
        sizes = self._sizes_from_shapes(layout, shapes, args)
        pieces = [(evaluate(b["offset"], sizes), evaluate(b["bytes"], sizes),
                   tuple(d if isinstance(d, int) else evaluate(d, sizes) for d in b["shape"]))
                  for b in self.entry["scratch"]]
        total = evaluate(self.entry["workspace_bytes"], sizes)
        if len(self._scratch) >= 1024:
            self._scratch.clear()
        self._scratch[tuple(shapes)] = out = (sizes, pieces, total)
        return out

    def _torch_workspace(self, like, pieces, total: int, explicit):
        torch = sys.modules["torch"]
        ws = torch.empty(max(total, 1), dtype=torch.uint8, device=like.device)
        side = None if explicit is None else torch.cuda.ExternalStream(explicit, device=like.device)
        if side is not None:  # the caching allocator must not hand the bytes out before that stream is done
            ws.record_stream(side)
        if self._has_zeroed:  # cleared on the stream the stages run on (captured, when capturing)
            with contextlib.nullcontext() if side is None else torch.cuda.stream(side):
                ws[:self._zeroed_prefix(pieces)].zero_()
        views = []
        for (off, nbytes, shape), b in zip(pieces, self.entry["scratch"], strict=True):
            views.append(ws[off:off + nbytes].view(getattr(torch, TORCH_NAMES[b["dtype"]])).view(shape))
        return views

    def _workspace(self, device: int, handle: int, total: int) -> int:
        """A device workspace of at least `total` bytes for launches on this stream (kept, grown as needed)."""
        return _kept_buffer(self._workspaces, device, handle, total)

    def _zeroed_prefix(self, pieces) -> int:
        """The bytes from the workspace's start that hold the zeroed scratch tensors (they come first)."""
        return max((off + nbytes for (off, nbytes, _), b in zip(pieces, self.entry["scratch"], strict=True)
                    if b.get("zeroed")), default=0)

    def _zeroed_workspace(self, device: int, handle: int, nbytes: int) -> int:
        """A kept buffer of at least `nbytes` zero bytes for the zeroed scratch of launches on this stream (0 for
        none). The functions leave it zero, so it is cleared only when it is made."""
        return _kept_buffer(self._zeroed, device, handle, nbytes, zeroed=True) if nbytes else 0

    def _run_host(self, args, layout, pieces, total: int, explicit) -> None:
        """numpy arguments: every tensor copied to GPU 0, the stages launched, the outputs copied back."""
        from .cuda_driver import Driver

        drv = Driver.get(0)
        handle = explicit or 0
        staged: list[int] = []
        with drv.current():  # the stages take their fast launch path (Kernel._run_staged says why)
            try:
                device_args = list(args)
                for t in layout.tensors:
                    arr = args[t.index]
                    staged.append(drv.alloc(max(arr.nbytes, 1)))
                    drv.htod(staged[-1], arr.ctypes.data, arr.nbytes)
                    device_args[t.index] = _DeviceBuffer(staged[-1], arr.shape)
                staged.append(drv.alloc(max(total, 1)))
                if self._has_zeroed:
                    drv.zero(staged[-1], self._zeroed_prefix(pieces))
                views = [_DeviceBuffer(staged[-1] + off, shape) for off, _, shape in pieces]
                for kernel, mapping in self.stages:
                    kernel(*[device_args[i] if public else views[i] for public, i in mapping], stream=handle)
                drv.synchronize(handle)
                for t, ptr in zip(layout.tensors, staged, strict=False):
                    if t.output:
                        arr = args[t.index]
                        drv.dtoh(arr.ctypes.data, ptr, arr.nbytes)
            finally:
                for ptr in staged:
                    drv.free(ptr)

    def launch_config(self, sizes: dict[str, int], device: int = 0):
        raise ArgumentError(f"{self.name} is a sequence of {len(self.stages)} launches: ask its stages "
                            f"({', '.join(k.name for k, _ in self.stages)}) for their launch configurations")

    def launch_plan(self, *args, stream=None):
        raise ArgumentError(f"{self.name} is a sequence of {len(self.stages)} launches: ask its stages "
                            f"({', '.join(k.name for k, _ in self.stages)}) for their plans")


def _kept_buffer(kept: dict, device: int, handle: int, nbytes: int, zeroed: bool = False) -> int:
    """A cuMemAlloc buffer of at least `nbytes` kept in `kept` per (device, stream), grown as needed (the old one freed
    once the stream's launches are done with it); `zeroed`: cleared when it is made."""
    from .cuda_driver import Driver

    ptr, have = kept.get((device, handle), (0, 0))
    if have < nbytes:
        drv = Driver.get(device)
        if ptr:
            drv.synchronize(handle)  # launches still reading the old buffer
            drv.free(ptr)
        ptr = drv.alloc(nbytes)
        if zeroed:
            drv.zero(ptr, nbytes)
            drv.synchronize()  # (the memset runs on the legacy stream, which a non-blocking stream does not wait for)
        kept[(device, handle)] = (ptr, nbytes)
    return ptr
