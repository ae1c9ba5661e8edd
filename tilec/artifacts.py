"""Artifact manifests: what a program needs to launch a compiled kernel without the compiler.

The manifest (OUT.json beside the binary) lists each kernel's parameters with dtypes and
shapes (runtime sizes by name), grid formulas over the runtime sizes, threads per block,
dynamic shared memory, and the FLOPs and bytes the kernel implies (for roofline reports), plus
versions and a hash of the sources. Formulas use only integers, names, + - * // % and
ceildiv/min/max, so tilec.runtime and the C launcher can evaluate them.
"""

from __future__ import annotations

import hashlib
import json

from . import __version__
from .ir import simt as S
from .ir import tile as T
from .ir.formula import formula

MANIFEST_VERSION = 1


def source_hash(files: list[str], sources_text: dict[str, str], options: dict) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.encode() + b"\0" + sources_text.get(f, "").encode() + b"\0")
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    return h.hexdigest()


def kernel_entry(k: T.Kernel, sk: S.SKernel, costs: dict[str, str]) -> dict:
    params = []
    for p in k.params:
        if isinstance(p, T.Buffer):
            params.append({"name": p.name, "kind": "tensor", "dtype": p.dtype.name, "output": p.is_output,
                           "shape": [int(d.value) if isinstance(d, T.Const) else d.name if isinstance(d, T.Var)
                                     else formula(d) for d in p.shape]})  # a formula: ceildiv(N, 128)
        else:
            params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
    entry = {
        "name": k.name,
        "params": params,
        "sizes": [v.name for v in k.size_vars],
        "grid": [formula(g) for g in sk.grid],
        "threads": sk.threads,
        "shared_bytes": sk.shared_bytes,
        "flops": costs.get("flops", "0"),
        "bytes": costs.get("bytes", "0"),
    }
    if sk.attrs.get("tensor_maps"):  # Hopper TMA: CUtensorMap parameters after the sizes (docs/deploy.md)
        entry["tensor_maps"] = sk.attrs["tensor_maps"]
        entry["fallback"] = sk.attrs["fallback"]
    if sk.attrs.get("internal"):
        entry["internal"] = True
    if "abi" in sk.attrs:  # the back end's binding interface (WGSL: bindings, uniform block, features)
        entry["abi"] = sk.attrs["abi"]
    return entry


def manifest(result, kind: str, archs: list[str], toolchain: str, options: dict, binary: str | None) -> dict:
    from .ir.cost import kernel_costs

    sources_text = {f: result.sources.text(f) or "" for f in result.module.files}
    kernels = [kernel_entry(k, sk, kernel_costs(k)) for k, sk in zip(result.module.kernels, result.simt.kernels,
                                                                     strict=True)]
    return {
        "manifest_version": MANIFEST_VERSION,
        "tilec_version": __version__,
        "target": result.target.name,
        "backend": result.target.backend,
        "archs": archs,
        "kind": kind,
        "binary": binary,
        "toolchain": toolchain,
        "driver_api": {"cuda": "CUDA driver API (cuModuleLoadData, cuLaunchKernel)",
                       "wgsl": "WebGPU (createShaderModule, createComputePipeline, dispatchWorkgroups)"}.get(
            result.target.backend, ""),
        "source_hash": source_hash(result.module.files, sources_text, options),
        "kernels": kernels,
    }


def dumps(m: dict) -> str:
    return json.dumps(m, indent=2, sort_keys=True) + "\n"
