"""One call of tilec's flash_attention and one of SDPA's (cuDNN where it runs the shape) at one shape, for Nsight
Compute to profile side by side: where the attention family falls short of cuDNN (issue #26), which unit limits it.

    python bench/shape_sweep.py build DIR --only attention --only "attention causal"   # here: DIR/attn_d*.cubin
    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section Occupancy --section LaunchStats \
        python3 bench/ncu_attention.py DIR --dim 64 --shape 16,16,512 [--causal] [--variants]

bf16, q, k and v of shape [B, S, H, dim] as the sweep passes them (SDPA gets the [B, H, S, dim] views). Both run
warmed up outside the profiled range (torch.cuda.profiler.start/stop bracket one call of each), on fresh random
inputs, and tilec's output is checked against SDPA's first. `--variants` adds one call of every tuned variant the
artifact carries (each checked too).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tilec.runtime as rt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--dim", type=int, choices=[64, 96, 128, 256], default=64)
    ap.add_argument("--shape", default="16,16,512", help="B,H,S")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--variants", action="store_true", help="also one call of every tuned variant")
    a = ap.parse_args()
    b, h, s = (int(x) for x in a.shape.split(","))
    build = f"attn_d{a.dim}{'_causal' if a.causal else ''}"
    attention = rt.load(a.dir / f"{build}.cubin").flash_attention
    q, k, v = (torch.randn(b, s, h, a.dim, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    o = torch.empty_like(q)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def peer():
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=a.causal), "cuDNN"
        except RuntimeError:
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=a.causal), "SDPA's default"

    ref, peer_name = peer()
    calls = [attention] + (list(getattr(attention, "variants", ())) if a.variants else [])
    sizes = {"B": b, "H": h, "S": s}
    for call in calls:
        o.fill_(float("nan"))
        for _ in range(5):
            call(q, k, v, o)
        torch.cuda.synchronize()
        err = ((o.float() - ref.transpose(1, 2).float()).abs().max() / ref.float().abs().max()).item()
        name = (attention.variant_for(sizes).name if hasattr(attention, "variant_for") else attention.name) \
            if call is attention else call.name
        print(f"tilec {name} at B{b} H{h} S{s} d{a.dim}{' causal' if a.causal else ''}: max |err| / max |ref| "
              f"against {peer_name} {err:.3g}")
    for _ in range(5):
        peer()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for call in calls:
        call(q, k, v, o)
    peer()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
