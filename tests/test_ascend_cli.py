"""The AscendC back end's outputs and commands: the per-core-type bisheng builds of `-o k.o` (with a stand-in
compiler: no CANN here), −inf from its bit pattern, Nd2Nz's uint16 row stride split into row copies,
`tilec run --check --reference`, `tilec layout`, and the documented refusal of gemm_splitk."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the AscendC CPU model needs g++")

FAKE_TOOL = """#!/bin/sh
# records its command line and writes the object it was asked for
echo "$(basename "$0") $*" >> "{log}"
out=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done
echo obj > "$out"
"""


def _fake_cann(tmp_path, monkeypatch) -> Path:
    bindir = tmp_path / "cann" / "compiler" / "ccec_compiler" / "bin"
    bindir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    for tool in ("bisheng", "ld.lld"):
        t = bindir / tool
        t.write_text(FAKE_TOOL.format(log=log))
        t.chmod(t.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "cann"))
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    return log


@pytest.mark.parametrize("sample,builds", [
    ("softmax", ["dav-c220-vec"]),
    ("gemm", ["dav-c220-cube"]),
    ("flash_attention", ["dav-c220-cube", "dav-c220-vec"]),
])
def test_kernel_object_builds_each_core_type_as_cann_does(sample, builds, tmp_path, monkeypatch):
    log = _fake_cann(tmp_path, monkeypatch)
    assert tilec_main([str(SAMPLES / f"{sample}.tile"), "--target", "ascend910b", "-o", str(tmp_path / "k.o")]) == 0
    calls = log.read_text().splitlines()
    compiles = [c for c in calls if c.startswith("bisheng")]
    assert [next(a.split("=")[1] for a in c.split() if a.startswith("--cce-aicore-arch=")) for c in compiles] == builds
    if len(builds) == 2:  # a mixed kernel: each half renamed as CANN's launch stubs expect, then one object
        assert f"-D{sample}={sample}_mix_aic" in compiles[0] and f"-D{sample}={sample}_mix_aiv" in compiles[1]
        assert calls[-1].startswith("ld.lld -r")
    else:
        assert len(calls) == 1 and "_mix_" not in calls[0]


def test_infinity_is_built_from_its_bit_pattern():
    source = tilec.compile(SAMPLES / "softmax.tile", target="ascend910b").source
    assert "INFINITY" not in source and "tilec_float_bits(0xff800000u)" in source


@needs_gxx
def test_a_row_stride_beyond_uint16_is_copied_row_by_row():
    from tests.test_ascend import _assert_close, _run

    result = tilec.compile(SAMPLES / "gemm.tile", defines={"block_M": 32, "block_N": 32, "block_K": 32},
                           target="ascend910b")
    sizes = {"M": 20, "N": 24, "K": 65600 + 16}
    _assert_close(*_run(result, sizes))
    # planted: the whole-tile Nd2Nz whatever the stride: srcDValue = (uint16_t)K wraps and rows are read wrong
    bad = result.source.replace("if ((K) <= 65535)", "if (true)")
    assert bad != result.source
    got, want, _ = _run(result, sizes, source=bad)
    assert not np.allclose(got["C"].astype(np.float64), want["C"].astype(np.float64), rtol=1e-2, atol=1e-2)


REFERENCE = """
import numpy as np
def right(A):
    return A.astype(np.float32).sum(axis=1).astype(A.dtype)
def zeros(A):
    return np.zeros(A.shape[0], A.dtype)
def broken(A):
    raise RuntimeError("no")
"""


@needs_gxx
def test_run_check_honours_reference(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    ref = tmp_path / "ref.py"
    ref.write_text(REFERENCE)
    base = ["run", str(SAMPLES / "row_sum.tile"), "--target", "ascend910b", "--check", "--size", "M=9,N=300"]
    assert tilec_main(base + ["--reference", f"{ref}:right"]) == 0
    assert "against --reference: PASS" in capsys.readouterr().out
    assert tilec_main(base + ["--reference", f"{ref}:zeros"]) == 1
    assert "against --reference: FAIL" in capsys.readouterr().out
    assert tilec_main(base + ["--reference", f"{ref}:broken"]) == 1
    assert "raised RuntimeError: no" in capsys.readouterr().err
    assert tilec_main(base + ["--reference", f"{ref}:missing"]) == 1
    assert "missing" in capsys.readouterr().err


def test_layout_answers_for_every_kind_of_ascend_kernel(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for sample, line in [("vector_add", "vector_add: no on-chip tiles"),
                         ("softmax", "softmax: UB "), ("gemm", "gemm: L1 A_s: 128x32 (NZ fractals of 16 x 16)")]:
        assert tilec_main(["layout", str(SAMPLES / f"{sample}.tile"), "--target", "ascend910b"]) == 0
        assert line in capsys.readouterr().out


def test_gemm_splitk_adds_its_partial_products_in_the_atomic_mode(capsys):
    """samples/gemm_splitk.tile: every split's Fixpipe adds into C (SetAtomicAdd<float> .. SetAtomicNone), on the
    model against the interpreter at a ragged shape (C starts at zero in both)."""
    source = tilec.compile(SAMPLES / "gemm_splitk.tile", target="ascend910b").source
    assert "SetAtomicAdd<float>();" in source and "SetAtomicNone();" in source
    rc = tilec_main(["run", str(SAMPLES / "gemm_splitk.tile"), "--target", "ascend910b", "--check", "--size",
                     "M=70,N=45,K=300"])
    assert rc == 0 and "PASS" in capsys.readouterr().out


def test_docs_say_which_samples_the_back_end_refuses():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "ascend.md").read_text()
    assert "gemm_splitk" in doc and "fp8_gemm" in doc
    # the README's status row: fp8_gemm is the one sample refused (gemm_splitk runs: the test above)
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| ascend910b |"))
    assert "every sample but fp8_gemm (no fp8 on the cube unit) runs in CI" in row, row


TWO_LAUNCHES = """\
kernel twice(A: f32[N], B: out f32[N], C: out f32[N]):
    with Kernel(ceildiv(N, 256), threads=128) as bx:
        for i in Parallel(256):
            if bx * 256 + i < N:
                B[bx * 256 + i] = A[bx * 256 + i] * 2.0
    with Kernel(ceildiv(N, 256), threads=128) as bx:
        for i in Parallel(256):
            if bx * 256 + i < N:
                C[bx * 256 + i] = B[bx * 256 + i] + 1.0
"""


@pytest.mark.parametrize("n", [256, 300])
def test_two_launches_run_in_order_on_the_model(tmp_path, n):
    """A function of two launches (the second reads what the first wrote) builds as two stage kernels; run one
    after the other on the model, they match numpy."""
    import numpy as np

    from tilec.targets.ascend.model_run import build_runner, run_on_model

    path = tmp_path / "twice.tile"
    path.write_text(TWO_LAUNCHES)
    r = tilec.compile(path, target="ascend910b")
    assert [p.name for p in r.simt] == ["twice__stage0", "twice__stage1"]
    a = np.random.default_rng().standard_normal(n).astype(np.float32)
    args = {"A": a, "B": np.full(n, np.nan, np.float32), "C": np.full(n, np.nan, np.float32), "N": n}
    for program in r.simt:
        run_on_model(build_runner(r.source, program), program, args, cores=4)
    np.testing.assert_allclose(args["B"], a * 2.0, rtol=1e-6)
    np.testing.assert_allclose(args["C"], a * 2.0 + 1.0, rtol=1e-6)
