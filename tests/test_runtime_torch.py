"""tilec.torch on the CPU: op schemas from manifests, the fake (meta) implementations' shapes and
checks, and torch.compile(fullgraph=True) tracing tilec ops — run on meta tensors, which dispatch to
the fake implementation, so no GPU is needed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilec.torch as tt  # noqa: E402
from tilec.runtime.module import Module  # noqa: E402


def _t(name, dtype, shape, out=False):
    return {"name": name, "kind": "tensor", "dtype": dtype, "output": out, "shape": shape}


SOFTMAX = {"name": "softmax", "params": [_t("X", "bf16", ["M", "N"]), _t("Y", "bf16", ["M", "N"], True)],
           "sizes": ["M", "N"], "grid": ["ceildiv(M, 4)", "1", "1"], "threads": 128, "shared_bytes": 0}
ATTN = {"name": "attn", "params": [_t("Q", "f16", ["B", "S", "H", 64]), _t("K", "f16", ["B", "S", "H", 64]),
                                   _t("O", "f16", ["B", "S", "H", 64], True), _t("L", "f32", ["B", "H", "S"], True),
                                   {"name": "scale", "kind": "scalar", "dtype": "f32"},
                                   {"name": "window", "kind": "scalar", "dtype": "i32"}],
        "sizes": ["B", "S", "H"], "grid": ["S", "H", "B"], "threads": 128, "shared_bytes": 0}
GEMM = {"name": "gemm", "params": [_t("A", "f16", ["M", "K"]), _t("B", "f16", ["B_rows", "B_cols"]),
                                   _t("C", "f16", ["M", "N"], True)],
        "sizes": ["M", "K", "B_rows", "B_cols", "N"], "grid": ["ceildiv(N, 128)", "ceildiv(M, 128)", "1"],
        "threads": 128, "shared_bytes": 0}


@pytest.fixture(scope="module")
def ops():
    mod = Module(b"", {"manifest_version": 1, "kind": "cubin", "archs": ["sm_90a"], "kernels": [SOFTMAX, ATTN, GEMM]})
    return tt.register(mod, namespace="tilec_test")


def meta(*shape, dtype=torch.float16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_schemas_follow_the_manifest(ops):
    mod = Module(b"", {"manifest_version": 1, "kernels": [SOFTMAX, ATTN, GEMM]})
    assert tt.schema(mod.softmax, "s") == "s(Tensor X) -> Tensor"
    assert tt.schema(mod.attn, "a") == "a(Tensor Q, Tensor K, float scale, int window) -> (Tensor, Tensor)"
    # C's N is no input's size: the op takes C and writes it in place
    assert tt.schema(mod.gemm, "g") == "g(Tensor A, Tensor B, Tensor(a!) C) -> ()"
    assert str(torch.ops.tilec_test.softmax.default._schema) == "tilec_test::softmax(Tensor X) -> Tensor"


def test_fake_implementations_give_the_output_shapes(ops):
    y = ops.softmax(meta(3, 700, dtype=torch.bfloat16))
    assert y.shape == (3, 700) and y.dtype == torch.bfloat16 and y.device.type == "meta"
    o, lse = ops.attn(meta(2, 100, 8, 64), meta(2, 100, 8, 64), 0.125, 16)
    assert o.shape == (2, 100, 8, 64) and o.dtype == torch.float16
    assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32
    assert ops.gemm(meta(4, 8), meta(8, 16), meta(4, 16)) is None


@pytest.mark.parametrize("args, match", [
    ((meta(3, 4, 5, dtype=torch.bfloat16),), "'X' has 3 dimension"),
    ((meta(3, 4, dtype=torch.float32),), "'X' has dtype torch.float32, expected bf16"),
])
def test_fake_implementations_check_the_inputs(ops, args, match):
    with pytest.raises(RuntimeError, match=match):
        ops.softmax(*args)


def test_fake_implementation_checks_fixed_and_shared_sizes(ops):
    with pytest.raises(RuntimeError, match="dimension 3 of 'Q' must be 64"):
        ops.attn(meta(2, 100, 8, 32), meta(2, 100, 8, 32), 0.1, 1)
    with pytest.raises(RuntimeError, match="inputs disagree on size S"):
        ops.attn(meta(2, 100, 8, 64), meta(2, 99, 8, 64), 0.1, 1)


def test_torch_compile_fullgraph_traces_tilec_ops(ops):
    def block(x, q, k, a, b, c):
        y = ops.softmax(x * 2)
        o, lse = ops.attn(q, k, 0.5, 4)
        ops.gemm(a, b, c)
        return y + 1, o.sum(-1) + lse.transpose(1, 2), c * 2

    compiled = torch.compile(block, fullgraph=True, backend="eager")
    for m in (5, 9):  # a second shape: the fake implementation handles it too
        y, z, c = compiled(meta(m, 33, dtype=torch.bfloat16), meta(1, m, 2, 64), meta(1, m, 2, 64),
                           meta(m, 8), meta(8, 16), meta(m, 16))
        assert y.shape == (m, 33) and z.shape == (1, m, 2) and c.shape == (m, 16)


def test_registration_is_idempotent_and_names_are_guarded(ops):
    mod = Module(b"", {"manifest_version": 1, "kernels": [SOFTMAX]})
    first = tt.op(mod.softmax, "softmax_once", namespace="tilec_test")
    assert tt.op(mod.softmax, "softmax_once", namespace="tilec_test") is first
    other = Module(b"", {"manifest_version": 1, "kernels": [SOFTMAX]})
    with pytest.raises(ValueError, match="already another kernel"):
        tt.op(other.softmax, "softmax_once", namespace="tilec_test")


def test_output_sizes_known():
    assert tt.output_sizes_known(SOFTMAX) and tt.output_sizes_known(ATTN)
    assert not tt.output_sizes_known(GEMM)
