"""The IR readers (tilec/ir/reader.py, tilec/ir/simt_reader.py): print -> read -> print is the identity, and what
is read is well-formed (the verifiers of both IRs accept it). Every sample at every stage of sm80 (build, the
front passes, the planners' Tile IR with its schedule, the SIMT IR after each SIMT pass); every TileLang port at
one stage of each form (checked Tile IR, the planned Tile IR with its schedule, the final SIMT IR; the other
stages print the same constructs, and reading is the slow part); sm90 (TMA, wgmma, warp specialization, tensor
maps) and gfx942 (MFMA) for the samples that reach those forms; the built IR of every tests/ir FileCheck file. Bad
text is a ReadError at its line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.driver import pass_names
from tilec.ir.printer import module_str
from tilec.ir.reader import ReadError, read_module
from tilec.ir.simt_printer import simt_module_str
from tilec.ir.simt_reader import read_simt
from tilec.ir.simt_verify import verify as verify_simt
from tilec.ir.verify import verify as verify_tile

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "samples").glob("*.tile")) + sorted((ROOT / "examples" / "tilelang").glob("*.tile"))
# what the file cannot compile for (its tiles exceed the target's shared memory)
TOO_BIG = {("gemm_persistent", "sm80")}
MORE = [("gemm", "sm90"), ("flash_attention", "sm90"), ("fp8_gemm", "sm90"), ("gemm", "gfx942")]
FORMS = ("check-threads", "pipeline-planning", "storage-planning")  # one stage of each form
CASES = [(p, "sm80") for p in FILES if (p.stem, "sm80") not in TOO_BIG] + \
    [(ROOT / "samples" / f"{name}.tile", t) for name, t in MORE]


def round_trip(text: str, where: str, target) -> None:
    if text.startswith("simt kernel"):
        m = read_simt(text)
        again = simt_module_str(m)
        verify_simt(m, target)
    else:
        m = read_module(text)
        again = module_str(m)
        verify_tile(m)
    if again != text:
        import difflib

        diff = "".join(list(difflib.unified_diff(text.splitlines(True), again.splitlines(True), "printed",
                                                 "read and printed again", n=1))[:40])
        pytest.fail(f"{where}: the read IR prints differently\n{diff}", pytrace=False)


@pytest.mark.parametrize("path,target", CASES, ids=[f"{p.stem}-{t}" for p, t in CASES])
def test_print_read_print_is_the_identity(path: Path, target: str):
    stages = set(pass_names(target)) if path.parent.name == "samples" else set(FORMS)
    r = tilec.compile(path, target, dump_after=stages)
    assert set(r.ir_after) == stages
    seen = set()
    for stage, text in r.ir_after.items():
        if text not in seen:  # (a pass that changed nothing prints the same text)
            seen.add(text)
            round_trip(text, f"{path.name} after {stage} ({target})", r.target)


def test_the_comparison_can_fail():
    """A read that lost something shows: a changed label of the schedule, a dropped statement."""
    r = tilec.compile(ROOT / "samples" / "gemm.tile", "sm80", dump_after={"pipeline-planning", "simplify"})
    text = r.ir_after["pipeline-planning"]
    assert "3 stage(s)" in text
    assert module_str(read_module(text)) == text
    assert module_str(read_module(text.replace("3 stage(s)", "2 stage(s)"))) != text
    simt = r.ir_after["simplify"]
    dropped = simt.replace("    barrier()\n", "", 1)
    assert dropped != simt and simt_module_str(read_simt(dropped)) != simt


@pytest.mark.parametrize("text,where,message", [
    ("kernel k(A: f16[N])\n  grid (1, 1, 1) threads 32 as (bx, by, bz)\nbody:\n  A[0] = B[0]\n", (4, 10),
     "'B' is not a buffer in scope"),
    ("kernel k(A: f16[N])\n  grid (1, 1, 1) threads 32 as (bx, by, bz)\nbody:\n  A[0] = 1.0:f99\n", (4, 10),
     "unknown dtype 'f99'"),
    ("kernel k(A: f16[N])\n  grid (1, 1, 1) threads 32 as (bx, by, bz)\nbody:\n  for i in sideways(4):\n    pass\n",
     (4, 12), "unknown loop kind 'sideways'"),
    ("kernel k(A: f16[N])\nbody:\n  copy A[0 +: 4] -> A[0 +: 4\n", (3, 29), "expected ']'"),
    # an op in the generic form (T.Stmt.keyword): read from its class's declarations
    ("kernel k(A: f16[N])\nbody:\n  cumsum A[0 +: 4] -> A[0 +: 4]\n", (3, 32), "cumsum needs 'dim=...'"),
    ("kernel k(A: f16[N])\nbody:\n  cumsum A[0 +: 4], A[0 +: 4] [dim=0]\n", (3, 19), "expected '->'"),
    ("kernel k(A: f16[N])\nbody:\n  cumsum A[0 +: 4] -> A[0 +: 4] [dim=x]\n", (3, 33), "'dim' of cumsum must be an"),
    ("kernel k(A: f16[N])\nbody:\n  cumsum A[0 +: 4] -> A[0 +: 4] [dim]\n", (3, 33), "'dim' of cumsum needs a value"),
    ("kernel k(A: f16[N])\nbody:\n  cumsum A[0 +: 4] -> A[0 +: 4] [dim=0, reverse=1]\n", (3, 33),
     "'reverse' of cumsum is a flag"),
    ("kernel k(A: f16[N])\nbody:\n  cumsum A[0 +: 4] -> A[0 +: 4] [dim=0, order=2]\n", (3, 33),
     "cumsum has no attribute 'order'"),
])
def test_tile_reader_errors_point_at_the_text(text, where, message):
    with pytest.raises(ReadError) as e:
        read_module(text)
    assert (e.value.line, e.value.col) == where and e.value.message.startswith(message), str(e.value)


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "ir").glob("*.tile")), ids=lambda p: p.stem)
def test_built_ir_of_the_filecheck_tests_reads_back(path: Path):
    """The built Tile IR of every tests/ir file, where a tile op's FileCheck test lives: an op printed in the generic
    form (T.Stmt.keyword) is read back from its class's declarations alone."""
    r = tilec.compile(path, include_dirs=[path.parent / "inputs"])
    round_trip(module_str(r.module), f"{path.name} as built", None)


def test_tile_op_declarations_name_fields_of_their_class():
    """What a tile op's class declares (T.Stmt.read_fields, written_fields, phase, keyword) names its own fields and
    a phase of the profiler, and every registered op declares what it writes (access.written reads only that)."""
    import dataclasses

    from tilec.ir import tile as T
    from tilec.ir.profile import PHASES
    from tilec.ops.registry import OPS

    for cls in {*OPS, *T.keyword_ops().values()}:
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(cls.read_fields) | set(cls.written_fields) <= fields, cls
        assert cls.phase is None or cls.phase in PHASES, cls
        assert cls.written_fields or cls is T.Print, f"{cls.__name__} declares no written field"
    assert T.keyword_ops()["cumsum"] is T.CumSum


@pytest.mark.parametrize("text,where,message", [
    ("simt kernel k(A: global f32) grid (1, 1, 1) threads 32 shared 0 B\n  A[tid] = x;\n", (2, 12),
     "'x' is not a variable in scope"),
    ("simt kernel k(A: global f32) grid (1, 1, 1) threads 32 shared 0 B\n  if (tid < 4) {\n    A[0] = 1.0f;\n",
     (3, 5), "expected '}'"),
    ("simt kernel k(A: global f32) grid (1, 1, 1) threads 32 shared 0 B\n  frobnicate(A[0])\n", (2, 3),
     "no intrinsic is named 'frobnicate'"),
])
def test_simt_reader_errors_point_at_the_text(text, where, message):
    with pytest.raises(ReadError) as e:
        read_simt(text)
    assert (e.value.line, e.value.col) == where and e.value.message.startswith(message), str(e.value)


KEYWORDS = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128, persistent=True, cluster=(2, 1)) as bx:
        for i in Parallel(128):
            idx = bx * 128 + i
            if idx < N:
                B[idx] = A[idx] * 2.0
"""


def test_the_sources_schedule_keywords_are_read_back_into_the_request(tmp_path):
    from tilec.ir.schedule import KernelKeywords, request_of

    src = tmp_path / "k.tile"
    src.write_text(KEYWORDS)
    text = tilec.compile(str(src), dump_after={"build"}).ir_after["build"]
    assert "keyword persistent = True" in text and "keyword cluster = (2, 1)" in text
    m = read_module(text)
    assert request_of(m.kernels[0]).keywords == KernelKeywords(persistent=True, cluster=(2, 1))
    assert module_str(m) == text
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "keyword persistent" in t)
    for bad, says in (("persistant = True", "unknown keyword 'persistant'"), ("persistent = 1", "takes True or False"),
                      ("cluster = (2,)", r"a value like \(1, 1\)"),
                      ("cluster = (2, 1.0)", "a value like"), ("persistent True", "expected 'keyword NAME")):
        wrong = text.replace("keyword persistent = True", f"keyword {bad}")
        with pytest.raises(ReadError, match=says) as e:
            read_module(wrong)
        assert e.value.line == line
