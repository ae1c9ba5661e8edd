"""The TileLang ports in examples/tilelang/ compiled for every target in scripts/tilelang_ports.py's table (generated
source, or the located error the table documents). Apart from tests/test_examples_tilelang.py (the interpreter
runs) so that the two halves run on the two pytest-xdist workers side by side (--dist loadfile gives a file to one
worker)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from tilelang_ports import CASES, EXPECTED_TARGETS, TARGETS  # noqa: E402


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_port_compiles_where_the_table_says(case):
    """Every target either generates source or fails with the error the docs table records."""
    for target in TARGETS:
        want = EXPECTED_TARGETS.get((case.name, target))
        try:
            tilec.compile(ROOT / "examples" / "tilelang" / case.file, target=target,
                          defines=case.defines_for(target), kernel=case.kernel, limits=case.limits_for(target))
        except tilec.diagnostics.CompileError as e:
            msg = " ".join(d.message for d in e.diagnostics)
            assert want is not None and want in msg, f"{case.name} on {target}: {msg}"
            continue
        assert want is None, f"{case.name} on {target} now compiles: update EXPECTED_TARGETS ({want})"
