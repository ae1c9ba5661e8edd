"""Issue #30's constructs as GPU correctness cases for bench/ports_gpu.py: each a .tile file of this folder with
its numpy reference, in scripts/tilelang_ports.py's Case form (`folder` points here)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "scripts"))
from tilelang_ports import Case  # noqa: E402


def _steps(a, s):
    out = []
    for x in a["A"]:
        total = 0
        for j in range(10):
            if j == 3:
                continue
            if j * x > 20:
                break
            total += j
        n = 0
        while True:
            n += 1
            if n % 2 == 1:
                continue
            if n >= x:
                break
        out.append(total * 100 + n)
    return {"B": np.array(out, np.int32)}


def _steps_inputs(sizes, rng):
    return {"A": rng.integers(0, 12, sizes["N"]).astype(np.int32), "B": np.zeros(sizes["N"], np.int32)}


def _fragment_elements(a, s):
    n = a["A"].shape[0]
    x = np.zeros((-(-n // 16) * 16, 16), np.float32)  # the last block's rows past N read zeros
    x[:n] = a["A"]
    x = x.reshape(-1, 16, 16)
    out = x.sum(-1)
    out[:, 3] = out[:, 0] + x[:, 1, 2]
    out[:, 5] += 1
    return {"B": out.reshape(-1)[:n]}


def _clipped(a, s, block_n=32, splits=2):
    x = a["A"].astype(np.float32)
    per = x.shape[0] // splits
    valid = min(block_n, per)
    out = np.zeros((splits, block_n, 64), np.float32)
    for bx in range(splits):
        tile = np.zeros((block_n, 64), np.float32)
        for k in range(-(-per // block_n)):
            rows = x[per * bx + k * valid:per * bx + (k + 1) * valid]
            tile[:len(rows)] = rows
            out[bx] += tile
    return {"B": out}


def _slots(a, s):
    taken = int((a["X"] > 0).sum())
    seen = np.zeros(a["X"].shape[0], np.int32)
    seen[:taken] = 1
    return {"Seen": seen, "Count": np.array([taken], np.int32)}


CASES = [
    Case("break_continue", _steps, {"regular": {"N": 256}, "ragged": {"N": 301}}, inputs=_steps_inputs,
         rtol=0, atol=0, folder=HERE),
    Case("fragment_elements", _fragment_elements, {"regular": {"N": 64}, "ragged": {"N": 45}}, folder=HERE),
    Case("clipped_copy", _clipped, {"regular": {"N": 128}, "ragged": {"N": 131}}, rtol=1e-3, atol=1e-3, folder=HERE),
    Case("return_prev", _slots, {"regular": {"N": 256}, "ragged": {"N": 333}}, rtol=0, atol=0, folder=HERE),
]
