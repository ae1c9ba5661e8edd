"""`tilec package`: versioned artifact packages for deployment (docs/deploy.md#artifact-packages).

For a list of .tile files and targets it writes a directory: per source one artifact (a CUDA fatbin of every
target, with the forward-compatible PTX unless --no-ptx) and its manifest, a check file (inputs at a small ragged
shape and the reference interpreter's outputs for them, recorded here because the interpreter needs the compiler,
which a deployment machine does not have), and `index.json` naming, per kernel, its file, architectures, SHA-256,
tilec version, toolchain and the oldest driver that loads it. tilec.runtime.package reads it (load_package) and
checks it on a GPU (check_deploy). The same inputs give the same bytes: the artifacts are deterministic, the JSON
is written with sorted keys, and the check files are zip archives with fixed timestamps.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from .diagnostics import CompileError, Diagnostic

PACKAGE_FORMAT = 1
INDEX_NAME = "index.json"
CHECK_SIZE = 37  # every runtime size of a check run, unless --size says otherwise: small, and ragged for any tile
CHECK_BYTES = 1 << 20  # a check run's arguments at most: sizes not given are halved, in signature order, to fit
KINDS = {"cuda": "fatbin"}  # back end -> the artifact a package holds (a WebGPU package comes from --emit: webgpu.md)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: check files do not depend on when they were written


def build_package(sources: list[str], targets: str, out: Path, *, defines: dict | None = None,
                  include_dirs=(), sizes: dict[str, int] | None = None, forward_ptx: bool = True,
                  toolchain: str | None = None, deps: list[str] | None = None) -> dict:
    """Write the package for `sources` x `targets` into directory `out` (created; files of the same names are
    replaced) and return its index. `deps`, when given, gets every file the builds read (each source, what it
    imports, a tuning database), for a dependency file."""
    import tilec

    from .options import CompileOptions
    from .targets.registry import UnknownTarget, lookup
    from .version import __version__

    try:
        backends = {lookup(t).backend for t in targets.split(",") if t.strip()}
    except UnknownTarget as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    kind = KINDS.get(next(iter(backends))) if len(backends) == 1 else None
    if kind is None:
        raise CompileError([Diagnostic("error", f"tilec package builds CUDA packages (targets sm80 ... sm100); "
                                                f"{targets} is not (a WebGPU package: tilec --emit, docs/webgpu.md)")])
    out.mkdir(parents=True, exist_ok=True)
    stems = [Path(s).stem for s in sources]
    if len(set(stems)) != len(stems):
        raise CompileError([Diagnostic("error", "tilec package: two sources have the same file name "
                                                f"({', '.join(sorted(s for s in stems if stems.count(s) > 1))}); "
                                                "their artifacts would overwrite each other")])
    for source in sources:
        if Path(source).resolve().parent == out.resolve():
            raise CompileError([Diagnostic("error", f"tilec package: {source} is inside the output directory {out}; "
                                                    "write the package elsewhere")])
    rows = []
    for source, stem in zip(sources, stems, strict=True):
        options = CompileOptions.make(targets, defines=defines or {}, include_dirs=list(include_dirs),
                                      forward_ptx=forward_ptx, toolchain=toolchain)
        name = f"{stem}.{kind}"
        artifact = tilec.compile(source, options=options, emit=kind, output_name=name)
        if deps is not None:
            deps.extend(artifact.deps)
        _write(out / name, artifact.data)
        _write(out / f"{name}.json", artifact.manifest)
        manifest = json.loads(artifact.manifest)
        check_name = f"{stem}.check.zip"
        _write(out / check_name, _check_file(source, options, sizes or {}))
        for k in manifest["kernels"]:
            if k.get("internal"):
                continue
            rows.append(_row(k["name"], name, artifact.data, artifact.manifest, manifest, check_name, __version__))
        for seq in manifest.get("launches") or []:
            rows.append(_row(seq["name"], name, artifact.data, artifact.manifest, manifest, check_name, __version__))
    index = {"package_format": PACKAGE_FORMAT, "tilec_version": __version__, "targets": targets.split(","),
             "kernels": rows}
    _write(out / INDEX_NAME, (json.dumps(index, indent=2, sort_keys=True) + "\n").encode())
    return index


def _row(kernel: str, name: str, data: bytes, manifest_text: bytes, manifest: dict, check: str, version: str) -> dict:
    from .cache import sha256_bytes

    built = int(manifest.get("driver_api_version") or 0)
    ptx = manifest.get("ptx")
    return {"kernel": kernel, "file": name, "manifest": f"{name}.json", "sha256": sha256_bytes(data),
            "manifest_sha256": sha256_bytes(manifest_text), "archs": manifest.get("archs", []),
            "ptx": ptx["arch"] if ptx else None, "tilec_version": version, "toolchain": manifest.get("toolchain"),
            "oldest_driver": built // 1000 * 1000,
            "oldest_driver_cuda": f"{built // 1000}.0" if built else None, "check": check}


def _write(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _check_file(source: str, options, sizes: dict[str, int]) -> bytes:
    """A zip of, per public kernel: `<kernel>/<param>.npy` (each tensor argument's bits, inputs and zeroed
    outputs) and `<kernel>/<output>.expected.npy` (the interpreter's result), and `checks.json` (per kernel, its
    sizes, scalar values and each tensor's tilec dtype). Bits, because a bf16 or fp8 .npy needs ml_dtypes to be
    read back as such."""
    import tilec

    from .interp.run import public_kernels, random_inputs, run_any

    result = tilec.compile(source, options.targets[0], defines=dict(options.defines),
                           include_dirs=list(options.include_dirs))
    files: dict[str, bytes] = {}
    meta = {}
    for seed, k in enumerate(public_kernels(result.module)):
        chosen = _check_sizes(k, sizes)
        args = random_inputs(k, chosen, seed=seed)
        given = {n: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for n, v in args.items()}
        run_any(result.module, k, args)
        params = []
        for p in k.params:
            value = given[p.name]
            if isinstance(value, np.ndarray):
                files[f"{k.name}/{p.name}.npy"] = _npy_bits(value)
                entry = {"name": p.name, "kind": "tensor", "dtype": p.dtype.name, "output": bool(p.is_output)}
                if p.is_output:
                    files[f"{k.name}/{p.name}.expected.npy"] = _npy_bits(np.asarray(args[p.name]))
                params.append(entry)
            else:
                params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name, "value": value})
        meta[k.name] = {"sizes": chosen, "seed": seed, "params": params}
    files["checks.json"] = (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, files[name])
    return buf.getvalue()


def _check_sizes(kernel, given: dict[str, int]) -> dict[str, int]:
    """The runtime sizes of a kernel's check run: `given`'s, else CHECK_SIZE, the ones not given halved in signature
    order (attention's B before S and H) while the arguments exceed CHECK_BYTES."""
    import math

    from .interp.run import shape_of
    from .ir import tile as T

    order = [v.name for v in kernel.size_vars]
    chosen = {n: given.get(n, CHECK_SIZE) for n in order}

    def nbytes() -> int:
        return sum(math.prod(shape_of(p, chosen)) * max(p.dtype.bytes, 1) for p in kernel.params
                   if isinstance(p, T.Buffer))

    for name in [n for n in order if n not in given]:
        while nbytes() > CHECK_BYTES and chosen[name] > 1:
            chosen[name] = (chosen[name] + 1) // 2
    return dict(sorted(chosen.items()))


def _npy_bits(a: np.ndarray) -> bytes:
    """The array as .npy bytes; an ml_dtypes array (bf16, fp8: numpy kind "V") as its unsigned bits."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "V":
        a = a.view(f"u{a.dtype.itemsize}")
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()
