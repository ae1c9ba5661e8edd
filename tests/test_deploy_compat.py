"""Forward compatibility and the no-JIT guarantee (issue #31, docs/deploy.md): which image of an artifact a GPU
runs (tilec.manifest.choose_image, as the C launcher picks it), the forward-compatible PTX that fatbins, headers and
objects carry, and the switch under which nothing compiles -- against the recording driver of tests/fake_cuda.py,
with the toolchain where one is installed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

import tilec
import tilec.runtime as rt
from tilec.manifest import choose_image, for_device
from tilec.runtime.module import Module

SCALE = {"name": "scale", "params": [{"name": "X", "kind": "tensor", "dtype": "f32", "output": False, "shape": ["N"]},
                                     {"name": "Y", "kind": "tensor", "dtype": "f32", "output": True, "shape": ["N"]}],
         "sizes": ["N"], "grid": ["ceildiv(N, 256)", "1", "1"], "threads": 256, "shared_bytes": 0}
PTX = {"arch": "compute_80", "target": "sm80", "kernels_arch": "sm_80"}


def _fatbin(**extra):
    return {"manifest_version": 1, "kind": "fatbin", "archs": ["sm_80", "sm_90a"], "driver_api_version": 13000,
            "toolchain": "nvcc 13.0.88", "kernels": [SCALE], **extra}


@pytest.mark.parametrize("cc, image, how", [(90, "sm_90a", "exact"), (80, "sm_80", "exact"),
                                            (86, "sm_80", "same_major"), (89, "sm_80", "same_major"),
                                            (100, "compute_80", "jit"), (120, "compute_80", "jit")])
def test_the_image_a_gpu_runs(cc, image, how):
    choice = choose_image(_fatbin(ptx=PTX), cc)
    assert (choice.image, choice.how) == (image, how)
    assert choice.why  # said in words


def test_without_ptx_a_newer_gpu_runs_nothing():
    assert choose_image(_fatbin(), 100) is None
    assert choose_image(_fatbin(ptx=PTX), 75) is None  # PTX runs on its architecture and newer only
    ptx_file = dict(_fatbin(), kind="ptx", archs=["sm_80"])
    assert choose_image(ptx_file, 90).how == "jit"


def test_the_ptx_image_launches_with_its_own_entries():
    """A fatbin whose PTX was generated for sm80 alone launches, where the PTX runs, with sm80's entries."""
    sm80 = dict(SCALE, threads=128)
    m = _fatbin(archs=["sm_90a"], ptx=PTX, arch_kernels={"sm_90a": [SCALE], "sm_80": [sm80]})
    assert for_device(m, 100)["kernels"] == [sm80]
    assert for_device(m, 90)["kernels"] == [SCALE]


def test_the_runtime_says_which_image_and_refuses_jit_when_asked(monkeypatch):
    fake = install(monkeypatch, FakeDriver({"scale": SCALE}, capability=(10, 0)))
    monkeypatch.delenv("TILEC_NO_JIT", raising=False)
    mod = Module(b"fatbin", _fatbin(ptx=PTX), "k.fatbin")
    loaded = mod.image_report()
    assert (loaded.image, loaded.how) == ("compute_80", "jit") and loaded.load_seconds >= 0
    assert fake.loads == [b"fatbin"]

    for module in (Module(b"fatbin", _fatbin(ptx=PTX), "k.fatbin", no_jit=True),
                   _with_env(monkeypatch, lambda: Module(b"fatbin", _fatbin(ptx=PTX), "k.fatbin"))):
        with pytest.raises(rt.JitRefused) as e:
            module.scale(np.ones(300, np.float32))
        msg = str(e.value)
        assert all(w in msg for w in ("k.fatbin", "scale", "GPU 0 (Fake GPU, sm_100)", "compute_80 PTX",
                                      "missing: a cubin for sm_100")), msg
    assert fake.loads == [b"fatbin"]  # nothing more was handed to the driver

    fake.capability = (9, 0)  # a cubin for this GPU: the guarantee does not stand in the way
    assert Module(b"fatbin", _fatbin(ptx=PTX), "k.fatbin", no_jit=True).image_report().how == "exact"


def _with_env(monkeypatch, make):
    monkeypatch.setenv("TILEC_NO_JIT", "1")
    module = make()
    monkeypatch.delenv("TILEC_NO_JIT")
    return module


def test_no_jit_load_refuses_a_cache_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "k.tile"
    src.write_text(open("samples/vector_add.tile").read())
    with pytest.raises(rt.JitRefused) as e:
        tilec.load(src, target="sm90", no_jit=True)
    msg = str(e.value)
    assert "vector_add" in msg and "GPU 0" in msg and "missing: the compiled artifact" in msg, msg
    assert not (tmp_path / "cache" / "load").exists()  # nothing was built


def _fatbin_images(data: bytes) -> set[tuple[str, int]]:
    """(kind, architecture) of each image in a fatbin: its header (magic, version, header size, size of the rest)
    then per image a header whose first fields are the kind (1 PTX, 2 ELF), its header size and payload size, and
    at byte 28 the architecture."""
    import struct

    magic, _, header, size = struct.unpack_from("<IHHQ", data, 0)
    assert magic == 0xBA55ED50
    out, offset = set(), header
    while offset < header + size:
        kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, offset)
        out.add(({1: "ptx", 2: "cubin"}[kind], struct.unpack_from("<I", data, offset + 28)[0]))
        offset += entry_header + payload
    return out


def _toolchain_or_skip(compiler: str | None = None):
    import os
    import shutil

    from tilec.targets.cuda.locate import nvfatbin_lib, nvrtc_lib

    found = {"nvcc": shutil.which("nvcc") is not None, "nvrtc": nvrtc_lib() is not None and nvfatbin_lib() is not None}
    if not (found[compiler] if compiler else any(found.values())):
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"no {compiler or 'CUDA toolchain'} (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip(f"no {compiler or 'CUDA toolchain (nvcc or the NVRTC wheel)'}")


def test_headers_carry_ptx_of_the_generic_path(tmp_path):
    """An sm90-only header gets sm80's code as compute_80 PTX (compiled for it alone), with sm80's launch
    configuration; --no-ptx leaves it out; the output stays byte-identical build to build."""
    _toolchain_or_skip()
    opts = dict(emit="header", use_cache=False)
    a = tilec.compile("samples/softmax.tile", "sm90", **opts)
    assert a.data == tilec.compile("samples/softmax.tile", "sm90", **opts).data
    images = json.loads(a.manifest)["header"]["images"]
    assert [im["arch"] for im in images] == ["sm_90a", "compute_80"]
    text = a.data.decode()
    assert ', 80, 0, 1, "compute_80"}' in text  # the image table marks it PTX
    bare = tilec.compile("samples/softmax.tile", "sm90", forward_ptx=False, **opts)
    assert [im["arch"] for im in json.loads(bare.manifest)["header"]["images"]] == ["sm_90a"]


@pytest.mark.parametrize("compiler", ["nvcc", "nvrtc"])  # nvcc's -gencode ...,code=compute_80; nvFatbinAddPTX
def test_fatbins_carry_the_oldest_generic_targets_ptx(compiler):
    _toolchain_or_skip(compiler)
    a = tilec.compile("samples/vector_add.tile", "sm80,sm90", emit="fatbin", use_cache=False, toolchain=compiler)
    m = json.loads(a.manifest)
    assert m["ptx"] == PTX and m["archs"] == ["sm_80", "sm_90a"]
    assert _fatbin_images(a.data) == {("ptx", 80), ("cubin", 80), ("cubin", 90)}
    assert "ptx" not in json.loads(tilec.compile("samples/vector_add.tile", "sm80,sm90", emit="fatbin",
                                                 use_cache=False, forward_ptx=False).manifest)


def test_ptx_needs_a_driver_of_its_cuda_version(monkeypatch):
    """A 13.0 driver loads cubins built by CUDA 13.1 (minor-version compatibility), not 13.1's PTX."""
    fake = install(monkeypatch, FakeDriver({"scale": SCALE}, capability=(10, 0), version=13000))
    built = _fatbin(ptx=PTX, driver_api_version=13010, toolchain="nvcc 13.1.80")
    with pytest.raises(rt.DriverTooOld, match=r"compute_80 PTX, built with CUDA 13\.1 .*this driver supports CUDA "
                                              r"13\.0"):
        Module(b"f", built, "k.fatbin").image_report()
    fake.capability = (9, 0)
    assert Module(b"f", built, "k.fatbin").image_report().image == "sm_90a"


def test_the_nvrtc_of_another_cuda_version_is_chosen_by_tilec_nvrtc(monkeypatch, tmp_path):
    """TILEC_NVRTC=12 takes the nvidia-cuda-nvrtc-cu12 wheel's library (artifacts for CUDA 12 drivers); a path
    takes that library; the default is unchanged."""
    from tilec.targets.cuda import locate

    default = locate.nvrtc_lib()
    lib = tmp_path / "libnvrtc.so.12"
    lib.write_bytes(b"")
    monkeypatch.setenv("TILEC_NVRTC", str(lib))
    assert locate.nvrtc_lib() == lib
    monkeypatch.setenv("TILEC_NVRTC", "99")
    assert locate.nvrtc_lib() is None  # no wheel of CUDA 99: the build then says NVRTC is missing
    monkeypatch.setattr(locate, "wheel_files", lambda pattern: [tmp_path / "cu13/lib/libnvrtc.so.13", lib])
    monkeypatch.setenv("TILEC_NVRTC", "12")
    assert locate.nvrtc_lib() == lib
    monkeypatch.delenv("TILEC_NVRTC")
    assert locate.nvrtc_lib() == tmp_path / "cu13/lib/libnvrtc.so.13"
    assert default is None or default.name.startswith("libnvrtc.so")


def _nvrtc12():
    from tilec.targets.cuda.locate import wheel_files

    found = [p for p in wheel_files("*/lib/libnvrtc.so.12")]
    extra = os.environ.get("TILEC_TEST_NVRTC12")  # or a libnvrtc.so.12 unpacked elsewhere
    return found[0] if found else (Path(extra) if extra and Path(extra).is_file() else None)


def test_an_artifact_built_by_nvrtc_12_needs_only_a_cuda_12_driver(monkeypatch):
    lib = _nvrtc12()
    if lib is None:
        pytest.skip("no NVRTC 12 (pip install 'tilec[cuda12]', or TILEC_TEST_NVRTC12=path/libnvrtc.so.12)")
    monkeypatch.setenv("TILEC_NVRTC", str(lib))
    a = tilec.compile("samples/vector_add.tile", "sm80,sm90", emit="header", toolchain="nvrtc", use_cache=False)
    m = json.loads(a.manifest)
    assert m["toolchain"].startswith("nvrtc 12.") and 12000 <= m["driver_api_version"] < 13000
    assert "needs a CUDA 12.x driver or newer" in a.data.decode()


def test_kernels_that_do_not_fit_the_generic_target_go_without_ptx_with_a_warning():
    """A gemm tile of 192 KiB of shared memory fits sm90 (227 KiB), not sm80 (163 KiB): the header keeps its sm_90a
    cubin, has no PTX, and the build says so (a warning the command line prints; -Werror refuses it)."""
    _toolchain_or_skip()
    big = {"block_M": 128, "block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4}
    a = tilec.compile("samples/gemm.tile", "sm90", emit="header", defines=big, use_cache=False)
    assert [im["arch"] for im in json.loads(a.manifest)["header"]["images"]] == ["sm_90a"]
    (w,) = [d for d in a.toolchain_warnings if "forward-compatible PTX" in d.message]
    assert "do not compile for sm80" in w.message and "196608 bytes of shared memory" in w.message
    from tilec.diagnostics import CompileError

    with pytest.raises(CompileError, match="no forward-compatible PTX"):
        tilec.compile("samples/gemm.tile", "sm90", emit="header", defines=big, use_cache=False, werror=True)
