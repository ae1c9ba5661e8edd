"""`tilec layout`: the plotted cells agree with the vendors' fragment definitions, written out here independently
of tilec's layout code; shared tiles show the swizzle formula's addresses; a known conflicting access pattern is
reported and highlighted."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tilec.cli.main import main
from tilec.inspect.layout import kernel_views
from tilec.inspect.svg import render
from tilec.options import CompileOptions

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"
SVG = "{http://www.w3.org/2000/svg}"


def _cells(svg_text: str) -> dict[str, dict[tuple[int, int], tuple[str, ...]]]:
    """{view title: {(row, col): text lines}} of an SVG written by tilec layout (it must parse as XML)."""
    root = ET.fromstring(svg_text)
    out = {}
    for view in root.iter(f"{SVG}g"):
        title = view.find(f"{SVG}text")
        if view.get("transform") is None or title is None:
            continue
        cells = {}
        for g in view.iter(f"{SVG}g"):
            if g.get("data-row") is not None:
                text = g.find(f"{SVG}text")
                cells[(int(g.get("data-row")), int(g.get("data-col")))] = tuple(t.text for t in text)
        out[title.text] = cells
    return out


def _layout_svg(tmp_path, target: str, *extra: str, file: Path = GEMM) -> str:
    out = tmp_path / f"{target}.svg"
    assert main(["layout", str(file), "--target", target, "-o", str(out), "--full", *extra]) == 0  # every element
    return out.read_text()


def _view(cells, prefix: str):
    (found,) = [c for title, c in cells.items() if title.startswith(prefix)]
    return found


SAMPLE_POINTS = [(0, 0), (1, 3), (9, 6), (17, 13), (63, 130), (64, 7), (100, 201), (127, 255), (77, 98)]


def test_sm90_wgmma_accumulator_matches_ptx(tmp_path):
    # PTX ISA, wgmma .m64nNk16 D fragment (.f32): thread (within the warpgroup) 32*w + lane holds d_i at
    # row 16*w + lane/4 + 8*((i/2)%2), column 8*(i/4) + 2*(lane%4) + i%2. gemm.tile on sm90: 128x256 on two
    # consumer warpgroups stacked along M (warpgroup g owns rows 64g..64g+63), one m64n256 instruction each.
    cells = _view(_cells(_layout_svg(tmp_path, "sm90")), "fragment C_local")
    for r, c in SAMPLE_POINTS:
        group, rr = divmod(r, 64)
        warp, lane = rr // 16, 4 * (rr % 8) + (c % 8) // 2
        i = 4 * (c // 8) + 2 * ((rr % 16) // 8) + c % 2
        assert cells[(r, c)] == (f"T{128 * group + 32 * warp + lane}", f"r{i}"), (r, c)
    assert len(cells) == 128 * 256


def test_gfx942_mfma_accumulator_matches_cdna(tmp_path):
    # CDNA3 v_mfma_f32_16x16x16f16 C/D: lane l holds column l%16, rows 4*(l/16) + i in its register i.
    # gemm.tile on gfx942: 128x128 over 2 waves stacked along M, each 64x128 as 4x8 atoms; k = (mi*8 + ni)*4 + i.
    svg = _layout_svg(tmp_path, "gfx942")
    cells = _view(_cells(svg), "fragment C_local")
    for r, c in [(0, 0), (5, 17), (63, 127), (64, 0), (99, 45), (127, 127)]:
        wave, rr = divmod(r, 64)
        mi, ni = rr // 16, c // 16
        lane = 16 * ((rr % 16) // 4) + c % 16
        assert cells[(r, c)] == (f"T{64 * wave + lane}", f"r{(mi * 8 + ni) * 4 + rr % 4}"), (r, c)
    atom = _view(_cells(svg), "v_mfma_f32_16x16x16 A")
    # A: lane l holds row l%16, columns 4*(l/16) + i (four 16-bit values in two registers)
    for lane, i in [(0, 0), (17, 2), (63, 3)]:
        assert atom[(lane % 16, 4 * (lane // 16) + i)] == (f"T{lane}", f"r{i // 2}.{i % 2}")


def test_sm80_mma_accumulator_and_swizzle(tmp_path):
    svg = _layout_svg(tmp_path, "sm80")
    views = _cells(svg)
    cells = _view(views, "fragment C_local")
    # PTX ISA mma.m16n8k16 C (.f32): lane = 4*(row%8) + (col%8)//2 holds c_i, i = 2*((row%16)//8) + col%2.
    # gemm.tile on sm80: 128x128 on 4 warps 2x2 (warp = warp_m + 2*warp_n), each 64x64 as 4x8 atoms.
    for r, c in [(0, 0), (9, 6), (17, 13), (63, 127), (64, 7), (100, 101), (127, 127)]:
        warp = r // 64 + 2 * (c // 64)
        mi, ni = (r % 64) // 16, (c % 64) // 8
        i = 2 * ((r % 16) // 8) + c % 2
        assert cells[(r, c)] == (f"T{32 * warp + 4 * (r % 8) + (c % 8) // 2}", f"r{(mi * 8 + ni) * 4 + i}")
    atom = _view(views, "mma.sync.m16n8k16 C")
    assert atom[(9, 5)] == (f"T{4 * 1 + 5 // 2}", "r3")  # c3: row groupID + 8, column 2*tig + 1
    # A_s: 128 x 32 f16, 64-byte rows: XOR swizzle of 16-byte chunks, chunk' = chunk ^ ((row / 2) % 4)
    shared = _view(views, "shared A_s")
    for r, c in [(0, 0), (1, 9), (2, 8), (5, 31), (127, 17)]:
        off = r * 32 + ((c // 8) ^ ((r // 2) % 4)) * 8 + c % 8
        assert shared[(r, c)] == (str(off), f"b{(off * 2 // 4) % 32}")


CONFLICTING = """
kernel gemm(A: f16[M, K], B: f16[K, N], C: out f16[M, N]):
    with Kernel(ceildiv(N, 128), ceildiv(M, 128), threads=128) as (bx, by):
        A_s = alloc_shared((128, 32), f16)
        B_s = alloc_shared((32, 128), f16)
        annotate_layout({A_s: make_linear_layout(A_s)})
        acc = alloc_fragment((128, 128), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, 32), num_stages=2):
            copy(A[by * 128, k * 32], A_s)
            copy(B[k * 32, bx * 128], B_s)
            gemm(A_s, B_s, acc)
        copy(acc, C[by * 128, bx * 128])
"""


def test_linear_mma_operand_reports_conflicts(tmp_path):
    # ldmatrix reads 8 rows of 16 bytes per phase; unswizzled 64-byte rows put rows 0, 2, 4, 6 on the same
    # four banks: a 4-way conflict, which the swizzled B_s does not have.
    src = tmp_path / "linear.tile"
    src.write_text(CONFLICTING)
    report = kernel_views(str(src), CompileOptions.make("sm80"))
    a_views = [v for v in report.views if v.title.startswith("shared A_s")]
    assert any("ldmatrix" in n and "4-way" in n for n in a_views[0].notes), a_views[0].notes
    # the lanes that collide are marked, not every element of the access: in one phase of the ldmatrix, lanes 0, 2,
    # 4 and 6 give rows 0, 2, 4 and 6, whose first word (elements 32 r and 32 r + 1) is in bank 0
    framed = {(i, j): c.shown() for i, row in enumerate(a_views[0].cells) for j, c in enumerate(row) if c.highlight}
    assert framed == {(r, j): (str(r * 32 + j), f"L{r}") for r in (0, 2, 4, 6) for j in (0, 1)}, framed
    assert any("collide in bank 0" in n and "lanes 0, 2, 4, 6" in n for n in a_views[0].notes), a_views[0].notes
    b_view = next(v for v in report.views if v.title.startswith("shared B_s"))
    assert not any(c.highlight for row in b_view.cells for c in row)
    assert any("conflict-free" in n for n in b_view.notes)
    root = ET.fromstring(render(report.views))
    assert any(g.get("class") == "hot" for g in root.iter(f"{SVG}g"))


def test_ascend_fractals(tmp_path):
    cells = _view(_cells(_layout_svg(tmp_path, "ascend910b")), "L1 A_s")
    # Nd2Nz with dstNzC0Stride = rows (128) and dstNzNStride = 1: (c / 16) * 128 * 16 + r * 16 + c % 16
    for r, c in [(0, 0), (3, 17), (127, 31)]:
        assert cells[(r, c)][0] == str((c // 16) * 128 * 16 + r * 16 + c % 16)


def test_png_without_matplotlib_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc = main(["layout", str(GEMM), "--target", "sm80", "--buffer", "A_s", "-o", str(tmp_path / "a.png")])
    assert rc == 1
    assert "pip install 'tilec[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "a.png").exists()


def test_unknown_buffer_and_bad_suffix(tmp_path, capsys):
    assert main(["layout", str(GEMM), "--target", "sm80", "--buffer", "Z", "-o", str(tmp_path / "a.svg")]) == 1
    assert "there are: A_s, B_s, C_local" in capsys.readouterr().err
    assert main(["layout", str(GEMM), "--target", "sm80", "-o", str(tmp_path / "a.txt")]) == 1
    assert ".svg, .png or .pdf" in capsys.readouterr().err


def test_png_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "b.png"
    assert main(["layout", str(GEMM), "--target", "gfx942", "--buffer", "B_s", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_compiler_does_not_import_inspect():
    import re

    tilec_dir = ROOT / "tilec"
    below = [tilec_dir / d for d in ("ir", "passes", "ops", "targets", "parser", "interp", "runtime", "testing")]
    pattern = re.compile(r"^\s*(from\s+(tilec|\.+)\.?inspect\b|import\s+tilec\.inspect)", re.M)
    offenders = [str(p.relative_to(ROOT)) for d in below for p in d.rglob("*.py") if pattern.search(p.read_text())]
    offenders += [f for f in ("driver.py", "artifacts.py") if pattern.search((tilec_dir / f).read_text())]
    assert not offenders
    assert pattern.search("        from .inspect.remarks import x") and pattern.search("from ..inspect import views")
