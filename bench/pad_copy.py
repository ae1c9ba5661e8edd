"""The padded launches' copies alone (tilec_pad.h's tilec_pad_batch), timed at the copies that tilec.runtime makes for
the misaligned gemm and fp8 shapes of bench/misaligned_h200.py: each tensor with rows that are not a multiple of 16
bytes copied into a 16-byte pitched workspace before the kernel, and an output copied back out after it.

    python3 bench/pad_copy.py [HEADER_DIR[:ROWS] ...] [--grid even|256]   # on the GPU: nvcc, numpy, the driver

Each HEADER_DIR holds a tilec_pad.h (default: the checkout's, tilec/targets/cuda/include). Its tilec_pad_batch is
compiled with nvcc for sm_90 and launched through tilec.runtime's driver wrapper with the grid the runtime gives
(tilec.runtime.launch._batch_grid; `--grid 256` instead gives every row's blocks 256 threads, the grid before s33),
ROWS rows a thread (the header's TILEC_PAD_ROWS, which the manifest records and the grid's height follows; default
tilec.manifest.PAD_ROWS). Every copy is checked against numpy: each row's bytes arrive, and the destination's bytes
outside the rows keep their fill. The time is a launch's share of 50 queued back to back between two CUDA events,
behind a kernel that spins for a millisecond, so that the host's launches do not count (5 warm-up launches first);
TB/s counts the bytes read and written.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (name, copies of one call as (direction, rows, row bytes)): "in" moves a caller's packed rows into a workspace whose
# pitch is the width rounded up to 16, "out" the workspace's rows back into packed ones
CASES = [
    ("fp8 8191x131x8191", [("in", 8191, 8191), ("in", 131, 8191)]),
    ("fp8 2047x4099x4097", [("in", 2047, 4097), ("in", 4099, 4097)]),
    ("fp8 1009x2003x4001", [("in", 1009, 4001), ("in", 2003, 4001)]),
    ("fp8 4095^3", [("in", 4095, 4095), ("in", 4095, 4095)]),
    ("fp8 97x1001x3003", [("in", 97, 3003), ("in", 1001, 3003)]),
    ("f16 4095^3 A, B in", [("in", 4095, 8190), ("in", 4095, 8190)]),
    ("f16 4095^3 C out", [("out", 4095, 8190)]),
    ("f16 2047x4099x4097 in", [("in", 2047, 8194), ("in", 4097, 8198)]),
    ("f16 97x1001x3003 in", [("in", 97, 6006), ("in", 3003, 2002)]),
    ("f16 97x1001x3003 C out", [("out", 97, 2002)]),
    ("f16 127x4099x515 in", [("in", 127, 1030), ("in", 515, 8198)]),
    ("f16 4096x50257x4096 B in", [("in", 4096, 100514)]),
    ("f16 4096x50257x4096 C out", [("out", 4096, 100514)]),
]


def _compile(header_dir: Path, out: Path) -> bytes:
    src = out / "pad.cu"
    src.write_text('#include "tilec_pad.h"\n'
                   'extern "C" __global__ void spin(long long cycles) {\n'
                   '  const long long t0 = clock64();\n'
                   '  while (clock64() - t0 < cycles) {}\n'
                   '}\n')
    cubin = out / "pad.cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", f"-I{header_dir}", "-o", str(cubin), str(src)],
                   check=True)
    return cubin.read_bytes()


def _grid_256(copies, rows_per_thread):
    """The grid before s33: blocks of 256 threads over a row (fewer for a row under 256 chunks)."""
    def threads_for(width):
        chunks = -(-width // 16)
        return 256 if chunks >= 256 else max(32, -(-chunks // 32) * 32)

    threads = max(threads_for(w) for w, _ in copies)
    places, first = [], 0
    for width, rows in copies:
        chunks = -(-width // 16)
        bx, by = -(-chunks // threads), min(-(-rows // rows_per_thread), 65535)
        places.append((bx, by, first))
        first += bx * by
    return threads, (first, 1, 1), places


def main(argv=None) -> int:
    import numpy as np

    from tilec.manifest import PAD_ROWS
    from tilec.runtime.cuda_driver import Driver
    from tilec.runtime.launch import _batch_grid, _PadCopies, _PadCopy, _unit

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("headers", nargs="*", default=[str(ROOT / "tilec" / "targets" / "cuda" / "include")])
    ap.add_argument("--grid", choices=["even", "256"], default="even")
    args = ap.parse_args(argv)
    drv = Driver.get(0)
    headers = []  # (label, rows a thread, tilec_pad_batch, spin)
    with tempfile.TemporaryDirectory() as tmp:
        for i, spec in enumerate(args.headers):
            folder, _, rows = spec.partition(":")
            out = Path(tmp) / str(i)
            out.mkdir()
            mod = drv.load_module(_compile(Path(folder), out))
            headers.append((Path(folder).name[-14:], int(rows or PAD_ROWS), drv.function(mod, "tilec_pad_batch"),
                            drv.function(mod, "spin")))
    spin_cycles = ctypes.c_longlong(2_000_000)
    spin_params = (ctypes.c_void_p * 1)(ctypes.addressof(spin_cycles))
    rng = np.random.default_rng(0)
    start, end = drv.event(), drv.event()
    bad = 0
    print(f"{drv.name()}; grid {args.grid}; us a call (TB/s read + written)")
    print(f"{'copies':28}" + "".join(f"{f'{label}:{rows}':>22}" for label, rows, _, _ in headers))
    for name, copies in CASES:
        layout = []  # (src offset, src pitch, dst offset, dst pitch, width, rows) in one source and one dest buffer
        src_at = dst_at = 0
        for direction, rows, width in copies:
            padded = -(-width // 16) * 16
            sp, dp = (width, padded) if direction == "in" else (padded, width)
            layout.append((src_at, sp, dst_at, dp, width, rows))
            src_at += -(-(rows * sp) // 256) * 256
            dst_at += -(-(rows * dp) // 256) * 256
        host_src = rng.integers(0, 256, src_at, dtype=np.uint8)
        src, dst = drv.alloc(src_at), drv.alloc(dst_at)
        drv.htod(src, host_src.ctypes.data, src_at)
        moved = 2 * sum(w * r for *_, w, r in layout)
        grid_of = _batch_grid if args.grid == "even" else _grid_256
        cells = []
        for _, rows_per_thread, fn, spin in headers:
            threads, grid, places = grid_of([(w, r) for *_, w, r in layout], rows_per_thread)
            packed = _PadCopies(count=len(layout))
            for j, ((so, sp, do, dp, w, r), place) in enumerate(zip(layout, places, strict=True)):
                packed.copy[j] = _PadCopy(src + so, dst + do, r, w, sp, dp, _unit(src + so, sp),
                                          _unit(dst + do, dp), *place)
            params = (ctypes.c_void_p * 1)(ctypes.addressof(packed))
            fill = np.full(dst_at, 0xA5, dtype=np.uint8)
            drv.htod(dst, fill.ctypes.data, dst_at)
            drv.launch_packed(fn, grid, threads, 0, 0, ctypes.addressof(params))
            drv.synchronize()
            got = np.empty(dst_at, dtype=np.uint8)
            drv.dtoh(got.ctypes.data, dst, dst_at)
            want = fill.copy()
            for so, sp, do, dp, w, r in layout:
                want[do:do + r * dp].reshape(r, dp)[:, :w] = host_src[so:so + r * sp].reshape(r, sp)[:, :w]
            ok = np.array_equal(got, want)
            bad += not ok
            for _ in range(5):
                drv.launch_packed(fn, grid, threads, 0, 0, ctypes.addressof(params))
            drv.launch_packed(spin, (1, 1, 1), 32, 0, 0, ctypes.addressof(spin_params))
            drv.record(start)
            for _ in range(50):
                drv.launch_packed(fn, grid, threads, 0, 0, ctypes.addressof(params))
            drv.record(end)
            us = drv.elapsed_ms(start, end) * 1000 / 50
            cells.append(f"{us:9.1f} ({moved / us / 1e6:4.2f}){'' if ok else ' WRONG'}")
        print(f"{name:28}" + "".join(f"{c:>22}" for c in cells), flush=True)
        drv.free(src)
        drv.free(dst)
    print("all correct" if not bad else f"{bad} WRONG")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
