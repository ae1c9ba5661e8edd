"""The C launcher header (`tilec k.tile --emit header -o k.h`): deploy kernels with no Python.

One self-contained header, valid C11 and C++11, that needs only the CUDA driver API (<cuda.h>,
link with -lcuda). It embeds one device image per target (a cubin for each architecture) and
declares, for each kernel K of the file,

    CUresult K_launch(CUstream stream, CUdeviceptr tensor..., scalar..., int size...);
    CUresult K_check_device(CUdevice dev, char* message, size_t message_size);

`K_launch` computes the grid from the runtime sizes (the manifest's formulas, translated to C with
floor-division semantics), loads the module lazily, once per CUDA context (a mutex-guarded table
keyed by the context's unique id), picks the image that fits the device's compute capability, sets
the dynamic shared-memory limit of kernels above 48 KB, and launches. It returns the driver's
error codes and never prints or exits; CUDA_ERROR_NO_BINARY_FOR_GPU means no embedded image fits
this GPU, and `K_check_device` then says, in words, what the header was built for.

A kernel whose manifest entry lists "tensor_maps" (Hopper TMA) takes one CUtensorMap per map after
its sizes: `K_launch` encodes them with cuTensorMapEncodeTiled from the pointers and sizes of that
launch, or, when TMA cannot address the tensors (an address not 16-byte aligned, a row not a
multiple of 16 bytes), launches the entry's "fallback" kernel instead. Fallback entries are marked
"internal": they are looked up with the other kernels but get no launch function of their own.

Everything the header defines is `static` (functions `static inline`), so it can be included in
several translation units; its private names carry a per-header id, and the small runtime helpers
shared by every tilec header are guarded by a versioned macro, so that several tilec headers can be
included in one file.

The generator works from manifest data (tilec.artifacts.kernel_entry dicts) and the built images
only: nothing here depends on the IR.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ...identity import IdentityDict
from ...manifest import (
    INTERNAL_KEY,
    TENSOR_MAPS_KEY,
    WORKSPACE_ALIGN,
    ManifestError,
    TensorMapSpec,
    cluster_dims,
    direct_stores_entry,
    fallback_entry,
    launch_checks,
    tensor_map_specs,
)
from .size_checks import check_sizes_function  # K_check_sizes

LAUNCHER_ABI = 3  # bump when the shared helpers below change meaning (2: tilec_encode_tensor_map_; 3: PTX images)

_C_TYPES = {"bool": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t", "u16": "uint16_t",
            "i32": "int32_t", "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t", "f32": "float",
            "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "f8e4m3": "uint8_t", "f8e5m2": "uint8_t"}
_BITS_NOTE = {"f16": "IEEE binary16 bits", "bf16": "bfloat16 bits", "f8e4m3": "fp8 e4m3 bits",
              "f8e5m2": "fp8 e5m2 bits"}

_RESERVED = set("""auto break case char const continue default do double else enum extern float for goto if inline int
long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
bool true false alignas alignof and asm catch class constexpr decltype delete explicit export friend mutable
namespace new noexcept not nullptr operator or private protected public template this throw try typeid typename
using virtual xor stream NULL""".split())


class LauncherError(Exception):
    """A kernel the C launcher cannot serve (yet)."""


@dataclass
class Image:
    target: str  # tilec's target name: sm80, sm90
    arch: str  # sm_80, sm_90a; compute_80 for PTX
    data: bytes  # cubin (or fatbin) bytes; PTX text ending in a NUL
    kernels: list[dict]  # manifest kernel entries as built for this target


def arch_cc(arch: str) -> tuple[int, bool]:
    """sm_90a -> (90, True): compute capability major*10+minor and whether the image is
    architecture-specific (runs only on exactly that compute capability). compute_80 (PTX) -> (80, False)."""
    m = re.fullmatch(r"(?:sm|compute)_(\d+)([af]?)", arch)
    if not m:
        raise LauncherError(f"not a CUDA architecture: {arch}")
    return int(m.group(1)), bool(m.group(2))


def _c_string(text: str) -> str:
    """A C string literal of the UTF-8 bytes (file names may hold quotes, backslashes, non-ASCII)."""
    return '"' + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\?' else f"\\{b:03o}"
                         for b in text.encode()) + '"'


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def ident(text: str) -> str:
    s = re.sub(r"\W", "_", text)
    return ("_" + s) if not s or s[0].isdigit() else s


# The C functions formula_to_c's expressions call (every C launcher includes them once).
FORMULA_HELPERS_C = r"""/* Size formulas use Python's floor division and modulo (the manifest's semantics). */
static inline int64_t tilec_floordiv_(int64_t a, int64_t b) {
  int64_t q;
  if (b == 0) return 0;
  q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tilec_floormod_(int64_t a, int64_t b) { return b == 0 ? 0 : a - tilec_floordiv_(a, b) * b; }
static inline int64_t tilec_ceildiv_(int64_t a, int64_t b) { return -tilec_floordiv_(-a, b); }
static inline int64_t tilec_min_(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t tilec_max_(int64_t a, int64_t b) { return a > b ? a : b; }
"""


def formula_names(text: str) -> set[str]:
    """The size names a manifest formula reads (its functions' names aside)."""
    tree = ast.parse(text, mode="eval")
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def formula_to_c(text: str, names: dict[str, str]) -> str:
    """A manifest size formula (integers, names, + - * // %, ceildiv/min/max) as a C expression
    over int64_t values, with Python's floor division and modulo."""
    def ev(n: ast.AST) -> str:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return f"INT64_C({n.value})"
        if isinstance(n, ast.Name) and n.id in names:
            return names[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return f"(-{ev(n.operand)})"
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, (ast.Add, ast.Sub, ast.Mult)):
                op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(n.op)]
                return f"({a} {op} {b})"
            if isinstance(n.op, ast.FloorDiv):
                return f"tilec_floordiv_({a}, {b})"
            if isinstance(n.op, ast.Mod):
                return f"tilec_floormod_({a}, {b})"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("ceildiv", "min", "max") \
                and len(n.args) == 2 and not n.keywords:
            return f"tilec_{n.func.id}_({ev(n.args[0])}, {ev(n.args[1])})"
        raise LauncherError(f"cannot translate the size formula '{text}' to C")

    return ev(ast.parse(text, mode="eval"))


def _byte_array(name: str, data: bytes) -> str:
    lines = [f"TILEC_ALIGN64_ static const unsigned char {name}[{len(data)}] = {{"]
    for i in range(0, len(data), 24):
        lines.append("  " + ",".join(f"0x{b:02x}" for b in data[i:i + 24]) + ",")
    lines.append("};")
    return "\n".join(lines)


_COMMON = (r"""
/* ---- helpers shared by every tilec launcher header (ABI @ABI@) ---- */
#ifndef TILEC_LAUNCHER_COMMON_@ABI@
#define TILEC_LAUNCHER_COMMON_@ABI@
#if defined(__cplusplus)
#define TILEC_ALIGN64_ alignas(64)
#else
#define TILEC_ALIGN64_ _Alignas(64)
#endif
#if defined(_WIN32)
typedef SRWLOCK tilec_mutex_;
#define TILEC_MUTEX_INIT_ SRWLOCK_INIT
static inline void tilec_lock_(tilec_mutex_* m) { AcquireSRWLockExclusive(m); }
static inline void tilec_unlock_(tilec_mutex_* m) { ReleaseSRWLockExclusive(m); }
#else
typedef pthread_mutex_t tilec_mutex_;
#define TILEC_MUTEX_INIT_ PTHREAD_MUTEX_INITIALIZER
static inline void tilec_lock_(tilec_mutex_* m) { pthread_mutex_lock(m); }
static inline void tilec_unlock_(tilec_mutex_* m) { pthread_mutex_unlock(m); }
#endif
#ifndef TILEC_MAX_CONTEXTS
#define TILEC_MAX_CONTEXTS 64 /* contexts cached per header; more evict the oldest (its module stays loaded) */
#endif
/* One embedded device image. cc = major*10 + minor; exact != 0: runs only on that compute capability;
 * ptx != 0: PTX text, which the driver JIT-compiles for any GPU of compute capability cc or newer. */
typedef struct tilec_image_ {
  const unsigned char* data;
  size_t size;
  int cc;
  int exact;
  int ptx;
  const char* arch;
} tilec_image_;
"""
    + FORMULA_HELPERS_C
    + r"""/* How an image runs on a GPU, best first: built for exactly it (an architecture-specific image, or a cubin
 * of its compute capability), a cubin of an earlier GPU of its major version, PTX the driver JIT-compiles. */
enum { TILEC_RUNS_EXACT_ = 1, TILEC_RUNS_SAME_MAJOR_ = 2, TILEC_RUNS_JIT_ = 3, TILEC_RUNS_NOT_ = 4 };
static inline int tilec_image_runs_(const tilec_image_* im, int cc) {
  if (im->ptx) return cc >= im->cc ? TILEC_RUNS_JIT_ : TILEC_RUNS_NOT_;
  if (cc == im->cc) return TILEC_RUNS_EXACT_;
  return !im->exact && cc / 10 == im->cc / 10 && cc > im->cc ? TILEC_RUNS_SAME_MAJOR_ : TILEC_RUNS_NOT_;
}
/* TILEC_NO_JIT set (and not "0"): a launcher never hands the driver PTX to compile. */
static inline int tilec_no_jit_(void) {
  const char* v = getenv("TILEC_NO_JIT");
  return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}
/* The best image for compute capability cc (how it runs in *how), or -1; with no_jit, never a PTX image. */
static inline int tilec_pick_image_(const tilec_image_* images, int n, int cc, int no_jit, int* how) {
  int best = -1, best_how = TILEC_RUNS_NOT_, i;
  for (i = 0; i < n; ++i) {
    int h = tilec_image_runs_(&images[i], cc);
    if (h == TILEC_RUNS_NOT_ || (h == TILEC_RUNS_JIT_ && no_jit)) continue;
    if (best < 0 || h < best_how ||
        (h == best_how && (images[i].exact > images[best].exact ||
                           (images[i].exact == images[best].exact && images[i].cc > images[best].cc)))) {
      best = i;
      best_how = h;
    }
  }
  if (how) *how = best_how;
  return best;
}
static inline CUresult tilec_device_cc_(CUdevice dev, int* cc) {
  int major = 0, minor = 0;
  CUresult rc = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (rc != CUDA_SUCCESS) return rc;
  rc = cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  *cc = major * 10 + minor;
  return rc;
}
static inline CUresult tilec_check_device_(const char* header, const tilec_image_* images, int n,
                                           const char* built_for, int min_driver, int ptx_driver, CUdevice dev,
                                           char* msg, size_t size) {
  int cc = 0, driver = 0, pick, how = 0;
  char name[128] = "?";
  CUresult rc = tilec_device_cc_(dev, &cc);
  if (rc != CUDA_SUCCESS) {
    const char* s = "";
    cuGetErrorName(rc, &s);
    if (msg && size) snprintf(msg, size, "%s: cannot query device %d: %s", header, (int)dev, s ? s : "?");
    return rc;
  }
  cuDeviceGetName(name, (int)sizeof name, dev);
  cuDriverGetVersion(&driver);
  if (driver < min_driver) {
    if (msg && size)
      snprintf(msg, size, "%s: built with CUDA %d.%d, which needs a CUDA %d.x driver or newer; this driver "
               "supports CUDA %d.%d", header, min_driver / 1000, (min_driver % 1000) / 10, min_driver / 1000,
               driver / 1000, (driver % 1000) / 10);
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  }
  pick = tilec_pick_image_(images, n, cc, tilec_no_jit_(), &how);
  if (pick < 0 && tilec_pick_image_(images, n, cc, 0, NULL) >= 0) {
    if (msg && size)
      snprintf(msg, size, "%s: TILEC_NO_JIT is set, and the only image that runs on device %d (%s, sm_%d) is PTX, "
               "which the driver would JIT-compile; missing: a cubin for sm_%d (built for %s; rebuild with tilec "
               "--target sm%d)", header, (int)dev, name, cc, cc, built_for, cc);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  if (pick < 0) {
    if (msg && size)
      snprintf(msg, size, "%s: built for %s; device %d (%s) is sm_%d: rebuild with tilec --target sm%d",
               header, built_for, (int)dev, name, cc, cc);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  if (images[pick].ptx && driver < ptx_driver) {
    if (msg && size)
      snprintf(msg, size, "%s: the only image that runs on device %d (%s, sm_%d) is the %s PTX, built with CUDA %d.%d, "
               "which the driver can JIT-compile only if it supports CUDA %d.%d or newer; this driver supports CUDA "
               "%d.%d", header, (int)dev, name, cc, images[pick].arch, ptx_driver / 1000, (ptx_driver % 1000) / 10,
               ptx_driver / 1000, (ptx_driver % 1000) / 10, driver / 1000, (driver % 1000) / 10);
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  }
  if (msg && size) {
    const char* why = how == TILEC_RUNS_EXACT_ ? "built for exactly this GPU"
                      : how == TILEC_RUNS_SAME_MAJOR_ ? "a cubin runs on later GPUs of its major version"
                      : "no cubin runs on this GPU, so the driver JIT-compiles the PTX on the first launch";
    snprintf(msg, size, "%s: device %d (%s, sm_%d) runs the %s image (built for %s): %s", header, (int)dev, name,
             cc, images[pick].arch, built_for, why);
  }
  return CUDA_SUCCESS;
}
#if CUDA_VERSION >= 12000
/* Encodes a TMA descriptor for a C-contiguous tensor at ptr: shape and box outermost first (the
 * driver's order is the reverse), byte strides from the shape, no interleave, 256-byte L2 promotion,
 * out-of-bounds elements read as zero. *usable = 0 (and CUDA_SUCCESS) when TMA cannot address the
 * tensor -- an address not 16-byte aligned, a stride not a multiple of 16 bytes or over 2^40, a
 * dimension outside 1..2^32 -- so that the caller launches the fallback kernel; otherwise *usable = 1
 * and cuTensorMapEncodeTiled's result. */
static inline CUresult tilec_encode_tensor_map_(CUtensorMap* map, int dtype, unsigned elem_bytes, int rank,
                                                CUdeviceptr ptr, const int64_t* shape, const unsigned* box,
                                                int swizzle, int* usable) {
  cuuint64_t dims[5], strides[5];
  cuuint32_t boxdim[5], elem_strides[5];
  uint64_t stride = elem_bytes;
  int i;
  *usable = 0;
  if (rank < 1 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  if (ptr % 16u != 0) return CUDA_SUCCESS;
  for (i = 0; i < rank; ++i) {
    const int64_t d = shape[rank - 1 - i];
    if (d < 1 || d > (INT64_C(1) << 32)) return CUDA_SUCCESS;
    dims[i] = (cuuint64_t)d;
    boxdim[i] = (cuuint32_t)box[rank - 1 - i];
    elem_strides[i] = 1;
  }
  for (i = 1; i < rank; ++i) {
    if (dims[i - 1] > ((UINT64_C(1) << 40) - 1) / stride) return CUDA_SUCCESS;
    stride *= dims[i - 1];
    if (stride % 16u != 0) return CUDA_SUCCESS;
    strides[i - 1] = stride;
  }
  strides[rank - 1] = 0;
  *usable = 1;
  return cuTensorMapEncodeTiled(map, (CUtensorMapDataType)dtype, (cuuint32_t)rank, (void*)(uintptr_t)ptr, dims,
                                strides, boxdim, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                (CUtensorMapSwizzle)swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
#endif
#endif /* TILEC_LAUNCHER_COMMON_@ABI@ */
""")

_MODULE = r"""
/* ---- this header's images and per-context module table ---- */
@IMAGES@
static const tilec_image_ @P@images[@NIMAGES@] = {
@IMAGE_TABLE@
};
static const char* const @P@kernel_names[@NKERNELS@] = {@KERNEL_NAMES@};
static const unsigned @P@shared_bytes[@NIMAGES@][@NKERNELS@] = {@SHARED_TABLE@};
/* Which kernels each image has (an image built for a GPU without TMA has no TMA fallback kernels). */
static const unsigned char @P@has_kernel[@NIMAGES@][@NKERNELS@] = {@HAS_TABLE@};
typedef struct @P@slot {
  unsigned long long ctx_id;
  int image;
  CUmodule module;
  CUfunction fn[@NKERNELS@];
} @P@slot;
static @P@slot @P@slots[TILEC_MAX_CONTEXTS];
static int @P@nslots = 0, @P@next_evict = 0;
static tilec_mutex_ @P@lock = TILEC_MUTEX_INIT_;

static inline CUresult @P@load(@P@slot* s) {
  CUdevice dev;
  int cc = 0, driver = 0, k, pick;
  CUresult rc = cuCtxGetDevice(&dev);
  if (rc != CUDA_SUCCESS) return rc;
  rc = cuDriverGetVersion(&driver);
  if (rc != CUDA_SUCCESS) return rc;
  if (driver < @MIN_DRIVER@) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  rc = tilec_device_cc_(dev, &cc);
  if (rc != CUDA_SUCCESS) return rc;
  pick = tilec_pick_image_(@P@images, @NIMAGES@, cc, tilec_no_jit_(), NULL);
  if (pick < 0) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (@P@images[pick].ptx && driver < @PTX_DRIVER@) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  rc = cuModuleLoadData(&s->module, @P@images[pick].data);
  if (rc != CUDA_SUCCESS) return rc;
  for (k = 0; k < @NKERNELS@; ++k) {
    if (!@P@has_kernel[pick][k]) continue;
    rc = cuModuleGetFunction(&s->fn[k], s->module, @P@kernel_names[k]);
    if (rc == CUDA_SUCCESS && @P@shared_bytes[pick][k] > 48u * 1024u)
      rc = cuFuncSetAttribute(s->fn[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              (int)@P@shared_bytes[pick][k]);
    if (rc != CUDA_SUCCESS) {
      cuModuleUnload(s->module);
      return rc;
    }
  }
  s->image = pick;
  return CUDA_SUCCESS;
}

/* The function for kernel k in the current context (its module loaded on first use), and the image chosen. */
static inline CUresult @P@function(int k, CUfunction* fn, int* image) {
  CUcontext ctx = NULL;
  unsigned long long id = 0;
  int i;
  CUresult rc = cuCtxGetCurrent(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == NULL) return CUDA_ERROR_INVALID_CONTEXT;
#if CUDA_VERSION >= 12000
  rc = cuCtxGetId(ctx, &id); /* unique for the process's lifetime, unlike the handle */
  if (rc != CUDA_SUCCESS) return rc;
#else
  id = (unsigned long long)(uintptr_t)ctx;
#endif
  tilec_lock_(&@P@lock);
  for (i = 0; i < @P@nslots; ++i) {
    if (@P@slots[i].ctx_id == id) {
      *fn = @P@slots[i].fn[k];
      *image = @P@slots[i].image;
      tilec_unlock_(&@P@lock);
      return CUDA_SUCCESS;
    }
  }
  {
    @P@slot s;
    memset(&s, 0, sizeof s);
    s.ctx_id = id;
    rc = @P@load(&s);
    if (rc == CUDA_SUCCESS) {
      if (@P@nslots < TILEC_MAX_CONTEXTS) {
        i = @P@nslots++;
      } else {
        i = @P@next_evict;
        @P@next_evict = (@P@next_evict + 1) % TILEC_MAX_CONTEXTS;
      }
      @P@slots[i] = s;
      *fn = s.fn[k];
      *image = s.image;
    }
  }
  tilec_unlock_(&@P@lock);
  return rc;
}
"""


def _c_name(name: str, taken: set[str]) -> str:
    n = ident(name)
    while n in _RESERVED or n in taken or n.startswith("tilec_"):
        n += "_"
    taken.add(n)
    return n


class _TwinPlan(NamedTuple):
    """A kernel's direct-stores twin in one image: its entry, its kernel-table index, and for each of its tensor maps
    the index of the same map among the kernel's."""
    entry: dict
    index: int
    maps: list[int]


def _tensor_map_plan(k: dict, im: Image, index_of: dict[str, int]
                     ) -> tuple[list[TensorMapSpec], int | None, _TwinPlan | None]:
    """Image `im`'s tensor maps for kernel k, the kernel-table index of its fallback (None: none) and its
    direct-stores twin (None: none)."""
    try:
        maps = tensor_map_specs(k)
        fb = fallback_entry(k, im.kernels) if maps else None
        twin = direct_stores_entry(k, im.kernels) if maps else None
    except ManifestError as e:
        raise LauncherError(f"{im.arch}: {e}") from None
    return (maps, (index_of[fb["name"]] if fb is not None else None),
            _TwinPlan(twin[0], index_of[twin[0]["name"]], twin[1]) if twin is not None else None)


def launch_check_lines(k: dict, sizes: dict[str, str], invalid: str) -> list[str]:
    """C lines that return `invalid` when one of the kernel entry's launch checks fails (conditions on the sizes
    the compiler could not prove: a view must fit its tensor); `sizes` maps each size to its C name."""
    try:
        checks = launch_checks(k)
    except ManifestError as e:
        raise LauncherError(str(e)) from None
    size_c = {s: f"((int64_t){c})" for s, c in sizes.items()}
    lines = []
    for chk in checks:
        op = "==" if chk["op"] == "==" else "<="
        lines.append(f"  if (!({formula_to_c(chk['lhs'], size_c)} {op} {formula_to_c(chk['rhs'], size_c)}))"
                     f" return {invalid}; /* {_comment(chk['message'])} */")
    return lines


def _launch_function(fname: str, k: dict, index_of: dict[str, int], images: list[Image],
                     p: str) -> tuple[str, str]:
    """(doc comment + definition of K_launch, its prototype)."""
    taken: set[str] = set()
    args, pack, docs = ["CUstream stream"], [], []
    taken.add("stream")
    cname_of: dict[str, str] = {}
    for prm in k["params"]:
        c = _c_name(prm["name"], taken)
        cname_of[prm["name"]] = c
        if prm["kind"] == "tensor":
            args.append(f"CUdeviceptr {c}")
            shape = ", ".join(str(d) for d in prm["shape"])
            role = "out " if prm.get("output") else "in  "
            docs.append(f" *   {c:<10} {role}{prm['dtype']}[{shape}]  device pointer, C-contiguous")
        else:
            ctype = _C_TYPES.get(prm["dtype"])
            if ctype is None:
                raise LauncherError(f"kernel '{k['name']}': scalar '{prm['name']}' of type {prm['dtype']} cannot be "
                                    "passed from C")
            args.append(f"{ctype} {c}")
            note = f" ({_BITS_NOTE[prm['dtype']]})" if prm["dtype"] in _BITS_NOTE else ""
            docs.append(f" *   {c:<10} scalar {prm['dtype']}{note}")
        pack.append(c)
    sizes = {}
    for s in k["sizes"]:
        c = _c_name(s, taken)
        sizes[s] = c
        args.append(f"int {c}")
        pack.append(c)
    if sizes:
        docs.append(f" *   {', '.join(sizes.values())}: runtime sizes (>= 0)")
    per_image = [next(e for e in im.kernels if e["name"] == k["name"]) for im in images]
    plans = [_tensor_map_plan(e, im, index_of) for e, im in zip(per_image, images, strict=True)]
    names_of = {i: n for n, i in index_of.items()}
    fb_entries = [next(e for e in im.kernels if e["name"] == names_of[fb]) if fb is not None else None
                  for im, (_, fb, _) in zip(images, plans, strict=True)]
    twin_entries = [twin.entry for _, _, twin in plans if twin is not None]
    nmaps = max(len(maps) for maps, _, _ in plans)
    configs = [(tuple(e["grid"]), e["threads"], e["shared_bytes"]) for e in per_image]
    # thread-block clusters (sm90): launched with cuLaunchKernelEx and the cluster dimension attribute
    clusters = IdentityDict((e, cluster_dims(e)) for e in per_image + [fe for fe in fb_entries if fe]
                            + twin_entries)  # (dicts)
    clustered = any(clusters.values())
    vars_ = {s: f"tilec_s_{c}" for s, c in sizes.items()}
    # A grid extent may also be an integer scalar parameter (Kernel(nblocks, ...)).
    vars_.update({prm["name"]: f"((int64_t){cname_of[prm['name']]})" for prm in k["params"]
                  if prm["kind"] == "scalar" and prm["dtype"] in ("i8", "u8", "i16", "u16", "i32", "u32", "i64")})

    def config_code(cfg, indent: str, entry: dict) -> list[str]:
        grid, threads, shared = cfg
        g = [formula_to_c(x, vars_) for x in grid] + ["INT64_C(1)"] * (3 - len(grid))
        code = [f"{indent}tilec_gx = {g[0]};", f"{indent}tilec_gy = {g[1]};", f"{indent}tilec_gz = {g[2]};",
                f"{indent}tilec_threads = {threads}u;", f"{indent}tilec_shared = {shared}u;"]
        if clustered:
            cl = clusters[entry] or (1, 1, 1)
            code += [f"{indent}tilec_cluster[0] = {cl[0]}u; tilec_cluster[1] = {cl[1]}u; tilec_cluster[2] = {cl[2]}u;"]
        return code

    def dim_c(d) -> str:
        return f"INT64_C({d})" if isinstance(d, int) else vars_[d] if d in vars_ else formula_to_c(d, vars_)

    def image_code(i: int, indent: str) -> list[str]:
        """Image i's launch configuration, with its tensor maps encoded (or its fallback picked)."""
        code = config_code(configs[i], indent, per_image[i])
        maps, fb, twin = plans[i]
        if not maps:
            return code
        code += [f"{indent}if (tilec_gx > 0 && tilec_gy > 0 && tilec_gz > 0) {{ /* an empty launch encodes nothing */",
                 f"{indent}  int tilec_tma = 1;"]
        if twin is not None:  # every map is encoded, so that the twin's can be picked out of them
            code += [f"{indent}  int tilec_usable[{len(maps)}];"]
        for m in maps:
            rank = len(m.box)
            flag = f"&tilec_usable[{m.index}]" if twin is not None else "&tilec_tma"
            code += [f"{indent}  {'{' if twin is not None else 'if (tilec_tma) {'} /* {_comment(m.describe())} */",
                     f"{indent}    const int64_t tilec_shape[{rank}] = "
                     f"{{{', '.join(dim_c(d) for d in (m.view_shape or m.param['shape']))}}};",
                     f"{indent}    static const unsigned tilec_box[{rank}] = {{{', '.join(f'{b}u' for b in m.box)}}};",
                     f"{indent}    tilec_rc = tilec_encode_tensor_map_(&tilec_tmap[{m.index}], {m.dtype}, "
                     f"{m.elem_bytes}u, {rank}, {cname_of[m.param['name']]}, tilec_shape, tilec_box, {m.swizzle},",
                     f"{indent}                                        {flag});",
                     f"{indent}    if (tilec_rc != CUDA_SUCCESS) return tilec_rc;"]
            if twin is not None:
                code += [f"{indent}    if (!tilec_usable[{m.index}]) tilec_tma = 0;"]
            code += [f"{indent}  }}"]
        if twin is not None:
            te = twin.entry
            usable = " && ".join(f"tilec_usable[{j}]" for j in twin.maps)
            code += [f"{indent}  if (!tilec_tma && {usable}) {{ /* only stored tensors are not: the direct-stores "
                     "twin */",
                     f"{indent}    CUtensorMap tilec_loads[{len(twin.maps)}];",
                     *[f"{indent}    tilec_loads[{t}] = tilec_tmap[{j}];" for t, j in enumerate(twin.maps)],
                     *[f"{indent}    tilec_tmap[{t}] = tilec_loads[{t}];" for t in range(len(twin.maps))],
                     f"{indent}    tilec_rc = {p}function({twin.index}, &tilec_fn, &tilec_image); "
                     f"/* {_comment(te['name'])} */",
                     f"{indent}    if (tilec_rc != CUDA_SUCCESS) return tilec_rc;",
                     *config_code((tuple(te["grid"]), te["threads"], te["shared_bytes"]), indent + "    ", te),
                     f"{indent}    tilec_tma = 1;",
                     f"{indent}  }}"]
        if fb is None:
            code += [f"{indent}  if (!tilec_tma) return CUDA_ERROR_INVALID_VALUE; /* and no fallback kernel */"]
        else:
            fe = fb_entries[i]
            code += [f"{indent}  if (!tilec_tma) {{ /* TMA cannot address these tensors: the fallback kernel */",
                     f"{indent}    tilec_rc = {p}function({fb}, &tilec_fn, &tilec_image); /* {_comment(fe['name'])} */",
                     f"{indent}    if (tilec_rc != CUDA_SUCCESS) return tilec_rc;",
                     *config_code((tuple(fe["grid"]), fe["threads"], fe["shared_bytes"]), indent + "    ", fe),
                     f"{indent}  }}"]
        code += [f"{indent}}}"]
        return code

    body = ["  CUfunction tilec_fn;", "  int tilec_image = 0;", "  int64_t tilec_gx, tilec_gy, tilec_gz;",
            "  unsigned tilec_threads, tilec_shared;", "  CUresult tilec_rc;"]
    if clustered:
        body += ["  unsigned tilec_cluster[3];"]
    formulas = [g for cfg in configs for g in cfg[0]] + [g for fe in fb_entries + twin_entries if fe
                                                         for g in fe["grid"]]
    used = {n for g in formulas for n in formula_names(g)}
    used |= {n for maps, _, _ in plans for m in maps for d in (m.view_shape or m.param["shape"]) if isinstance(d, str)
             for n in formula_names(d)}
    body += [f"  const int64_t tilec_s_{c} = {c};" for s, c in sizes.items() if s in used]
    if "num_sms" in used:  # a persistent kernel: at most one block per multiprocessor
        vars_["num_sms"] = "tilec_num_sms"
        body += ["  int64_t tilec_num_sms;",
                 "  { CUdevice tilec_dev; int tilec_n = 0;",
                 "    tilec_rc = cuCtxGetDevice(&tilec_dev);",
                 "    if (tilec_rc == CUDA_SUCCESS)",
                 "      tilec_rc = cuDeviceGetAttribute(&tilec_n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,",
                 "                                      tilec_dev);",
                 "    if (tilec_rc != CUDA_SUCCESS) return tilec_rc;",
                 "    tilec_num_sms = tilec_n; }"]
    ptrs = [f"&{a}" for a in pack]
    if nmaps:
        body += [f"  CUtensorMap tilec_tmap[{nmaps}]; /* by-value kernel parameters after the sizes */"]
        ptrs += [f"&tilec_tmap[{j}]" for j in range(nmaps)]
    body += [f"  void* tilec_params[{max(1, len(ptrs))}] = {{{', '.join(ptrs) or 'NULL'}}};"]
    if sizes:
        cond = " || ".join(f"{c} < 0" for c in sizes.values())
        body += [f"  if ({cond}) return CUDA_ERROR_INVALID_VALUE;"]
    body += launch_check_lines(k, sizes, "CUDA_ERROR_INVALID_VALUE")
    body += [f"  tilec_rc = {p}function({index_of[k['name']]}, &tilec_fn, &tilec_image);",
             "  if (tilec_rc != CUDA_SUCCESS) return tilec_rc;"]
    blocks = [image_code(i, "    ") for i in range(len(images))]
    if all(b == blocks[0] for b in blocks):
        body += image_code(0, "  ")
        body += ["  (void)tilec_image;"]
    else:
        body += ["  switch (tilec_image) {"]
        for i, b in enumerate(blocks):
            body += [f"  {'default' if i == len(images) - 1 else f'case {i}'}: /* {images[i].arch} */"]
            body += b + ["    break;"]
        body += ["  }"]
    body += ["  if (tilec_gx <= 0 || tilec_gy <= 0 || tilec_gz <= 0) return CUDA_SUCCESS; /* nothing to compute */",
             "  if (tilec_gx > INT64_C(2147483647) || tilec_gy > INT64_C(65535) || tilec_gz > INT64_C(65535))",
             "    return CUDA_ERROR_INVALID_VALUE;"]
    if clustered:  # (the grid formulas give whole clusters)
        body += ["  if (tilec_cluster[0] * tilec_cluster[1] * tilec_cluster[2] > 1u) { /* a thread-block cluster */",
                 "    CUlaunchAttribute tilec_attr;",
                 "    CUlaunchConfig tilec_config;",
                 "    memset(&tilec_attr, 0, sizeof tilec_attr);",
                 "    memset(&tilec_config, 0, sizeof tilec_config);",
                 "    tilec_attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;",
                 "    tilec_attr.value.clusterDim.x = tilec_cluster[0];",
                 "    tilec_attr.value.clusterDim.y = tilec_cluster[1];",
                 "    tilec_attr.value.clusterDim.z = tilec_cluster[2];",
                 "    tilec_config.gridDimX = (unsigned)tilec_gx;",
                 "    tilec_config.gridDimY = (unsigned)tilec_gy;",
                 "    tilec_config.gridDimZ = (unsigned)tilec_gz;",
                 "    tilec_config.blockDimX = tilec_threads;",
                 "    tilec_config.blockDimY = 1;",
                 "    tilec_config.blockDimZ = 1;",
                 "    tilec_config.sharedMemBytes = tilec_shared;",
                 "    tilec_config.hStream = stream;",
                 "    tilec_config.attrs = &tilec_attr;",
                 "    tilec_config.numAttrs = 1;",
                 "    return cuLaunchKernelEx(&tilec_config, tilec_fn, tilec_params, NULL);",
                 "  }"]
    body += ["  return cuLaunchKernel(tilec_fn, (unsigned)tilec_gx, (unsigned)tilec_gy, (unsigned)tilec_gz, "
             "tilec_threads, 1, 1,",
             "                        tilec_shared, stream, tilec_params, NULL);"]
    if len(set(configs)) == 1:
        c = configs[0]
        grid_doc = f"grid ({', '.join(c[0])}) x {c[1]} threads, {c[2]} B of dynamic shared memory"
    else:
        grid_doc = "; ".join(f"{im.arch}: grid ({', '.join(c[0])}) x {c[1]} threads, {c[2]} B shared"
                             for im, c in zip(images, configs, strict=True))
    tma_doc = []
    for im, (maps, fb, twin) in zip(images, plans, strict=True):
        if maps:
            what = ", ".join(f"{m.param['name']} (box {'x'.join(map(str, m.box))}, swizzle {m.swizzle_bytes})"
                             for m in maps)
            then = (f"launches '{names_of[fb]}' instead" if fb is not None
                    else "returns CUDA_ERROR_INVALID_VALUE (there is no fallback kernel)")
            tma_doc += [_comment(f" * {im.arch}: encodes TMA tensor maps for {what} at each launch;"),
                        _comment(f" *   when TMA cannot address the tensors (an address not 16-byte aligned, a row not "
                                 f"a multiple of 16 bytes), {then}.")]
            if twin is not None:
                loaded = ", ".join(maps[j].param["name"] for j in twin.maps)
                tma_doc += [_comment(f" *   Where it can address {loaded} (what the kernel loads), it launches "
                                     f"'{twin.entry['name']}', whose threads store the rest.")]
    proto = f"static inline CUresult {fname}({', '.join(args)})"
    doc = [f"/* {fname}: launch kernel '{k['name']}' on `stream` (asynchronous; 0 is the legacy default stream).",
           *docs,
           f" * {grid_doc}.",
           *tma_doc,
           *[_comment(f" * Checks before launching: {c['message']} ({c['lhs']} {c['op']} {c['rhs']}).")
             for c in launch_checks(k)],
           " * Returns CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE (a negative size, a failed check, or a grid over the",
           " * hardware's limits), CUDA_ERROR_INVALID_CONTEXT (no current context), CUDA_ERROR_NO_BINARY_FOR_GPU",
           " * (no embedded image for this GPU), CUDA_ERROR_UNSUPPORTED_PTX_VERSION (a driver older than the CUDA that",
           " * built the images) -- the _check_device function explains these two in words -- or the driver's",
           " * error. */"]
    return "\n".join(doc) + "\n" + proto + " {\n" + "\n".join(body) + "\n}\n", proto + ";"


@dataclass(frozen=True)
class SequenceApi:
    """How a C launcher spells the driver calls of a multi-launch kernel's functions (CUDA here; the HIP launcher
    passes its own)."""
    qualifier: str  # before the return type: "static inline " (a header) or "" (exported from an object)
    result: str  # CUresult
    stream: str  # CUstream
    ptr: str  # CUdeviceptr
    null: str  # a null pointer of that type
    success: str
    invalid: str
    alloc: str  # the stream-ordered allocation and free, as "NAME"
    free: str
    memset: str  # the stream-ordered byte fill (the driver API's cuMemsetD8Async signature), as "NAME"

    def offset(self, base: str, off: str) -> str:
        return f"({self.ptr})((uintptr_t){base} + (uintptr_t)({off}))"


CUDA_API = SequenceApi("static inline ", "CUresult", "CUstream", "CUdeviceptr", "0", "CUDA_SUCCESS",
                       "CUDA_ERROR_INVALID_VALUE", "cuMemAllocAsync", "cuMemFreeAsync", "cuMemsetD8Async")


def sequence_functions(seq: dict, prefix: str, stage_launch: Callable[[str], str], entries: dict[str, dict],
                       api: SequenceApi = CUDA_API) -> tuple[list[str], list[str]]:
    """(definitions, prototypes) of a multi-launch kernel's public functions: NAME_workspace_bytes,
    NAME_launch_with_workspace (the caller's workspace) and NAME_launch (a workspace allocated and freed
    stream-ordered: cuMemAllocAsync / cuMemFreeAsync), which call the stages' private launch functions
    (`stage_launch(kernel name)`) in order."""
    name = seq["name"]
    taken: set[str] = {"stream", "workspace", "bytes"}
    cname_of, args, docs = {}, [], []
    for prm in seq["params"]:
        c = cname_of[prm["name"]] = _c_name(prm["name"], taken)
        if prm["kind"] == "tensor":
            args.append(f"{api.ptr} {c}")
            role = "out " if prm.get("output") else "in  "
            shape = ", ".join(str(d) for d in prm["shape"])
            docs.append(f" *   {c:<10} {role}{prm['dtype']}[{shape}]  device pointer, C-contiguous")
        else:
            ctype = _C_TYPES.get(prm["dtype"])
            if ctype is None:
                raise LauncherError(f"kernel '{name}': scalar '{prm['name']}' of type {prm['dtype']} cannot be "
                                    "passed from C")
            args.append(f"{ctype} {c}")
            docs.append(f" *   {c:<10} scalar {prm['dtype']}")
    sizes = {s: _c_name(s, taken) for s in seq["sizes"]}
    args += [f"int {c}" for c in sizes.values()]
    if sizes:
        docs.append(f" *   {', '.join(sizes.values())}: runtime sizes (>= 0)")
    vars_ = {s: f"tilec_s_{c}" for s, c in sizes.items()}
    size_decls = [f"  const int64_t tilec_s_{c} = {c};" for c in sizes.values()]
    negative = [f"  if ({' || '.join(f'{c} < 0' for c in sizes.values())}) return {api.invalid};"] if sizes else []
    size_args = [f"int {c}" for c in sizes.values()]
    scratch_doc = "; ".join(f"{b['name']} {b['dtype']}[{', '.join(str(d) for d in b['shape'])}] at byte {b['offset']}"
                            + (", zeroed" if b.get("zeroed") else "") for b in seq["scratch"])
    stages_doc = ", ".join(st["kernel"] for st in seq["stages"])
    ws_name = f"{prefix}{name}_workspace_bytes"
    with_name = f"{prefix}{name}_launch_with_workspace"
    launch_name = f"{prefix}{name}_launch"
    ws_proto = f"{api.qualifier}{api.result} {ws_name}({', '.join([*size_args, 'size_t* bytes'])})"
    with_proto = (f"{api.qualifier}{api.result} {with_name}("
                  f"{', '.join([f'{api.stream} stream', f'{api.ptr} workspace', *args])})")
    launch_proto = f"{api.qualifier}{api.result} {launch_name}({', '.join([f'{api.stream} stream', *args])})"
    ws_body = [*size_decls, *negative, f"  if (bytes == NULL) return {api.invalid};",
               f"  *bytes = (size_t)({formula_to_c(seq['workspace_bytes'], vars_)});",
               *[f"  (void)tilec_s_{c};" for c in sizes.values()], f"  return {api.success};"]
    out = [f"/* {ws_name}: the bytes of device memory (the scratch tensors {scratch_doc}; each\n"
           f" * {WORKSPACE_ALIGN}-byte aligned) that kernel '{name}' needs for these sizes. */\n"
           f"{ws_proto} {{\n" + "\n".join(ws_body) + "\n}\n"]
    body = [*size_decls, f"  {api.result} tilec_rc;", *negative,
            f"  if (workspace == {api.null} || (uintptr_t)workspace % {WORKSPACE_ALIGN}u != 0) return {api.invalid};"]
    scratch_c = {}
    for b in seq["scratch"]:
        c = scratch_c[b["name"]] = f"tilec_w_{ident(b['name'])}"
        body.append(f"  const {api.ptr} {c} = {api.offset('workspace', formula_to_c(b['offset'], vars_))};")
    zeroed = seq.get("zeroed_bytes")  # the bytes of the zeroed scratch tensors, which lie first
    zero_doc = ""
    if zeroed is not None:  # a workspace (the caller's, or a pool's reused block) holds anything: clear every call
        zero_doc = (f" * Its zeroed scratch tensors ({', '.join(b['name'] for b in seq['scratch'] if b.get('zeroed'))})"
                    f" lie first: {api.memset} clears them on\n * `stream` before the first stage, on every call.\n")
        body += [f"  const size_t tilec_zeroed = (size_t)({formula_to_c(zeroed, vars_)});",
                 "  if (tilec_zeroed > 0) {",
                 f"    tilec_rc = {api.memset}(workspace, 0, tilec_zeroed, stream);",
                 f"    if (tilec_rc != {api.success}) return tilec_rc;",
                 "  }"]
    for st in seq["stages"]:
        entry = entries[st["kernel"]]
        call = [cname_of.get(a) or scratch_c[a] for a in st["args"]] + [sizes[s] for s in entry["sizes"]]
        body += [f"  tilec_rc = {stage_launch(st['kernel'])}({', '.join(['stream', *call])});",
                 f"  if (tilec_rc != {api.success}) return tilec_rc;"]
    body += [f"  (void){c};" for c in [*scratch_c.values(), *(f"tilec_s_{c}" for c in sizes.values())]]
    body.append(f"  return {api.success};")
    out.append(f"/* {with_name}: launch kernel '{name}' -- its stages {stages_doc}, in order on `stream`\n"
               f" * (asynchronous) -- with its scratch tensors in `workspace`: at least {ws_name} bytes of\n"
               f" * device memory, {WORKSPACE_ALIGN}-byte aligned, that no other launch uses until these finish.\n"
               + zero_doc + "\n".join(docs) + "\n"
               f" * Returns {api.success}, {api.invalid} (a negative size, a misaligned or null workspace)\n"
               f" * or what {f'{api.memset} or ' if zeroed is not None else ''}a stage's launch returns. */\n"
               f"{with_proto} {{\n" + "\n".join(body) + "\n}\n")
    out.append(f"/* {launch_name}: launch kernel '{name}' on `stream` (asynchronous): its workspace is allocated\n"
               f" * and freed stream-ordered ({api.alloc} / {api.free}, from the device's default memory pool)\n"
               f" * around the stages; {with_name} takes the caller's instead. Parameters as there. */\n"
               f"{launch_proto} {{\n"
               f"  size_t tilec_bytes = 0;\n  {api.ptr} tilec_ws = {api.null};\n"
               f"  {api.result} tilec_rc, tilec_free_rc;\n"
               f"  tilec_rc = {ws_name}({', '.join([*sizes.values(), '&tilec_bytes'])});\n"
               f"  if (tilec_rc != {api.success}) return tilec_rc;\n"
               f"  tilec_rc = {api.alloc}(&tilec_ws, tilec_bytes ? tilec_bytes : 1, stream);\n"
               f"  if (tilec_rc != {api.success}) return tilec_rc;\n"
               f"  tilec_rc = {with_name}({', '.join(['stream', 'tilec_ws', *cname_of.values(), *sizes.values()])});\n"
               f"  tilec_free_rc = {api.free}(tilec_ws, stream);\n"
               f"  return tilec_rc != {api.success} ? tilec_rc : tilec_free_rc;\n}}\n")
    return out, [ws_proto + ";", with_proto + ";", launch_proto + ";"]


def generate_header(header_name: str, images: list[Image], *, source_name: str, tilec_version: str,
                    toolchain: str, driver_api_version: int, source_hash: str, prefix: str = "",
                    embed: Callable[[str, bytes], str] = _byte_array, launches: list[dict] | None = None,
                    tail: str = "") -> str:
    """The header's text. `embed(name, data)` defines each image as a 64-byte aligned `const unsigned char
    name[len(data)]` (default: a C array initializer; a host object assembles the bytes instead, objects.py).
    `tail`: C code that follows the kernels' functions (a tuned artifact's dispatchers: dispatch.py)."""
    if not images:
        raise LauncherError("no image to embed")
    # Public kernels get a launch function; internal ones (TMA fallbacks) are launched by them, and
    # may exist in some images only (a target without TMA has no fallback to carry).
    kernels = [k for k in images[0].kernels if not k.get(INTERNAL_KEY)]
    for im in images[1:]:
        if [k["name"] for k in im.kernels if not k.get(INTERNAL_KEY)] != [k["name"] for k in kernels]:
            raise LauncherError(f"targets {images[0].target} and {im.target} have different kernels")
    table = [k["name"] for k in kernels]
    for im in images:
        table += [k["name"] for k in im.kernels if k.get(INTERNAL_KEY) and k["name"] not in table]
    index_of = {n: i for i, n in enumerate(table)}
    uses_tma = any(k.get(TENSOR_MAPS_KEY) for im in images for k in im.kernels)
    digest = hashlib.sha256()
    for im in images:
        digest.update(im.arch.encode() + b"\0" + im.data)
    digest.update(prefix.encode() + b"\0" + header_name.encode())
    hid = f"{ident(header_name.rsplit('.', 1)[0]).lower()}_{digest.hexdigest()[:10]}"
    p = f"tilec_{hid}_"
    guard = f"TILEC_{hid.upper()}_H"
    min_driver = (driver_api_version // 1000) * 1000
    built_for = ", ".join(im.arch for im in images)

    funcs, protos = [], []
    stage_of = {st["kernel"]: seq["name"] for seq in launches or [] for st in seq["stages"]}
    for k in images[0].kernels:  # the stages of multi-launch kernels: private launch functions
        if k["name"] in stage_of:
            code, _ = _launch_function(f"{p}{ident(k['name'])}_launch", k, index_of, images, p)
            funcs.append(code)
    publics = [(k["name"], k, False) for k in kernels] + [(seq["name"], seq, True) for seq in launches or []]
    for name, k, is_sequence in publics:
        if is_sequence:
            code, proto = sequence_functions(k, prefix, lambda stage: f"{p}{ident(stage)}_launch",
                                             {e["name"]: e for e in images[0].kernels})
            funcs += code
            protos += proto
        else:
            fname = f"{prefix}{k['name']}_launch"
            code, proto = _launch_function(fname, k, index_of, images, p)
            funcs.append(code)
            protos.append(proto)
            code, proto = check_sizes_function(f"{prefix}{k['name']}_check_sizes", k, _c_name, formula_to_c)
            funcs.append(code)
            protos.append(proto)
        cname = f"{prefix}{name}_check_device"
        funcs.append(
            f"/* {cname}: CUDA_SUCCESS when this header has an image for device `dev`, else\n"
            " * CUDA_ERROR_NO_BINARY_FOR_GPU (or CUDA_ERROR_UNSUPPORTED_PTX_VERSION, or the driver's error); writes a\n"
            " * one-line explanation naming the architectures it was built for to `message` (if not NULL). Needs\n"
            " * cuInit. */\n"
            f"static inline CUresult {cname}(CUdevice dev, char* message, size_t message_size) {{\n"
            f"  return tilec_check_device_({_c_string(header_name)}, {p}images, {len(images)}, {_c_string(built_for)}, "
            f"{min_driver}, {driver_api_version},\n"
            "                             dev, message, message_size);\n}\n")
        protos.append(f"static inline CUresult {cname}(CUdevice dev, char* message, size_t message_size);")

    image_arrays = "\n".join(embed(f"{p}image{i}", im.data) for i, im in enumerate(images))
    image_table = ",\n".join(f'  {{{p}image{i}, sizeof {p}image{i}, {arch_cc(im.arch)[0]}, '
                             f'{int(arch_cc(im.arch)[1])}, {int(im.arch.startswith("compute_"))}, "{im.arch}"}}'
                             for i, im in enumerate(images))
    by_name = [{e["name"]: e for e in im.kernels} for im in images]
    shared = ", ".join("{" + ", ".join(f"{es[n]['shared_bytes'] if n in es else 0}u" for n in table) + "}"
                       for es in by_name)
    has = ", ".join("{" + ", ".join("1" if n in es else "0" for n in table) + "}" for es in by_name)
    module = (_MODULE.replace("@IMAGES@", image_arrays).replace("@IMAGE_TABLE@", image_table)
              .replace("@NIMAGES@", str(len(images))).replace("@NKERNELS@", str(len(table)))
              .replace("@KERNEL_NAMES@", ", ".join(_c_string(n) for n in table))
              .replace("@SHARED_TABLE@", shared).replace("@HAS_TABLE@", has)
              .replace("@MIN_DRIVER@", str(min_driver)).replace("@P@", p)
              .replace("@PTX_DRIVER@", str(driver_api_version)))
    if launches:
        module = ("\n#if CUDA_VERSION < 11020\n#error \"this tilec header allocates the workspace of a multi-launch "
                  "kernel with cuMemAllocAsync: it needs cuda.h from CUDA 11.2 or newer\"\n#endif" + module)
    if uses_tma:
        module = ("\n#if CUDA_VERSION < 12000\n#error \"this tilec header launches TMA kernels (CUtensorMap): it needs "
                  "cuda.h from CUDA 12 or newer\"\n#endif" + module)
    banner = [
        f"/* {_comment(header_name)}: generated by tilec {tilec_version} from {_comment(source_name)} -- do not edit.",
        f" * Built for {built_for} with {toolchain}; needs a CUDA {min_driver // 1000}.x driver or newer"
        + (f" (its PTX: CUDA {driver_api_version // 1000}.{driver_api_version % 1000 // 10} or newer)."
           if any(im.arch.startswith("compute_") for im in images) else "."),
        f" * Source hash {source_hash}.",
        " *",
        " * C11 / C++11, CUDA driver API only: #include this file, link with -lcuda (and -lpthread). Functions:",
        " *",
        *[f" *   {s}" for s in protos],
        " *",
        " * The module is loaded on the first launch in each context (thread-safe); the caller must have a",
        " * current context (cuCtxSetCurrent / the CUDA runtime's). Nothing here prints or exits. */",
    ]
    out = ["\n".join(banner),
           f"#ifndef {guard}",
           f"#define {guard}",
           "",
           "#include <cuda.h>",
           "#include <stddef.h>",
           "#include <stdint.h>",
           "#include <stdio.h>",
           "#include <stdlib.h>",
           "#include <string.h>",
           "#if !defined(__cplusplus)",
           "#include <stdbool.h>",
           "#endif",
           "#if defined(_WIN32)",
           "#include <windows.h>",
           "#else",
           "#include <pthread.h>",
           "#endif",
           _COMMON.replace("@ABI@", str(LAUNCHER_ABI)),
           module,
           "/* ---- kernels ---- */",
           "\n".join(funcs),
           *([tail.lstrip("\n")] if tail else []),
           f"#endif /* {guard} */",
           ""]
    return "\n".join(out)
