"""`tilec profile`'s GPU half, runtime only: `python -m tilec.runtime.profile_worker ARTIFACT --size ...`.

Launches a profiled kernel (tilec/runtime/profile.py) on fresh random inputs with recording on, writes the
Chrome/Perfetto trace and prints the summary; then times the kernel with recording off and on, and the
uninstrumented build given as `--baseline`, for the instrumentation's overhead.
"""

from __future__ import annotations

import sys

import numpy as np

from .profile import DEFAULT_BLOCKS, DEFAULT_CAPACITY, bench_recording, record


def random_args(kernel, sizes: dict[str, int], seed: int = 0) -> list:
    """Fresh random inputs (normal, scaled to keep softmax and sums finite) for every parameter of `kernel`."""
    from .arrays import NP_NAMES
    from .formulas import evaluate

    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.entry["params"]:
        if p["kind"] == "scalar":
            out.append(sizes.get(p["name"], 1))
            continue
        if p["dtype"] in ("bf16", "f8e4m3", "f8e5m2"):
            import ml_dtypes  # noqa: F401  (registers these dtypes with numpy)
        shape = tuple(d if isinstance(d, int) else sizes[d] if d in sizes else evaluate(d, sizes) for d in p["shape"])
        dt = np.dtype(NP_NAMES[p["dtype"]])
        if dt.kind in "iub":
            arr = rng.integers(0, 4, size=shape).astype(dt)
        else:
            arr = (rng.standard_normal(shape) * 0.5).astype(np.float32).astype(dt)
        out.append(arr)
    return out


def main(argv=None) -> int:
    import argparse
    import json

    from .loader import load

    ap = argparse.ArgumentParser(prog="python -m tilec.runtime.profile_worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact", help="a profiled build (.cubin / .fatbin with its manifest)")
    ap.add_argument("--kernel", help="the kernel to profile (default: the first)")
    ap.add_argument("--size", action="append", default=[], metavar="NAME=N", help="a runtime size")
    ap.add_argument("-o", "--output", default="trace.json", help="the Chrome/Perfetto trace to write")
    ap.add_argument("--baseline", help="the same kernel built without instrumentation, for the overhead")
    ap.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY, help="marks recorded per warp")
    ap.add_argument("--blocks", type=int, default=DEFAULT_BLOCKS, help="blocks recorded and summarized")
    ap.add_argument("--trace-blocks", type=int, default=16, help="blocks written to the trace")
    ap.add_argument("--json", help="also write the figures (shares, times, overhead) to this JSON file")
    a = ap.parse_args(argv)
    sizes = {}
    for s in a.size:
        name, _, value = s.partition("=")
        sizes[name.strip()] = int(value)
    mod = load(a.artifact)
    name = a.kernel or next(iter(mod.kernels))
    kernel = mod.kernels[name]
    missing = [n for n in kernel.entry["sizes"] if n not in sizes]
    if missing:
        print(f"error: give the runtime sizes {', '.join(missing)} of {name} (--size NAME=N)", file=sys.stderr)
        return 2
    args = random_args(kernel, sizes)
    tl = record(kernel, *args, capacity=a.capacity, max_blocks=a.blocks)
    trace = tl.chrome_trace(a.trace_blocks)
    with open(a.output, "w") as f:
        json.dump(trace, f)
    print(tl.summary())
    figures: dict = {"kernel": name, "sizes": sizes, "shares": tl.shares(), "time_per_warp_us": tl.warpgroup_time_us(),
                     "clock_ghz": tl.clock_ghz}
    off = bench_recording(kernel, *args, on=False, capacity=a.capacity)["ms"]
    on = bench_recording(kernel, *args, on=True, capacity=a.capacity)["ms"]
    figures.update(instrumented_off_ms=off, instrumented_on_ms=on)
    line = f"time: instrumented, recording {on * 1e3:.1f} us; instrumented, not recording {off * 1e3:.1f} us"
    if a.baseline:
        plain = load(a.baseline).kernels[name].bench(*args)["ms"]
        figures["plain_ms"] = plain
        line += f"; plain build {plain * 1e3:.1f} us: overhead {100 * (on / plain - 1):+.1f}% recording, " \
                f"{100 * (off / plain - 1):+.1f}% not recording"
    print(line)
    print(f"trace: {a.output} (first {a.trace_blocks} blocks; open in https://ui.perfetto.dev)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
