"""Device print and the timeline profiler on the GPU (issue 19): build here, run on the H200.

    python bench/devprint_gpu.py build .artifacts/devprint     # here: kernels, inputs, the interpreter's text
    python3 bench/devprint_gpu.py run .artifacts/devprint      # on the GPU (numpy + tilec.runtime only)

`run`:
  1. device print: a kernel printing a shared tile (f16, block-filtered), a gathered wgmma-layout fragment
     region and a scalar runs on the GPU in a child process (printf writes to the process's stdout); its
     text is compared with the Tile IR interpreter's print of the same inputs, line for line (the shared
     tile and scalar exactly, the fragment within f32 rounding);
  2. `python -m tilec.runtime.profile_worker` on flash_attention and gemm (sm90): a trace per kernel in $OUT, the
     summary, and the instrumentation's overhead against plain builds of the same kernels;
  3. TILEC_PROFILE=...: an instrumented artifact loaded with the runtime switch set writes its trace.
Prints a short table last and writes the figures to $OUT/devprint.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRINT_KERNEL = """
const bm = 64
const bn = 64
const bk = 32
kernel printing(A: f16[M, K], B: f16[K, N], C: out f32[M, N]):
    with Kernel(ceildiv(N, bn), ceildiv(M, bm), threads=128) as (bx, by):
        A_s = alloc_shared((bm, bk), f16)
        B_s = alloc_shared((bk, bn), f16)
        acc = alloc_fragment((bm, bn), f32)
        clear(acc)
        for k in Serial(ceildiv(K, bk)):
            copy(A[by * bm, k * bk], A_s)
            copy(B[k * bk, bx * bn], B_s)
            if k == 0:
                print(A_s[0:8, :], "A tile", block=(1, 1))
            gemm(A_s, B_s, acc)
        print(acc[3:5, 0:16], "acc", block=(1, 1))
        print(by * 10 + bx, msg="block id", thread=33, block=(0, 1))
        copy(acc, C[by * bm, bx * bn])
"""
PRINT_SIZES = {"M": 130, "N": 100, "K": 70}
LEVELS = ("full", "sync")  # tilec profile --level
PROFILES = {  # name: (sample, -D, sizes)
    "flash_attention": ("flash_attention", [], {"B": 4, "S": 4096, "H": 16}),
    "gemm": ("gemm", [], {"M": 4096, "N": 4096, "K": 4096}),
}


def build(out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import io

    import numpy as np

    import tilec
    from tilec.cli.main import main as tilec_main
    from tilec.interp import random_inputs, run_kernel

    out.mkdir(parents=True, exist_ok=True)
    (out / "printing.tile").write_text(PRINT_KERNEL)
    art = tilec.compile(str(out / "printing.tile"), target="sm90", emit="cubin", output_name="printing.cubin")
    (out / "printing.cubin").write_bytes(art.data)
    (out / "printing.cubin.json").write_bytes(art.manifest)
    tk = tilec.compile(str(out / "printing.tile")).module.kernels[0]
    args = random_inputs(tk, PRINT_SIZES, seed=int.from_bytes(os.urandom(4), "little"))
    np.savez(out / "printing_inputs.npz", A=args["A"], B=args["B"])
    text = io.StringIO()
    run_kernel(tk, args, stdout=text)
    (out / "printing_expected.txt").write_text(text.getvalue())
    np.save(out / "printing_C.npy", args["C"])
    for name, (sample, defines, sizes) in PROFILES.items():
        size_arg = ",".join(f"{k}={v}" for k, v in sizes.items())
        for level in LEVELS:
            rc = tilec_main(["profile", str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "--size",
                             size_arg, "--level", level, "--build-dir", str(out / f"{name}.{level}"),
                             *(x for d in defines for x in ("-D", d))])
            if rc:
                raise SystemExit(f"building {name} ({level}) failed")
    (out / "profiles.json").write_text(json.dumps({k: v[2] for k, v in PROFILES.items()}))


def _print_child(folder: Path) -> None:
    """In the child process: launch the printing kernel; its printf goes to this process's stdout."""
    import numpy as np

    import tilec.runtime as rt

    inputs = np.load(folder / "printing_inputs.npz")
    mod = rt.load(str(folder / "printing.cubin"))
    c = np.zeros_like(np.load(folder / "printing_C.npy"))
    sys.stdout.flush()
    mod.printing(inputs["A"], inputs["B"], c)  # numpy arguments: synchronous, so printf has been flushed
    want = np.load(folder / "printing_C.npy")
    err = float(np.max(np.abs(c - want)))
    print(f"#C max abs error {err:.3g}", flush=True)


def check_print(folder: Path) -> dict:
    from tilec.testing.print_text import compare_prints, print_lines

    child = subprocess.run([sys.executable, __file__, "print-child", str(folder)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(folder / "pkg")))
    got = child.stdout
    want = (folder / "printing_expected.txt").read_text()
    g, w = print_lines(got), print_lines(want)
    shared = [k for k in w if " A tile " in k]
    exact = sorted(ln for ln in got.splitlines() if " A tile " in ln or "block id" in ln) == sorted(
        ln for ln in want.splitlines() if " A tile " in ln or "block id" in ln)
    problems = compare_prints("\n".join(ln for ln in got.splitlines() if not ln.startswith("#")), want,
                              rtol=1e-5, atol=1e-4)
    result = {"lines_expected": len(w), "lines_printed": len(g), "shared_tile_lines": len(shared),
              "shared_tile_and_scalar_identical": exact, "all_within_f32_rounding": not problems,
              "problems": problems[:5], "child_rc": child.returncode, "stderr_tail": child.stderr[-500:],
              "c_check": next((ln for ln in got.splitlines() if ln.startswith("#C")), "")}
    (Path(os.environ.get("OUT", folder)) / "device_print.txt").write_text(got)
    return result


def run(folder: Path) -> int:
    out = Path(os.environ.get("OUT", folder))
    out.mkdir(parents=True, exist_ok=True)
    figures: dict = {"print": check_print(folder)}
    sizes = json.loads((folder / "profiles.json").read_text())
    env = dict(os.environ, PYTHONPATH=str(folder / "pkg"))
    for name, sz in sizes.items():
        for level in LEVELS:
            d, tag = folder / f"{name}.{level}", f"{name}.{level}"
            prof = next(d.glob("*.prof.cubin"))
            plain = prof.with_name(prof.name.replace(".prof", ""))
            cmd = [sys.executable, "-m", "tilec.runtime.profile_worker", str(prof), "--baseline", str(plain),
                   "--kernel", name, "-o", str(out / f"{tag}_trace.json"), "--json", str(out / f"{tag}_profile.json"),
                   "--trace-blocks", "2", *(f"--size={k}={v}" for k, v in sz.items())]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            print(p.stdout + p.stderr[-2000:])
            figures[tag] = json.loads((out / f"{tag}_profile.json").read_text()) if p.returncode == 0 else {
                "rc": p.returncode}
    # the runtime switch: an already-built instrumented artifact, loaded with TILEC_PROFILE set
    switch = out / "env_switch_trace.json"
    code = ("import sys, json, numpy as np, tilec.runtime as rt\n"
            "from tilec.runtime.profile_worker import random_args\n"
            f"m = rt.load({str(next((folder / 'flash_attention.full').glob('*.prof.cubin')))!r})\n"
            "k = m.flash_attention\n"
            "a = random_args(k, {'B': 1, 'S': 1024, 'H': 4})\n"
            "k(*a); k(*a)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(env, TILEC_PROFILE=str(switch)))
    launches = len(json.loads(switch.read_text())["otherData"]["summaries"]) if switch.exists() else 0
    figures["env_switch"] = {"rc": p.returncode, "launches_in_trace": launches, "stderr_tail": p.stderr[-300:]}
    (out / "devprint.json").write_text(json.dumps(figures, indent=1, default=str))
    _table(figures)
    return 0


def _table(f: dict) -> None:
    pr = f["print"]
    print("\n== device print (sm90 cubin on this GPU) vs the interpreter")
    print(f"  lines {pr['lines_printed']}/{pr['lines_expected']}, shared tile lines {pr['shared_tile_lines']}, "
          f"shared tile + scalar identical: {pr['shared_tile_and_scalar_identical']}, fragment within f32 rounding: "
          f"{pr['all_within_f32_rounding']}; {pr['c_check']}")
    for name in (f"{n}.{level}" for n in PROFILES for level in LEVELS):
        g = f.get(name, {})
        if "shares" not in g:
            print(f"== {name}: failed {g}")
            continue
        plain, on, off = g.get("plain_ms"), g["instrumented_on_ms"], g["instrumented_off_ms"]
        print(f"== {name} {g['sizes']}: plain {plain * 1e3:.1f} us, instrumented recording {on * 1e3:.1f} us "
              f"({100 * (on / plain - 1):+.1f}%), not recording {off * 1e3:.1f} us ({100 * (off / plain - 1):+.1f}%)")
        for wg, share in g["shares"].items():
            top = sorted(((v, k) for k, v in share.items() if k != "stall"), reverse=True)[:5]
            print(f"  wg{wg}: stall {100 * share['stall']:.1f}%; " + ", ".join(f"{k} {100 * v:.1f}%" for v, k in top))
    switch = f["env_switch"]
    print(f"== TILEC_PROFILE switch: {switch['launches_in_trace']} launches traced (rc {switch['rc']})")


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    if mode == "build":
        build(folder)
    elif mode == "print-child":
        _print_child(folder)
    else:
        sys.exit(run(folder))
