"""Write the generated source of every sample, under every configuration the GPU suite and the benchmarks
build, for every target, into one folder — so a refactoring can prove the generated code unchanged:

    python scripts/codegen_snapshot.py /tmp/before      # on the old commit
    python scripts/codegen_snapshot.py /tmp/after       # on the new one
    diff -r /tmp/before /tmp/after                      # empty when behaviour is preserved

A configuration a target refuses is recorded as its diagnostic text (`.err`), so a change in what is refused
shows up in the diff too.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# (label, target, disabled features)
TARGETS = [
    ("sm80", "sm80", ()),
    ("sm90", "sm90", ()),
    ("sm90-nows", "sm90", ("warp_specialize",)),
    ("sm90-notma", "sm90", ("tma",)),
    ("gfx90a", "gfx90a", ()),
    ("gfx942", "gfx942", ()),
    ("webgpu", "webgpu", ()),
]
EXT = {"cuda": "cu", "hip": "hip", "wgsl": "wgsl"}


def configurations():
    from gpu_suite import CASES, DTYPES, case_name
    from sweep import ATTN, GEMM

    seen = set()
    extra = [("gemm", d, None) for _, d, _ in GEMM] + [("flash_attention", d, None) for _, d in ATTN]
    for sample, defines, _ in [*CASES, *extra]:
        defines = {k: v for k, v in defines.items() if k != "_sm90_only"}
        const, dtypes = DTYPES.get(sample, ("dtype", ("f16", "bf16")))
        for dtype in dtypes:
            name = case_name(sample, defines, dtype)
            if name not in seen:
                seen.add(name)
                yield name, sample, {**defines, const: dtype}


def main(out: Path) -> int:
    from gpu_suite import source_path

    import tilec
    from tilec.diagnostics import CompileError, render

    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, sample, defines in configurations():
        for label, target, disable in TARGETS:
            path = source_path(sample)
            try:
                result = tilec.compile(path, defines=defines, target=target, disable=set(disable))
            except CompileError as e:
                (out / f"{name}.{label}.err").write_text("\n".join(render(d, e.sources) for d in e.diagnostics))
                continue
            (out / f"{name}.{label}.{EXT.get(result.target.backend, 'src')}").write_text(result.source)
            count += 1
    print(f"{count} sources written to {out}")
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder to write the snapshot into (created)")
    raise SystemExit(main(parser.parse_args().out))
