"""docs/tilelang.md's table of TileLang's T.* constructs agrees with the compiler: a name the table calls supported is
one the parser knows, a name it calls refused is refused with the documented alternative (at the call's line); the
cheap constructs added for it (T.parallel, T.shift_left, T.get_block_binding, T.assume) run in the interpreter."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel
from tilec.ir import dtypes as D
from tilec.parser.build_common import BUILTINS, LOOP_FUNCS, TILELANG_UNSUPPORTED, unsupported_builtin

DOC = Path(__file__).resolve().parent.parent / "docs" / "tilelang.md"
# refused by the language itself rather than as a call (a decorator, a loop kind, a dtype hint, a reserved word, a
# form tilec supports only in place), with the reason the table gives
REFUSED_OTHERWISE = {"Persistent", "float4_e2m1_unpacked", "ptr", "Layout", "Fragment", "dp4a"}
PARAM_SPELLINGS = {"Tensor", "Buffer", "GemmWarpPolicy"}


def _rows() -> list[tuple[list[str], str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        if line.startswith("| `T."):
            cells = line.strip("|").split(" | ")
            rows.append((re.findall(r"`T\.([A-Za-z_0-9]+)`", cells[0]), cells[2].strip()))
    return rows


def test_the_table_covers_each_name_once():
    names = [n for ns, _ in _rows() for n in ns]
    assert len(names) == len(set(names)) == 155


@pytest.mark.parametrize("names,verdict", _rows(), ids=lambda v: v[0] if isinstance(v, list) else None)
def test_each_row_agrees_with_the_compiler(names, verdict):
    for n in names:
        if verdict.startswith("supported"):
            known = n in BUILTINS or n in LOOP_FUNCS or n in PARAM_SPELLINGS or n in ("max", "min")
            if not known:
                D.lookup(n)  # a dtype spelling
        elif verdict.startswith("refused"):
            if n not in REFUSED_OTHERWISE:
                assert unsupported_builtin(n) is not None, f"T.{n}: the table says refused, the compiler has no reason"
        else:
            assert verdict.startswith("spelled"), verdict


@pytest.mark.parametrize("name", ["sync_grid", "rng_rand", "mbarrier_arrive", "atomic_load", "alloc_tmem"])
def test_a_refused_call_is_located_with_its_alternative(tmp_path, name):
    p = tmp_path / "k.tile"
    p.write_text(f"kernel k(A: f32[N], B: out f32[N]):\n    with T.Kernel(1, threads=128) as bx:\n"
                 f"        T.{name}()\n        B[0] = A[0]\n")
    with pytest.raises(CompileError) as e:
        tilec.compile(p)
    d = e.value.diagnostics[0]
    assert (d.span.line, d.span.col) == (3, 9)
    assert d.message == f"TileLang's T.{name} is not supported: {TILELANG_UNSUPPORTED[name]}"


def test_cheap_constructs_run_in_the_interpreter(tmp_path):
    p = tmp_path / "k.tile"
    p.write_text("""
kernel k(A: i32[N], B: out i32[G, N]):
    with T.Kernel(G, threads=128) as bx:
        T.assume(N > 0)
        b = T.get_block_binding(0)
        for k in T.serial(T.ceildiv(N, 128)):
            for i in T.parallel(128):
                if k * 128 + i < N:
                    B[b, k * 128 + i] = T.shift_left(A[k * 128 + i], b) + T.shift_right(A[k * 128 + i], 1)
""")
    n, g = 300, 3
    a = np.random.default_rng().integers(0, 1000, n).astype(np.int32)
    args = {"A": a, "B": np.zeros((g, n), np.int32)}
    run_kernel(tilec.compile(p, verify=True).module.kernels[0], args)
    np.testing.assert_array_equal(args["B"], (a[None, :] << np.arange(g)[:, None]) + (a >> 1)[None, :])
    for target in ("sm80", "gfx942", "webgpu"):
        tilec.compile(p, target=target)
