"""What the WebGPU tests run: every sample configuration of tests/test_wgsl.py and every TileLang port that builds
for webgpu (scripts/tilelang_ports.py's table), each with its arguments at the ragged shape."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np

from tilec.interp.run import random_inputs
from tilec.interp.tile_interp import storage_dtype
from tilec.ir import tile as T

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from test_wgsl import CASES as SAMPLE_CASES  # noqa: E402
from tilelang_ports import CASES as PORT_CASES  # noqa: E402
from tilelang_ports import EXPECTED_TARGETS  # noqa: E402


def sample_configs():
    """(sample, defines, ragged sizes) for each distinct configuration of test_wgsl's table."""
    seen = set()
    for sample, defines, shapes in SAMPLE_CASES:
        key = (sample, tuple(sorted(defines.items())))
        if key not in seen:
            seen.add(key)
            yield sample, defines, shapes[-1]


def webgpu_ports():
    return [case for case in PORT_CASES if (case.name, "webgpu") not in EXPECTED_TARGETS]


def _size_from(k, args: dict, name: str) -> int:
    for p in k.params:
        for axis, d in enumerate(getattr(p, "shape", [])):
            if getattr(d, "name", None) == name and p.name in args:
                return args[p.name].shape[axis]
    raise KeyError(name)


def arguments(k, sizes: dict[str, int], defines: dict, inputs=None, seed: int = 0, earlier: dict | None = None):
    """Arguments of kernel k: the case's own inputs (made for this configuration's tiles where the inputs function
    takes them; cast to the kernel's types, as -D dtype=f16 changes them), earlier kernels' results, fresh random
    values for the rest; and the sizes. gemm's B gets the shape the sample stores it in."""
    args = dict(earlier or {})
    if inputs is not None and not args:
        takes = inspect.signature(inputs).parameters
        tiles = {"bm": defines.get("block_M"), "bn": defines.get("block_N")}
        args = inputs(sizes, np.random.default_rng(seed), **{n: v for n, v in tiles.items() if n in takes and v})
    own = {}
    for v in k.size_vars:
        if v.name in sizes:
            own[v.name] = sizes[v.name]
        elif args:
            own[v.name] = _size_from(k, args, v.name)
    if {"B_rows", "B_cols"} <= {v.name for v in k.size_vars} - set(own):
        trans = defines.get("trans_B", False)
        own.update(B_rows=own["N"] if trans else own["K"], B_cols=own["K"] if trans else own["N"])
    fresh = random_inputs(k, own, seed=seed)
    names = {p.name: p for p in k.params}
    for n, a in args.items():
        if n in names and isinstance(names[n], T.Buffer):
            fresh[n] = np.asarray(a).astype(storage_dtype(names[n].dtype))
    return fresh, own
