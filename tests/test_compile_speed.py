"""The compile-time mechanisms (issue #14, bench/compile_time.py measures them): NVRTC's results kept in the
compile cache's section "programs", keyed by the generated program and the toolchain only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "samples" / "vector_add.tile"


@pytest.fixture
def nvrtc(monkeypatch, tmp_path):
    """NVRTC's module, with its compiles counted, and an empty compile cache."""
    from tilec.targets.cuda import nvrtc as mod

    if mod.find_lib() is None:
        pytest.skip("NVRTC (pip nvidia-cuda-nvrtc) is not installed")
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    calls = []
    inner = mod._compile

    def counted(source, stem, flags, kind):
        calls.append(flags[0])
        return inner(source, stem, flags, kind)

    monkeypatch.setattr(mod, "_compile", counted)
    mod.calls = calls
    return mod


def _build(path, targets, kind="cubin", name=None, **kw):
    import tilec
    from tilec.options import CompileOptions

    opts = CompileOptions.make(targets, toolchain="nvrtc", **kw)
    return tilec.compile(path, options=opts, emit=kind, output_name=name)


def _programs(tmp_path) -> list[Path]:
    return sorted((tmp_path / "cache" / "v1" / "programs").glob("*/*/*.entry"))


def test_an_unchanged_program_is_not_compiled_again(nvrtc, tmp_path):
    first = _build(VECTOR_ADD, ("sm80",), name="a.cubin")
    assert len(nvrtc.calls) == 1 and not first.from_cache
    # another output name: the artifact's cache misses, NVRTC's result is served
    again = _build(VECTOR_ADD, ("sm80",), name="b.cubin")
    assert len(nvrtc.calls) == 1 and not again.from_cache
    fresh = _build(VECTOR_ADD, ("sm80",), name="b.cubin", use_cache=False)
    assert len(nvrtc.calls) == 2
    assert again.data == fresh.data == first.data and again.manifest == fresh.manifest
    from tilec.cache import Cache

    st = Cache().stats()["programs"]
    assert (st["entries"], st["hits"], st["misses"]) == (1, 1, 1)


def test_a_changed_program_is_compiled_and_only_it(nvrtc, tmp_path):
    src = tmp_path / "k.tile"
    src.write_text(VECTOR_ADD.read_text())
    _build(src, ("sm80",))
    assert nvrtc.calls == ["-arch=sm_80"]
    # a header for two targets: one program each (sm80's is the cubin's), and sm80's PTX for newer GPUs
    _build(src, ("sm80", "sm90"), kind="header")
    assert sorted(nvrtc.calls[1:]) == ["-arch=compute_80", "-arch=sm_90a"]
    # the kernel changed: its program is new on both targets
    text = VECTOR_ADD.read_text()
    assert "A[idx] + B[idx]" in text
    src.write_text(text.replace("A[idx] + B[idx]", "A[idx] + B[idx] + A[idx]"))
    changed = _build(src, ("sm80", "sm90"), kind="header")
    assert sorted(nvrtc.calls[3:]) == ["-arch=compute_80", "-arch=sm_80", "-arch=sm_90a"]  # (in threads)
    assert changed.data == _build(src, ("sm80", "sm90"), kind="header", use_cache=False).data
    assert len(_programs(tmp_path)) == 6


def test_a_damaged_program_entry_is_detected_and_compiled_again(nvrtc, tmp_path):
    good = _build(VECTOR_ADD, ("sm80",), name="a.cubin").data
    (entry,) = _programs(tmp_path)
    data = bytearray(entry.read_bytes())
    data[-100] ^= 0x40  # a bit of the cubin
    entry.write_bytes(bytes(data))
    again = _build(VECTOR_ADD, ("sm80",), name="b.cubin")
    assert len(nvrtc.calls) == 2 and again.data == good
    (entry,) = _programs(tmp_path)  # the damaged one was removed, the new one is whole
    assert entry.read_bytes() != bytes(data)
    _build(VECTOR_ADD, ("sm80",), name="c.cubin")
    assert len(nvrtc.calls) == 2


def test_no_cache_neither_reads_nor_writes_programs(nvrtc, tmp_path):
    _build(VECTOR_ADD, ("sm80",), use_cache=False)
    _build(VECTOR_ADD, ("sm80",), use_cache=False)
    assert len(nvrtc.calls) == 2 and _programs(tmp_path) == []


def test_the_program_key_holds_what_the_binary_depends_on(nvrtc):
    from tilec.targets.cuda.toolchain import BuildOptions

    plain = BuildOptions("cubin", ["sm_80"])
    lined = BuildOptions("cubin", ["sm_80"], lineinfo=True)
    flags = ["-arch=sm_80", "-std=c++17"]

    def key(text, name, flags, opts, kind="cubin"):
        return nvrtc.program_key(text, name, flags, opts, kind)

    assert key("int x;", "a", flags, plain) == key("int x;", "b", flags, plain)  # the name is not in the binary
    assert key("int x;", "a", flags, lined) != key("int x;", "b", flags, lined)  # with line info it is
    assert key("int x;", "a", flags, plain) != key("int y;", "a", flags, plain)
    assert key("int x;", "a", flags, plain) != key("int x;", "a", flags + ["-G"], plain)
    assert key("int x;", "a", flags, plain) != key("int x;", "a", flags, plain, "ptx")


def test_a_tuned_build_parses_its_file_once(monkeypatch):
    import tilec
    from tilec.options import CompileOptions
    from tilec.parser import parse as P

    calls = []
    inner = P._parse

    def counted(text, filename):
        calls.append(filename)
        return inner(text, filename)

    monkeypatch.setattr(P, "_parse", counted)
    monkeypatch.setattr(P, "_PARSED", {})
    gemm = ROOT / "samples" / "gemm.tile"
    opts = CompileOptions.make(("sm90",), use_cache=False, tune_db=str(gemm.with_suffix(".tune.json")))
    once = tilec.compile(gemm, options=opts, emit="cu")
    assert len(json.loads(once.manifest)["kernels"]) > 2  # several configurations...
    assert calls == [str(gemm)]  # ... from one parse
    monkeypatch.setattr(P, "_PARSED", {})
    monkeypatch.setattr(P, "_PARSED_MAX", 0)  # no tree kept: a parse per configuration
    every = tilec.compile(gemm, options=opts, emit="cu")
    assert len(calls) > 2 and every.data == once.data and every.manifest == once.manifest


def test_nvrtc_in_threads_gives_what_it_gives_one_at_a_time(nvrtc):
    """Several targets' programs (a fatbin's, a header's) build in threads: the same bytes as one by one."""
    import tilec
    from tilec.targets.cuda.backend import _per_target
    from tilec.targets.cuda.toolchain import BuildOptions

    jobs = [(tilec.compile(ROOT / "samples" / f"{s}.tile", target=t).source, a)
            for s in ("softmax", "vector_add") for t, a in (("sm80", "sm_80"), ("sm90", "sm_90a"))]

    def build(job):
        return nvrtc.build_nvrtc(job[0], "k", BuildOptions("cubin", [job[1]]))

    alone = [build(j) for j in jobs]
    together = _per_target(jobs, build)
    assert [b.binary for b in together] == [b.binary for b in alone]
    assert [b.usage_by_arch for b in together] == [b.usage_by_arch for b in alone]


CONCURRENT = r"""
import sys, time
import tilec
from tilec.options import CompileOptions
src, out, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
opts = CompileOptions.make(("sm80",), toolchain="nvrtc")
art = tilec.compile(src, options=opts, emit="cubin", output_name=out.rsplit("/", 1)[-1])
open(out, "wb").write(art.data)
"""


def test_processes_sharing_programs_get_the_same_bytes(nvrtc, tmp_path):
    import os
    import subprocess
    import sys
    import time

    from tilec.cache import Cache

    want = _build(VECTOR_ADD, ("sm80",), use_cache=False).data
    env = dict(os.environ, PYTHONPATH=str(ROOT), TILEC_CACHE_DIR=str(tmp_path / "cache"))
    start = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(VECTOR_ADD), str(tmp_path / f"k{i}.cubin"),
                               str(start)], env=env, stderr=subprocess.PIPE, text=True) for i in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert all((tmp_path / f"k{i}.cubin").read_bytes() == want for i in range(4))
    st = Cache(tmp_path / "cache").stats()
    assert st["programs"]["entries"] == 1 and st["partial_writes"] == 0
    assert st["programs"]["hits"] + st["programs"]["misses"] == 4


def test_f32_and_f16_constants_round_as_numpy_does_without_it():
    import math
    import os
    import random
    import struct
    import subprocess
    import sys

    import numpy as np

    from tilec.ir import dtypes as D
    from tilec.ir.fold import _round_float

    rng = random.Random(3)
    values = [0.0, -0.0, math.inf, -math.inf, 65504.0, 65519.99, 65520.0, -65520.0, 2.98e-8, 5.96e-8, 1e-50,
              3.4028234663852886e38, 3.4028235677973366e38, 1e39, -1e39, 7e-46, 1.401298464324817e-45]
    values += [rng.uniform(-1e5, 1e5) for _ in range(2000)] + [2.0 ** rng.randint(-160, 130) * rng.uniform(-2, 2)
                                                              for _ in range(2000)]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(2000)]
    with np.errstate(all="ignore"):
        for v in values:
            if math.isnan(v):
                continue
            for dt, npt in ((D.F32, np.float32), (D.F16, np.float16)):
                got, want = _round_float(v, dt), float(np.array(v, dtype=npt))
                assert got == want and math.copysign(1, got) == math.copysign(1, want), (v, dt.name)
    assert math.isnan(_round_float(math.nan, D.F32)) and math.isnan(_round_float(math.nan, D.F16))
    probe = ("import sys, tilec\n"
             f"tilec.compile({str(ROOT / 'samples' / 'softmax.tile')!r}, 'sm90')\n"
             "print('numpy' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr


def test_ptxas_in_threads_gives_the_same_sass(nvrtc, tmp_path, monkeypatch):
    """ptxas compiles a program's kernels in PTXAS_THREADS threads: every kernel's SASS is what one thread gives
    (the cubin's bytes differ only where it records ptxas's options), and the bytes do not vary from run to run."""
    import subprocess

    from tilec.inspect.isa import cuobjdump

    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
    attention = ROOT / "samples" / "flash_attention.tile"  # on sm90: the kernel, its twin, the padded rows' copy
    split = _build(attention, ("sm90",), use_cache=False)
    assert _build(attention, ("sm90",), use_cache=False).data == split.data
    monkeypatch.setattr(nvrtc, "PTXAS_THREADS", 1)
    one = _build(attention, ("sm90",), use_cache=False)
    dumps = []
    for name, art in (("split", split), ("one", one)):
        path = tmp_path / f"{name}.cubin"
        path.write_bytes(art.data)
        dumps.append(subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True).stdout)
    assert dumps[0].count("Function : ") == 4 and dumps[0] == dumps[1]  # attention, its twin, the two copies
    assert json.loads(split.manifest)["resources"] == json.loads(one.manifest)["resources"]


def test_a_split_compile_of_the_users_replaces_tilecs(nvrtc):
    from tilec.targets.cuda.toolchain import BuildOptions

    cmd = nvrtc.build_nvrtc("", "k", BuildOptions("cubin", ["sm_80"], dryrun=True)).commands[0]
    assert f"--ptxas-options=--split-compile={nvrtc.PTXAS_THREADS}" in cmd
    cmd = nvrtc.build_nvrtc("", "k", BuildOptions("cubin", ["sm_80"], dryrun=True,
                                                   ptxas_args=["--split-compile=4"])).commands[0]
    assert "--ptxas-options=--split-compile=4" in cmd and cmd.count("--ptxas-options=--split-compile") == 1
    ptx = nvrtc.build_nvrtc("", "k", BuildOptions("ptx", ["sm_80"], dryrun=True)).commands[0]
    assert "ptxas-options" not in ptx and ptx.count("split-compile") == 1  # (no ptxas for PTX; NVVM's own)


def test_nvvm_splits_its_compile_unless_the_user_chose(nvrtc):
    """NVRTC's NVVM gets --split-compile=0 as nvcc does; a -Xcompiler --split-compile=N of the user's replaces it."""
    from tilec.targets.cuda.toolchain import BuildOptions

    cmd = nvrtc.build_nvrtc("", "k", BuildOptions("cubin", ["sm_90a"], dryrun=True)).commands[0]
    assert f" {nvrtc.NVVM_SPLIT_COMPILE} " in cmd
    cmd = nvrtc.build_nvrtc("", "k", BuildOptions("cubin", ["sm_90a"], dryrun=True,
                                                   extra=["--split-compile=3"])).commands[0]
    assert nvrtc.NVVM_SPLIT_COMPILE not in cmd and cmd.count(" --split-compile=3") == 1


def test_nvcc_splits_its_compile_unless_the_user_chose(monkeypatch):
    """nvcc gets --split-compile=0 (CUDA 12 or newer; the SASS is the same at any thread count), and a
    -Xcompiler --split-compile=N of the user's replaces it; an older or unknown nvcc gets none."""
    from tilec.targets.cuda import toolchain
    from tilec.targets.cuda.toolchain import BuildOptions

    monkeypatch.setattr(toolchain.shutil, "which", lambda name: f"/opt/cuda/bin/{name}")
    monkeypatch.setattr(toolchain, "nvcc_version", lambda: "nvcc 13.0.48")
    cmd = toolchain.build("", "k", BuildOptions("cubin", ["sm_90a"], dryrun=True)).commands[0]
    assert cmd.split()[-1] == "--split-compile=0"
    cmd = toolchain.build("", "k", BuildOptions("cubin", ["sm_90a"], dryrun=True,
                                                extra=["--split-compile=2"])).commands[0]
    assert cmd.count("split-compile") == 1 and cmd.endswith("--split-compile=2")
    monkeypatch.setattr(toolchain, "nvcc_version", lambda: "nvcc 11.4.100")
    assert "split-compile" not in toolchain.build("", "k", BuildOptions("cubin", ["sm_80"], dryrun=True)).commands[0]


def test_toolchain_sass_reads_each_kernels_registers_and_instructions(nvrtc, tmp_path):
    """bench/toolchain_sass.py (NVRTC's binaries against nvcc's, kernel by kernel) on one NVRTC build."""
    import importlib.util

    from tilec.inspect.isa import cuobjdump

    if cuobjdump() is None:
        pytest.skip("cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
    spec = importlib.util.spec_from_file_location("toolchain_sass", ROOT / "bench" / "toolchain_sass.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    regs, sass = bench.build("vector_add", "sm80", ["--compiler", "nvrtc"], tmp_path, tmp_path / "cache")
    assert set(regs) == set(sass) and regs and all(r > 0 for r in regs.values())
    assert all(any(op.startswith("EXIT") for op in ops) for ops in sass.values())
