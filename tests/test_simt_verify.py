"""The SIMT IR verifier (tilec/ir/simt_verify.py): silent on what lowering produces for every target, and it
catches each kind of broken SIMT IR it promises to."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.ir import simt as S
from tilec.ir.simt_verify import VerifyError, verify

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("sample", ["gemm", "flash_attention", "softmax", "row_sum"])
@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942"])
def test_lowered_samples_verify(sample, target):
    tilec.compile(ROOT / "samples" / f"{sample}.tile", target=target, verify=True)  # raises on a violation


def _kernel():
    return tilec.compile(ROOT / "samples" / "gemm.tile", target="sm80").simt


def _first(body, kind):
    for s in body:
        if isinstance(s, kind):
            return s, body
        for sub in (getattr(s, "body", None), getattr(s, "then_body", None), getattr(s, "else_body", None)):
            if sub:
                found = _first(sub, kind)
                if found:
                    return found
    return None


def test_a_variable_used_before_its_declaration_is_caught():
    m = _kernel()
    decl, body = _first(m.kernels[0].body, S.Declare)
    body.remove(decl)
    with pytest.raises(VerifyError, match=f"'{decl.var.name}' is used outside the scope"):
        verify(m)


def test_an_undeclared_register_array_is_caught():
    m = _kernel()
    decl, body = _first(m.kernels[0].body, S.DeclareArray)
    body.remove(decl)
    with pytest.raises(VerifyError, match=f"'{decl.buffer.name}', which is not declared here"):
        verify(m)


def test_a_constant_index_past_a_register_array_is_caught():
    m = _kernel()
    decl, body = _first(m.kernels[0].body, S.DeclareArray)
    i = body.index(decl)
    from tilec.ir import dtypes as D
    from tilec.ir import tile as T
    body.insert(i + 1, S.SStore(None, decl.buffer, T.Const(D.I32, None, decl.buffer.size), T.Const(D.F32, None, 0.0)))
    with pytest.raises(VerifyError, match="outside its"):
        verify(m)


def test_a_shared_buffer_the_kernel_does_not_list_is_caught():
    m = _kernel()
    m.kernels[0].shared.pop()
    with pytest.raises(VerifyError, match="not declared here"):
        verify(m)
