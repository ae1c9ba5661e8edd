"""The compiled launcher: tilec/runtime/fastlaunch.c, built once per machine and Python, used when it builds.

`launcher_for(kernel, layout)` gives a kernel's `Launcher` (or None, and the generated Python fast path of
launch.py serves, through ctypes, as before). The extension is one C file against Python's limited API (abi3),
compiled by the host C compiler (`$CC`, else `cc`) with Python's headers, into

    TILEC_NATIVE_DIR, if set, else <tilec cache directory>/native/<hash of the source and the compiler>/

and loaded from there by every later process (no compile: the file is found by its hash). Where no compiler or no
Python.h exists (a slim deployment image), it is not built and the ctypes path serves; so it does when
`TILEC_NATIVE_LAUNCH=0`. `python -m tilec.runtime.fastlaunch` builds it ahead of time (a container build step) and
says where it is or why it cannot be built; `status()` says the same from Python.

What the C launcher does per call, and what it leaves to the Python path, is at the top of fastlaunch.c: it
launches with plans the Python path made and registered here (`remember`), so plans, tensor maps, tuned variants and
every error message stay in one place, launch.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import NamedTuple

from .arrays import _NO_TYPESTR

SOURCE = Path(__file__).with_name("fastlaunch.c")
MODULE = "tilec_fastlaunch"
SCALAR_KINDS = {"i8": 0, "u8": 1, "i16": 2, "u16": 3, "i32": 4, "u32": 5, "i64": 6, "u64": 7, "f32": 8, "f64": 9,
                "f16": 10, "bf16": 11, "bool": 12}
MAX_PARAMS, MAX_DIMS = 64, 8  # fastlaunch.c's limits (TL_MAX_PARAMS, TL_MAX_DIMS)
# __cuda_array_interface__ typestrs of tilec dtypes (little-endian hosts); bf16 and fp8 have none: any type of
# their width is read as their bits (arrays.py's _NO_TYPESTR)
TYPESTRS = {"bool": "|b1", "i8": "|i1", "u8": "|u1", "i16": "<i2", "u16": "<u2", "i32": "<i4", "u32": "<u4",
            "i64": "<i8", "u64": "<u8", "f16": "<f2", "f32": "<f4", "f64": "<f8"}
READERS = {"cuda_array_interface": 2, "cupy": 3}  # arrays.py adapter kinds fastlaunch.c reads (besides torch's)

_lock = threading.Lock()
_state: dict = {}  # "module": the extension or None; "why": the reason it is not used; "path"


def _native_dir() -> Path:
    env = os.environ.get("TILEC_NATIVE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("TILEC_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = os.path.join(xdg, "tilec") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "tilec")
    return Path(base) / "native"


def _compiler() -> list[str]:
    return (os.environ.get("CC") or "cc").split()


def _tag(source: bytes) -> str:
    """The build's folder name: the source, the limited-API level and the platform (not the Python minor version:
    an abi3 extension loads on any later CPython 3)."""
    import sysconfig

    h = hashlib.sha256(source)
    h.update(f"abi3-3.10 {sysconfig.get_platform()} {sys.implementation.name}".encode())
    return h.hexdigest()[:16]


def library_path() -> Path:
    return _native_dir() / _tag(SOURCE.read_bytes()) / f"{MODULE}.abi3.so"


def build(path: Path | None = None) -> Path:
    """Compile fastlaunch.c into `path` (default library_path()); RuntimeError saying why it cannot."""
    import subprocess
    import sysconfig
    import tempfile

    path = path or library_path()
    include = sysconfig.get_paths().get("include") or ""
    if not (Path(include) / "Python.h").is_file():
        raise RuntimeError(f"Python's headers are not installed (no {include}/Python.h): install python3-dev, "
                           "or build the extension where they are (python -m tilec.runtime.fastlaunch)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{MODULE}.", suffix=".so", dir=path.parent)
    os.close(fd)
    cmd = [*_compiler(), "-O2", "-shared", "-fPIC", "-std=c11", "-fvisibility=hidden", "-Wall",
           "-Werror=implicit-function-declaration", f"-I{include}", str(SOURCE), "-o", tmp]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        os.unlink(tmp)
        raise RuntimeError(f"no C compiler ({cmd[0]}: {e.strerror}); set CC, or build it where one is") from None
    if r.returncode:
        os.unlink(tmp)
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{(r.stderr or r.stdout).strip()}")
    os.replace(tmp, path)  # complete or absent: concurrent builders write the same bytes
    return path


def _import(path: Path):
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    spec = importlib.util.spec_from_file_location(MODULE, str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def extension():
    """The extension module, built on first use if needed; None when it cannot be had (status() says why)."""
    if "module" in _state:
        return _state["module"]
    with _lock:
        if "module" in _state:
            return _state["module"]
        mod, why, path = None, "", None
        if os.environ.get("TILEC_NATIVE_LAUNCH", "1").strip().lower() in ("0", "no", "off", "false"):
            why = "TILEC_NATIVE_LAUNCH=0"
        elif not sys.implementation.name == "cpython":
            why = f"not CPython ({sys.implementation.name})"
        else:
            try:
                path = library_path()
                if not path.is_file():
                    build(path)
                mod = _import(path)
            except (RuntimeError, OSError, ImportError) as e:
                why = str(e)
                mod = None
        _state.update(module=mod, why=why, path=path)
        return mod


def status() -> dict:
    """{"native": bool, "path": the extension's file or None, "why": why it is not used ("" when it is)}."""
    mod = extension()
    return {"native": mod is not None, "path": str(_state.get("path")) if mod else None, "why": _state.get("why", "")}


_DLPACK_DTYPES: dict[str, tuple[int, int, int]] = {}


def _dlpack_dtype(ext, t) -> tuple[int, int, int] | None:
    """The (code, bits, lanes) torch's exchange table reports for this parameter's dtype, asked of torch itself."""
    if t.dtype not in _DLPACK_DTYPES:
        torch = sys.modules["torch"]
        td = t.torch_dtype()
        if td is None:
            return None
        try:
            _DLPACK_DTYPES[t.dtype] = ext.describe(torch.empty(0, dtype=td))[2]
        except Exception:  # a dtype torch cannot export (never the Python path's concern)
            return None
    return _DLPACK_DTYPES[t.dtype]


_NATIVE_CLASSES: dict[type, type] = {}


def native_class(cls: type) -> type:
    """`cls` (a tilec.runtime Kernel class), or its subclass over the extension's KernelBase, whose calls run C at
    once: the compiled launcher once the first call attached it, else `cls.__call__`. The subclass has the same
    name and behaviour; it is used when torch or cupy is imported (the arrays the launcher reads) and the extension
    is available, so loading a module may build the extension (once per machine, as the first launch would)."""
    if "torch" not in sys.modules and "cupy" not in sys.modules:
        return cls
    got = _NATIVE_CLASSES.get(cls)
    if got is None:
        ext = extension()
        if ext is None or not hasattr(ext, "KernelBase"):
            return cls
        got = _NATIVE_CLASSES[cls] = type(cls.__name__, (ext.KernelBase, cls),
                                          {"_python_call": cls.__call__, "__module__": cls.__module__,
                                           "__doc__": cls.__doc__, "__qualname__": cls.__qualname__})
    return got


def launcher_for(kernel, layout, miss, launch: int | None = None, device_type: int = 2, launch_ex: int = 0,
                 capturing: int = 0):
    """`kernel`'s compiled launcher, or None (the ctypes path serves). Needs torch with its DLPack exchange table
    (torch 2.10 and later: it gives the dtypes) or cupy imported, and a kernel within the C file's limits. `launch`:
    the address of cuLaunchKernel (default: the driver's), `launch_ex` that of cuLaunchKernelEx for kernels launched
    in clusters (default: the driver's; 0 leaves them to the Python path), `capturing` that of cuStreamIsCapturing
    (default: the driver's; 0 leaves sequences on a kept workspace to the Python path) and `device_type` the DLPack
    device type of the tensors (kDLCUDA) -- the tests put a fake driver over host tensors there."""
    torch = sys.modules.get("torch")
    tables = torch is not None and any(n in vars(torch.Tensor) for n in ("__dlpack_c_exchange_api__",
                                                                         "__c_dlpack_exchange_api__"))
    if not tables and "cupy" not in sys.modules:
        return None  # torch before 2.10 (no exchange table) and no cupy
    if len(kernel.entry["params"]) > MAX_PARAMS or len(layout.size_names) > 32 or len(layout.tmaps) > 16:
        return None
    ext = extension()
    if ext is None:
        return None
    if launch is None:
        import ctypes

        from .cuda_driver import Driver

        try:
            drv = Driver.get(0)
        except Exception:  # no driver: nothing to launch anyway (the Python path reports it)
            return None
        if not isinstance(drv.raw_launch, ctypes._CFuncPtr):  # a stand-in driver (tests/fake_cuda.py)
            return None
        launch = ctypes.cast(drv.raw_launch, ctypes.c_void_p).value
        launch_ex, capturing = drv.entry_address("cuLaunchKernelEx"), drv.entry_address("cuStreamIsCapturing")
    tensors = {t.index: t for t in layout.tensors}
    first_seen: dict[str, int] = {}  # a size -> the input dimension it is read from (tensor number * 8 + axis)
    for k, t in enumerate(layout.tensors):
        if not t.output:
            for axis, d in enumerate(t.shape):
                if isinstance(d, str) and d.isidentifier():
                    first_seen.setdefault(d, k * MAX_DIMS + axis)
    can_allocate = bool(layout.outputs)
    params = []
    for i, p in enumerate(kernel.entry["params"]):
        if p["kind"] == "tensor":
            t = tensors[i]
            code = _dlpack_dtype(ext, t) if tables else (0, 0, 0)  # (0, 0, 0): no DLPack array matches
            if code is None or len(t.shape) > MAX_DIMS:
                return None
            alloc = None
            if t.output:
                alloc = []
                for d in t.shape:
                    if isinstance(d, int):
                        alloc.append(d)
                    elif d in first_seen:
                        alloc.append(-(1 + first_seen[d]))
                    else:  # a size no input gives, or a formula: the Python path allocates
                        can_allocate = False
                        alloc = None
                        break
            typestr = TYPESTRS.get(t.dtype, "") if sys.byteorder == "little" else ""
            params.append((True, t.output, 0, code, len(t.shape), alloc, typestr, _NO_TYPESTR.get(t.dtype, 0)))
        else:
            kind = SCALAR_KINDS.get(p["dtype"])
            if kind is None:
                return None
            params.append((False, False, kind, (0, 0, 0), 0, None))
    spec = (params, layout.inputs, layout.outputs, layout.grid_scalars, layout.key_has_pointers, can_allocate)
    return ext.Launcher(spec, launch, miss, device_type, launch_ex, capturing)


def remember(launcher, layout, key, plan, args=()) -> None:
    """File the plan the Python path just launched with under `key` (launch.py's plan key) in the C launcher, and
    teach it the array types among `args` it reads without an exchange table (cupy, __cuda_array_interface__), with
    the stream their adapter launches on."""
    if plan.empty:
        return
    for t in layout.tensors:
        if t.index < len(args) and not launcher.reader(type(args[t.index])):
            _accept(launcher, layout, args[t.index])
    flat: list[int] = []
    n = len(layout.tensors)
    for shape in key[:n]:
        flat.extend(int(d) for d in shape)
    flat.extend(int(v) for v in key[n:])
    # (a clustered plan is filed where the launcher has cuLaunchKernelEx; else remember() declines it)
    launcher.remember(flat, plan.fn, plan.grid, plan.threads, plan.shared, plan.sizes, plan.map_addresses, plan,
                      plan.cluster)


ALWAYS, UNLESS_ALLOCATED, IF_ALLOCATED = 0, 1, 2  # Step.when (fastlaunch.c's tl_step.when)


class Step(NamedTuple):
    """One launch of a plan of several (fastlaunch.c's tl_step): a padded launch's copies and kernel, or a
    multi-launch kernel's stages. Per kernel parameter, in the kernel's order (its parameters, sizes, tensor maps):
    `sources[j]` is the call's parameter it takes (its index), or -1 for the value at the address `fixed[j]`, which
    the plan's owner keeps alive."""

    fn: int
    grid: tuple
    threads: int
    shared: int
    cluster: tuple | None
    sources: tuple
    fixed: tuple
    when: int = 0  # ALWAYS, or only UNLESS_ALLOCATED / IF_ALLOCATED: the launcher made the outputs (no copy in)

    def through(self, sources: dict[int, int], fixed: dict[int, int]) -> Step:
        """This step as a launch of another call: its parameter i becomes that call's `sources[i]`, or the fixed
        address `fixed[i]` (a multi-launch kernel's stage, whose scratch tensors are views of a kept workspace)."""
        src = tuple(-1 if s < 0 or s in fixed else sources[s] for s in self.sources)
        fix = tuple(fixed[s] if s >= 0 and s in fixed else f for s, f in zip(self.sources, self.fixed, strict=True))
        return self._replace(sources=src, fixed=fix)


def remember_steps(launcher, layout, key, steps: list[Step], owner, stream: int | None) -> bool:
    """File a call's launches (`steps`) under `key` in the C launcher; `owner` keeps every fixed address alive,
    `stream` binds the plan to the stream whose kept workspace it uses (None: any). False when not filed."""
    flat: list[int] = []
    n = len(layout.tensors)
    for shape in key[:n]:
        flat.extend(int(d) for d in shape)
    flat.extend(int(v) for v in key[n:])
    return bool(launcher.remember_steps(flat, [tuple(s) for s in steps], owner, stream))


@contextlib.contextmanager
def held():
    """Around a Python-path sequence of launches on a kept workspace: the C launcher's plans bound to a stream
    wait until it is queued (another thread's C call on the same stream would interleave with it)."""
    ext = _state.get("module")
    if ext is None or not hasattr(ext, "hold"):
        yield
        return
    ext.hold(1)
    try:
        yield
    finally:
        ext.hold(-1)


def _accept(launcher, layout, array) -> None:
    from .arrays import NP_NAMES, adapter

    tp = type(array)
    a = adapter(tp)
    reader = READERS.get(a.kind)
    if a.kind == "other" and hasattr(array, "__cuda_array_interface__"):  # an instance attribute (arrays.py reads
        reader = 2  # it first, on the legacy stream; an instance without one is a miss there and goes to Python)
    if reader is None:
        return
    np_dtypes = [None] * layout.nparams
    numpy = sys.modules.get("numpy")
    if reader == 3 and numpy is not None:  # cupy arrays carry numpy dtypes
        for t in layout.tensors:
            try:
                np_dtypes[t.index] = numpy.dtype(NP_NAMES[t.dtype])
            except TypeError:  # bfloat16 / fp8 without ml_dtypes: cupy cannot hold them either
                pass
    alloc = _cupy_allocator(layout) if reader == 3 and "cupy" in sys.modules else None
    launcher.accept(tp, reader, a.stream if reader == 3 else None, tuple(np_dtypes), alloc)


def _cupy_allocator(layout):
    """alloc(parameter, shape, device): a left-out output as launch.py's allocate_like makes it beside a cupy array
    (cupy.empty of the parameter's dtype on the array's device), for fastlaunch.c to call."""
    from .arrays import NP_NAMES

    cupy = sys.modules["cupy"]
    dtypes = {t.index: NP_NAMES[t.dtype] for t in layout.tensors if t.output}

    def alloc(index: int, shape: tuple, device: int):
        if cupy.cuda.runtime.getDevice() == device:
            return cupy.empty(shape, dtype=dtypes[index])
        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype=dtypes[index])

    return alloc


def main() -> int:
    """python -m tilec.runtime.fastlaunch [--rebuild]: build (or find) the extension and say where, or why not."""
    if "--rebuild" in sys.argv[1:]:
        try:
            print(build())
        except RuntimeError as e:
            print(f"tilec: not built: {e}", file=sys.stderr)
            return 1
        return 0
    st = status()
    if st["native"]:
        print(st["path"])
        return 0
    print(f"tilec: the compiled launcher is not available: {st['why']}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
