"""The back-end interface (tilec/targets/backend.py), CompileOptions, the compile cache behind
`tilec.compile(..., emit=KIND)`, the manifest schema's per-architecture entries, and the import graph."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tilec
from tilec.manifest import ARCH_KERNELS_KEY, KERNELS_KEY, for_device, loader_name
from tilec.options import CompileOptions
from tilec.targets.registry import BACKENDS, TARGETS, get_backend

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


# ---------------------------------------------------------------------------- the registry


def test_every_backend_declares_what_the_driver_and_the_cli_need():
    suffixes: dict[str, str] = {}
    for name in BACKENDS:
        b = get_backend(name)
        assert b.name == name
        assert b.default_kind in b.output_kinds and b.source_kind in b.output_kinds
        assert b.multi_target_kinds <= set(b.output_kinds)
        assert not b.run_kind or b.run_kind in b.output_kinds
        for kind, suffix in b.output_kinds.items():
            if kind in b.directory_kinds:  # -o names a directory: asked for with --emit alone
                assert suffix == "/" and b.directory_kinds[kind][0] in b.output_kinds.values(), (name, kind)
                continue
            # the command line reads the kind from -o's suffix before it knows the back end: one suffix, one kind
            assert suffix.startswith(".") and suffixes.setdefault(suffix, kind) == kind, (name, kind, suffix)
        target = next(t for t in TARGETS.values() if t.backend == name)
        steps = b.pipeline(target)
        assert steps and len({s.name for s in steps}) == len(steps)


def test_simt_backends_share_one_pipeline():
    names = {b: [s.name for s in get_backend(b).pipeline(next(t for t in TARGETS.values() if t.backend == b))]
             for b in ("cuda", "hip", "wgsl")}
    assert names["cuda"] == names["hip"] == names["wgsl"]
    assert names["cuda"][0] == "rasterization" and names["cuda"][-1] == "storage-planning"


def test_pass_names_follow_the_target_backend():
    from tilec.driver import pass_names

    assert pass_names() == ["build", "specialize", "check-tile-ops", "check-threads"]
    assert "lower-to-simt" in pass_names("sm90") and "lower-to-simt" in pass_names("webgpu")
    # AscendC's own pipeline from Tile IR, no SIMT IR
    assert pass_names("ascend910b")[4:] == ["ascend-placement", "ascend-queues", "ascend-lower", "ascend-event-ids",
                                            "ascend-capacity", "ascend-sync"]
    assert pass_names("nosuch") == pass_names()  # compiling reports the unknown target


def test_build_refuses_kinds_the_backend_cannot_write(tmp_path):
    from tilec.diagnostics import CompileError

    with pytest.raises(CompileError,
                       match=r"emits hip, hsaco, asm, object, not cubin: use -o NAME\.hsaco \(or \.hip, \.s, \.o\)"):
        tilec.compile(SAMPLES / "vector_add.tile", "gfx942", emit="cubin")
    with pytest.raises(CompileError, match="need a fatbin, header or object output"):
        tilec.compile(SAMPLES / "vector_add.tile", "sm80,sm90", emit="cubin")
    with pytest.raises(CompileError, match="different back ends"):
        tilec.compile(SAMPLES / "vector_add.tile", "sm90,webgpu", emit="fatbin")


# ---------------------------------------------------------------------------- options and the cache


def test_compile_options_are_frozen_and_hash_by_value():
    a = CompileOptions.make("sm80,sm90", defines={"b": 2, "a": 1}, disable={"tma"}, limits={"max_threads": 512})
    b = CompileOptions.make(("sm80", "sm90"), defines={"a": 1, "b": 2}, disable=["tma"], limits={"max_threads": 512})
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a.targets == ("sm80", "sm90") and a.target == "sm80" and a.defines_dict == {"a": 1, "b": 2}
    with pytest.raises(AttributeError):
        a.kernel = "k"  # type: ignore[misc]
    assert a.replace(defines=(("a", 3),)) != a
    # how the build runs is not what it produces: not in the key, but it turns the cache off
    assert a.replace(dryrun=True).key() == a.key() and not a.replace(dryrun=True).cacheable
    assert a.replace(lineinfo=True).key() != a.key()
    json.dumps(a.key())  # plain data


@pytest.mark.parametrize("target,kind", [("webgpu", "wgsl"), ("gfx942", "hip"), ("sm80", "cu")])
def test_compile_to_an_artifact_uses_the_cache_for_every_backend(target, kind, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "k.tile"
    src.write_text((SAMPLES / "softmax.tile").read_text())
    first = tilec.compile(src, target, emit=kind)
    again = tilec.compile(src, target, emit=kind)
    assert not first.from_cache and again.from_cache
    assert (again.data, again.manifest, again.deps) == (first.data, first.manifest, first.deps)
    m = json.loads(first.manifest)
    assert m["kind"] == kind and m["target"] == target
    assert m["binary"] == "k" + get_backend(m["backend"]).output_kinds[kind]
    # another -D value is another entry; an edited source is a miss
    assert not tilec.compile(src, target, emit=kind, defines={"block_N": 512}).from_cache
    src.write_text(src.read_text() + "\n")
    assert not tilec.compile(src, target, emit=kind).from_cache


def test_a_cache_hit_does_not_import_the_compiler(tmp_path):
    src = tmp_path / "k.tile"
    src.write_text((SAMPLES / "vector_add.tile").read_text())
    probe = ("import sys, tilec\n"
             f"a = tilec.compile({str(src)!r}, 'webgpu', emit='wgsl')\n"
             "heavy = sorted(m for m in sys.modules if m.startswith(('tilec.driver', 'tilec.parser', 'tilec.ir', "
             "'tilec.passes', 'lark', 'numpy')))\n"
             "print(a.from_cache, heavy)\n")
    env = dict(os.environ, TILEC_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env) for _ in range(2)]
    assert runs[0].stdout.startswith("False"), runs[0].stderr
    assert runs[1].stdout.strip() == "True []", runs[1].stdout + runs[1].stderr


# ---------------------------------------------------------------------------- manifests per architecture


def _entry(name: str, threads: int) -> dict:
    return {"name": name, "params": [], "sizes": [], "grid": ["1"], "threads": threads, "shared_bytes": 0}


def test_a_device_sees_the_entries_of_its_architecture():
    m = {"kind": "fatbin", "archs": ["sm_80", "sm_90a"], KERNELS_KEY: [_entry("k", 128)],
         ARCH_KERNELS_KEY: {"sm_80": [_entry("k", 128)], "sm_90a": [_entry("k", 256), _entry("k__no_tma", 128)]}}
    assert for_device(m, 90)[KERNELS_KEY] == m[ARCH_KERNELS_KEY]["sm_90a"]
    assert for_device(m, 80)[KERNELS_KEY] == m[ARCH_KERNELS_KEY]["sm_80"]
    assert for_device(m, 86)[KERNELS_KEY] == m[ARCH_KERNELS_KEY]["sm_80"]  # sm_80 code runs on sm_86
    assert for_device(m, 100) is m  # nothing runs there: the runtime's architecture check reports it
    plain = {"kind": "cubin", "archs": ["sm_80"], KERNELS_KEY: [_entry("k", 128)]}
    assert for_device(plain, 90) is plain


def test_loader_names():
    assert loader_name({"loader": "wgsl", "backend": "wgsl"}) == "wgsl"
    assert loader_name({"backend": "wgsl"}) == "wgsl" and loader_name({"backend": "cuda"}) == "cuda"
    assert loader_name({"backend": "hip"}) == "hip"


@pytest.fixture(scope="module")
def nvcc():
    """A CUDA toolchain: nvcc, or NVRTC and nvFatbin (what tilec builds with when nvcc is missing)."""
    from tilec.targets.cuda.locate import nvfatbin_lib, nvrtc_lib

    if shutil.which("nvcc") is None and (nvrtc_lib() is None or nvfatbin_lib() is None):
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc or NVRTC is required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("neither nvcc nor NVRTC and nvFatbin installed")


@pytest.mark.parametrize("flags", [[], ["--no-tma"]])
def test_fatbin_of_architectures_that_launch_differently(nvcc, tmp_path, flags, monkeypatch):
    """The README's `tilec samples/gemm.tile --target sm80,sm90 -o gemm.fatbin`: the sm90 gemm takes its own
    default tile (two consumer warpgroups) plus a producer warpgroup (384 threads) and a no-TMA twin, the sm80 one
    does not; the manifest carries both."""
    from tilec.cli.main import main

    out = tmp_path / "gemm.fatbin"
    assert main([str(SAMPLES / "gemm.tile"), "--target", "sm80,sm90", "-o", str(out), "--no-cache", *flags]) == 0
    m = json.loads(Path(str(out) + ".json").read_text())
    assert m["archs"] == ["sm_80", "sm_90a"]
    sm80 = tilec.compile(SAMPLES / "gemm.tile", "sm80", disable=[f[5:] for f in flags])
    sm90 = tilec.compile(SAMPLES / "gemm.tile", "sm90", disable=[f[5:] for f in flags])
    assert [(k["name"], k["threads"]) for k in m[KERNELS_KEY]] == [(k.name, k.threads) for k in sm80.simt.kernels]
    if flags:  # no TMA, no twin; sm90 still takes its own default tile, so its entries are its own
        per = m.get(ARCH_KERNELS_KEY) or {"sm_90a": m[KERNELS_KEY]}
        assert [(k["name"], k["threads"]) for k in per["sm_90a"]] == [(k.name, k.threads) for k in sm90.simt.kernels]
        assert [k["name"] for k in per["sm_90a"]] == ["gemm"]
    else:
        per = m[ARCH_KERNELS_KEY]
        assert [(k["name"], k["threads"]) for k in per["sm_90a"]] == [(k.name, k.threads) for k in sm90.simt.kernels]
        assert [k["name"] for k in per["sm_90a"]] == ["gemm", "gemm__no_tma"]
        assert for_device(m, 90)[KERNELS_KEY] == per["sm_90a"]
        # tilec.runtime.load asks the GPU its compute capability and takes that architecture's entries
        import tilec.runtime as rt
        from tilec.runtime import cuda_driver

        for cc, threads in (((9, 0), 384), ((8, 0), 128), ((8, 9), 128)):
            fake = type("FakeDriver", (), {"compute_capability": lambda self, cc=cc: cc})()
            monkeypatch.setattr(cuda_driver.Driver, "get", classmethod(lambda cls, fake=fake: fake))
            mod = rt.load(out)
            assert mod.gemm.entry["threads"] == threads, cc
            assert ("gemm__no_tma" in mod._internal) == (cc == (9, 0))


# ---------------------------------------------------------------------------- structure


def _imports() -> dict[str, set[str]]:
    """Module -> the tilec modules it imports anywhere (lazy imports included)."""
    mods = {}
    for p in (ROOT / "tilec").rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = p
    graph = {}
    for name, p in mods.items():
        package = name.split(".") if p.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + (node.module.split(".") if node.module else []))
                deps |= {f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def test_no_import_circles():
    graph = _imports()
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        if m in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        for d in sorted(graph[m]):
            visit(d, path + [m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])


def test_targets_and_runtime_do_not_import_the_cli_and_the_runtime_knows_no_compiler():
    for m, deps in _imports().items():
        if m.startswith(("tilec.targets", "tilec.runtime", "tilec.manifest", "tilec.options", "tilec.outputs",
                         "tilec.driver")):
            assert not any(d.startswith("tilec.cli") for d in deps), m
        if m.startswith("tilec.runtime"):
            assert not any(d.startswith(("tilec.driver", "tilec.parser", "tilec.passes", "tilec.targets",
                                         "tilec.outputs", "tilec.artifacts")) for d in deps), m
        if m == "tilec.manifest" or m == "tilec.options":
            assert deps <= {"tilec.errors"}, (m, deps)


# Generic passes that still test a back end's name: issue 11's part 2 (tile-op homes, instruction descriptors)
# moves these choices to target capabilities; shrink this list as it does, never grow it.
NAMES_BACK_ENDS_TODAY: set[str] = set()


def test_only_targets_runtime_and_the_simt_interpreter_name_back_ends():
    import re

    names = "|".join(re.escape(f'"{b}"') for b in BACKENDS)
    compares = re.compile(rf"\bbackend\s*(==|!=)\s*({names})|({names})\s*(==|!=)\s*\w*\.?backend\b|"
                          rf"targets\.(?:{'|'.join(BACKENDS)})\b|targets import (?:{'|'.join(BACKENDS)})\b")
    naming = set()
    for p in (ROOT / "tilec").rglob("*.py"):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(("tilec/targets/", "tilec/runtime/", "tilec/simt/", "tilec/testing/")):
            continue
        if compares.search(p.read_text()):
            naming.add(rel)
    assert naming <= NAMES_BACK_ENDS_TODAY, sorted(naming - NAMES_BACK_ENDS_TODAY)
