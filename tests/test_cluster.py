"""Thread-block clusters on sm90 (docs/hopper.md, "Thread-block clusters"): two blocks along grid x or y share one
operand tile of a warp-specialized TMA gemm pipeline; each loads half of it and TMA multicasts it into both.

Checked without a GPU: the schedule (the request, the plan, its printout and price), where a cluster is ignored
(remark) or refused (a pinned schedule request, a bad keyword), the lowered code executed by the SIMT interpreter's
cluster model against the Tile IR interpreter at regular and ragged shapes (a grid that is not a whole number of
clusters), planted protocol bugs it must catch, the SASS of an nvcc build, the manifest, tilec.runtime's launch
(cuLaunchKernelEx with the cluster dimension attribute) on the recording fake driver, and the C launcher compiled
and run against a mock driver.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

import tilec
from tilec.cli.main import main as tilec_main
from tilec.diagnostics import CompileError
from tilec.ir import simt as S
from tilec.ir.schedule import ScheduleRequest, resources

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"
# the every-target tile: several k-steps and stages at small sizes (the SIMT model runs in seconds)
SMALL = {"block_M": 128, "block_N": 128, "block_K": 32, "threads": 128, "num_stages": 3}
HOPPER = {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4}  # the sm90 default, a TMA store


def _cl(m: int, n: int, **extra) -> dict:
    return {**extra, "cluster_m": m, "cluster_n": n}


def _compile(defines: dict, **kw):
    return tilec.compile(GEMM, target="sm90", defines=defines, **kw)


def _main_source(r) -> str:
    return r.source[r.source.index(" gemm("):r.source.index("gemm__no_tma(")]


# ---------------------------------------------------------------- the schedule


@pytest.mark.parametrize("shape,grid_dim,shared", [((2, 1), "y", "B_s"), ((1, 2), "x", "A_s")])
def test_cluster_is_planned_printed_and_priced(shape, grid_dim, shared):
    r = _compile(_cl(*shape, **SMALL), dump_after={"pipeline-planning"})
    k = r.module.kernels[0]
    cluster = (shape[1], shape[0])  # grid x runs over N: (cluster_n, cluster_m)
    assert k.schedule.cluster == cluster
    (plan,) = k.schedule.loops.values()
    assert [p.dst.buffer.name for p in plan.multicast] == [shared]
    text = r.ir_after["pipeline-planning"]
    assert f"multicast: {shared}" in text and f"cluster: {cluster[0]}x{cluster[1]} blocks" in text
    res = resources(k)
    plain = resources(_compile(SMALL).module.kernels[0])
    assert res.cluster == cluster and res.shared_bytes == plain.shared_bytes and res.threads == plain.threads
    # A is 128x32 f16 (8 KiB), B 32x128 (8 KiB): the shared tile counts half per block
    assert (res.loaded_bytes, plain.loaded_bytes) == (8192 + 4096, 16384)
    assert "cluster" in str(res)
    sk = r.simt.kernels[0]
    assert sk.attrs["cluster"] == (*cluster, 1)
    twin = r.simt.kernels[1]
    assert twin.name == "gemm__no_tma" and "cluster" not in twin.attrs  # the no-TMA twin stays clusterless


def test_default_build_is_clusterless_and_has_no_cluster_code():
    r = _compile({})
    assert all(k.schedule.cluster == (1, 1) for k in r.module.kernels)
    assert "cluster" not in r.simt.kernels[0].attrs
    assert "tilec_cluster.h" not in r.source and "cluster_sync" not in r.source and "multicast" not in r.source
    assert "attr cluster" not in r.ir()


def test_schedule_request_pins_a_cluster_and_refuses_what_cannot_have_one():
    req = ScheduleRequest.parse({"cluster": [1, 2]})
    assert req.cluster == (1, 2)
    with pytest.raises(ValueError, match=r"cluster must be one of \(1, 1\), \(2, 1\), \(1, 2\)"):
        ScheduleRequest.parse({"cluster": [2, 2]})
    r = _compile(SMALL, schedule={"cluster": [2, 1]})
    assert r.module.kernels[0].schedule.cluster == (2, 1)
    # pinned where it cannot be: an error at the kernel's line
    with pytest.raises(CompileError) as e:
        _compile({**SMALL, "persistent": True}, schedule={"cluster": [2, 1]})
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert "asks for a 2x1 cluster for kernel 'gemm'" in d.message and "persistent" in d.message
    assert d.span is not None and d.span.line > 1
    with pytest.raises(CompileError, match="has no thread-block clusters"):
        tilec.compile(GEMM, target="sm80", defines=SMALL, schedule={"cluster": [2, 1]})


@pytest.mark.parametrize("target,flags,why", [
    ("sm80", [], "sm80 has no thread-block clusters with TMA multicast"),
    ("sm90", ["--no-tma"], "TMA is turned off"),
    ("sm90", ["--no-warp-specialize"], "it applies to a warp-specialized TMA pipeline"),
    ("sm90", ["-Dpersistent=True"], "the kernel is persistent"),
])
def test_cluster_where_it_cannot_be_is_ignored_with_a_remark(capsys, tmp_path, target, flags, why):
    # (the sample's tune() space leaves clusters out of persistent configurations: a literal cluster here)
    src = tmp_path / "gemm.tile"
    src.write_text(GEMM.read_text().replace("cluster=(cluster_n, cluster_m)", "cluster=(1, 2)"))
    out = tmp_path / "g.cu"
    assert tilec_main([str(src), "--target", target, "-o", str(out), "-Rpass=cluster", *flags]) == 0
    err = capsys.readouterr().err
    assert re.search(r"gemm\.tile:\d+:\d+: remark: cluster=\(1, 2\) is ignored for kernel 'gemm'", err), err
    assert why in err
    assert "multicast" not in out.read_text() and "cluster_sync" not in out.read_text()


def test_granted_cluster_is_a_remark_too(capsys, tmp_path):
    assert tilec_main([str(GEMM), "--target", "sm90", "-o", str(tmp_path / "g.cu"), "-Dcluster_n=2", "-R"]) == 0
    assert "remark: cluster=(2, 1): blocks side by side along grid x share 'A_s'" in capsys.readouterr().err


@pytest.mark.parametrize("value,message", [
    ("(3, 1)", r"cluster must be one of \(1, 1\), \(2, 1\), \(1, 2\)"),
    ("(2, 2)", r"cluster must be one of"),
    ("2", r"cluster= takes two compile-time integers"),
    ("(2, M)", r"a cluster extent must be a compile-time integer"),
])
def test_bad_cluster_keyword_is_a_located_diagnostic(tmp_path, capsys, value, message):
    src = tmp_path / "k.tile"
    src.write_text("kernel k(A: f16[M, N], B: out f16[M, N]):\n"
                   f"    with Kernel(ceildiv(N, 64), threads=128, cluster={value}) as (bx,):\n"
                   "        S = alloc_shared((64,), f16)\n"
                   "        copy(A[0, bx * 64], S)\n"
                   "        copy(S, B[0, bx * 64])\n")
    assert tilec_main([str(src), "--target", "sm90", "--emit-ir"]) != 0
    err = capsys.readouterr().err
    assert re.search(r"k\.tile:2:\d+: error: " + message, err), err
    assert "Traceback" not in err


def test_tilelang_cluster_dims_is_accepted():
    text = GEMM.read_text().replace("cluster=(cluster_n, cluster_m)", "cluster_dims=2")
    r = tilec.compile(GEMM, text=text, target="sm90", defines=SMALL)
    assert r.module.kernels[0].schedule.cluster == (2, 1)
    with pytest.raises(CompileError, match="along grid z is not supported"):
        tilec.compile(GEMM, text=text.replace("cluster_dims=2", "cluster_dims=(1, 1, 2)"), target="sm90")


def test_cluster_without_a_shared_producer_is_ignored(tmp_path, capsys):
    """A pipeline whose every copy moves with the block index along the cluster's dimension has nothing to
    multicast (each block of gemm's grid x loads its own B columns and, along y, its own A rows)."""
    src = tmp_path / "k.tile"
    text = GEMM.read_text().replace("cluster=(cluster_n, cluster_m)", "cluster=(2, 1)")
    text = text.replace("copy(A[by * block_M, k * block_K], A_s)", "copy(A[by * block_M + bx, k * block_K], A_s)")
    src.write_text(text)
    assert tilec_main([str(src), "--target", "sm90", "-o", str(tmp_path / "k.cu"), "-Rpass=cluster"]) == 0
    assert "no producer tile is the same for the blocks side by side along grid x" in capsys.readouterr().err


# ---------------------------------------------------------------- the lowered code


def test_lowered_protocol():
    r = _compile(_cl(2, 1, **SMALL))
    src = _main_source(r)
    # 4 consumer warps in each of the two blocks release every stage
    assert src.count("tl::mbar_init(&tl_mbar[6], 8);") == 1
    assert src.count("tl::cluster_sync();") == 2  # after the barriers' initialisation, and before the exit
    assert src.index("tl::fence_mbar_init();") < src.index("tl::cluster_sync();") < src.index("threadIdx.x) >= 128")
    assert src.split("tl::cluster_sync();")[-1].startswith("\n}\n")  # the kernel's last statement
    # the shared B tile: each block its 16 rows of the 32, multicast into both blocks' stage
    assert re.search(r"tma_load_multicast_2d\(&tl_tmap\d, &B_s\[k_slot \* 4096 \+ \(\(\(int\(blockIdx\.y\) % 2\) \* "
                     r"16\) \* 64\)\], &tl_mbar\[3 \+ k_slot\], 3, ", src), src
    # each block's full barrier still expects the whole tile (8192 bytes), half from its peer
    assert "tl::mbar_expect_tx(&tl_mbar[3 + k_slot], 8192);" in src
    assert "tl::mbar_arrive_cluster_warp(&tl_mbar[6 + ((k + 2) % 3)], 3);" in src
    assert "mbar_arrive_warp" not in src
    # a block past the grid (ragged M) runs the pipeline for its peer and skips the epilogue
    assert re.search(r"if \(by_swizzled < tl::ceildiv\(M, 128\)\) \{\n\s+// store|if \(by_swizzled < "
                     r"tl::ceildiv\(M, 128\)\)", src)
    tmaps = r.simt.kernels[0].attrs["tensor_maps"]
    assert {"tensor": "B", "box": [16, 64], "swizzle": 128} in tmaps  # half the rows of a 32x64 panel
    from tilec.ir.formula import formula
    from tilec.runtime.formulas import evaluate

    grid = [formula(g) for g in r.simt.kernels[0].grid]
    assert [evaluate(g, {"M": 300, "N": 264}) for g in grid] == [3, 4, 1]  # 3 M tiles rounded up to 2 clusters


# ---------------------------------------------------------------- executed: the SIMT interpreter's cluster model

RUN = [
    (_cl(2, 1, **SMALL), {"M": 256, "N": 256, "K": 96}),
    (_cl(2, 1, **SMALL), {"M": 300, "N": 264, "K": 136}),  # ragged: 3 M tiles, a block past the grid
    (_cl(1, 2, **SMALL), {"M": 256, "N": 256, "K": 96}),
    (_cl(1, 2, **SMALL), {"M": 300, "N": 264, "K": 136}),  # 3 N tiles
    (_cl(2, 1, **HOPPER, dtype="bf16"), {"M": 300, "N": 264, "K": 136}),  # two warpgroups, TMA store, 4 stages
    (_cl(1, 2, **HOPPER), {"M": 392, "N": 520, "K": 200}),
    (_cl(1, 2, **SMALL, trans_B=True), {"M": 200, "N": 392, "K": 72}),  # B stored [N, K]
    (_cl(2, 1, **SMALL, trans_B=True, dtype="bf16"), {"M": 392, "N": 264, "K": 136}),  # the K-major B shared
]


def _sizes(defines: dict, sizes: dict) -> dict:
    return dict(sizes)


@pytest.mark.parametrize("defines,sizes", RUN, ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()))
def test_clustered_gemm_runs_in_the_simt_interpreter(defines, sizes):
    from test_simt_interp import check

    r = _compile(defines)
    assert r.simt.kernels[0].attrs.get("cluster") in ((2, 1, 1), (1, 2, 1))
    check("gemm", defines, _sizes(defines, sizes), "sm90", result=r)


def _rewrite(body, fn):
    out = []
    for st in body:
        for field in ("body", "then_body", "else_body"):
            if hasattr(st, field):
                setattr(st, field, _rewrite(getattr(st, field), fn))
        st = fn(st)
        if st is not None:
            out.append(st)
    return out


def test_simt_interpreter_catches_planted_cluster_bugs():
    from test_simt_interp import check

    from tilec.ir import dtypes as D
    from tilec.ir import tile as T
    from tilec.ir.layout import c
    from tilec.ir.visit import rewrite_expr
    from tilec.simt.interp import SimtInterpreterError

    defines = _cl(2, 1, **SMALL)
    sizes = _sizes(defines, {"M": 256, "N": 128, "K": 160})  # 5 k-steps on 3 stages: every stage is refilled

    def planted(fn):
        r = _compile(defines)
        k = r.simt.kernels[0]
        k.body = _rewrite(k.body, fn)
        return r

    check("gemm", defines, sizes, "sm90", result=planted(lambda st: st))  # unplanted: right
    # a block multicasts into its own shared memory only: its peer's full barrier never gets its half
    def own_only(st):
        if isinstance(st, S.SCall) and st.op == "tma_load_multicast":  # mask 1 << rank: the issuing block alone
            st.args[3] = T.Binary(D.I32, None, "<<", c(1), T.Binary(D.I32, None, "%", S.BlockIdx(D.I32, None, 1), c(2)))
        return st

    with pytest.raises(SimtInterpreterError, match="never completes"):
        check("gemm", defines, sizes, "sm90", result=planted(own_only))
    # consumers that release only their own block's stage: the peer's producer waits forever
    def local_release(st):
        if isinstance(st, S.SCall) and st.op == "mbar_arrive_cluster_warp":
            return S.SCall(st.span, "mbar_arrive_warp", st.args[:1])
        return st

    with pytest.raises(SimtInterpreterError, match="never completes"):
        check("gemm", defines, sizes, "sm90", result=planted(local_release))
    # ... and with the empty barriers counting only the block's own warps, a producer refills a stage its peer's
    # wgmma has not read yet: a wrong result
    def local_release_and_count(st):
        st = local_release(st)
        if isinstance(st, S.SCall) and st.op == "mbar_init" and getattr(st.args[1], "value", 1) == 8:
            st.args[1] = c(4)
        return st

    with pytest.raises(AssertionError, match="C differs"):
        check("gemm", defines, sizes, "sm90", result=planted(local_release_and_count))
    # both blocks load the upper half of the shared tile: the lower half is never written
    def same_half(st):
        if isinstance(st, S.SCall) and st.op == "tma_load_multicast":
            def rank0(e):
                if isinstance(e, S.BlockIdx) and e.axis == 1:
                    return c(0)
                return None

            st.args = [rewrite_expr(a, rank0) for a in st.args]
        return st

    with pytest.raises(AssertionError, match="C differs"):
        check("gemm", defines, sizes, "sm90", result=planted(same_half))
    # no cluster barrier after the barriers' initialisation: a block multicasts into a peer that has not
    # initialised its barriers; none before the exit: a block arrives on the barriers of one that has exited
    first = [True]

    def no_first_sync(st):
        if isinstance(st, S.SCall) and st.op == "cluster_sync" and first[0]:
            first[0] = False
            return None
        return st

    with pytest.raises(SimtInterpreterError, match="before mbar_init"):
        check("gemm", defines, sizes, "sm90", result=planted(no_first_sync))
    r = _compile(defines)
    k = r.simt.kernels[0]
    assert isinstance(k.body[-1], S.SCall) and k.body[-1].op == "cluster_sync"
    k.body = k.body[:-1]
    with pytest.raises(SimtInterpreterError, match="has exited"):
        check("gemm", defines, sizes, "sm90", result=r)


# ---------------------------------------------------------------- nvcc: SASS, the manifest, the launches


@pytest.fixture(scope="module")
def clustered_cubin(tmp_path_factory):
    from test_cuda_backend import _cuobjdump

    if not shutil.which("nvcc") or not _cuobjdump():
        pytest.skip("nvcc or cuobjdump not found")
    d = tmp_path_factory.mktemp("cluster")
    out = d / "gemm.cubin"
    assert tilec_main([str(GEMM), "--target", "sm90", "-o", str(out), "-Dcluster_m=2"]) == 0
    return out


def test_sass_has_multicast_tma_remote_arrivals_and_cluster_barriers(clustered_cubin):
    from test_cuda_backend import _sass
    from test_hopper import _functions

    kernels = _functions(_sass(clustered_cubin))
    main, twin = kernels["gemm"], kernels["gemm__no_tma"]
    assert "UTMALDG.2D.MULTICAST" in main  # B's four panels, half the rows each
    assert main.count("UTMALDG.2D.MULTICAST") == 4 and main.count("UTMALDG.2D ") == 1  # and A's own box
    assert "UCGABAR_ARV" in main and "UCGABAR_WAIT" in main  # barrier.cluster arrive / wait
    assert "SYNCS.ARRIVE.TRANS64.RED" in main  # arrivals on the peer's empty barriers (mapa + remote arrive)
    assert "HGMMA" in main and "LDL" not in main and "STL" not in main
    # the stage releases keep release.cta semantics: no GPU-scope fence in the consumers' loop
    assert main.count("MEMBAR.ALL.GPU") == 2  # (the release of the two cluster barriers, once per block each)
    assert "MULTICAST" not in twin and "UCGABAR" not in twin and "UTMALDG" not in twin
    manifest = json.loads(clustered_cubin.with_name("gemm.cubin.json").read_text())
    entries = {e["name"]: e for e in manifest["kernels"]}
    assert entries["gemm"]["cluster"] == [1, 2, 1] and "cluster" not in entries["gemm__no_tma"]
    assert entries["gemm"]["grid"][1] == "(ceildiv(ceildiv(M, 128), 2) * 2)"
    assert {"tensor": "B", "box": [32, 64], "swizzle": 128} in entries["gemm"]["tensor_maps"]


def test_runtime_launches_in_clusters_on_the_fake_driver(clustered_cubin, monkeypatch):
    from tilec.runtime.module import Module

    manifest = json.loads(clustered_cubin.with_name("gemm.cubin.json").read_text())
    fake = install(monkeypatch, FakeDriver({e["name"]: e for e in manifest["kernels"]}))
    mod = Module(clustered_cubin.read_bytes(), manifest)
    M, K, N = 300, 136, 264  # 3 M tiles: the grid rounds up to 2 clusters of 2
    A, B, C = (np.ones((M, K), np.float16), np.ones((K, N), np.float16), np.zeros((M, N), np.float16))
    mod.gemm(A, B, C)
    (launch,) = fake.launches
    assert launch.fn == "gemm" and launch.cluster == (1, 2, 1) and launch.grid == (2, 4, 1)
    assert "launch_cluster" in fake.calls
    assert launch.block == (384, 1, 1)
    # a tensor TMA cannot address: the clusterless twin, by cuLaunchKernel
    fake.launches.clear()
    K = 100
    mod.gemm(np.ones((M, K), np.float16), np.ones((K, N), np.float16), np.zeros((M, N), np.float16))
    (launch,) = fake.launches
    assert launch.fn == "gemm__no_tma" and launch.cluster is None and launch.grid == (2, 3, 1)
    # a failed first attempt (no context current) is retried through launch_packed, still in clusters
    fake.launches.clear()
    fake.raw_results = [201]
    mod.gemm(A, B, C)
    (launch,) = fake.launches
    assert launch.cluster == (1, 2, 1) and fake.calls[-1] == "launch_packed"


def test_cluster_launch_config_struct_matches_cuda_h():
    import ctypes

    from tilec.runtime import cuda_driver

    assert ctypes.sizeof(cuda_driver.CUlaunchAttribute) == 72  # id, pad to 8, a 64-byte value
    cfg = cuda_driver.cluster_launch_config((4, 2, 1), 384, 1000, 0, (2, 1, 1))
    assert ctypes.sizeof(cuda_driver.CUlaunchConfig) == 56
    assert (cfg.gridDimX, cfg.gridDimY, cfg.blockDimX, cfg.sharedMemBytes, cfg.numAttrs) == (4, 2, 384, 1000, 1)
    assert cfg.attrs[0].id == 4 and list(cfg.attrs[0].value[:3]) == [2, 1, 1]


MOCK_LAUNCH_EX = r"""
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** p, void** extra) {
  unsigned i;
  (void)p; (void)extra;
  printf("launchex %s grid %u %u %u block %u shared %u", (const char*)f, config->gridDimX, config->gridDimY,
         config->gridDimZ, config->blockDimX, config->sharedMemBytes);
  for (i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      printf(" cluster %u %u %u", config->attrs[i].value.clusterDim.x, config->attrs[i].value.clusterDim.y,
             config->attrs[i].value.clusterDim.z);
  printf("\n");
  return CUDA_SUCCESS;
}
"""


def test_c_launcher_launches_in_clusters(tmp_path):
    from test_deploy import cuda_include_dir
    from test_tensor_maps import MOCK_DRIVER

    gcc, inc = shutil.which("gcc"), cuda_include_dir()
    if not gcc or not inc or not shutil.which("nvcc"):
        pytest.skip("gcc, nvcc or the CUDA toolkit's cuda.h not found")
    assert tilec_main([str(GEMM), "--target", "sm90", "-o", str(tmp_path / "gemm.h"), "-Dcluster_n=2"]) == 0
    header = (tmp_path / "gemm.h").read_text()
    assert "cuLaunchKernelEx" in header and "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION" in header
    (tmp_path / "driver.c").write_text(MOCK_DRIVER + MOCK_LAUNCH_EX)
    (tmp_path / "main.c").write_text(
        '#include "gemm.h"\n#include <stdlib.h>\n'
        "int main(int argc, char** argv) {\n"
        "  int K = atoi(argv[1]);\n  (void)argc;\n"
        "  printf(\"rc %d\\n\", (int)gemm_launch(0, 0x10000, 0x20000, 0x30000, 300, K, 264));\n"
        "  return 0;\n}\n")
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{inc}", f"-I{tmp_path}"]
    subprocess.run([gcc, *flags, "main.c", "driver.c", "-o", "prog", "-lpthread"], cwd=tmp_path, check=True)

    def run(k: int) -> list[str]:
        out = subprocess.run([str(tmp_path / "prog"), str(k)], capture_output=True, text=True, timeout=60, check=True)
        return out.stdout.splitlines()

    lines = run(136)
    # N = 264: 2 N tiles of 256, a whole cluster of 2 along x; M = 300: 3 M tiles
    assert "launchex gemm grid 2 3 1 block 384 shared" in "\n".join(lines) and "cluster 2 1 1" in "\n".join(lines)
    assert "rc 0" in lines
    lines = run(100)  # a 200-byte row: TMA cannot address A, the clusterless twin by cuLaunchKernel
    assert any(ln.startswith("launch gemm__no_tma grid 2 3 1 block 256") for ln in lines), lines
    assert not any(ln.startswith("launchex") for ln in lines)
