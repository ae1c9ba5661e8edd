"""The GEMV tiles (and any gemm artifact) against torch at ragged decode shapes, for compute-sanitizer (issue #26).

    python3 bench/gemv_check_gpu.py ARTIFACT.cubin [...] [--shape M,N,K ...]
    compute-sanitizer --tool memcheck python3 bench/gemv_check_gpu.py ...     # and --tool racecheck

Each artifact at each shape: the output poisoned with NaN, one call, compared with torch's product in f32 (relative
to the output's magnitude, 2e-2); prints one line a case and exits 1 if any is wrong. B is [K, N], or [N, K] when
the artifact's B is (trans_B builds). Needs torch and tilec.runtime (PYTHONPATH at a tilec checkout).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SHAPES = ["1,45,517", "3,77,333", "17,130,129", "1,4096,4096", "5,4104,520"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("artifacts", nargs="+")
    p.add_argument("--shape", action="append")
    a = p.parse_args(argv)
    import torch

    from tilec.runtime.loader import load

    bad = 0
    for path in a.artifacts:
        kernel = load(Path(path)).kernels["gemm"]
        params = {q["name"]: q for q in kernel.entry["params"]}
        dt = torch.float16 if params["A"]["dtype"] == "f16" else torch.bfloat16
        trans_b = params["B"]["shape"][0] == "N"
        for shape in a.shape or SHAPES:
            m, n, k = map(int, shape.split(","))
            g = torch.Generator(device="cuda").manual_seed(m * 7 + n + k)
            A = torch.randn(m, k, device="cuda", generator=g).to(dt)
            B = torch.randn(*((n, k) if trans_b else (k, n)), device="cuda", generator=g).to(dt)
            C = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
            for _ in range(2):  # the general path, then the fast one
                C.fill_(float("nan"))
                kernel(A, B, C)
            torch.cuda.synchronize()
            ref = A.float() @ (B.float().T if trans_b else B.float())
            err = float((C.float() - ref).abs().max() / ref.abs().max())
            ok = err <= 2e-2 and bool(torch.isfinite(C).all())
            bad += not ok
            print(f"{Path(path).name} {m}x{n}x{k}{' trans_B' if trans_b else ''}: rel err {err:.2e} "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
