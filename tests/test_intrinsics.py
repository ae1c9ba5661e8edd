"""Typed intrinsics (tilec/ir/intrinsics.py): one definition each, typed parameters checked, printed names
round-trip, every dialect's spelling table complete for what its targets may receive, and the SIMT verifier
refusing a call the target does not offer."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.ir import dtypes as D
from tilec.ir import intrinsics as I
from tilec.ir import simt as S
from tilec.ir import tile as T
from tilec.ir.simt_verify import VerifyError, verify
from tilec.targets.registry import check_spellings, lookup

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("op, params", [
    ("load_vec", {"n": 8}), ("store_vec", {"n": 4}), ("atomic", {"kind": "max"}),
    ("print", {"fmt": "[block (%d, %d, %d)] a: %.5g"}), ("prof_mark", {"phase": 3, "end": True}),
    ("prof_mark", {"phase": 12, "end": False}),
    ("ldmatrix", {"count": 4, "trans": True}), ("ldmatrix", {"count": 2, "trans": False}), ("mma", {"dtype": "bf16"}),
    ("mfma", {"dtype": "f16"}), ("mfma", {"dtype": "bf16"}), ("tma_load", {"rank": 3}),
    ("wgmma", {"operands": "rs", "n": 64, "dtype": "f8e4m3", "b_k_major": 1, "zero_d": False}),
    ("wgmma", {"operands": "ss", "n": 128, "dtype": "bf16", "b_k_major": 0, "zero_d": True}), ("cp_async_wait", {}),
])
def test_printed_names_round_trip(op, params):
    s = S.call(None, op, [], **params)
    assert (s.op, s.params) == (op, params)
    assert I.parse(s.name) == (op, params)
    again = S.SCall(None, s.name, [])  # built by name (as a test does): the same typed intrinsic
    assert (again.op, again.params) == (op, params)


def test_parameters_are_typed():
    with pytest.raises(TypeError, match="parameter n must be int"):
        S.call(None, "load_vec", [], n="8")
    with pytest.raises(TypeError, match="takes parameters"):
        S.call(None, "mma", [])
    with pytest.raises(TypeError, match="is an expression"):
        S.call(None, "shfl_xor", [])
    with pytest.raises(KeyError):
        S.SCall(None, "no_such_intrinsic", [])


@pytest.mark.parametrize("module, backend", [("tilec.targets.cuda.codegen", "cuda"),
                                             ("tilec.targets.hip.codegen", "hip"),
                                             ("tilec.targets.wgsl.codegen", "wgsl")])
def test_each_dialect_spells_every_intrinsic_its_targets_may_receive(module, backend):
    import importlib

    m = importlib.import_module(module)
    table = {*m._CALLS, *getattr(m, "_VALUES", {})}
    check_spellings(backend, table, backend)  # complete (also checked when the module was loaded)
    for op in sorted(table):
        if op in I.DEFS:
            with pytest.raises(ImportError, match=f"no spelling for intrinsic.*{op}"):
                check_spellings(backend, table - {op}, backend)
            break


def test_the_verifier_refuses_an_intrinsic_the_target_does_not_offer():
    r = tilec.compile(ROOT / "samples" / "gemm.tile", target="sm80")
    verify(r.simt, r.target)
    k = r.simt.kernels[0]
    k.body.insert(0, S.call(None, "wgmma_fence", []))
    with pytest.raises(VerifyError, match="needs 'wgmma.m64nNk16', which sm80 does not offer"):
        verify(r.simt, r.target)
    k.body[0] = S.SCall(None, "cp_async_commit", [])
    verify(r.simt, lookup("sm80"))
    with pytest.raises(VerifyError, match="which gfx942 does not offer"):
        verify(r.simt, lookup("gfx942"))
    k.body[0] = S.SCall(None, "copy16", [S.AddrOf(D.I64, None, k.params[0], T.Const(D.I32, None, 0))] * 2)
    verify(r.simt, r.target)
