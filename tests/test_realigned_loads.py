"""The realigned-loads twin (docs/hopper.md, "The realigned-loads twin"): K-major operand tiles of a misaligned K
loaded through 16 residue-class tensor maps, the accumulator's rows and columns in residue order. Without a GPU: the
twin lane by lane in the SIMT interpreter against the Tile IR interpreter at odd K (each residue class's rows start
at another phase of their 16 bytes), which kernels get one, the layout's order, the host's map arithmetic."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import tilec
from tilec.ir import simt as S
from tilec.ir.fold import fold
from tilec.ir.layout import WgmmaTiled, c, residue_order
from tilec.manifest import ManifestError, residue_map_geometry, tensor_map_specs
from tilec.runtime.tensor_maps import NoTma, tensor_map_args

ROOT = Path(__file__).resolve().parent.parent


def _twin(result):
    main = result.simt.kernels[0]
    by_name = {sk.name: sk for sk in result.simt.kernels}
    return main, by_name[main.attrs["realigned_loads"]]


def _realigned(twin) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for m in twin.attrs["tensor_maps"]:
        if m.get("residue") is not None:
            out.setdefault(m["tensor"], []).append(m["residue"])
    return out


@pytest.mark.parametrize("sample,defines,sizes,realigned", [
    ("fp8_gemm", {}, {"M": 130, "N": 131, "K": 161}, {"A", "B"}),
    ("fp8_gemm", {}, {"M": 3, "N": 40, "K": 161}, {"A", "B"}),  # a decode step: classes 3..15 of A have no rows
    ("fp8_gemm", {"block_N": 128, "block_K": 128, "threads": 256, "num_stages": 6, "split_k": 3},
     {"M": 200, "N": 72, "K": 1411}, {"A", "B"}),  # split-K: the planes of the first launch
    ("gemm", {"trans_B": True, "dtype": "bf16"}, {"M": 200, "N": 137, "K": 75}, {"A", "B"}),
    ("gemm", {}, {"M": 200, "N": 136, "K": 75}, {"A"}),  # NN: B's rows are N long (a plain map)
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3, "trans_B": True, "dtype": "bf16"},
     {"M": 300, "N": 264, "K": 137}, {"A", "B"}),  # two consumer warpgroups, 16 rows of B a class
], ids=["fp8", "fp8-decode", "fp8-split-k", "trans_B", "nn", "trans_B-128x256"])
def test_realigned_twin_matches_the_tile_interpreter_at_an_odd_k(sample, defines, sizes, realigned):
    from test_simt_interp import check

    r = tilec.compile(ROOT / "samples" / f"{sample}.tile", target="sm90", defines=defines)
    main, twin = _twin(r)
    assert twin.name == main.name + "__realigned" and twin.attrs["fallback"] == main.name + "__no_tma"
    assert {t: sorted(cls) for t, cls in _realigned(twin).items()} == {t: list(range(16)) for t in realigned}
    calls = [st.op for st in S.walk_simt(twin.body) if isinstance(st, S.SCall)]
    assert "tma_store" not in calls and calls.count("tma_load") >= 16 * len(realigned)
    check(sample, defines, sizes, "sm90", result=SimpleNamespace(simt=SimpleNamespace(kernels=[twin])))


def test_the_twin_is_checked_by_its_order(monkeypatch):
    """A planted bug: an accumulator layout that forgets the residue order gives wrong rows and columns."""
    from test_simt_interp import check

    import tilec.ir.layout as layout

    monkeypatch.setattr(layout, "residue_order", lambda x, extent: x)
    r = tilec.compile(ROOT / "samples" / "fp8_gemm.tile", target="sm90")
    with pytest.raises(AssertionError, match="C differs"):
        check("fp8_gemm", {}, {"M": 130, "N": 131, "K": 161}, "sm90",
              result=SimpleNamespace(simt=SimpleNamespace(kernels=[_twin(r)[1]])))


@pytest.mark.parametrize("sample,defines", [
    ("flash_attention", {}),  # its accumulators feed row statistics and a second gemm: rows must stay in place
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4, "persistent": True, "trans_B": True}),
], ids=["attention", "persistent"])
def test_no_realigned_twin(sample, defines):
    r = tilec.compile(ROOT / "samples" / f"{sample}.tile", target="sm90", defines=defines)
    assert not any(sk.name.endswith("__realigned") or "realigned_loads" in sk.attrs for sk in r.simt.kernels)


@pytest.mark.parametrize("extent", [16, 64, 128, 256])
def test_residue_order_is_a_permutation_by_class(extent):
    per = extent // 16
    held = [int(fold(residue_order(c(x), extent)).value) for x in range(extent)]
    assert sorted(held) == list(range(extent))
    assert all(held[cls * per + i] == cls + 16 * i for cls in range(16) for i in range(per))


def test_stmatrix_rows_follow_the_residue_order():
    """stmatrix takes a row address a lane: rows by residue class keep it (columns by class do not)."""
    lay = WgmmaTiled(128, 64, 2, 1, rows_by_residue=True)
    plain = WgmmaTiled(128, 64, 2, 1)
    for t in (0, 37, 130, 255):
        i, j = (int(fold(x).value) for x in lay.stmatrix_row(c(t), 1, 2, 4))
        pi, pj = (int(fold(x).value) for x in plain.stmatrix_row(c(t), 1, 2, 4))
        assert (i, j) == (int(fold(residue_order(c(pi), 128)).value), pj)
    assert str(lay) == "wgmma_m64n64[128x64, warpgroups 2x1, rows by residue]"


def _spec(shape=("M", "K"), residue=3, dtype="f8e4m3", box=(8, 128)):
    entry = {"name": "k", "params": [{"name": "A", "kind": "tensor", "dtype": dtype, "shape": list(shape)}],
             "tensor_maps": [{"tensor": "A", "box": list(box), "swizzle": 128, "residue": residue}]}
    return tensor_map_specs(entry)[0]


@pytest.mark.parametrize("rows,cols,ptr", [(300, 4097, 0x7f0000), (300, 4097, 0x7f0003), (3, 161, 0x1000),
                                           (4096, 4096, 0x2000)])
def test_residue_map_arguments(rows, cols, ptr):
    """Each class's map starts at its first row rounded down to 16 bytes, spans the row plus that phase, steps 16
    rows; a class with no rows reads class 0's; every element a map addresses lies inside the tensor."""
    for cls in range(16):
        args = tensor_map_args(_spec(residue=cls), None, (rows, cols), ptr)
        first = cls if cls < rows else 0
        start = ptr + first * cols
        assert (ptr + args.offset) % 16 == 0 and ptr + args.offset == start - start % 16
        assert args.dims == (cols + start % 16, -(-(rows - first) // 16)) and args.strides == (16 * cols,)
        assert args.box == (128, 8) and args.rank == 2
        phase = start % 16
        last_row_end = ptr + args.offset + (args.dims[1] - 1) * args.strides[0] + args.dims[0]
        assert last_row_end <= ptr + rows * cols  # the last element addressed is inside the tensor
        assert residue_map_geometry(rows, cols, 1, cls, ptr).phase == phase


def test_residue_maps_need_element_aligned_addresses():
    assert isinstance(tensor_map_args(_spec(dtype="f16", box=(8, 64)), None, (64, 75), 0x1001), NoTma)
    assert not isinstance(tensor_map_args(_spec(dtype="f16", box=(8, 64)), None, (64, 75), 0x1002), NoTma)


@pytest.mark.parametrize("residue,shape", [(16, ("M", "K")), (-1, ("M", "K")), (2, ("B", "M", "K"))])
def test_manifest_refuses_a_malformed_residue(residue, shape):
    with pytest.raises(ManifestError, match="residue"):
        _spec(shape=shape, residue=residue, box=(8,) * (len(shape) - 1) + (128,))
