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

from .ir import simt as S
from .ir import tile as T
from .ir.coverage import outputs_written_in_full
from .ir.formula import formula
from .manifest import (
    DIRECT_STORES_KEY,
    HELPERS_KEY,
    LAUNCHES_KEY,
    LOADER_KEY,
    MANIFEST_VERSION,
    PAD_HELPER,
    PAD_ROWS,
    PAD_ROWS_KEY,
    TMA_ONLY_KEY,
    WRITTEN_IN_FULL_KEY,
)
from .version import __version__


def source_hash(result, options: dict) -> str:
    """A hash of every file the compile read and of the options recorded in the manifest."""
    h = hashlib.sha256()
    for f in result.module.files:
        h.update(f.encode() + b"\0" + (result.sources.text(f) or "").encode() + b"\0")
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    return h.hexdigest()


def manifest_options(options, kind: str, backend, own) -> dict:
    """The options a manifest records (tilec.options.CompileOptions as plain data): -D values, the kernel, the
    targets as spelled, the kind, and the back end's own (Backend.manifest_options of `own`, what its
    parse_options made of `options`)."""
    from .driver import define_values

    return {"defines": define_values(options), "kernel": options.kernel, "targets": list(options.targets),
            "kind": kind, **backend.manifest_options(own)}


def param_entries(params: list[T.Buffer | T.Var]) -> list[dict]:
    out = []
    for p in params:
        if isinstance(p, T.Buffer):
            out.append({"name": p.name, "kind": "tensor", "dtype": p.dtype.name, "output": p.is_output,
                        "shape": _shape(p)})
        else:
            out.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
    return out


def _shape(p: T.Buffer) -> list:
    return [int(d.value) if isinstance(d, T.Const) else d.name if isinstance(d, T.Var)
            else formula(d) for d in p.shape]  # a formula: ceildiv(N, 128)


def kernel_entry(k: T.Kernel, sk: S.SKernel, costs: dict[str, str]) -> dict:
    entry = {
        "name": k.name,
        "params": param_entries(k.params),
        "sizes": [v.name for v in k.size_vars],
        "grid": [formula(g) for g in sk.grid],
        "threads": sk.threads,
        "shared_bytes": sk.shared_bytes,
        "flops": costs.get("flops", "0"),
        "bytes": costs.get("bytes", "0"),
    }
    if k.launch_checks:  # conditions on the sizes tested before each launch (views; docs/deploy.md)
        entry["launch_checks"] = k.launch_checks
    if sk.attrs.get("tensor_maps"):  # Hopper TMA: CUtensorMap parameters after the sizes (docs/deploy.md)
        entry["tensor_maps"] = sk.attrs["tensor_maps"]
        entry["fallback"] = sk.attrs["fallback"]
        if sk.attrs.get("direct_stores"):
            entry[DIRECT_STORES_KEY] = sk.attrs["direct_stores"]
        only = tma_only_tensors(sk)
        if only:
            entry[TMA_ONLY_KEY] = only
            full = [name for name in outputs_written_in_full(k) if only.get(name) == "store"]
            if full:
                entry[WRITTEN_IN_FULL_KEY] = full
    if sk.attrs.get("cluster"):  # a thread-block cluster: launched with its dimensions (sm90)
        entry["cluster"] = list(sk.attrs["cluster"])
    if sk.attrs.get("internal") or k.stage_of is not None:  # a twin, or one launch of a multi-launch kernel
        entry["internal"] = True
    if "profile" in sk.attrs:  # an instrumented build: how the runtime records and decodes (tilec/ir/profile.py)
        entry["profile"] = sk.attrs["profile"]
    if "abi" in sk.attrs:  # the back end's binding interface (WGSL: bindings, uniform block, features)
        entry["abi"] = sk.attrs["abi"]
    return entry


def tma_only_tensors(sk: S.SKernel) -> dict[str, str]:
    """The tensor params that a TMA kernel reaches through its tensor maps alone, each with the one direction
    ("load" or "store") its maps move it in: the kernel never dereferences their pointers, so tilec.runtime may
    hand it a padded copy of such a tensor (rows padded to 16 bytes) described by the map (docs/deploy.md)."""
    from dataclasses import fields

    from .ir.visit import sub_exprs

    maps = sk.attrs.get("tensor_maps") or []
    map_vars = {v.name: m for v, m in zip(sk.attrs.get("tensor_map_params") or [], maps, strict=True)}
    touched: set[str] = set()  # pointers dereferenced (or their addresses taken) by the body
    direction: dict[str, set[str]] = {}

    def note(x) -> None:
        if isinstance(x, S.SBuffer):
            touched.add((x.alias_of or x).name)
        elif isinstance(x, T.Expr):
            for e in sub_exprs(x):
                if isinstance(e, (S.Ref, S.AddrOf)):
                    touched.add((e.buffer.alias_of or e.buffer).name)

    def visit(body) -> None:
        for st in body:
            if isinstance(st, S.SCall) and st.op in ("tma_load", "tma_load_multicast", "tma_store"):
                tmap = st.args[0]
                m = map_vars.get(tmap.name) if isinstance(tmap, T.Var) else None
                if m is not None:
                    direction.setdefault(m["tensor"], set()).add("store" if st.op == "tma_store" else "load")
                for a in st.args[1:]:
                    note(a)
                continue
            for f in fields(st):
                v = getattr(st, f.name)
                if isinstance(v, list):
                    if v and isinstance(v[0], S.SStmt):
                        visit(v)
                    else:
                        for x in v:
                            note(x)
                else:
                    note(v)

    visit(sk.body)
    viewed = {m["tensor"] for m in maps if m.get("view") is not None}
    return {p.name: next(iter(direction[p.name])) for p in sk.params
            if isinstance(p, S.SBuffer) and p.name in direction and len(direction[p.name]) == 1
            and p.name not in touched and p.name not in viewed}


def kernel_entries(result) -> list[dict]:
    """The manifest's kernel entries of a compile result (one per kernel, no-TMA twins included)."""
    from .ir.cost import kernel_costs

    return [kernel_entry(k, sk, kernel_costs(k)) for k, sk in zip(result.module.kernels, result.simt.kernels,
                                                                  strict=True)]


def launch_entries(module: T.Module, kernels: list[dict]) -> list[dict]:
    """The manifest's public entries of multi-launch kernels (tilec/manifest.py LAUNCHES_KEY): the signature, the
    scratch tensors in one workspace (offsets WORKSPACE_ALIGN-aligned, formulas of the sizes) and the stages."""
    from .ir import dtypes as D
    from .ir.exprs import binary
    from .manifest import WORKSPACE_ALIGN

    by_name = {e["name"]: e for e in kernels}
    out = []
    for seq in module.launches:
        align = T.Const(D.I64, None, WORKSPACE_ALIGN)
        offset: T.Expr = T.Const(D.I64, None, 0)
        scratch = []
        zeroed: dict = {}
        # the zeroed tensors first: the bytes a launcher zeroes before the first stage are then one prefix
        for b in sorted(seq.scratch, key=lambda b: not b.zeroed):
            nbytes: T.Expr = T.Const(D.I64, None, b.dtype.bytes)
            for d in b.shape:
                nbytes = binary("*", nbytes, T.Cast(D.I64, None, d) if d.dtype != D.I64 else d)
            scratch.append({"name": b.name, "dtype": b.dtype.name, "shape": _shape(b), "offset": formula(offset),
                            "bytes": formula(nbytes), **({"zeroed": True} if b.zeroed else {})})
            offset = binary("+", offset, binary("*", T.Call(D.I64, None, "ceildiv", [nbytes, align]), align))
            if b.zeroed:
                zeroed = {"zeroed_bytes": formula(offset)}
        stages = [{"kernel": st.kernel, "args": st.args, "grid": by_name[st.kernel]["grid"]} for st in seq.stages]
        costs = {key: " + ".join(f"({by_name[st.kernel][key]})" for st in seq.stages) for key in ("flops", "bytes")}
        out.append({"name": seq.name, "params": param_entries(seq.params), "sizes": [v.name for v in seq.size_vars],
                    "scratch": scratch, "workspace_bytes": formula(offset), **zeroed, "stages": stages, **costs})
    return out


def manifest(result, kind: str, archs: list[str], toolchain: str, options: dict, binary: str | None,
             kernels: list[dict] | None = None, launches: list[dict] | None = None) -> dict:
    """The manifest of an artifact built from `result` (its first target's, for several): see tilec/manifest.py.
    `options` (manifest_options) are recorded as "options", -D values of other types as text. `kernels` and
    `launches` replace the result's own entries (a tuned artifact's: every variant's)."""
    from .targets.registry import get_backend

    backend = result.backend or get_backend(result.target.backend)
    m = {
        "manifest_version": MANIFEST_VERSION,
        "tilec_version": __version__,
        "target": result.target.name,
        "backend": result.target.backend,
        "archs": archs,
        "kind": kind,
        "binary": binary,
        "toolchain": toolchain,
        "driver_api": backend.driver_api,
        "source_hash": source_hash(result, options),
        "kernels": kernel_entries(result) if kernels is None else kernels,
    }
    if launches is None and result.module.launches:
        launches = launch_entries(result.module, m["kernels"])
    if launches:
        m[LAUNCHES_KEY] = launches
    helpers = backend.helper_functions(m["kernels"])
    if helpers:
        m[HELPERS_KEY] = helpers
    if PAD_HELPER in helpers:
        m[PAD_ROWS_KEY] = PAD_ROWS
    m["remarks"] = [remark_entry(d) for d in result.remarks]
    if options:
        m["options"] = {k: ({n: v if isinstance(v, (bool, int, float, str)) else str(v) for n, v in v.items()}
                            if k == "defines" else v) for k, v in options.items()}
    if backend.loader:
        m[LOADER_KEY] = backend.loader
    return m


def remark_entry(d) -> dict:
    """A remark (tilec.diagnostics.Diagnostic) as the manifest's "remarks" list holds it."""
    span = d.span
    where = {"file": span.file, "line": span.line, "column": span.col} if span is not None and span.line else {}
    return {"category": d.category, "message": d.message, **where}


def dumps(m: dict) -> str:
    return json.dumps(m, indent=2, sort_keys=True) + "\n"
