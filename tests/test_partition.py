"""Interior/boundary partitioning and index simplification with TVM's analyzer (partition-boundaries,
simplify-indices, tilec/ir/arith.py).

The lowered code runs in the SIMT interpreter at ragged shapes, where one launch has interior tiles (the
unguarded fast path) and edge tiles (the guarded path), against numpy. Mutation tests show that both paths
really run at those shapes: emptying either side of the branch breaks the result. The arithmetic is checked
against Python's floor division on random values, negative ones included.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.interp import random_inputs
from tilec.ir import dtypes as D
from tilec.ir import simt as S
from tilec.ir import tile as T
from tilec.ir.fold import fold
from tilec.ir.visit import rewrite_expr, sub_exprs
from tilec.options import CompileOptions
from tilec.simt.interp import run_simt

pytest.importorskip("tvm")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
OFF = {"partition", "simplify_indices"}
G64 = {"block_M": 64, "block_N": 64}
GEMM_RAGGED = {"M": 70, "N": 100, "K": 75}  # interior and edge tiles, a ragged K step
ATTN = {"causal": True}
ATTN_RAGGED = {"B": 1, "S": 150, "H": 1}  # 3 query blocks: interior KV tiles, diagonal ones, a ragged tail


def _compile(sample: str, defines: dict, target: str = "sm80", disable=()):
    """Both passes on (simplify-indices is opt-in: CompileOptions.simplify_indices) unless `disable` names them."""
    return tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, options=CompileOptions(simplify_indices=True),
                         defines=defines, disable=set(disable), verify=True)


def _run(result, sizes: dict, seed: int = 0) -> tuple[dict, dict]:
    tk = result.module.kernels[0]
    sizes = {n: v for n, v in sizes.items() if n in {s.name for s in tk.size_vars}}
    args = random_inputs(tk, sizes, seed)
    for p in tk.params:
        if isinstance(p, T.Buffer) and p.is_output:
            args[p.name][...] = np.nan
    inputs = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_simt(result.simt.kernels[0], args, sizes, warp_size=result.target.warp_size)
    return inputs, args


def _gemm_matches_numpy(result, sizes) -> None:
    inputs, out = _run(result, sizes)
    want = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
    np.testing.assert_allclose(out["C"].astype(np.float64), want, rtol=4e-3, atol=4e-3)


def _attention_matches_numpy(result, sizes, dim: int = 64) -> None:
    inputs, out = _run(result, sizes)
    q, k, v = (inputs[n].astype(np.float64).transpose(0, 2, 1, 3) for n in "QKV")  # B, H, S, D
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dim)
    n = s.shape[-1]
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = ((p / p.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out["O"].astype(np.float64), want, rtol=1e-2, atol=1e-2)


def _fast_paths(body) -> list[S.SIf]:
    found = []
    for s in body:
        if isinstance(s, S.SIf):
            if s.then_body and isinstance(s.then_body[0], S.SComment) and "interior" in s.then_body[0].text:
                found.append(s)
            found += _fast_paths(s.then_body) + _fast_paths(s.else_body)
        elif isinstance(s, S.SFor):
            found += _fast_paths(s.body)
    return found


@pytest.mark.parametrize("target", ["sm80", "gfx90a"])
def test_ragged_gemm_is_right_on_both_paths(target):
    result = _compile("gemm", G64, target)
    assert _fast_paths(result.simt.kernels[0].body), "no interior fast path was generated"
    _gemm_matches_numpy(result, GEMM_RAGGED)


def test_ragged_causal_attention_is_right_on_both_paths():
    result = _compile("flash_attention", ATTN)
    fast = _fast_paths(result.simt.kernels[0].body)
    source = result.source
    assert "TL_INF" in source and len(fast) >= 3
    _attention_matches_numpy(result, ATTN_RAGGED)


def _mutated(monkeypatch, side: str):
    """Compile with the fast path ('then') or the guarded path ('else') of every partition emptied."""
    from tilec.passes import partition_boundaries as P

    orig = P._branch

    def broken(loop, cond, fast):
        s = orig(loop, cond, fast)
        if side == "then":
            s.then_body = s.then_body[:1]  # the marker comment only
        else:
            s.else_body = []
        return s

    monkeypatch.setattr(P, "_branch", broken)


@pytest.mark.parametrize("side", ["then", "else"])
def test_both_paths_run_at_the_ragged_gemm_shape(monkeypatch, side):
    _mutated(monkeypatch, side)
    with pytest.raises(AssertionError):
        _gemm_matches_numpy(_compile("gemm", G64), GEMM_RAGGED)


@pytest.mark.parametrize("side", ["then", "else"])
def test_both_paths_run_at_the_ragged_attention_shape(monkeypatch, side):
    _mutated(monkeypatch, side)
    with pytest.raises(AssertionError):
        _attention_matches_numpy(_compile("flash_attention", ATTN), ATTN_RAGGED)


def test_the_causal_mask_is_skipped_on_interior_kv_tiles():
    """Only the diagonal block and the ragged tail select -inf; interior KV tiles store the zeros alone."""
    text = _compile("flash_attention", ATTN).source
    assert "if (k * 64 + 63 <= bx * 64 && k * 64 + 63 < S) {" in text


def test_index_terms_are_simplified():
    before = _compile("gemm", {"dtype": "bf16"}, disable=OFF).source
    after = _compile("gemm", {"dtype": "bf16"}, disable={"partition"}).source
    for stale in ("(int(threadIdx.x) / 32) / 2)", "% 4) % 2)", "(r_2 / 32) * 16"):
        assert stale in before
    assert "(int(threadIdx.x) / 32) / 2)" not in after and "% 4) % 2)" not in after
    assert len(after.split("__global__")[1]) < len(before.split("__global__")[1])


def test_switched_off_each_pass_leaves_the_old_code():
    base = _compile("gemm", G64, disable=OFF).source
    assert _compile("gemm", G64, disable={"partition"}).source != base
    assert _compile("gemm", G64, disable={"simplify_indices"}).source != base


def test_without_tvm_the_passes_are_skipped():
    probe = ("import sys\n"
             "sys.modules['tvm'] = None\n"
             "import tilec\n"
             f"a = tilec.compile({str(SAMPLES / 'gemm.tile')!r}, target='sm80', defines={G64!r}).source\n"
             f"b = tilec.compile({str(SAMPLES / 'gemm.tile')!r}, target='sm80', defines={G64!r}, "
             f"disable={OFF!r}).source\n"
             "print(a == b, 'tvm' in sys.modules and sys.modules['tvm'] is not None)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.strip() == "True False", proc.stdout + proc.stderr


# ---------------------------------------------------------------- the arithmetic against Python's floor semantics


def _random_expr(rng: random.Random, leaves: list[T.Expr], depth: int) -> T.Expr:
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.3:
            return T.Const(D.I32, None, rng.randint(-9, 40))
        return rng.choice(leaves)
    op = rng.choice(["+", "-", "*", "//", "%", "//", "%"])
    a = _random_expr(rng, leaves, depth - 1)
    if op in ("//", "%"):
        b: T.Expr = T.Const(D.I32, None, rng.choice([1, 2, 3, 4, 8, 16, 32]))
    elif op == "*":
        b = T.Const(D.I32, None, rng.randint(-4, 9))
    else:
        b = _random_expr(rng, leaves, depth - 1)
    return T.Binary(D.I32, None, op, a, b)


def _value(e: T.Expr, env: dict[T.Expr, int]) -> int:
    out = fold(rewrite_expr(e, lambda x: T.Const(D.I32, None, env[x]) if x in env else None))
    assert isinstance(out, T.Const), out
    return int(out.value)


def test_simplification_keeps_floor_semantics_on_negative_values():
    from tilec.ir.arith import Arith

    rng = random.Random(7)
    ar = Arith()
    tid, n = S.ThreadIdx(D.I32, None), T.Var(D.I32, None, "x", "param")  # x: any sign
    r = T.Var(D.I32, None, "r", "loop")
    ar.bound_thread(128)
    ar.bound_var(r, 0, 3)
    leaves = [tid, n, r]
    changed = 0
    for _ in range(300):
        e = _random_expr(rng, leaves, 4)
        s = ar.simplify(e)
        if s is None:
            continue
        changed += s is not e
        for _ in range(12):
            env = {n: rng.randint(-1000, 1000), r: rng.randint(0, 3)}
            t = rng.randint(0, 127)
            env_e = {**env, **{x: t for x in _thread_nodes(e)}}
            env_s = {**env, **{x: t for x in _thread_nodes(s)}}
            assert _value(e, env_e) == _value(s, env_s)
    assert changed > 100


def _thread_nodes(e: T.Expr) -> list[T.Expr]:
    from tilec.ir.visit import sub_exprs

    return [x for x in sub_exprs(e) if isinstance(x, S.ThreadIdx)]


def test_bounds_and_equality_use_the_facts():
    from tilec.ir.arith import Arith

    ar = Arith()
    ar.bound_thread(128)
    by, x = T.Var(D.I32, None, "by", "local"), T.Var(D.I32, None, "x", "param")
    tid = S.ThreadIdx(D.I32, None)

    def b(op, a, c):
        return T.Binary(D.I32, None, op, a, c if isinstance(c, T.Expr) else T.Const(D.I32, None, c))

    assert ar.bounds(b("//", tid, 2)) == (0, 63)
    assert ar.bounds(b("+", b("*", by, 128), b("//", tid, 2))) == (None, None)
    assert ar.equal(b("//", b("//", tid, 32), 2), b("//", tid, 64))
    assert ar.equal(b("//", b("+", x, 8), 8), b("+", b("//", x, 8), 1))  # floor division: true for x < 0 too
    assert not ar.equal(b("//", b("*", x, 3), 3), b("+", x, 1))
    assert not ar.equal(b("%", tid, 64), tid)  # tid reaches 127


def test_tvm_is_imported_without_torch_and_ml_dtypes_which_still_import_afterwards():
    probe = ("import sys\n"
             "from tilec.ir.arith import Arith\n"
             "Arith()\n"
             "print('tvm' in sys.modules, 'ml_dtypes' in sys.modules, 'torch' in sys.modules)\n"
             "import ml_dtypes\n"
             "print(ml_dtypes.bfloat16.__name__)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.split() == ["True", "False", "False", "bfloat16"], proc.stdout + proc.stderr


def test_tvm_sees_ml_dtypes_when_it_was_loaded_first():
    probe = ("import sys, ml_dtypes\n"
             "from tilec.ir.arith import Arith\n"
             "Arith()\n"
             "import numpy as np\n"
             "from tvm_ffi._dtype import dtype\n"
             "print(np.dtype(ml_dtypes.bfloat16) in dtype._NUMPY_DTYPE_TO_STR)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.strip() == "True", proc.stdout + proc.stderr


# ---------------------------------------------------------------- LazyArith: TVM's answers without TVM


def _lazy_expr(rng: random.Random, leaves: list[T.Expr], depth: int) -> T.Expr:
    """Index expressions of every form LazyArith models (and atoms: casts, xor, division by a variable)."""
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.25:
            return T.Const(D.I32, None, rng.randint(-9, 300))
        return rng.choice(leaves)
    kind = rng.random()
    a = _lazy_expr(rng, leaves, depth - 1)
    if kind < 0.1:
        return T.Call(D.I32, None, rng.choice(["min", "max"]), [a, _lazy_expr(rng, leaves, depth - 1)])
    if kind < 0.15:
        return T.Binary(D.I32, None, "^", a, T.Const(D.I32, None, rng.randint(0, 7)))
    if kind < 0.2:
        return T.Binary(D.I32, None, rng.choice(["//", "%"]), a, rng.choice(leaves))  # an atom
    op = rng.choice(["+", "-", "*", "*", "//", "%", "//", "%"])
    if op in ("//", "%"):
        b: T.Expr = T.Const(D.I32, None, rng.choice([1, 2, 3, 4, 6, 8, 16, 32, 128]))
    elif op == "*":
        b = T.Const(D.I32, None, rng.randint(-4, 64)) if rng.random() < 0.8 else _lazy_expr(rng, leaves, 0)
    else:
        b = _lazy_expr(rng, leaves, depth - 1)
    return T.Binary(D.I32, None, op, *((b, a) if op == "*" and rng.random() < 0.3 else (a, b)))


def _facts(ar, leaves_bounds, grid) -> None:
    ar.bound_thread(256)
    for axis, g in enumerate(grid):
        ar.bound_block(axis, g)
    for v, b in leaves_bounds:
        if b is not None:
            ar.bound_var(v, *b)


def test_lazy_arith_answers_as_tvm_does():
    from tilec.ir.arith import Arith, LazyArith

    rng = random.Random(11)
    m = T.Var(D.I32, None, "M", "size")
    vs = [(T.Var(D.I32, None, "k", "loop"), (0, 15)), (T.Var(D.I32, None, "i", "loop"), (2, 130)),
          (T.Var(D.I32, None, "x", "param"), None), (T.Var(D.I32, None, "d", "local"), (-40, 7)),
          (T.Var(D.I32, None, "u", "local"), (0, None)), (m, None)]
    grid = [T.Call(D.I32, None, "ceildiv", [m, T.Const(D.I32, None, 128)]), T.Const(D.I32, None, 4)]
    leaves = [v for v, _ in vs] + [S.ThreadIdx(D.I32, None), S.BlockIdx(D.I32, None, 0),
                                   S.BlockIdx(D.I32, None, 1), T.Cast(D.I32, None, T.Var(D.I16, None, "h", "local"))]
    tvm_ar, lazy = Arith(), LazyArith()
    for ar in (tvm_ar, lazy):
        _facts(ar, vs, grid)
    with tvm_ar.kernel_scope(), lazy.kernel_scope():
        for _ in range(400):
            e = _lazy_expr(rng, leaves, 4)
            assert lazy.bounds(e) == tvm_ar.bounds(e), e
            same = T.Binary(D.I32, None, "-", T.Binary(D.I32, None, "+", e, T.Const(D.I32, None, 3)),
                            T.Const(D.I32, None, 3))
            assert lazy.equal(e, same) and tvm_ar.equal(e, same)
        assert lazy.fallbacks == 0
        # what it cannot see as equal goes to TVM, which then has every fact: its answers stay TVM's
        x = vs[2][0]
        by4 = T.Binary(D.I32, None, "//", T.Binary(D.I32, None, "*", x, T.Const(D.I32, None, 4)),
                       T.Const(D.I32, None, 4))
        assert lazy.equal(by4, x) and tvm_ar.equal(by4, x) and lazy.fallbacks == 1
        for _ in range(100):
            e = _lazy_expr(rng, leaves, 4)
            assert lazy.bounds(e) == tvm_ar.bounds(e), e
            f = _lazy_expr(rng, leaves, 2)
            assert lazy.equal(e, f) == tvm_ar.equal(e, f)


def test_lazy_arith_hands_tvm_the_facts_it_has_so_far():
    from tilec.ir.arith import Arith, LazyArith

    rng = random.Random(5)
    k, i = T.Var(D.I32, None, "k", "loop"), T.Var(D.I32, None, "i", "loop")
    leaves = [k, i, S.ThreadIdx(D.I32, None), T.Binary(D.I32, None, "^", i, T.Const(D.I32, None, 3))]
    exprs = [_lazy_expr(rng, leaves, 3) for _ in range(60)]
    tvm_ar, lazy = Arith(), LazyArith()
    for ar in (tvm_ar, lazy):
        ar.bound_thread(128)
        ar.bound_var(k, 0, 7)
    for e in exprs[:30]:  # atoms made now keep the bounds they have now
        assert lazy.bounds(e) == tvm_ar.bounds(e)
    for ar in (tvm_ar, lazy):
        ar.bound_var(i, 0, 63)
    flag = T.Var(D.BOOL, None, "p", "local")
    assert lazy.bounds(flag) == tvm_ar.bounds(flag) and lazy.fallbacks == 1  # a boolean: TVM's question
    for e in exprs:
        assert lazy.bounds(e) == tvm_ar.bounds(e), e


def test_partitioning_needs_no_tvm_and_gives_tvms_code(monkeypatch):
    from tilec.ir import arith

    probe = ("import sys, tilec\n"
             f"for s, t in [('gemm', 'sm90'), ('flash_attention', 'sm90'), ('layernorm', 'sm80')]:\n"
             f"    tilec.compile({str(SAMPLES)!r} + '/' + s + '.tile', target=t)\n"
             "print('tvm' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr
    cases = [("gemm", "sm90", None), ("flash_attention", "sm90", ATTN), ("layernorm", "sm80", None),
             ("gemm", "sm80", G64)]
    lazy = [tilec.compile(SAMPLES / f"{s}.tile", target=t, defines=d).source for s, t, d in cases]
    # every question to TVM, as before LazyArith
    monkeypatch.setattr(arith.LazyArith, "bounds", lambda self, e: self._arith().bounds(e))
    monkeypatch.setattr(arith.LazyArith, "equal", lambda self, a, b: self._arith().equal(a, b))
    assert lazy == [tilec.compile(SAMPLES / f"{s}.tile", target=t, defines=d).source for s, t, d in cases]


@pytest.mark.parametrize("causal", [False, True])
def test_warp_specialized_attention_skips_the_mask_on_interior_kv_tiles(causal):
    """On sm90 the KV loop holds barriers and mbarrier waits; the mask loop inside it is split per KV step. A guard
    with no block-uniform variable (the ping-pong's `tid / 128 < 1`) gives no branch: its condition would be a
    constant, and the loop around it (the whole KV loop) would keep its masks on both sides."""
    defines = {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256, "dtype": "bf16", "causal": causal}
    result = tilec.compile(str(SAMPLES / "flash_attention.tile"), target="sm90", defines=defines, verify=True)
    main = result.simt.kernels[0]
    assert main.name == "flash_attention" and main.attrs.get("warp_specialized", True)
    for branch in _fast_paths(main.body):
        assert any(isinstance(x, T.Var | S.BlockIdx) for x in sub_exprs(branch.cond)), \
            f"a fast path under a constant condition: {branch.cond}"
    source = result.source[:result.source.index("flash_attention__no_tma(")]  # the warp-specialized kernel
    # (causal: `bx` is the query block, the launch's blocks taken in reverse so that the longest start first)
    want = "k * 128 + 127 <= bx * 128 && k * 128 + 127 < S" if causal else "k * 128 + 127 < S"
    assert f"if ({want}) {{" in source
    assert ("int bx = (tl::ceildiv(S, 128) - 1) - int(blockIdx.x);" in source) == causal
