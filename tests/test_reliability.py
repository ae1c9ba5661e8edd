"""Never clobber, never serve a corrupt artifact: the output-path policy (tilec.cli.outputs), the
input checks, and the compile cache's verification and size bound (tilec.cache)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilec.cache import MAGIC, Cache, decode_entry, encode_entry, max_bytes, sha256_bytes
from tilec.cli.main import main as tilec_main

ROOT = Path(__file__).resolve().parent.parent

KERNEL = """import "lib.tile"

kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        for i in Parallel(128):
            if bx * 128 + i < N:
                B[bx * 128 + i] = A[bx * 128 + i] * scale
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """g.tile importing lib.tile, in the current directory; a private cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "g.tile").write_text(KERNEL)
    (tmp_path / "lib.tile").write_text("const scale = 3\n")
    return tmp_path


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}


# ================================================================ outputs over inputs


CLOBBERS = [
    ["--emit", "cu", "-o", "g.tile"],
    ["--emit", "hip", "-t", "gfx942", "-o", "g.tile"],
    ["--emit", "wgsl", "-t", "webgpu", "-o", "g.tile"],
    ["--emit-ir", "-o", "g.tile"],
    ["--emit-ir", "-o", "lib.tile"],
    ["-o", "k.cu", "-MD", "-MF", "g.tile"],
    ["-o", "k.cu", "-MD", "-MF", "lib.tile"],
    ["-o", "k.cu", "--manifest", "g.tile"],
    ["-o", "k.cu", "--manifest", "lib.tile"],
    ["-o", "k.cu", "--manifest", "./sub/../lib.tile"],
    ["-M", "-MF", "g.tile"],
    ["-M", "-MF", "lib.tile"],
    ["-o", "g.tile"],
    ["--emit", "cu", "-o", "new.tile"],  # no generated file takes a .tile name
    ["--emit", "header", "-t", "sm80", "-o", "lib.tile"],
]


@pytest.mark.parametrize("flags", CLOBBERS, ids=lambda f: " ".join(f))
def test_no_flag_writes_over_a_source(project, capsys, flags):
    (project / "sub").mkdir()
    before = _snapshot(project)
    assert tilec_main(["g.tile", *flags]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal" not in err
    assert err.startswith("tilec: error: "), err
    assert _snapshot(project) == before  # nothing written at all, not even the other outputs


def test_an_imported_file_reached_through_a_link_is_not_overwritten(project, capsys):
    os.symlink("lib.tile", project / "soft.cu")
    os.link(project / "lib.tile", project / "hard.cu")
    for name in ("soft.cu", "hard.cu"):
        assert tilec_main(["g.tile", "-o", name, "--no-cache"]) == 1
        assert f"-o '{name}' would overwrite 'lib.tile', which g.tile imports" in capsys.readouterr().err
    assert (project / "lib.tile").read_text() == "const scale = 3\n"
    assert os.path.islink(project / "soft.cu")


def test_a_cache_hit_checks_the_imports_too(project, capsys):
    assert tilec_main(["g.tile", "-o", "k.cu"]) == 0
    os.link(project / "lib.tile", project / "hard.cu")
    assert tilec_main(["g.tile", "-o", "hard.cu"]) == 1  # same key, but the output is an import now
    assert "would overwrite 'lib.tile'" in capsys.readouterr().err
    assert (project / "lib.tile").read_text() == "const scale = 3\n"


def test_two_outputs_at_one_path_are_refused(project, capsys):
    assert tilec_main(["g.tile", "-o", "k.cu", "--manifest", "k.cu"]) == 1
    assert "--manifest 'k.cu' and -o 'k.cu' name the same file" in capsys.readouterr().err
    assert tilec_main(["g.tile", "-o", "k.cu", "-MD", "-MF", "k.cu.json"]) == 1
    assert "name the same file" in capsys.readouterr().err


def test_bad_output_locations_are_diagnostics_naming_the_users_path(project, capsys):
    (project / "afile").write_text("x")
    (project / "d.cu").mkdir()
    cases = {
        ("--emit", "cu", "-o", str(project)): f"-o '{project}' is a directory",
        ("-o", "d.cu"): "-o 'd.cu' is a directory",
        ("-o", "missing/k.cu"): "-o 'missing/k.cu': directory 'missing' does not exist",
        ("-o", "afile/k.cu"): "-o 'afile/k.cu': directory 'afile' is not a directory",
        ("-o", "k.cu", "--manifest", "nodir/m.json"): "--manifest 'nodir/m.json': directory 'nodir' does not exist",
        ("--emit-ir", "-o", "missing/x.ir"): "directory 'missing' does not exist",
    }
    for flags, message in cases.items():
        rc = tilec_main(["g.tile", *flags])
        err = capsys.readouterr().err
        assert rc == 1 and message in err, (flags, err)
        assert ".tmp" not in err and "internal" not in err


def test_an_unwritable_location_names_the_users_path(project, capsys, monkeypatch):
    import tilec.cache

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied", "/somewhere/.k.cu.123.tmp")

    monkeypatch.setattr(tilec.cache.os, "replace", refuse)
    assert tilec_main(["g.tile", "-o", "k.cu", "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert "cannot write -o 'k.cu': permission denied" in err and ".tmp" not in err
    assert not list(project.glob(".k.cu*"))  # the temporary file is gone


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory(project, capsys):
    ro = project / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert tilec_main(["g.tile", "-o", "ro/k.cu", "--no-cache"]) == 1
        assert "cannot write -o 'ro/k.cu': permission denied" in capsys.readouterr().err
    finally:
        ro.chmod(0o755)


def test_a_special_file_output_is_written_in_place(project, capsys):
    assert tilec_main(["g.tile", "--emit", "cu", "-o", os.devnull, "--no-cache", "-MD"]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)  # still the device, not a renamed file
    assert not os.path.exists(os.devnull + ".json.partial")
    assert "error" not in capsys.readouterr().err


def test_output_kind_must_match_the_emission(project, capsys):
    for flags, message in [
        (["--emit-ir", "-o", "x.cubin"], "--emit-ir -o 'x.cubin': IR text under a .cubin name"),
        (["--emit-ir", "-o", "x.cu"], "IR text under a .cu name"),
        (["--emit", "cu", "-o", "x.cubin"], "--emit cu -o 'x.cubin': the suffix .cubin says cubin"),
        (["--emit", "cubin", "-o", "x.cu"], "the suffix .cu says cu"),
    ]:
        assert tilec_main(["g.tile", *flags]) == 1
        assert message in capsys.readouterr().err
        assert not (project / flags[-1]).exists()
    # two text kinds may share a name (the Makefile rule writes CUDA source under x.h)
    assert tilec_main(["g.tile", "--emit", "cu", "-o", "x.h"]) == 0
    assert "__global__" in (project / "x.h").read_text()
    assert tilec_main(["g.tile", "--emit-ir", "-o", "x.ir"]) == 0
    assert "kernel k" in (project / "x.ir").read_text()


@pytest.mark.parametrize("target", ["", " ", "sm90,", ",sm80", "sm80,,sm90"])
def test_an_empty_target_name_is_an_error(project, capsys, target):
    assert tilec_main(["g.tile", "--target", target, "-o", "k.cu"]) == 1
    assert "empty target name" in capsys.readouterr().err
    assert tilec_main(["run", "g.tile", "--target", target]) == 1
    assert "empty target name" in capsys.readouterr().err
    assert not (project / "k.cu").exists()


def test_a_fifo_or_device_as_input_is_refused_at_once(project):
    os.mkfifo(project / "pipe.tile")
    for argv in (["pipe.tile", "-o", "k.cu"], ["pipe.tile", "--emit-ir"], ["run", "pipe.tile"],
                 ["pipe.tile", "-M"], [os.devnull, "-o", "k.cu"]):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tilec", *argv], capture_output=True, text=True, timeout=20,
                              cwd=project, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 1, (argv, proc.stderr)
        assert "is not a regular file" in proc.stderr and time.perf_counter() - t < 10


def test_a_missing_include_directory_is_a_warning(project, capsys):
    assert tilec_main(["g.tile", "-I", "nosuch", "-I", "lib.tile", "-o", "k.cu"]) == 0
    err = capsys.readouterr().err
    assert "tilec: warning: -I 'nosuch': no such directory; ignored" in err
    assert "tilec: warning: -I 'lib.tile': not a directory; ignored" in err


def test_keep_must_be_a_directory(project, capsys):
    assert tilec_main(["g.tile", "-t", "sm80", "-o", "k.cubin", "--keep", "g.tile"]) == 1
    assert "--keep 'g.tile' is not a directory" in capsys.readouterr().err
    assert tilec_main(["g.tile", "-t", "sm80", "-o", "k.cubin", "--keep", "nodir/sub"]) == 1
    assert "directory 'nodir' does not exist" in capsys.readouterr().err
    assert (project / "g.tile").read_text() == KERNEL


def test_random_flag_combinations_never_touch_a_source(project, capsys):
    """300 random command lines mixing every flag that writes, with paths that are the source, the
    import, links to them, directories, missing directories and fresh names: the .tile files never
    change, and every outcome is success or a diagnostic."""
    import random

    rng = random.Random(1212)
    os.symlink("lib.tile", project / "link.cu")
    (project / "dir.cu").mkdir()
    paths = ["g.tile", "lib.tile", "./g.tile", "sub/../lib.tile", "link.cu", "dir.cu", "nodir/x.cu", "x.cu", "y.cu",
             "x.hip", "x.wgsl", "x.ir", "x.h", "x.cubin", "-", os.devnull, "g.tile.json", "new.tile"]
    (project / "sub").mkdir()
    emits = [["--emit", "cu"], ["--emit", "hip", "-t", "gfx942"], ["--emit", "wgsl", "-t", "webgpu"], ["--emit-ir"],
             ["-t", "gfx90a"], ["-t", "webgpu"], ["-M"], ["--emit-ir=all", "-t", "sm80"]]
    sources = {n: (project / n).read_bytes() for n in ("g.tile", "lib.tile")}
    for _ in range(300):
        argv = ["g.tile", *rng.choice(emits), "--no-cache"]
        for flag in rng.sample(["-o", "--manifest", "-MF", "-MD", "-MP", "-MT", "-I"], rng.randint(1, 4)):
            argv += [flag] if flag in ("-MD", "-MP") else [flag, rng.choice(paths)]
        if "-o" in argv and argv[argv.index("-o") + 1].endswith((".cubin", ".h")):
            continue  # needs nvcc: covered elsewhere, and slow
        rc = tilec_main(argv)
        err = capsys.readouterr().err
        assert rc in (0, 1), (argv, err)
        assert "internal" not in err and "Traceback" not in err, (argv, err)
        for n, data in sources.items():
            assert (project / n).read_bytes() == data, (argv, err)
        assert os.path.islink(project / "link.cu") and (project / "dir.cu").is_dir()
        assert not (project / "new.tile").exists()


# ================================================================ the cache verifies what it serves


def _one_entry(project: Path) -> Path:
    [entry] = list((project / "cache").glob("v1/entries/*/*/*.entry"))
    return entry


def _rewrite(entry: Path, edit) -> None:
    """Re-encode an entry after `edit(meta)`, with a *valid* metadata checksum: what a buggy writer
    (not a torn write) would leave."""
    data = entry.read_bytes()
    nl1 = data.index(b"\n", len(MAGIC))
    nl2 = data.index(b"\n", nl1 + 1)
    meta = json.loads(data[nl1 + 1:nl2])
    edit(meta)
    meta_bytes = json.dumps(meta, sort_keys=True).encode()
    entry.write_bytes(MAGIC + sha256_bytes(meta_bytes).encode() + b"\n" + meta_bytes + b"\n" + data[nl2 + 1:])


def _off_by_one(meta):
    meta["outputs"][0]["size"] -= 1
    meta["outputs"][1]["size"] += 1


BAD_ENTRIES = {
    "size off by one": lambda e: _rewrite(e, _off_by_one),
    "no deps in info": lambda e: _rewrite(e, lambda m: m["info"].pop("deps")),
    "deps not a list": lambda e: _rewrite(e, lambda m: m["info"].update(deps=7)),
    "no outputs field": lambda e: _rewrite(e, lambda m: m.pop("outputs")),
    "an output missing": lambda e: _rewrite(e, lambda m: m["outputs"].pop()),
    "a wrong output hash": lambda e: _rewrite(e, lambda m: m["outputs"][0].update(sha256="0" * 64)),
    "metadata edited": lambda e: e.write_bytes(e.read_bytes().replace(b'"size"', b'"sizf"', 1)),
    "one payload byte": lambda e: e.write_bytes(e.read_bytes()[:-1] + b"!"),
    "truncated": lambda e: e.write_bytes(e.read_bytes()[:40]),
    "empty": lambda e: e.write_bytes(b""),
    "old format": lambda e: e.write_bytes(b"TILEC-CACHE 1\n{}\n"),
    "unreadable (a directory)": lambda e: (e.unlink(), e.mkdir()),
    "not JSON": lambda e: e.write_bytes(MAGIC + sha256_bytes(b"{") .encode() + b"\n{\n"),
}


@pytest.mark.parametrize("damage", sorted(BAD_ENTRIES))
def test_a_bad_entry_is_never_served_and_is_rebuilt(project, capsys, damage):
    args = ["g.tile", "-o", "k.cu", "-MD"]
    assert tilec_main(args) == 0
    good = _snapshot(project)
    entry = _one_entry(project)
    BAD_ENTRIES[damage](entry)
    for name in ("k.cu", "k.cu.json", "k.cu.d"):
        (project / name).unlink()
    assert tilec_main(args) == 0, capsys.readouterr().err
    assert _snapshot(project) == good  # the rebuilt outputs, byte for byte
    assert "error" not in capsys.readouterr().err
    st = Cache(project / "cache").stats()
    assert st["misses"] == 2 and st["hits"] == 0 and st["entries"] == 1
    decode_entry(_one_entry(project).read_bytes(), entry)  # replaced by a good one
    assert tilec_main(args) == 0 and Cache(project / "cache").stats()["hits"] == 1


def test_decode_rejects_each_inconsistency():
    meta = {"key1": "k", "deps": [], "absent": [], "created": 0, "info": {}}
    data = encode_entry(meta, {"a": b"alpha", "b": b"beta"})
    assert decode_entry(data, Path("x")).outputs == {"a": b"alpha", "b": b"beta"}
    from tilec.cache import BadEntry

    for bad in (data[:-1], data + b"x", data.replace(b"alpha", b"alphA"), b"", MAGIC, data[len(MAGIC):]):
        with pytest.raises(BadEntry):
            decode_entry(bad, Path("x"))


# ================================================================ the size bound


def _fill(cache: Cache, n: int, size: int, tmp: Path) -> list[Path]:
    dep = tmp / "dep.tile"
    dep.write_text("x")
    paths = []
    for i in range(n):
        p = cache.store(f"{i:064x}", [str(dep)], [], {"artifact": os.urandom(size)}, {"deps": []})
        assert p is not None
        os.utime(p, ns=(i * 10**9, i * 10**9))  # a distinct, increasing last use
        paths.append(p)
    return paths


def test_least_recently_used_entries_are_evicted_at_the_bound(tmp_path):
    cache = Cache(tmp_path / "c", limit=0)
    paths = _fill(cache, 10, 1000, tmp_path)
    assert cache.stats()["entries"] == 10
    entry_size = paths[0].stat().st_size
    # entry 2 is used (a hit touches it), then the bound drops below the total
    assert cache.lookup(f"{2:064x}") is not None
    evicted = cache.shrink(entry_size * 6)
    left = {p for p in paths if p.exists()}
    assert evicted == 5 and len(left) == 5
    assert paths[2] in left and paths[9] in left and paths[0] not in left and paths[1] not in left
    assert cache.stats()["bytes"] <= entry_size * 6 * 0.9 + 1


def test_store_keeps_the_cache_within_its_bound(tmp_path):
    cache = Cache(tmp_path / "c", limit=0)
    one = _fill(cache, 1, 5000, tmp_path)[0].stat().st_size
    bounded = Cache(tmp_path / "c", limit=one * 4)
    for i in range(20):
        bounded.store(f"{100 + i:064x}", [], [], {"artifact": os.urandom(5000)}, {})
        assert bounded.stats()["bytes"] <= one * 4
    assert bounded.store("f" * 64, [], [], {"artifact": os.urandom(one * 5)}, {}) is None  # never fits


@pytest.mark.parametrize("text, value", [("", 2 << 30), ("1000", 1000), ("64M", 64 << 20), ("1G", 1 << 30),
                                         ("2.5K", 2560), ("0", 0), ("lots", 2 << 30), ("inf", 2 << 30)])
def test_the_bound_comes_from_the_environment(monkeypatch, text, value):
    monkeypatch.setenv("TILEC_CACHE_MAX_BYTES", text)
    assert max_bytes() == value


CHURN = r"""
import os, sys
from tilec.cache import Cache
c = Cache(sys.argv[1], limit=int(sys.argv[2]))
for i in range(60):
    key = f"{i % 12:064x}"
    e = c.lookup(key)
    if e is not None:
        assert e.outputs["artifact"] == bytes([i % 12]) * 3000, "served a wrong artifact"
    else:
        c.store(key, [], [], {"artifact": bytes([i % 12]) * 3000}, {})
"""


def test_concurrent_processes_under_a_tight_bound(tmp_path):
    """Four processes store, look up and evict in one small cache at once: no error, and every hit
    serves the bytes stored under its key."""
    procs = [subprocess.Popen([sys.executable, "-c", CHURN, str(tmp_path / "c"), "20000"], stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    st = Cache(tmp_path / "c").stats()
    assert st["bytes"] <= 20000 and st["hits"] + st["misses"] == 240


# ================================================================ limits before work, located diagnostics

import tilec  # noqa: E402
from tilec.diagnostics import CompileError  # noqa: E402

SAMPLES = ROOT / "samples"


def _error_of(path, **kw) -> tuple[str, float]:
    t = time.perf_counter()
    with pytest.raises(CompileError) as e:
        tilec.compile(str(path), **kw)
    d = next(d for d in e.value.diagnostics if d.severity == "error")
    assert d.span is None or d.span.line >= 1
    return d.message, time.perf_counter() - t


@pytest.mark.parametrize("target", [None, "sm90", "gfx942"])
@pytest.mark.parametrize("define, message", [
    ({"num_stages": 65536}, "num_stages=65536: at most 64 pipeline stages"),
    ({"num_stages": 2**31}, "at most 64 pipeline stages"),
    ({"threads": 2**40}, "no GPU runs more than 1024 threads per block"),
])
def test_huge_consts_are_refused_before_work_in_proportion(target, define, message):
    msg, seconds = _error_of(SAMPLES / "gemm.tile", defines=define, target=target)
    assert message in msg and seconds < 2


@pytest.mark.parametrize("target", ["sm90", "gfx942", "webgpu"])
def test_shared_memory_far_over_the_limit_is_refused_before_lowering(target):
    """block_K=4096 declares 2 MiB of shared tiles: lowering them for gfx942 took 4 s of CPU before
    storage planning refused them (found by the fuzzer)."""
    msg, seconds = _error_of(SAMPLES / "gemm.tile", defines={"block_K": 4096}, target=target)
    assert "declares 2097152 bytes of shared memory (A_s 1048576 B, B_s 1048576 B)" in msg and seconds < 1
    msg, _ = _error_of(SAMPLES / "gemm.tile", defines={"block_K": 256}, target=target)  # near the limit:
    assert "needs" in msg and "bytes of shared memory" in msg  # storage planning's exact figures


@pytest.mark.parametrize("sample, define", [("softmax", "accum_dtype"), ("row_sum", "accum_dtype"),
                                            ("fp8_gemm", "out_dtype"), ("vector_add", "dtype")])
def test_fp8_on_cdna2_is_a_diagnostic_and_builds_on_gfx942(sample, define):
    msg, _ = _error_of(SAMPLES / f"{sample}.tile", defines={define: "f8e4m3"}, target="gfx90a")
    assert "is not supported on gfx90a" in msg or "must be" in msg
    source = tilec.compile(SAMPLES / f"{sample}.tile", defines={define: "f8e4m3"}, target="gfx942").source
    assert "tl::fp8_e4m3" in source


@pytest.mark.parametrize("threads", [1, 4, 8])
def test_tiny_hip_blocks_are_refused_fast(threads):
    """A block smaller than a wavefront: a located error in well under a second (it took 25 s and wrote
    3.5 MB of HIP), and the register-staged pipeline is not used for a few threads loading whole tiles."""
    msg, seconds = _error_of(SAMPLES / "gemm.tile", defines={"threads": threads}, target="gfx942")
    assert "not a whole number of 64-lane wavefronts" in msg and seconds < 3


def test_register_staging_is_bounded_per_thread():
    from tilec.ir import copy_mechanisms

    r = tilec.compile(str(SAMPLES / "gemm.tile"), target="gfx942", defines={"threads": 64})
    plans = list(r.module.kernels[0].schedule.loops.values())
    assert [p.mechanism for p in plans] == ["registers"]  # 8192 elements / 64 threads = 128 a thread
    assert copy_mechanisms.MAX_STAGED_PER_THREAD >= 128


@pytest.mark.parametrize("target, unit", [("sm80", "32-lane warps"), ("sm90", "32-lane warps"),
                                          ("gfx90a", "64-lane wavefronts")])
def test_partial_warps_are_refused_where_the_lowering_needs_whole_ones(target, unit):
    msg, _ = _error_of(SAMPLES / "gemm.tile", defines={"threads": 100}, target=target)
    assert unit in msg


def test_the_simt_interpreter_runs_partial_warps_as_the_gpu_does():
    """The compiler refuses partial warps; the SIMT interpreter models them (a short last warp) and
    reports a shuffle that reads past the block -- which is what the refused lowerings did."""
    import re

    import numpy as np

    from tilec.interp import random_inputs, run_kernel
    from tilec.simt.interp import SimtInterpreterError, run_simt

    def lowered(text: str, target: str):
        return (tilec.compile("k.tile", text=text).module.kernels[0],
                tilec.compile("k.tile", text=text, target=target).simt.kernels[0])

    # WebGPU has no warps to refuse: its lowering of an 80-thread block runs with a 16-lane last warp
    text = re.sub(r"threads=\d+", "threads=80", (SAMPLES / "vector_add.tile").read_text())
    tk, sk = lowered(text, "webgpu")
    sizes = {"N": 1000}
    args = random_inputs(tk, sizes, 3)
    out = next(p.name for p in tk.params if getattr(p, "is_output", False))
    args[out][...] = np.nan
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_kernel(tk, want)
    run_simt(sk, args, sizes, warp_size=32)
    np.testing.assert_allclose(args[out].astype(float), want[out].astype(float), rtol=4e-3, atol=4e-3)
    softmax = tilec.compile(str(SAMPLES / "softmax.tile"), target="sm80").simt.kernels[0]
    softmax.threads = 100  # its row reductions shuffle across lanes that a 100-thread block does not have
    tk = tilec.compile(str(SAMPLES / "softmax.tile")).module.kernels[0]
    with pytest.raises(SimtInterpreterError, match="shfl_xor reads lane|data race|out-of-bounds"):
        run_simt(softmax, random_inputs(tk, {"M": 4, "N": 300}, 1), {"M": 4, "N": 300}, warp_size=32)


def test_long_inputs_fail_fast(tmp_path):
    long_line = tmp_path / "line.tile"
    long_line.write_text("const c = " + "1 + " * 250_000 + "1\n")
    msg, seconds = _error_of(long_line)
    assert "characters long; at most 50000" in msg and seconds < 1
    big = tmp_path / "big.tile"
    big.write_text("".join(f"const c{i} = {i}\n" for i in range(700_000)))
    msg, seconds = _error_of(big)
    assert "a .tile file may have at most 1 MiB" in msg and seconds < 1


def test_run_sizes_are_bounded(project, capsys):
    (project / "v.tile").write_text((SAMPLES / "vector_add.tile").read_text())
    assert tilec_main(["run", "v.tile", "--size", "N=10000000000"]) == 1
    assert "a runtime size is at most 2147483647" in capsys.readouterr().err
    assert tilec_main(["run", "v.tile", "--size", "N=2000000000"]) == 1
    assert "GiB of arguments; the interpreter allows 4 GiB" in capsys.readouterr().err


# ================================================================ deterministic artifacts


def _require(ok, what: str) -> None:
    if ok:
        return
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
    pytest.skip(f"{what} not found")


def _has_amd(arch: str) -> bool:
    from tilec.targets.hip.toolchain import find_compiler

    return find_compiler(arch) is not None


ARTIFACTS = [  # (target, output name, what it needs)
    ("sm80", "k.cu", None), ("sm80", "k.ptx", "nvcc"), ("sm80", "k.cubin", "nvcc"), ("sm80,sm90", "k.fatbin", "nvcc"),
    ("sm80,sm90", "k.h", "nvcc"), ("gfx942", "k.hip", None), ("gfx942", "k.hsaco", "gfx942"),
    ("gfx942", "k.s", "gfx942"), ("gfx90a", "k.hsaco", "gfx90a"), ("webgpu", "k.wgsl", None),
]


@pytest.mark.parametrize("target, name, needs", ARTIFACTS, ids=[f"{t}-{n}" for t, n, _ in ARTIFACTS])
def test_every_artifact_kind_is_byte_for_byte_deterministic(tmp_path, target, name, needs):
    """Two builds, from different working directories, without the cache: identical artifact and
    manifest (gfx942 code objects once differed: clang named `__hip_cuid_` after a random temp dir)."""
    import shutil

    if needs == "nvcc":
        _require(shutil.which("nvcc"), "nvcc")
    elif needs:
        _require(_has_amd(needs), f"a compiler for {needs}")
    src = (SAMPLES / "vector_add.tile").read_text()
    outs = []
    for i in range(2):
        d = tmp_path / f"build{i}"
        d.mkdir()
        (d / "vector_add.tile").write_text(src)
        proc = subprocess.run([sys.executable, "-m", "tilec", "vector_add.tile", "-t", target, "-o", name,
                               "--no-cache"], cwd=d, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        outs.append(((d / name).read_bytes(), (d / f"{name}.json").read_bytes()))
    assert outs[0][0] == outs[1][0], f"{name} differs between two identical builds"
    assert outs[0][1] == outs[1][1], f"{name}.json differs between two identical builds"


def test_the_ir_dump_is_deterministic(tmp_path):
    runs = [subprocess.run([sys.executable, "-m", "tilec", str(SAMPLES / "gemm.tile"), "--emit-ir=all", "-t", "sm90"],
                           capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) > 1000


def test_a_chain_of_constants_folds_to_one():
    """`bx * 1 + 1 + 1 + ... + 1` (199 ones) was lowered as a 200-deep index for every element a
    gfx942 thread copies: 7 s of CPU (found by the fuzzer). Integer chains now fold."""
    text = (SAMPLES / "row_sum.tile").read_text().replace("A[bx * block_M,", "A[bx * 1" + " + 1" * 199 + ",")
    t = time.process_time()
    r = tilec.compile(str(SAMPLES / "fuzz_row_sum.tile"), text=text, target="gfx942")
    assert time.process_time() - t < 2
    assert "bx + 199" in tilec.compile(str(SAMPLES / "fuzz_row_sum.tile"), text=text).ir() and r.source
