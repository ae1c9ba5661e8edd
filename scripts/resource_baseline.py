#!/usr/bin/env python3
"""Performance regressions caught without a GPU: per sample and target, the resources of every kernel (registers,
spills, shared memory) and the instruction mix of its main loop, compared with a committed baseline.

    python scripts/resource_baseline.py            # compare with tests/baselines/resources.json (exit 1 on a change)
    python scripts/resource_baseline.py --update   # measure again and rewrite the baseline (commit the diff)

The numbers come from the binaries tilec builds (through its compile cache, so a second run is fast): the
manifest's "resources" (ptxas's report for CUDA, the code object's metadata for AMD) and the disassembly's main
loop (tilec/inspect/isa.py: cuobjdump -sass, llvm-objdump -d). tests/test_resource_baseline.py runs the comparison
in CI. A case whose toolchain differs from the one that made the baseline is not compared (its numbers would
move for reasons of its own): update the baseline with the new toolchain instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BASELINE = ROOT / "tests" / "baselines" / "resources.json"
SAMPLES = ("gemm", "flash_attention", "softmax")
TARGETS = ("sm80", "sm90", "gfx942")
CASES = [(s, t) for s in SAMPLES for t in TARGETS]

# How far a number may move before it is a change (absolute, relative): beyond both, the check fails.
TOLERANCE = {
    "registers": (8, 0.05), "vgpr": (8, 0.05), "agpr": (8, 0.05), "sgpr": (8, 0.10),
    "spill_stores": (0, 0.10), "spill_loads": (0, 0.10), "stack_bytes": (0, 0.10), "scratch": (0, 0.10),
    "vgpr_spill": (0, 0.10), "sgpr_spill": (2, 0.10),
    "shared_bytes": (0, 0.0), "static_shared_bytes": (0, 0.0), "lds": (0, 0.0),
    "mma": (0, 0.0), "shared_load": (2, 0.10), "shared_store": (2, 0.10), "global_load": (2, 0.10),
    "global_store": (2, 0.10), "sync": (2, 0.15), "spill": (0, 0.10), "fp32": (4, 0.10),
    "instructions": (8, 0.10),
}


def measure(sample: str, target: str) -> dict:
    """{"toolchain": ..., "kernels": {kernel: {resource: n, ..., "loop": {class: n}}}} of one sample's binary."""
    import tilec
    from tilec.inspect import isa

    amd = target.startswith("gfx")
    art = tilec.compile(str(ROOT / "samples" / f"{sample}.tile"), target, emit="hsaco" if amd else "cubin",
                        tune_db="")
    manifest = json.loads(art.manifest)
    usage = next(iter(manifest.get("resources", {}).values()), {})
    functions = isa.amd_functions(art.data) if amd else isa.sass_functions(art.data)
    kernels = {}
    for name, instructions in sorted(functions.items()):
        entry = {k: v for k, v in sorted(usage.get(name, {}).items())}
        entry["loop"] = isa.loop_mix(instructions, amd)
        kernels[name] = entry
    return {"toolchain": manifest["toolchain"], "kernels": kernels}


def measure_all(cases=CASES) -> dict:
    return {f"{s}@{t}": measure(s, t) for s, t in cases}


def _beyond(key: str, old: int, new: int) -> bool:
    absolute, relative = TOLERANCE.get(key, (0, 0.0))
    return abs(new - old) > max(absolute, relative * abs(old))


def compare(baseline: dict, current: dict) -> tuple[list[str], list[str]]:
    """(changes beyond tolerance, cases not compared and why), as readable lines."""
    changes: list[str] = []
    skipped: list[str] = []
    for case, now in sorted(current.items()):
        then = baseline.get(case)
        if then is None:
            changes.append(f"{case}: not in the baseline (run scripts/resource_baseline.py --update)")
            continue
        if then["toolchain"] != now["toolchain"]:
            skipped.append(f"{case}: built with {now['toolchain']}, the baseline with {then['toolchain']}")
            continue
        for kernel in sorted(set(then["kernels"]) | set(now["kernels"])):
            old, new = then["kernels"].get(kernel), now["kernels"].get(kernel)
            if old is None or new is None:
                changes.append(f"{case} {kernel}: {'new kernel' if old is None else 'kernel no longer built'}")
                continue
            flat_old = {**{k: v for k, v in old.items() if k != "loop"}, **{f"loop.{k}": v for k, v in
                                                                            old["loop"].items()}}
            flat_new = {**{k: v for k, v in new.items() if k != "loop"}, **{f"loop.{k}": v for k, v in
                                                                            new["loop"].items()}}
            for key in sorted(set(flat_old) | set(flat_new)):
                a, b = flat_old.get(key, 0), flat_new.get(key, 0)
                if _beyond(key.removeprefix("loop."), a, b):
                    absolute, relative = TOLERANCE.get(key.removeprefix("loop."), (0, 0.0))
                    what = "main loop " + key[5:] if key.startswith("loop.") else key
                    changes.append(f"{case} {kernel}: {what} {a} -> {b} ({b - a:+d}; tolerance "
                                   f"{max(absolute, int(relative * abs(a)))})")
    return changes, skipped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--update", action="store_true", help="rewrite the baseline with this machine's numbers")
    p.add_argument("--baseline", type=Path, default=BASELINE)
    args = p.parse_args(argv)
    current = measure_all()
    if args.update:
        args.baseline.parent.mkdir(parents=True, exist_ok=True)
        args.baseline.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.baseline} ({len(current)} cases)")
        return 0
    baseline = json.loads(args.baseline.read_text())
    changes, skipped = compare(baseline, current)
    for line in skipped:
        print(f"not compared: {line}")
    if changes:
        print("resource changes beyond tolerance (if intended: python scripts/resource_baseline.py --update):")
        print("\n".join(f"  {c}" for c in changes))
        return 1
    print(f"{len(current) - len(skipped)} cases match the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
