"""NVRTC's split build (opt-in, TILEC_NVRTC_SPLIT=1; tilec/targets/cuda/nvrtc.py, split.py): each kernel's program
through NVVM in threads, the merged PTX assembled once by ptxas. It gives the whole program's SASS, function by
function (instructions, registers, shared memory, constant banks: cuobjdump -sass and -res-usage) for the builds
below (not for every build: nvrtc.py says which differs), reproducible bytes whatever order the threads finish
in, and recompiles only the programs that changed."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"
ATTENTION = ROOT / "samples" / "flash_attention.tile"
ROW_SUM = ROOT / "samples" / "row_sum.tile"
SPLITKV = ROOT / "examples" / "tilelang" / "gqa_decode_splitkv.tile"  # two launches: two kernels on sm80


@pytest.fixture
def nvrtc(monkeypatch, tmp_path):
    """NVRTC's module, with a ptxas of NVRTC's own build (else the split build is not taken), its NVRTC
    compiles counted by kind, and an empty compile cache."""
    from tilec.targets.cuda import nvrtc as mod

    if mod.find_lib() is None:
        pytest.skip("NVRTC (pip nvidia-cuda-nvrtc) is not installed")
    ptxas = mod.find_ptxas()
    if ptxas is None or mod._ptxas_identity(ptxas) is None:
        pytest.skip("no ptxas (pip nvidia-cuda-nvcc, or the CUDA toolkit)")
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(mod.SPLIT_ENV, "1")
    calls = []
    inner = mod._compile

    def counted(source, stem, flags, kind):
        calls.append(kind)
        return inner(source, stem, flags, kind)

    monkeypatch.setattr(mod, "_compile", counted)
    mod.calls = calls
    return mod


def _build(path, target, whole=False, monkeypatch=None, **kw):
    import tilec
    from tilec.options import CompileOptions
    from tilec.targets.cuda import nvrtc

    opts = CompileOptions.make((target,), toolchain="nvrtc", **kw)
    if not whole:
        return tilec.compile(path, options=opts, emit="cubin")
    with monkeypatch.context() as m:
        m.setattr(nvrtc, "find_ptxas", lambda: None)
        return tilec.compile(path, options=opts, emit="cubin")


def _split(art) -> bool:
    """Whether the split build made this artifact (its commands say so)."""
    return any("kernels' programs" in c for c in art.commands)


def _cuobjdump():
    from tilec.inspect.isa import cuobjdump

    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
    return tool


def _functions(cubin: bytes, tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """kernel -> (its SASS instructions in order, without addresses or encodings; its -res-usage line)."""
    tool = _cuobjdump()
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    code: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        if m := re.match(r"\s*Function : (\S+)", line):
            current = code.setdefault(m.group(1), [])
        elif current is not None and (m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;?\s*/\*", line)):
            current.append(m.group(1))
    res, name = {}, None
    for line in usage.splitlines():
        if m := re.match(r"\s*Function (\S+):", line):
            name = m.group(1)
        elif "REG:" in line and name:
            res[name] = line.strip()
    return {k: (v, res.get(k, "")) for k, v in code.items()}


@pytest.mark.parametrize("path,target,db", [(GEMM, "sm90", ""), (ATTENTION, "sm90", None), (SPLITKV, "sm80", None)],
                         ids=["gemm-sm90", "flash_attention-sm90", "gqa_decode_splitkv-sm80"])
def test_the_split_build_gives_the_whole_programs_sass(nvrtc, monkeypatch, tmp_path, path, target, db):
    split = _build(path, target, tune_db=db, use_cache=False)
    assert _split(split) and "ptxas" in json.loads(split.manifest)["toolchain"]
    whole = _build(path, target, whole=True, monkeypatch=monkeypatch, tune_db=db, use_cache=False)
    assert not _split(whole)
    a, b = _functions(whole.data, tmp_path), _functions(split.data, tmp_path)
    # the kernels, and the helpers beside them (sm90's TMA kernels: the padded launches' copy, tilec_pad_rows)
    kernels = [k["name"] for k in json.loads(whole.manifest)["kernels"]] + json.loads(whole.manifest).get("helpers", [])
    assert len(kernels) >= 2 and sorted(a) == sorted(b) == sorted(kernels)
    assert ("tilec_pad_rows" in kernels) == ("tilec_pad_batch" in kernels) == (target == "sm90")
    for name in kernels:
        assert a[name][1] == b[name][1], name  # registers, shared memory, constant bank, stack
        assert len(a[name][0]) > 10 and a[name][0] == b[name][0], name
    # the manifest's resources (ptxas's report) are the same too
    assert json.loads(whole.manifest)["resources"] == json.loads(split.manifest)["resources"]


def test_the_split_build_is_reproducible_whatever_order_the_threads_finish_in(nvrtc, monkeypatch):
    first = _build(ROW_SUM, "sm90", use_cache=False).data
    inner = nvrtc._nvrtc_cached
    finished = []

    def late_first(source, stem, flags, opts, kind):  # the first program's thread finishes last
        if kind == "ptx" and "__no_tma" not in source.split('extern "C" __global__')[-1].split("(")[0]:
            time.sleep(0.3)
        out = inner(source, stem, flags, opts, kind)
        finished.append(source)
        return out

    monkeypatch.setattr(nvrtc, "_nvrtc_cached", late_first)
    again = _build(ROW_SUM, "sm90", use_cache=False).data
    assert len(finished) == 4 and again == first  # row_sum, its no-TMA twin, the padded launches' two copies


def test_a_changed_kernel_recompiles_only_its_own_program(nvrtc, tmp_path):
    src = tmp_path / "k.tile"
    text = SPLITKV.read_text()
    src.write_text(text)
    first = _build(src, "sm80")
    assert nvrtc.calls == ["ptx", "ptx"]
    # the first launch's kernel changes, the second's does not: one program through NVVM, then ptxas
    old = "logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]"
    assert text.count(old) == 1
    src.write_text(text.replace(old, "logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i] * 2.0"))
    changed = _build(src, "sm80")
    assert nvrtc.calls == ["ptx", "ptx", "ptx"] and changed.data != first.data
    # back to the first text: nothing is compiled again
    src.write_text(text)
    assert _build(src, "sm80").data == first.data and len(nvrtc.calls) == 3
    # what the caches served is what a fresh build gives
    src.write_text(text.replace(old, "logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i] * 2.0"))
    assert _build(src, "sm80", use_cache=False).data == changed.data


def test_a_ptxas_of_another_build_is_not_used(nvrtc, monkeypatch, tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.1'\n"
                    "echo 'Build cuda_13.0.r13.0/compiler.1_0'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(nvrtc, "find_ptxas", lambda: fake)
    built = _build(ROW_SUM, "sm90", use_cache=False)
    # (the PTX says which build made it; four programs: row_sum, its twin, the padded launches' two copies)
    assert not _split(built) and nvrtc.calls == ["ptx"] * 4 + ["cubin"]


def test_the_split_build_is_opt_in(nvrtc, monkeypatch):
    monkeypatch.delenv(nvrtc.SPLIT_ENV)
    built = _build(ROW_SUM, "sm90")
    assert not _split(built) and nvrtc.calls == ["cubin"]
    monkeypatch.setenv(nvrtc.SPLIT_ENV, "1")  # another toolchain identity: the artifact's cache misses
    again = _build(ROW_SUM, "sm90")
    assert _split(again) and not again.from_cache and nvrtc.calls == ["cubin"] + ["ptx"] * 4


def test_line_info_builds_the_whole_program(nvrtc):
    built = _build(ROW_SUM, "sm90", use_cache=False, lineinfo=True)
    assert not _split(built) and nvrtc.calls == ["cubin"]


def test_the_modules_merge_into_one():
    from tilec.targets.cuda.split import MergeRefused, kernel_programs, merge_ptx

    head = ".version 9.0\n.target sm_90a\n.address_size 64\n"
    a = head + "// .globl a\n.extern .shared .align 16 .b8 tl_smem[];\n"
    a += ".visible .entry a(\n.param .u64 p\n)\n{\nret;\n}\n"
    b = head + ".extern .shared .align 16 .b8 tl_smem[];\n.visible .entry b()\n{\n{\nret;\n}\n}\n"
    merged = merge_ptx([a, b])
    assert merged.count(".extern .shared") == 1 and merged.index(".entry a(") < merged.index(".entry b()")
    assert merged.count(".version") == 1
    with pytest.raises(MergeRefused):
        merge_ptx([a, b.replace(".align 16", ".align 1024")])
    with pytest.raises(MergeRefused):  # line info: each module's file table
        merge_ptx([a + '.file 1 "k.cu"\n', b + '.file 1 "k.cu"\n'])
    source = 'int h;\nextern "C" __global__ void k1() {\n  x;\n}\nint g;\nextern "C" __global__ void k2() {\n}\n'
    one, two = kernel_programs(source)
    assert one.count("\n") == two.count("\n") == source.count("\n")  # line numbers kept
    assert "k1" in one and "k2" not in one and "k2" in two and "k1" not in two and "int g;" in one
    assert kernel_programs('extern "C" __global__ void k() {\n}\n') is None
