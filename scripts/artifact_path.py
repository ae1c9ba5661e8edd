"""Follow `target` from `tilec.compile(emit=...)`: every call into a tilec function that receives the target (its
name, its Target, or CompileOptions naming it) as an argument, in call order, with its caller's module; and the
calls that climb from a module of a lower layer into one of a higher layer (the ```layers block of this
repository's docs/architecture.md, as tests/test_layers.py reads it).

    python scripts/artifact_path.py [TREE]      # TREE: a checkout of tilec to measure (default: this one)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
ROOT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "tests"))
os.environ["TILEC_CACHE_DIR"] = tempfile.mkdtemp()

import test_layers as layering  # noqa: E402

import tilec  # noqa: E402
from tilec.options import CompileOptions  # noqa: E402

TARGET = "sm80"
SAMPLE = str(ROOT / "samples" / "vector_add.tile")
PREFIX = str(ROOT / "tilec") + os.sep


def module_of(filename: str) -> str:
    rel = filename[len(PREFIX):-3].replace(os.sep, ".")
    return "tilec" if rel == "__init__" else "tilec." + rel.removesuffix(".__init__")


def holds_target(v, depth: int = 0) -> bool:
    if v == TARGET or (type(v).__name__ == "Target" and getattr(v, "name", None) == TARGET):
        return True
    if isinstance(v, CompileOptions):
        return TARGET in v.targets
    return depth < 1 and isinstance(v, (list, tuple)) and any(holds_target(x, depth + 1) for x in v)


def main() -> None:
    layers = layering.documented_layers((HERE / "docs" / "architecture.md").read_text())
    tilec.compile(SAMPLE, TARGET, emit="cu")  # the imports, outside the trace
    os.environ["TILEC_CACHE_DIR"] = tempfile.mkdtemp()  # a miss: the whole path
    stops = []

    def tracer(frame, event, arg):
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(PREFIX):
            return None
        args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
        if any(holds_target(a) for a in args):
            back = frame.f_back
            while back is not None and not back.f_code.co_filename.startswith(PREFIX):
                back = back.f_back
            stops.append((module_of(code.co_filename), code.co_name,
                          module_of(back.f_code.co_filename) if back is not None else None))
        return None

    sys.settrace(tracer)
    tilec.compile(SAMPLE, TARGET, emit="cu")
    sys.settrace(None)
    climbs = 0
    for i, (mod, fn, caller) in enumerate(stops, 1):
        a = layering.layer_of(caller, layers) if caller else None
        b = layering.layer_of(mod, layers)
        climb = a is not None and b is not None and b > a
        climbs += climb
        print(f"{i:3d} {mod}.{fn}  <- {caller}{'   CLIMB' if climb else ''}")
    print(f"{len(stops)} stops through {len({m for m, _, _ in stops})} modules; {climbs} calls from a module of a "
          "lower layer into a higher one")


if __name__ == "__main__":
    main()
