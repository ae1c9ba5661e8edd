"""The HIP C launcher of a linkable object (`tilec k.tile --target gfx942 -c -o k.o`): the AMD counterpart of the
CUDA back end's launcher (tilec/targets/c_launcher/header.py), with the HIP module API (hip_runtime_api.h; link with
-lamdhip64). For each kernel K of the file it defines, with external linkage and a C name,

    hipError_t K_launch(hipStream_t stream, hipDeviceptr_t tensor..., scalar..., int size...);
    hipError_t K_check_sizes(int size..., char* message, size_t message_size);

which computes the grid from the runtime sizes (the manifest's formulas, as C with floor division), loads the
module once per device (a mutex-guarded table keyed by the device ordinal), picks the code object whose
architecture is the device's (`gcnArchName` up to its first ':'), and launches with hipModuleLaunchKernel. It
returns HIP's error codes (hipErrorNoBinaryForGpu when no embedded code object fits the device) and never
prints or exits. K_launch's hipErrorInvalidValue for sizes that break the kernel's contract (a negative size, a
failed launch check) is explained by K_check_sizes, which runs the same checks without calling HIP and writes
the sentence tilec.runtime raises for the same sizes (parameter, dimension, expected and actual values:
tilec/targets/c_launcher/size_checks.py). Everything else is static. Like the CUDA launcher, it works from
manifest data and the built code objects only.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable

from ..c_launcher.dispatch import dispatchers
from ..c_launcher.header import (
    _C_TYPES,
    FORMULA_HELPERS_C,
    LauncherError,
    SequenceApi,
    _c_name,
    _c_string,
    _comment,
    formula_to_c,
    ident,
    launch_check_lines,
    sequence_functions,
)
from ..c_launcher.size_checks import check_sizes_function

MAX_DEVICES = 64

_COMMON = (r"""
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

"""
    + FORMULA_HELPERS_C
    + r"""
@IMAGES@
static const unsigned char* const @P@image_data[@NIMAGES@] = {@IMAGE_DATA@};
static const char* const @P@image_arch[@NIMAGES@] = {@IMAGE_ARCH@};
static const char* const @P@kernel_names[@NKERNELS@] = {@KERNEL_NAMES@};
static struct {
  int loaded;
  hipModule_t module;
  hipFunction_t fn[@NKERNELS@];
} @P@slots[@MAX_DEVICES@];
static pthread_mutex_t @P@lock = PTHREAD_MUTEX_INITIALIZER;

/* The code object for the current device (loaded on first use) and kernel k's function in it. */
static hipError_t @P@function(int k, hipFunction_t* fn) {
  int dev = 0, i, pick = -1;
  hipError_t rc = hipGetDevice(&dev);
  if (rc != hipSuccess) return rc;
  if (dev < 0 || dev >= @MAX_DEVICES@) return hipErrorInvalidDevice;
  pthread_mutex_lock(&@P@lock);
  if (!@P@slots[dev].loaded) {
    hipDeviceProp_t prop;
    rc = hipGetDeviceProperties(&prop, dev);
    if (rc == hipSuccess) {
      size_t n = strcspn(prop.gcnArchName, ":");
      for (i = 0; i < @NIMAGES@; ++i)
        if (strlen(@P@image_arch[i]) == n && strncmp(prop.gcnArchName, @P@image_arch[i], n) == 0) pick = i;
      rc = pick < 0 ? hipErrorNoBinaryForGpu : hipModuleLoadData(&@P@slots[dev].module, @P@image_data[pick]);
    }
    for (i = 0; rc == hipSuccess && i < @NKERNELS@; ++i)
      rc = hipModuleGetFunction(&@P@slots[dev].fn[i], @P@slots[dev].module, @P@kernel_names[i]);
    if (rc == hipSuccess) @P@slots[dev].loaded = 1;
  }
  if (rc == hipSuccess) *fn = @P@slots[dev].fn[k];
  pthread_mutex_unlock(&@P@lock);
  return rc;
}
""")


def _launch_function(fname: str, k: dict, index: int, p: str) -> tuple[str, str]:
    taken = {"stream"}
    args, pack, cname = ["hipStream_t stream"], [], {}
    for prm in k["params"]:
        c = _c_name(prm["name"], taken)
        cname[prm["name"]] = c
        if prm["kind"] == "tensor":
            args.append(f"hipDeviceptr_t {c}")
        else:
            ctype = _C_TYPES.get(prm["dtype"])
            if ctype is None:
                raise LauncherError(f"kernel '{k['name']}': scalar '{prm['name']}' of type {prm['dtype']} cannot be "
                                    "passed from C")
            args.append(f"{ctype} {c}")
        pack.append(c)
    sizes = {}
    for s in k["sizes"]:
        sizes[s] = _c_name(s, taken)
        args.append(f"int {sizes[s]}")
        pack.append(sizes[s])
    names = {s: f"((int64_t){c})" for s, c in sizes.items()}
    names.update({prm["name"]: f"((int64_t){cname[prm['name']]})" for prm in k["params"]
                  if prm["kind"] == "scalar" and prm["dtype"] in ("i8", "u8", "i16", "u16", "i32", "u32", "i64")})
    body = ["  hipFunction_t fn;", "  hipError_t rc;"]
    used = {n.id for g in k["grid"] for n in ast.walk(ast.parse(g, mode="eval")) if isinstance(n, ast.Name)}
    if "num_sms" in used:  # a persistent kernel: at most one block per compute unit
        names["num_sms"] = "((int64_t)num_sms)"
        body += ["  int dev = 0, num_sms = 0;", "  rc = hipGetDevice(&dev);",
                 "  if (rc == hipSuccess) rc = hipDeviceGetAttribute(&num_sms, hipDeviceAttributeMultiprocessorCount, "
                 "dev);", "  if (rc != hipSuccess) return rc;"]
    grid = [formula_to_c(g, names) for g in k["grid"]] + ["INT64_C(1)"] * (3 - len(k["grid"]))
    body += [f"  const int64_t gx = {grid[0]}, gy = {grid[1]}, gz = {grid[2]};",
             f"  void* params[{max(1, len(pack))}] = {{{', '.join(f'&{a}' for a in pack) or 'NULL'}}};"]
    if sizes:
        body += [f"  if ({' || '.join(f'{c} < 0' for c in sizes.values())}) return hipErrorInvalidValue;"]
    body += launch_check_lines(k, sizes, "hipErrorInvalidValue")
    body += ["  if (gx <= 0 || gy <= 0 || gz <= 0) return hipSuccess; /* nothing to compute */",
             "  if (gx > INT64_C(2147483647) || gy > INT64_C(2147483647) || gz > INT64_C(2147483647))",
             "    return hipErrorInvalidValue;",
             f"  rc = {p}function({index}, &fn);",
             "  if (rc != hipSuccess) return rc;",
             f"  return hipModuleLaunchKernel(fn, (unsigned)gx, (unsigned)gy, (unsigned)gz, {k['threads']}u, 1, 1, "
             f"{k['shared_bytes']}u, stream, params, NULL);"]
    proto = f"hipError_t {fname}({', '.join(args)})"
    doc = (f"/* {fname}: launch kernel '{_comment(k['name'])}' on `stream`; grid ({', '.join(k['grid'])}) x "
           f"{k['threads']} threads. */")
    return f"{doc}\n{proto} {{\n" + "\n".join(body) + "\n}\n", proto + ";"


HIP_API = SequenceApi("", "hipError_t", "hipStream_t", "hipDeviceptr_t", "NULL", "hipSuccess", "hipErrorInvalidValue",
                      "hipMallocAsync", "hipFreeAsync", "hipMemsetD8Async")


def generate_object_source(name: str, images: list[tuple[str, bytes, list[dict]]], *, source_name: str,
                           tilec_version: str, toolchain: str, prefix: str,
                           embed: Callable[[str, bytes], str],
                           launches: list[dict] | None = None,
                           dispatch: dict | None = None) -> tuple[str, list[str], list[str]]:
    """(C source, exported function names, their prototypes) for `images`: (arch, code object, manifest kernel
    entries) per target. `embed(name, data)` defines each code object as `const unsigned char name[]`.
    `launches`: the manifest's multi-launch kernels, whose stages (internal entries) get private launch functions
    and which get NAME_launch (hipMallocAsync / hipFreeAsync), NAME_launch_with_workspace (zeroed scratch
    tensors cleared first, hipMemsetD8Async) and NAME_workspace_bytes. `dispatch`: a tuned artifact's "dispatch"
    mapping, whose dispatchers (NAME_config, NAME_launch, ...: tilec/targets/c_launcher/dispatch.py) follow,
    exported."""
    stage_names = {st["kernel"] for seq in launches or [] for st in seq["stages"]}
    stages = [k for k in images[0][2] if k["name"] in stage_names]
    kernels = [k for k in images[0][2] if not k.get("internal")]
    for arch, _, entries in images[1:]:
        if [k["name"] for k in entries if not k.get("internal")] != [k["name"] for k in kernels]:
            raise LauncherError(f"targets {images[0][0]} and {arch} have different kernels")
    digest = hashlib.sha256(b"".join(a.encode() + b"\0" + d for a, d, _ in images) + name.encode()).hexdigest()
    p = f"tilec_{ident(name.rsplit('.', 1)[0]).lower()}_{digest[:10]}_"
    funcs, protos, exported = [], [], []
    for i, k in enumerate(kernels):
        fname = f"{prefix}{k['name']}_launch"
        code, proto = _launch_function(fname, k, i, p)
        funcs.append(code)
        protos.append(proto)
        exported.append(fname)
        cname = f"{prefix}{k['name']}_check_sizes"
        code, proto = check_sizes_function(cname, k, _c_name, formula_to_c, result="hipError_t", ok="hipSuccess",
                                           invalid="hipErrorInvalidValue", storage="")
        funcs.append(code)
        protos.append(proto)
        exported.append(cname)
    for i, k in enumerate(stages, start=len(kernels)):  # private: launched by their sequence's functions
        fname = f"{p}{ident(k['name'])}_launch"
        code, _ = _launch_function(fname, k, i, p)
        funcs.append(code.replace(f"\nhipError_t {fname}(", f"\nstatic hipError_t {fname}(", 1))
    for seq in launches or []:
        code, proto = sequence_functions(seq, prefix, lambda stage: f"{p}{ident(stage)}_launch",
                                         {k["name"]: k for k in stages}, HIP_API)
        funcs += code
        protos += proto
        exported += [f"{prefix}{seq['name']}_{f}" for f in ("workspace_bytes", "launch_with_workspace", "launch")]
    kernels = kernels + stages  # the module table: public kernels, then the stages
    common = (_COMMON.replace("@IMAGES@", "\n".join(embed(f"{p}image{i}", d) for i, (_, d, _) in enumerate(images)))
              .replace("@IMAGE_DATA@", ", ".join(f"{p}image{i}" for i in range(len(images))))
              .replace("@IMAGE_ARCH@", ", ".join(_c_string(a) for a, _, _ in images))
              .replace("@NIMAGES@", str(len(images))).replace("@NKERNELS@", str(len(kernels)))
              .replace("@KERNEL_NAMES@", ", ".join(_c_string(k["name"]) for k in kernels))
              .replace("@MAX_DEVICES@", str(MAX_DEVICES)).replace("@P@", p))
    banner = (f"/* {_comment(name)}: generated by tilec {tilec_version} from {_comment(source_name)} for "
              f"{', '.join(a for a, _, _ in images)} with {_comment(toolchain)} -- do not edit. */")
    text = "\n".join([banner, common, *funcs])
    code, tuned = dispatchers(dispatch, [*images[0][2], *(launches or [])], HIP_API, prefix, check_device=False)
    if code:
        text = text.rstrip("\n") + "\n" + code
    return text, exported + [f.name for f in tuned], protos + [f.prototype() for f in tuned]
