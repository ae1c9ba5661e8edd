"""One calling convention for every runtime (tilec/runtime/signature.py): parameters in signature order, outputs
may be left out (then allocated), and the call returns the outputs in signature order — the interpreter
(`tilec.load(..., target="cpu")`), WebGPU (wgpu on lavapipe) and the CUDA driver (tests/gpu: the same calls on
the H200) alike. Fresh random inputs at ragged sizes, compared with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.runtime import ArgumentError

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = ROOT / "samples" / "softmax.tile"
VECTOR_ADD = ROOT / "samples" / "vector_add.tile"


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _webgpu_module(path, tmp_path, defines):
    pytest.importorskip("wgpu")
    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    if not ok:
        pytest.skip(why)
    out = tmp_path / f"{path.stem}.wgsl"
    art = tilec.compile(path, target="webgpu", emit="wgsl", defines=defines)
    out.write_bytes(art.data)
    Path(f"{out}.json").write_bytes(art.manifest)
    return tilec.runtime.load(out)


@pytest.fixture(params=["cpu", "webgpu"])
def load(request, tmp_path):
    def loader(path, **defines):
        if request.param == "cpu":
            return tilec.load(path, target="cpu", defines=defines)
        return _webgpu_module(path, tmp_path, defines)

    return loader


def test_outputs_left_out_are_allocated_and_returned(load):
    rng = np.random.default_rng()
    mod = load(SOFTMAX, dtype="f32")
    x = rng.standard_normal((7, 333), dtype=np.float32)
    y = mod.softmax(x)
    assert isinstance(y, np.ndarray) and y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_allclose(y, _softmax(x), rtol=1e-4, atol=1e-5)
    given = np.full_like(x, np.nan)
    assert mod.softmax(x, given) is given  # given outputs are written in place and returned
    np.testing.assert_allclose(given, _softmax(x), rtol=1e-4, atol=1e-5)


def test_a_wrong_argument_count_names_both_forms(load):
    mod = load(VECTOR_ADD, dtype="f32")
    a = np.random.default_rng().standard_normal(37).astype(np.float32)
    np.testing.assert_allclose(mod.vector_add(a, a), a + a, rtol=1e-6)
    with pytest.raises(ArgumentError, match=r"vector_add takes 3 argument\(s\) \(A, B, C\), or 2 without its "
                                            r"outputs \(A, B\), got 1"):
        mod.vector_add(a)


def test_interpreter_entry_point_reports_source_errors(tmp_path):
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(A: f32[N]):\n    foo(A)\n")
    with pytest.raises(tilec.diagnostics.CompileError) as e:
        tilec.load(bad, target="cpu")
    assert "bad.tile:2:" in str(e.value)
