"""One representation per fact (issue 32): one options record with the back ends' own options parsed by their back
end, the source's schedule keywords as a typed request, identity-keyed maps."""

import copy
import dataclasses

import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.identity import IdentityDict, IdentitySet
from tilec.ir.schedule import KernelKeywords, ScheduleRequest, request_of
from tilec.options import CompileOptions, resolve
from tilec.targets.registry import get_backend

KEYWORDS = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128, persistent=True, cluster=(2, 1)) as bx:
        for i in Parallel(128):
            idx = bx * 128 + i
            if idx < N:
                B[idx] = A[idx] * 2.0
"""


def test_a_back_ends_own_options_travel_beside_the_shared_fields():
    o = CompileOptions.make("sm80", lineinfo=True, ptxas_args=["-v"])
    assert o.backend_options == (("lineinfo", True), ("ptxas_args", ("-v",)))
    assert not hasattr(o, "lineinfo")
    assert o.replace(lineinfo=False).backend_option("lineinfo") is False
    assert o.replace(lineinfo=False).key() != o.key() and hash(o) == hash(CompileOptions.make("sm80", lineinfo=True,
                                                                                             ptxas_args=("-v",)))
    # tilec.compile's keywords: the fields and the back ends' own options, laid over `options`
    r = resolve("sm90", o, defines={"x": 1}, forward_ptx=False, verify=True)
    assert r.targets == ("sm90",) and r.defines == (("x", 1),) and r.verify
    assert dict(r.backend_options) == {"lineinfo": True, "ptxas_args": ("-v",), "forward_ptx": False}


def test_the_cuda_back_end_parses_its_own_frozen_record():
    cuda = get_backend("cuda")
    rec = cuda.parse_options(CompileOptions.make("sm80", device_debug=True, opt_level=1, toolchain="nvrtc"))
    assert type(rec).__name__ == "CudaOptions" and rec.device_debug and rec.opt_level == 1
    assert rec.toolchain == "nvrtc" and rec.forward_ptx and not rec.lineinfo
    assert cuda.parse_options(rec) is rec
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.lineinfo = True  # type: ignore[misc]
    with pytest.raises(CompileError, match="lineinfo must be true or false"):
        cuda.parse_options(CompileOptions.make("sm80", lineinfo="yes"))
    with pytest.raises(CompileError, match="ptxas_args must be a list of strings"):
        cuda.parse_options(CompileOptions.make("sm80", ptxas_args="-v"))
    # another back end leaves CUDA's options alone; a name no back end has is an error everywhere
    assert get_backend("wgsl").parse_options(CompileOptions.make("webgpu", lineinfo=True)).targets == ("webgpu",)
    with pytest.raises(CompileError, match="unknown option.*lineinfoo"):
        get_backend("wgsl").parse_options(CompileOptions.make("webgpu", lineinfoo=True))


def test_an_unknown_keyword_of_tilec_compile_is_an_error(tmp_path):
    src = tmp_path / "k.tile"
    src.write_text(KEYWORDS)
    with pytest.raises(CompileError, match="unknown option.*no_such_option"):
        tilec.compile(str(src), "sm80", no_such_option=1)


def test_the_sources_keywords_are_a_typed_request_and_pins_keep_them(tmp_path):
    src = tmp_path / "k.tile"
    src.write_text(KEYWORDS)
    k = tilec.compile(str(src)).module.kernels[0]
    assert request_of(k).keywords == KernelKeywords(persistent=True, cluster=(2, 1))
    assert "persistent" not in k.attrs and "cluster" not in k.attrs  # attrs keeps bookkeeping only
    assert "keyword persistent = True" in tilec.compile(str(src), dump_after={"build"}).ir_after["build"]
    pinned = tilec.compile(str(src), schedule={"persistent": False}).module.kernels[0].request
    assert pinned.persistent is False and pinned.keywords.persistent and pinned.keywords.cluster == (2, 1)
    assert isinstance(pinned, ScheduleRequest)


def test_identity_maps_hold_values_that_compare_equal_apart_and_survive_a_deepcopy():
    a, b = [1], [1]
    d = IdentityDict([(a, "a"), (b, "b")])
    assert len(d) == 2 and d[a] == "a" and d[b] == "b" and [1] not in d
    s = IdentitySet([a, b, a])
    assert len(s) == 2 and list(s) == [a, b]
    s.discard(a)
    assert a not in s and b in s
    holder = {"lists": [a, b], "d": d, "s": IdentitySet([a])}
    held = copy.deepcopy(holder)
    assert held["d"][held["lists"][0]] == "a" and held["lists"][0] in held["s"] and a not in held["s"]


def test_no_map_is_keyed_by_id():
    """IR nodes key maps themselves (a lookup by id() into a map keyed by nodes would silently miss); keys that
    compare by value go through tilec/identity.py, the one module that calls id()."""
    import re
    from pathlib import Path

    root = Path(tilec.__file__).parent
    calls = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "identity.py"
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"(?<![\w.])id\(", line.split("#")[0])]
    assert calls == []


# The places outside tilec/targets that may compare such a name, and why: the runtime maps the manifest's loader
# names to its own modules (it imports no back end); `tilec run --device cuda` is the command line's own word;
# the ISA inspector's "mma" is its class of disassembled opcodes; Pipelined's `sync=` is a TileLang keyword.
_NAME_TESTS_ALLOWED = {"tilec/runtime/loader.py": 5, "tilec/cli/run.py": 1, "tilec/inspect/isa.py": 1,
                       "tilec/parser/build.py": 1}
_NAMES = {"mma", "wgmma", "mfma", "fma", "cuda", "hip", "wgsl", "ascend", "tma", "cp.async", "registers", "sync",
          "mma.sync.m16n8k16", "wgmma.m64nNk16", "mfma.16x16x16", "mfma.32x32x8", "mfma.16x16x32.fp8", "sm80", "sm90",
          "gfx90a", "gfx942", "webgpu", "ascend910b"}


def name_tests(root) -> dict[str, int]:
    """Per module outside tilec/targets: the comparisons (==, !=, in, not in) of a string naming an instruction
    family, a copy mechanism, a back end or a target (generic code asks the registered implementation or the
    Target's capabilities instead)."""
    import ast
    from pathlib import Path

    def strings(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return [n.value]
        return [x for e in n.elts for x in strings(e)] if isinstance(n, (ast.Tuple, ast.List, ast.Set)) else []

    out: dict[str, int] = {}
    for p in sorted((Path(root) / "tilec").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith("tilec/targets/"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Compare):
                for op, a, b in zip(node.ops, [node.left, *node.comparators[:-1]], node.comparators, strict=True):
                    if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) and _NAMES & {*strings(a), *strings(b)}:
                        out[rel] = out.get(rel, 0) + 1
    return out


def test_generic_code_tests_no_instruction_mechanism_or_back_end_names(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    assert name_tests(root) == _NAME_TESTS_ALLOWED
    planted = tmp_path / "tilec" / "passes"
    planted.mkdir(parents=True)
    (planted / "p.py").write_text("def f(s, t):\n    return s.instruction == 'wgmma' or t.backend in ('hip',)\n")
    assert name_tests(tmp_path) == {"tilec/passes/p.py": 2}
