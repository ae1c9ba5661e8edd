"""The sm90 (Hopper) path without a GPU: which instructions the passes choose, the layouts they rely on
(checked against the PTX ISA's definitions, written out independently here), the SASS nvcc makes of
them, the manifest's tensor maps and no-TMA twins, and the switches that turn each feature off.
The same kernels run on the H200 in bench/gpu_suite.py (bench/RESULTS.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_cuda_backend import _sass

import tilec
from tilec.cli.common import parse_defines as _parse_defines
from tilec.cli.main import main as tilec_main
from tilec.diagnostics import CompileError
from tilec.ir import simt as S
from tilec.ir import tile as T
from tilec.ir.fold import as_int
from tilec.ir.layout import SharedLayout, WgmmaTiled, c
from tilec.ir.visit import walk_stmts

ROOT = Path(__file__).resolve().parent.parent
HOPPER_GEMM = ["-Dblock_N=256", "-Dblock_K=64", "-Dthreads=256", "-Dnum_stages=4"]
HOPPER_ATTN = ["-Dblock_M=128", "-Dblock_N=128", "-Dthreads=256", "-Ddim=128", "-Ddtype=bf16"]
ATTN_D128_CAUSAL_64 = ["-Dblock_M=64", "-Dblock_N=64", "-Dthreads=128", "-Ddim=128", "-Ddtype=bf16", "-Dcausal=True"]


def _defines(flags: list[str]) -> dict[str, object]:
    return _parse_defines([f[2:] for f in flags])


def _compile(sample: str, flags: list[str] | None = None, disable: set[str] | None = None):
    return tilec.compile(ROOT / "samples" / f"{sample}.tile", defines=_defines(flags or []), target="sm90",
                         disable=disable)


# ---------------------------------------------------------------- layouts against the PTX ISA


def _wgmma_d_fragment(thread: int, reg: int, n: int) -> tuple[int, int]:
    """PTX ISA, wgmma .m64nNk16 D fragment (f32 accumulator) of one 64xN instruction: warp w of the
    warpgroup owns rows 16w..16w+15; register i of a thread is in 8-column chunk i/4, row
    lane/4 + 8*((i%4)/2), column 2*(lane%4) + i%2."""
    warp, lane = (thread % 128) // 32, thread % 32
    chunk, i = reg // 4, reg % 4
    assert chunk < n // 8
    return 16 * warp + lane // 4 + 8 * (i // 2), 8 * chunk + 2 * (lane % 4) + i % 2


_NP_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod, "^": np.bitwise_xor,
           "&": np.bitwise_and, "|": np.bitwise_or, ">>": np.right_shift, "<<": np.left_shift}


def _over_arrays(e: T.Expr, env: dict[str, np.ndarray]) -> np.ndarray:
    """A layout's index expression evaluated over arrays of its variables' values: the layout is built once,
    symbolically, and checked at every (thread, register) or (row, column) at once."""
    if isinstance(e, T.Const):
        return np.asarray(int(e.value))
    if isinstance(e, T.Var):
        return env[e.name]
    assert isinstance(e, T.Binary) and e.op in _NP_OPS, e
    return _NP_OPS[e.op](_over_arrays(e.a, env), _over_arrays(e.b, env))


def _var(name: str) -> T.Var:
    from tilec.ir import dtypes as D

    return T.Var(D.I32, None, name, "local")


@pytest.mark.parametrize("m,n,wm,wn", [(64, 64, 1, 1), (128, 128, 1, 1), (128, 256, 2, 1), (128, 128, 1, 2)])
def test_wgmma_accumulator_layout_is_the_ptx_fragment(m, n, wm, wn):
    lay = WgmmaTiled(m, n, wm, wn)
    per_instr = lay.ni * 4
    threads = 128 * wm * wn
    env = {"t": np.arange(threads)[:, None], "k": np.arange(lay.num_local)[None, :]}
    i, j = (np.broadcast_to(_over_arrays(x, env), (threads, lay.num_local))
            for x in lay.coords(_var("t"), _var("k")))
    for t in range(threads):
        group = t // 128
        for k in range(lay.num_local):
            mi, reg = divmod(k, per_instr)
            fi, fj = _wgmma_d_fragment(t, reg, n // wn)
            assert (i[t, k], j[t, k]) == ((group % wm) * (m // wm) + 64 * mi + fi, (group // wm) * (n // wn) + fj)
    assert len(set(zip(i.ravel().tolist(), j.ravel().tolist(), strict=True))) == m * n  # every element once
    t, k = 37, lay.num_local - 1  # the symbolic layout at constants folds to the same element
    assert tuple(as_int(x) for x in lay.coords(c(t), c(k))) == (i[t, k], j[t, k])


def _tma_swizzled_byte(offset: int, span: int) -> int:
    """The TMA / wgmma swizzle of a byte offset from a 1024-byte aligned base (PTX: the 16-byte chunk
    index, bits 4.., is XORed with the 128-byte row index, bits 7.., over log2(span/16) bits)."""
    bits = {128: 3, 64: 2, 32: 1}[span]
    mask = (1 << bits) - 1
    return offset ^ (((offset >> 7) & mask) << 4)


@pytest.mark.parametrize("shape,elem,span", [((128, 64), 2, 128), ((64, 128), 2, 128), ((32, 256), 2, 128),
                                              ((128, 32), 2, 64), ((64, 16), 2, 32), ((128, 128), 1, 128),
                                              ((256, 64), 1, 64),
                                              # rows that are not whole 128-byte panels: head dims 96 and 48
                                              ((64, 96), 2, 64), ((16, 48), 2, 32), ((32, 160), 1, 32)])
def test_panel_layout_is_what_tma_writes(shape, elem, span):
    rows, cols = shape
    lay = SharedLayout(shape, elem, swizzle=True, panel=True)
    assert lay.swizzle_bytes == span
    width = span // elem
    offsets = np.broadcast_to(_over_arrays(lay.offset([_var("r"), _var("col")]),
                                           {"r": np.arange(rows)[:, None], "col": np.arange(cols)[None, :]}),
                              (rows, cols))
    for r in range(rows):
        for col in range(cols):
            # TMA writes one box (rows x span bytes) per panel, row-major, then swizzles it.
            panel, within = divmod(col, width)
            want = panel * rows * span + _tma_swizzled_byte(r * span + within * elem, span)
            assert offsets[r, col] * elem == want
    assert as_int(lay.offset([c(rows - 1), c(cols - 1)])) == offsets[-1, -1]  # folding at constants agrees


# ---------------------------------------------------------------- what the passes choose


def test_gemm_plan_uses_wgmma_tma_and_a_producer_warpgroup():
    r = _compile("gemm", HOPPER_GEMM)
    k = r.module.kernels[0]
    lay = k.schedule
    assert {g.instruction for g in lay.gemms.values()} == {"wgmma"}
    assert str(lay.fragments[next(iter(lay.fragments))]) == "wgmma_m64n256[128x256, warpgroups 2x1]"
    (plan,) = k.schedule.loops.values()
    assert (plan.mechanism, plan.stages, plan.warp_specialized) == ("tma", 4, True)
    sk = r.simt.kernels[0]
    assert sk.threads == 256 + 128
    assert sk.attrs["tensor_maps"] == [{"tensor": "C", "box": [128, 64], "swizzle": 128},  # the TMA store
                                       {"tensor": "A", "box": [128, 64], "swizzle": 128},
                                       {"tensor": "B", "box": [64, 64], "swizzle": 128}]
    assert "tl::setmaxnreg_inc<232>()" in r.source and "tl::setmaxnreg_dec<40>()" in r.source
    assert "tl::wgmma_wait<1>()" in r.source  # one k-step of wgmma stays in flight
    assert [s.name for s in r.simt.kernels] == ["gemm", "gemm__no_tma"]


def test_attention_runs_softmax_on_the_wgmma_accumulator():
    r = _compile("flash_attention", HOPPER_ATTN)
    k = r.module.kernels[0]
    lay = k.schedule
    assert {g.instruction for g in lay.gemms.values()} == {"wgmma"}
    text = str(lay)
    assert "acc_s: wgmma_m64n128[128x128, warpgroups 2x1]" in text
    assert "scores_max: rows_of(wgmma_m64n128[128x128, warpgroups 2x1])" in text
    assert "tl_wgmma_rs_n128_bf16_t1" in r.source  # P.V with P in registers, V MN-major
    (plan,) = k.schedule.loops.values()
    assert plan.warp_specialized and [p.dst.buffer.name for p in plan.producers] == ["K_s", "V_s"]
    # the consumers wait for V only right before P.V, after the softmax
    body = r.source[r.source.index("pipeline over k"):]
    waits = [m.start() for m in re.finditer(r"tl::mbar_wait", body)]
    assert len(waits) >= 2 and body.index("exp2f_approx") < waits[1]


@pytest.mark.parametrize("dim,tile,n_qk", [(64, (128, 128, 256), 128), (96, (128, 128, 256), 128),
                                          (128, (128, 128, 256), 128), (256, (128, 64, 256), 64)])
def test_attention_default_build_runs_both_gemms_on_wgmma_at_every_head_dim(dim, tile, n_qk):
    """The sm90 default build (no -D but dtype and dim) of every common head dim fits the block's shared memory
    and runs Q.K^T and P.V on wgmma: dim 96 (192-byte rows, three 64-byte panels) used to fall back to
    mma.sync, 5x slower, and dim 256 was refused (393 KB of shared memory)."""
    r = _compile("flash_attention", [f"-Ddim={dim}", "-Ddtype=bf16"])
    k = r.module.kernels[0]
    assert {g.instruction for g in k.schedule.gemms.values()} == {"wgmma"}
    block_m, block_n, threads = tile
    shapes = {s.buffer.name: list(s.buffer.const_shape) for s in walk_stmts(k.body) if isinstance(s, T.Alloc)}
    assert (shapes["Q_s"], shapes["K_s"]) == ([block_m, dim], [block_n, dim])
    assert k.threads == threads
    assert f"tl_wgmma_ss_n{n_qk}_bf16_t0" in r.source and f"tl_wgmma_rs_n{dim}_bf16_t1" in r.source
    assert r.simt.kernels[0].shared_bytes <= r.target.shared_memory_bytes


def test_switches_turn_each_feature_off():
    r = _compile("gemm", HOPPER_GEMM, disable={"warp_specialize"})
    (plan,) = r.module.kernels[0].schedule.loops.values()
    assert plan.mechanism == "tma" and not plan.warp_specialized and r.simt.kernels[0].threads == 256
    r = _compile("gemm", HOPPER_GEMM, disable={"tma"})
    (plan,) = r.module.kernels[0].schedule.loops.values()
    assert plan.mechanism == "cp.async" and "tensor_maps" not in r.simt.kernels[0].attrs
    assert {g.instruction for g in r.module.kernels[0].schedule.gemms.values()} == {"wgmma"}
    r = _compile("gemm", HOPPER_GEMM, disable={"wgmma", "tma"})
    assert {g.instruction for g in r.module.kernels[0].schedule.gemms.values()} == {"mma"}
    assert "tl::mma_f16" in r.source
    src = (ROOT / "samples" / "gemm.tile").read_text().replace("persistent=persistent)",
                                                              "persistent=persistent, warp_specialize=False)")
    r = tilec.compile("ws_off.tile", text=src, target="sm90")
    (plan,) = r.module.kernels[0].schedule.loops.values()
    assert plan.mechanism == "tma" and not plan.warp_specialized


def test_unknown_feature_and_bad_kernel_argument_are_diagnostics(tmp_path, capsys):
    with pytest.raises(CompileError) as e:
        _compile("gemm", disable={"tensor_cores"})
    assert "unknown feature" in str(e.value.diagnostics[0].message)
    src = (ROOT / "samples" / "gemm.tile").read_text().replace("persistent=persistent)",
                                                              "persistent=persistent, warp_spec=1)")
    f = tmp_path / "bad.tile"
    f.write_text(src)
    assert tilec_main([str(f), "--target", "sm90", "--emit-ir"]) == 1
    err = capsys.readouterr().err
    assert "bad.tile:" in err and "unknown Kernel argument 'warp_spec'" in err and "Traceback" not in err


# ---------------------------------------------------------------- SASS (nvcc, no GPU)


def _functions(sass: str) -> dict[str, str]:
    parts = re.split(r"\n\s*Function : (\S+)\n", sass)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.fixture(scope="module")
def hopper_cubins(tmp_path_factory):
    import shutil

    from test_cuda_backend import _require

    _require(shutil.which("nvcc"), "nvcc")
    out = tmp_path_factory.mktemp("hopper")
    built = {}
    for name, sample, flags in [("gemm", "gemm", []), ("gemm_ws2", "gemm", HOPPER_GEMM),
                                ("flash_attention", "flash_attention", []),
                                ("flash_attention_ws2", "flash_attention", HOPPER_ATTN),
                                ("fp8_gemm", "fp8_gemm", []),
                                ("attention_d128_causal_64", "flash_attention", ATTN_D128_CAUSAL_64)]:
        path = out / f"{name}.cubin"
        assert tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(path),
                           *flags]) == 0
        built[name] = path
    return built


@pytest.mark.parametrize("name", ["gemm", "gemm_ws2", "flash_attention", "flash_attention_ws2", "fp8_gemm"])
def test_sm90_sass_has_wgmma_tma_and_mbarriers(hopper_cubins, name):
    path = hopper_cubins[name]
    kernels = _functions(_sass(path))
    kernel = name.removesuffix("_ws2")
    main, twin = kernels[kernel], kernels[kernel + "__no_tma"]
    mma = "QGMMA" if kernel == "fp8_gemm" else "HGMMA"
    # STSM: the accumulator goes into shared memory 16x16 a warp instruction (tma_store.py): the gemm's into the
    # TMA store's staging tile (UTMASTG), attention's into its O_s tile
    stores = ("UTMASTG",) if "gemm" in kernel else ()
    for instr in (mma, "UTMALDG", "SYNCS", "STSM.16.M88.4", *stores):
        assert instr in main, f"{name}: no {instr} in the sm90 SASS"
    assert mma in twin and "LDGSTS" in twin and "UTMALDG" not in twin  # the twin: cp.async feeding wgmma
    for instr in ("LDL", "STL"):
        assert f" {instr}" not in main and f" {instr}" not in twin, f"{name}: local-memory traffic ({instr})"
    manifest = json.loads(Path(str(path) + ".json").read_text())
    entries = {k["name"]: k for k in manifest["kernels"]}
    assert entries[kernel]["fallback"] == kernel + "__no_tma" and entries[kernel + "__no_tma"]["internal"]
    assert entries[kernel]["threads"] == entries[kernel + "__no_tma"]["threads"] + 128


def _hgmma_groups(kernel_sass: str) -> list[list[str]]:
    """The opcodes of each wgmma group: from an HGMMA to the one that closes the group (gsb0), inclusive."""
    groups, current = [], None
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)([^;]*);", kernel_sass):
        op = m.group(1)
        if current is None and op.startswith("HGMMA"):
            current = []
        if current is not None:
            current.append(op)
            if op.startswith("HGMMA") and "gsb0" in m.group(2):
                groups.append(current)
                current = None
    return groups


def test_sm90_wgmma_descriptors_stay_in_uniform_registers(hopper_cubins):
    """Between the wgmma of one group the consumers only advance descriptors, in the uniform datapath: the
    warpgroup index is broadcast from lane 0 (`tl_warpgroup`), and a tile's descriptor is the constant descriptor of
    dynamic shared memory advanced by the tile's offset. A descriptor built from each tile's own address cost a
    dozen instructions per wgmma (R2UR moves into the uniform registers among them) inside the attention loop."""
    kernel = _functions(_sass(hopper_cubins["flash_attention_ws2"]))["flash_attention"]
    groups = _hgmma_groups(kernel)
    assert len(groups) >= 2 and all(sum(op.startswith("HGMMA") for op in g) == 8 for g in groups[:2])
    for g in groups:
        between = [op for op in g if not op.startswith("HGMMA")]
        assert not [op for op in between if op.startswith("R2UR")], g
        # two adds and two moves per wgmma of two shared operands (Q.K^T): the descriptors' runtime part is added
        # once a step. Advanced by the whole offset, each wgmma added, shifted and merged anew: 54 in that group.
        assert len(between) <= 5 * sum(op.startswith("HGMMA") for op in g), g


def test_wgmma_descriptor_adds_its_runtime_offset_once_and_a_constant_per_wgmma():
    """The operand offsets of one gemm's wgmma differ by constants (the k-step within the tile); the swizzle's XOR
    with a multiple of the swizzle period folds away, so every descriptor is the same runtime base plus a constant."""
    defines = {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256, "dtype": "bf16"}
    source = tilec.compile(str(ROOT / "samples" / "flash_attention.tile"), target="sm90", defines=defines).source
    calls = re.findall(r"tl_wgmma_ss_n128_bf16_t0(?:_zero_d)?\(&acc_s\[0\], (.*)\);", source)
    assert len(calls) >= 8
    advanced = re.compile(r"tl::wgmma_desc_advance\((tl::wgmma_desc_advance\(tl::wgmma_desc\(tl_smem, [^)]*\), "
                          r"\(.*?\) \* 2\)), (\d+)\)")
    bases, constants = set(), []
    for call in calls[:8]:
        pair = advanced.findall(call)
        assert len(pair) == 2, call  # Q_s's and K_s's descriptors both split
        bases.update(base for base, _ in pair)
        constants.append(tuple(int(c) for _, c in pair))
    assert len(bases) == 2 and "^" not in "".join(bases)  # one runtime base per operand, no XOR left
    assert len(set(constants)) == 8 and all(c % 16 == 0 for pair in constants for c in pair)


def test_fold_multiples_keeps_every_value():
    """fold_multiples' rewrites ((x * k) // c, x % c of a multiple of c, x ^ 0) hold for every value, negative ones
    included (floor division), and split_constant's two parts add up to the expression."""
    from tilec.ir import dtypes as D
    from tilec.ir.fold import fold_multiples, split_constant
    from tilec.ir.printer import expr_str

    x = T.Var(D.I32, None, "x", "local")

    def c(v):
        return T.Const(D.I32, None, v)

    def b(op, a, bb):
        return T.Binary(D.I32, None, op, a, bb)

    def value(e, xv):
        if isinstance(e, T.Const):
            return e.value
        if isinstance(e, T.Var):
            return xv
        if isinstance(e, T.Unary):
            return -value(e.a, xv)
        a, bb = value(e.a, xv), value(e.b, xv)
        ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__, "%": int.__mod__,
               "^": int.__xor__}
        return ops[e.op](a, bb)

    swizzled = b("+", b("*", b("%", b("//", x, c(128)), c(2)), c(4096)),
                 b("*", b("^", c(6), b("%", b("//", b("*", b("*", b("%", x, c(2)), c(64)), c(128)), c(128)), c(8))),
                   c(8)))
    cases = [swizzled, b("//", b("*", x, c(96)), c(32)), b("%", b("*", x, c(24)), c(8)), b("^", x, c(0)),
             b("-", b("+", b("*", x, c(3)), c(40)), c(8)), b("//", b("*", x, c(6)), c(4))]
    for e in cases:
        folded = fold_multiples(e)
        rest, constant = split_constant(folded)
        for xv in range(-300, 300, 7):
            assert value(folded, xv) == value(e, xv), (expr_str(e), expr_str(folded), xv)
            assert (0 if rest is None else value(rest, xv)) + constant == value(e, xv)
    assert "^" not in expr_str(fold_multiples(swizzled)) and split_constant(fold_multiples(swizzled))[1] == 48
    assert "//" in expr_str(fold_multiples(cases[-1]))  # 4 does not divide 6: kept


def test_sm90_attention_64x64_keeps_two_blocks_a_multiprocessor(hopper_cubins):
    """d128 causal at 64 x 64 (the tuned choice at most shapes) runs two blocks a multiprocessor: 256 threads of at
    most 128 registers. Six registers more (descriptor bases hoisted out of the loop into ordinary registers) left
    one block and ran 1.5x slower on the H200 (bench/RESULTS.md, s28)."""
    path = hopper_cubins["attention_d128_causal_64"]
    use = json.loads(Path(str(path) + ".json").read_text())["resources"]["sm_90a"]["flash_attention"]
    assert use["registers"] <= 128 and 2 * use["shared_bytes"] <= 232448, use


def test_row_statistics_keep_warpgroups_stacked_along_m():
    """A 64-row accumulator with two warpgroups could only split N; its row reduction is lowered for
    warpgroups stacked along M only, so that gemm must not take wgmma (it takes mma.sync)."""
    src = """
kernel rowmax(A: f16[M, K], B: f16[K, N], out: out f32[M]):
    with Kernel(ceildiv(M, 64), threads=256) as (bx,):
        A_s = alloc_shared((64, 64), f16)
        B_s = alloc_shared((64, 128), f16)
        acc = alloc_fragment((64, 128), f32)
        m = alloc_fragment((64,), f32)
        clear(acc)
        copy(A[bx * 64, 0], A_s)
        copy(B[0, 0], B_s)
        gemm(A_s, B_s, acc)
        reduce_max(acc, m, dim=1)
        copy(m, out[bx * 64])
"""
    r = tilec.compile("rowmax.tile", text=src, target="sm90")
    lay = r.module.kernels[0].schedule
    assert {g.instruction for g in lay.gemms.values()} == {"mma"}
    no_rows = src.replace("        reduce_max(acc, m, dim=1)\n        copy(m, out[bx * 64])\n", "")
    no_rows = no_rows.replace("out: out f32[M]", "C: out f32[M, N]") + "        copy(acc, C[bx * 64, 0])\n"
    lay = tilec.compile("split_n.tile", text=no_rows, target="sm90").module.kernels[0].schedule
    assert {g.instruction for g in lay.gemms.values()} == {"wgmma"}
    assert "warpgroups 1x2" in str(lay)


def test_accumulator_leaves_through_tma_stores():
    r = _compile("gemm", HOPPER_GEMM)
    assert {"tensor": "C", "box": [128, 64], "swizzle": 128} in r.simt.kernels[0].attrs["tensor_maps"]
    assert r.source.count("tl::tma_store_2d(") == 4 and "tl::tma_store_wait()" in r.source
    twin = r.source[r.source.index("gemm__no_tma("):]
    assert "tma_store" not in twin


def test_persistent_gemm_loops_over_tiles_and_launches_at_most_one_block_per_sm(tmp_path):
    import shutil
    import subprocess

    from test_deploy import _require, cuda_include_dir

    r = _compile("gemm", [*HOPPER_GEMM[:-1], "-Dnum_stages=3", "-Dpersistent=True"])
    sk = r.simt.kernels[0]
    from tilec.ir.formula import formula
    from tilec.runtime.formulas import evaluate

    grid = formula(sk.grid[0])  # one block per output tile, at most one per multiprocessor
    assert evaluate(grid, {"M": 1000, "N": 1000, "num_sms": 132}) == 8 * 4
    assert evaluate(grid, {"M": 8192, "N": 8192, "num_sms": 132}) == 132
    src = r.source[r.source.index("gemm("):r.source.index("gemm__no_tma(")]
    assert src.count("tl_tile = int(blockIdx.x) + tl_tile_t * int(gridDim.x)") == 2  # producer and consumers
    assert "k_stage = (k_done + k) % 3" in src and "k_slot = (k_issued + k_load) % 3" in src
    assert "tl_store_tile" in src  # a staging tile of its own: the pipeline tiles hold the next tile's data
    twin = r.source[r.source.index("gemm__no_tma("):]
    assert "tl_tile" not in twin
    # the C launcher asks the device for its multiprocessor count
    gcc = _require(shutil.which("gcc"), "gcc")
    inc = _require(cuda_include_dir(), "cuda.h")
    out = tmp_path / "gemm.h"
    assert tilec_main([str(ROOT / "samples" / "gemm.tile"), "--target", "sm90", "-o", str(out),
                       *HOPPER_GEMM[:-1], "-Dnum_stages=3", "-Dpersistent=True"]) == 0
    header = out.read_text()
    assert "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT" in header and "tilec_num_sms" in header
    (tmp_path / "use.c").write_text('#include "gemm.h"\nint f(void) { return (int)gemm_launch(0, 0, 0, 0, 1, 1, 1); '
                                    '}\n')
    subprocess.run([gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{inc}", f"-I{tmp_path}",
                    "-fsyntax-only", "use.c"], cwd=tmp_path, check=True)


def test_persistent_elsewhere_is_a_warning(capsys):
    assert tilec_main([str(ROOT / "samples" / "gemm.tile"), "--target", "sm80", "--emit-ir", "-Dpersistent=True"]) == 0
    err = capsys.readouterr().err
    assert "warning: persistent=True has no effect on kernel 'gemm' for sm80" in err


@pytest.mark.parametrize("flags,groups", [(HOPPER_ATTN, 2), (["-Dblock_M=192", "-Dblock_N=128", "-Dthreads=384"], 3)])
def test_attention_warpgroups_take_turns_issuing_the_first_gemm(flags, groups):
    """Ping-pong: warpgroup g waits on named barrier 2+g before its first wgmma of an iteration and passes
    the turn (bar.arrive on the next warpgroup's barrier) after the commit, before waiting for the result;
    the last warpgroup opens the first turn, and its last turn has no taker."""
    # the barrier ids as lowering spells them (simplify-indices would print 3 - g, tid < 256)
    src = _compile("flash_attention", flags, disable={"simplify_indices"}).source
    body = src[src.index("take turns"):src.index("__no_tma(")]
    opening = f"if (tl_warpgroup == {groups - 1} && k_count > 0) {{\n      tl::named_barrier_arrive(2, 256);"
    assert opening in body
    turn = body.index("tl::named_barrier(2 + tl_warpgroup, 256);")
    first_wgmma = body.index("tl_wgmma_ss_")
    commit = body.index("tl::wgmma_commit();", first_wgmma)
    handoff = body.index("tl::named_barrier_arrive(", commit)
    wait = body.index("tl::wgmma_wait<0>();", commit)
    assert turn < first_wgmma < commit < handoff < wait
    group = "tl_warpgroup"
    following = f"2 + (1 - {group})" if groups == 2 else f"2 + ((tl_warpgroup + 1) % {groups})"
    assert f"tl::named_barrier_arrive({following}, 256);" in body
    assert f"if (tl_warpgroup < {groups - 1} || k < k_count - 1)" in body
    # the second gemm (P.V) is issued without a turn
    assert body.count("tl::named_barrier(2 + ") == 1


# ---------------------------------------------------------------- the lowered code, executed (SIMT interpreter)

RUN_CASES = [
    ("gemm", {}, {"M": 128, "N": 128, "K": 64}),
    ("gemm", {}, {"M": 300, "N": 264, "K": 136}),  # ragged: TMA zero-fills the edges
    ("gemm", {"trans_B": True, "dtype": "bf16"}, {"M": 200, "N": 136, "K": 72}),
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3}, {"M": 300, "N": 264, "K": 136}),
    ("flash_attention", {}, {"B": 1, "S": 200, "H": 1}),
    ("flash_attention", {"causal": True, "dim": 128, "block_M": 128, "threads": 256, "dtype": "bf16"},
     {"B": 1, "S": 136, "H": 1}),
    ("fp8_gemm", {}, {"M": 130, "N": 136, "K": 160}),
    ("fp8_gemm", {"in_dtype": "f8e5m2", "block_N": 256, "threads": 256, "num_stages": 2},
     {"M": 130, "N": 272, "K": 160}),
    ("gemm_bias_relu", {}, {"M": 200, "N": 136, "K": 72}),
    ("flash_attention", {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256}, {"B": 1, "S": 260, "H": 1}),
    # the default builds at head dims 96 (192-byte rows: three 64-byte swizzle panels) and 256 (128 x 64, O stored
    # straight from the accumulator)
    ("flash_attention", {"dim": 96, "dtype": "bf16"}, {"B": 1, "S": 200, "H": 2}),
    ("flash_attention", {"dim": 256, "dtype": "bf16", "causal": True}, {"B": 1, "S": 150, "H": 1}),
]


def _gemm_sizes(sample, defines, sizes):
    if sample != "gemm":
        return sizes
    return dict(sizes)


WS_ONLY_CASES = [
    # persistent: 6 output tiles on 3 "multiprocessors" (the interpreter's num_sms), two per block
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3, "persistent": True},
     {"M": 300, "N": 264, "K": 136}),
    # persistent with 4 stages: the accumulator leaves two 128-byte panels at a time
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4, "persistent": True, "dtype": "bf16"},
     {"M": 300, "N": 264, "K": 136}),
    # three consumer warpgroups taking turns (ping-pong), causal, ragged S
    ("flash_attention", {"block_M": 192, "block_N": 128, "threads": 384, "causal": True}, {"B": 1, "S": 250, "H": 1}),
    # the softmax overlapped with the gemms: one warpgroup; two taking turns, causal, ragged; three, ragged
    ("flash_attention", {"overlap_softmax": True}, {"B": 1, "S": 200, "H": 2}),
    ("flash_attention", {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256, "causal": True, "dtype": "bf16",
                         "overlap_softmax": True}, {"B": 1, "S": 300, "H": 1}),
    ("flash_attention", {"block_M": 192, "block_N": 128, "threads": 384, "overlap_softmax": True},
     {"B": 1, "S": 250, "H": 1}),
    # Q_s loaded by the producer warpgroup through TMA (ragged S: the last block's rows past S arrive as zeros)
    ("flash_attention", {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256, "tma_preload": True},
     {"B": 1, "S": 200, "H": 2}),
    ("flash_attention", {"tma_preload": True, "overlap_softmax": True, "causal": True}, {"B": 2, "S": 130, "H": 1}),
    # persistent: 6 query blocks (the longest first) on 3 "multiprocessors", causal, ragged S
    ("flash_attention", {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256, "causal": True, "dtype": "bf16",
                         "persistent": True}, {"B": 1, "S": 300, "H": 2}),
]


@pytest.mark.parametrize("ws", [True, False], ids=["warp-specialized", "no-ws"])
@pytest.mark.parametrize("sample,defines,sizes", RUN_CASES + WS_ONLY_CASES,
                         ids=lambda x: str(x) if isinstance(x, str) else None)
def test_hopper_lowering_runs_in_the_simt_interpreter(sample, defines, sizes, ws):
    """The sm90 code (TMA boxes, mbarriers, wgmma descriptors, TMA stores, the producer warpgroup, persistent
    tile loops) executed lane by lane on a CPU matches the Tile IR interpreter."""
    from test_simt_interp import check

    if not ws and (sample, defines, sizes) in WS_ONLY_CASES:
        pytest.skip("a warp-specialization case")
    r = tilec.compile(ROOT / "samples" / f"{sample}.tile", target="sm90", defines=defines,
                      disable=set() if ws else {"warp_specialize"})
    text = r.source[:r.source.index("__no_tma(")]
    assert "tl_wgmma_" in text and "tl::tma_load_" in text
    assert (r.simt.kernels[0].threads > r.module.kernels[0].threads) == ws
    check(sample, defines, _gemm_sizes(sample, defines, sizes), "sm90", result=r)


@pytest.mark.parametrize("sample,defines,sizes", [
    ("fp8_gemm", {}, {"M": 130, "N": 131, "K": 160}),
    ("fp8_gemm", {}, {"M": 3, "N": 131, "K": 160}),  # a decode step: one tile with 3 of its 128 rows inside
    # N = 187: the second column tile's first panel (columns 128-191) reaches 5 columns past N
    ("fp8_gemm", {}, {"M": 130, "N": 187, "K": 160}),
    ("gemm", {"trans_B": True}, {"M": 70, "N": 200, "K": 72}),  # rows 16-byte aligned
    ("gemm", {"trans_B": True, "dtype": "bf16"}, {"M": 200, "N": 137, "K": 72}),
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3, "persistent": True, "trans_B": True},
     {"M": 300, "N": 263, "K": 136}),
    # persistent on 4 stages: the staging tile holds two of the four 128-byte panels at a time
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4, "persistent": True, "trans_B": True,
              "dtype": "bf16"}, {"M": 300, "N": 263, "K": 136}),
], ids=["fp8", "fp8-decode", "fp8-panel-past-N", "trans_B-aligned-rows", "trans_B", "trans_B-persistent",
        "trans_B-persistent-panels"])
def test_direct_stores_twin_loads_with_tma_and_stores_with_the_threads(sample, defines, sizes):
    """Where C's rows can be misaligned while A's and B's are not (N is not a dimension of a loaded row), the build
    carries a twin with the kernel's load maps and no TMA store; lane by lane on a CPU it matches the Tile IR
    interpreter at a ragged N."""
    from types import SimpleNamespace

    from test_simt_interp import check

    r = tilec.compile(ROOT / "samples" / f"{sample}.tile", target="sm90", defines=defines)
    by_name = {sk.name: sk for sk in r.simt.kernels}
    main = r.simt.kernels[0]
    twin = by_name[main.attrs["direct_stores"]]
    assert twin.name == f"{main.name}__direct_stores" and twin.attrs["fallback"] == f"{main.name}__no_tma"
    assert twin.attrs["tensor_maps"] == [m for m in main.attrs["tensor_maps"] if m["tensor"] != "C"]
    calls = [st.op for st in S.walk_simt(twin.body) if isinstance(st, S.SCall)]
    assert "tma_store" not in calls and "tma_load" in calls
    assert "tma_store" in [st.op for st in S.walk_simt(main.body) if isinstance(st, S.SCall)]
    check(sample, defines, sizes, "sm90", result=SimpleNamespace(simt=SimpleNamespace(kernels=[twin])))


def test_no_direct_stores_twin_where_a_misaligned_output_means_a_misaligned_load():
    """gemm's C[M, N] and B[K, N] share N and the element size: C's rows are never misaligned alone."""
    for sample in ("gemm", "flash_attention"):
        r = tilec.compile(ROOT / "samples" / f"{sample}.tile", target="sm90")
        assert not any(sk.name.endswith("__direct_stores") or "direct_stores" in sk.attrs for sk in r.simt.kernels)


def _without(body, name):
    out = []
    for st in body:
        if isinstance(st, S.SCall) and st.name == name:
            continue
        for field in ("body", "then_body", "else_body"):
            if hasattr(st, field):
                setattr(st, field, _without(getattr(st, field), name))
        out.append(st)
    return out


def test_head_dim_96_without_tma_fills_the_64_byte_panels_with_cp_async():
    """The twin a misaligned tensor runs (cp.async, no TMA) writes the 64-byte swizzle panels of dim 96 that the
    wgmma descriptors read."""
    from test_simt_interp import check

    defines = {"dim": 96, "dtype": "bf16", "causal": True}
    r = tilec.compile(ROOT / "samples" / "flash_attention.tile", target="sm90", defines=defines, disable={"tma"})
    assert "tl_wgmma_" in r.source and "tl::tma_load_" not in r.source
    check("flash_attention", defines, {"B": 1, "S": 90, "H": 2}, "sm90", result=r)


def test_simt_interpreter_catches_planted_hopper_bugs(monkeypatch):
    from test_simt_interp import check

    from tilec.ir.layout import add
    from tilec.simt.interp import SimtInterpreterError
    from tilec.targets.cuda import hopper_lowering as lower_hopper

    sizes = {"M": 128, "N": 128, "K": 64}
    # the every-target tile (sm90's own default has one k-step at these sizes, which would hide the plants)
    tile = {"block_M": 128, "block_N": 128, "block_K": 32, "threads": 128, "num_stages": 3}
    # a consumer that does not wait for the TMA tiles
    r = tilec.compile(ROOT / "samples" / "gemm.tile", target="sm90", defines=tile, disable={"warp_specialize"})
    r.simt.kernels[0].body = _without(r.simt.kernels[0].body, "mbar_wait")
    with pytest.raises(SimtInterpreterError, match="missing mbar_wait"):
        check("gemm", tile, sizes, "sm90", result=r)
    # consumers that never release a stage: the producer waits forever (a deadlock the model reports)
    r = tilec.compile(ROOT / "samples" / "gemm.tile", target="sm90", defines=tile)
    r.simt.kernels[0].body = _without(r.simt.kernels[0].body, "mbar_arrive_warp")
    with pytest.raises(SimtInterpreterError, match="never completes"):
        check("gemm", tile, {"M": 128, "N": 128, "K": 256}, "sm90", result=r)
    # wgmma descriptors with the MN-major strides swapped (LBO <-> SBO)
    real = lower_hopper.HopperLowering.descriptor

    def swapped(self, r_, row, col, k_major):
        addr, lbo, sbo, swz = real(self, r_, row, col, k_major)
        return [addr, sbo, lbo, swz] if not k_major else [addr, lbo, sbo, swz]

    monkeypatch.setattr(lower_hopper.HopperLowering, "descriptor", swapped)
    r = tilec.compile(ROOT / "samples" / "gemm.tile", text=(ROOT / "samples" / "gemm.tile").read_text() + "\n",
                      target="sm90", defines=tile, disable={"warp_specialize"})
    with pytest.raises(AssertionError, match="differs"):
        check("gemm", tile, sizes, "sm90", result=r)

    # an operand tile starting 4 elements (8 bytes) into a 16-byte unit: the descriptor (and the generated code's
    # `tl::wgmma_desc_advance`, which adds the offset in 16-byte units) cannot say so; the model refuses it
    def shifted(self, r_, row, col, k_major):
        addr, lbo, sbo, swz = real(self, r_, row, col, k_major)
        return [S.AddrOf(addr.dtype, None, addr.buffer, add(addr.index, c(4))), lbo, sbo, swz]

    monkeypatch.setattr(lower_hopper.HopperLowering, "descriptor", shifted)
    r = tilec.compile(ROOT / "samples" / "gemm.tile", text=(ROOT / "samples" / "gemm.tile").read_text() + "\n\n",
                      target="sm90", defines=tile, disable={"warp_specialize"})
    with pytest.raises(SimtInterpreterError, match="descriptor starts at byte .* not a multiple of 16"):
        check("gemm", tile, sizes, "sm90", result=r)


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_clear_accum_gemm_replaces_the_accumulator_through_wgmma_scale_d():
    """gemm(..., clear_accum=True) on wgmma (attention's Q.K^T): no fill of the accumulator before it; its first
    k-step's wgmma has scale-d 0 and output-only accumulator operands, so the registers' earlier values are dead.
    Lane by lane on a CPU it matches the Tile IR interpreter; with scale-d dropped, the model's registers (NaN until
    written) reach the result."""
    from test_simt_interp import check

    defines = {"dim": 64, "causal": True, "mask_after_gemm": True}
    sizes = {"B": 1, "S": 150, "H": 1}
    r = tilec.compile(ROOT / "samples" / "flash_attention.tile", target="sm90", defines=defines)
    main = r.source[:r.source.index("__no_tma(")]
    wgmmas = [st for st in S.walk_simt(r.simt.kernels[0].body) if isinstance(st, S.SCall) and st.op == "wgmma"]
    zero = [st for st in wgmmas if st.params["zero_d"]]
    assert len(zero) == 1 and zero[0] is wgmmas[0]  # one 64-row slice a warpgroup: its first k-step alone
    assert "_zero_d(&acc_s[0]" in main and not re.search(r"acc_s\[\w+\] = 0\.0f", main)
    helper = re.search(r"void tl_wgmma_ss_\w+_zero_d\(.*?\n}", r.source, re.S).group(0)
    assert '"=f"(d[0])' in helper and '"+f"' not in helper and '"n"(0)' in helper
    check("flash_attention", defines, sizes, "sm90", result=r)
    for st in zero:
        st.name, st.params = st.name.replace(":zero_d", ""), {**st.params, "zero_d": False}
    with pytest.raises(AssertionError, match="differs"):
        check("flash_attention", defines, sizes, "sm90", result=r)


def test_simt_interpreter_refuses_a_tma_box_starting_inside_16_bytes():
    """The H200 stops a kernel with an illegal instruction when a TMA load's box starts at a column that is not 16
    bytes into the row (bench/RESULTS.md, s22: residue-class maps whose boxes started 3 bytes in); the model says so
    for a load whose column coordinate a plant moves by 3 fp8 elements, and runs the unplanted kernel."""
    from test_simt_interp import check

    from tilec.ir.layout import add, c
    from tilec.simt.interp import SimtInterpreterError

    sizes = {"M": 128, "N": 128, "K": 256}
    for disable in (set(), {"warp_specialize"}):  # (the producer warpgroup's error, not the consumers' deadlock)
        r = tilec.compile(ROOT / "samples" / "fp8_gemm.tile", target="sm90", disable=disable)
        check("fp8_gemm", {}, sizes, "sm90", result=r)
        for st in S.walk_simt(r.simt.kernels[0].body):
            if isinstance(st, S.SCall) and st.op == "tma_load":
                st.args[3] = add(st.args[3], c(3))  # the innermost coordinate (the column): after map, smem, mbarrier
        with pytest.raises(SimtInterpreterError, match="3 bytes into its row: not a multiple of 16 bytes"):
            check("fp8_gemm", {}, sizes, "sm90", result=r)


def test_a_copy_starting_inside_16_bytes_is_not_a_tma_box(tmp_path):
    """A user's copy whose first column is not a multiple of 16 bytes into the row (here 3 f16 elements) cannot be a
    TMA box on the H200 (the illegal instruction above): the loop loads with cp.async, says why, and computes what
    the Tile IR interpreter computes; 8 elements (16 bytes) in stays TMA."""
    from test_simt_interp import TOL, random_inputs, run_kernel, run_simt

    tile = {"block_M": 128, "block_N": 128, "block_K": 32, "threads": 128, "num_stages": 3}
    sizes = {"M": 130, "N": 72, "K": 100}
    for shift, tma in ((3, False), (8, True)):
        text = (ROOT / "samples" / "gemm.tile").read_text().replace(
            "copy(A[by * block_M, k * block_K], A_s)", f"copy(A[by * block_M, k * block_K + {shift}], A_s)")
        r = tilec.compile(tmp_path / "k.tile", text=text, target="sm90", defines=tile)
        loads = [st.op for st in S.walk_simt(r.simt.kernels[0].body) if isinstance(st, S.SCall)]
        assert ("tma_load" in loads) == tma
        remarks = [d.message for d in r.remarks if "not TMA" in d.message]
        assert bool(remarks) != tma and all("starting a multiple of 16 bytes into its row" in m for m in remarks)
        if not tma:
            tk = tilec.compile(tmp_path / "k.tile", text=text, defines=tile).module.kernels[0]
            args = random_inputs(tk, sizes, 0)
            want = {n: a.copy() if hasattr(a, "copy") else a for n, a in args.items()}
            run_kernel(tk, want)
            run_simt(r.simt.kernels[0], args, sizes, warp_size=32)
            rtol, atol = TOL["f16"]
            assert np.allclose(args["C"].astype(np.float64), want["C"].astype(np.float64), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- overlap_softmax


def test_overlap_softmax_is_planned_only_where_asked_and_possible():
    """The loop gets overlap_softmax from Kernel(..., overlap_softmax=True) or a schedule request; not by default,
    not without warp specialization (a warning), and a request the loop cannot honour is an error."""
    flags = HOPPER_ATTN + ["-Doverlap_softmax=True"]

    def plan(r):
        return next(iter(r.module.kernels[0].schedule.loops.values()))

    assert plan(_compile("flash_attention", flags)).overlap_softmax
    assert not plan(_compile("flash_attention", HOPPER_ATTN)).overlap_softmax
    r = tilec.compile(ROOT / "samples" / "flash_attention.tile", defines=_defines(HOPPER_ATTN), target="sm90",
                      schedule={"loops": {"k": {"overlap_softmax": True}}})
    assert plan(r).overlap_softmax
    r = _compile("flash_attention", flags, disable={"warp_specialize"})
    assert not plan(r).overlap_softmax
    assert any("overlap_softmax=True has no effect" in d.message for d in r.diagnostics)
    with pytest.raises(CompileError, match="asks for the softmax to overlap"):  # a gemm loop has one gemm
        tilec.compile(ROOT / "samples" / "gemm.tile", target="sm90",
                      schedule={"loops": {"k": {"overlap_softmax": True}}})
    # the twin (no TMA, no producer warpgroup) keeps the plain loop, silently
    r = _compile("flash_attention", flags)
    assert not any("overlap_softmax" in d.message for d in r.diagnostics)
    assert r.source.count("tl::wgmma_wait<1>();") == 1
    # ping-pong in the steady loop: the turn is taken before Q.K^T and handed on after its commit, before P.V
    steady = r.source[r.source.index("for (int k_2_t = 0;"):r.source.index("__no_tma(")]
    turn = steady.index("tl::named_barrier(2 + tl_warpgroup, 256);")
    first = steady.index("tl_wgmma_ss_")
    handoff = steady.index("tl::named_barrier_arrive(2 + (1 - tl_warpgroup), 256);")
    second = steady.index("tl_wgmma_rs_")
    assert turn < first < steady.index("tl::wgmma_commit();") < handoff < second < steady.index("tl::wgmma_wait<1>();")


def test_simt_interpreter_catches_a_missing_wait_in_the_overlapped_loop():
    """Without the wait for P.V before O is rescaled, P.V lands on the rescaled O: the model retires a wgmma group
    at its wait, so the result differs."""
    from test_simt_interp import check

    defines = {"overlap_softmax": True}
    sizes = {"B": 1, "S": 200, "H": 1}
    r = tilec.compile(ROOT / "samples" / "flash_attention.tile", target="sm90", defines=defines)

    def drop_inner_wait0(body, inside=False):
        out = []
        for st in body:
            if (inside and isinstance(st, S.SCall) and st.name == "wgmma_wait" and as_int(st.args[0]) == 0):
                continue
            for field in ("body", "then_body", "else_body"):
                if hasattr(st, field):
                    setattr(st, field, drop_inner_wait0(getattr(st, field), inside or isinstance(st, S.SFor)))
            out.append(st)
        return out

    r.simt.kernels[0].body = drop_inner_wait0(r.simt.kernels[0].body)
    with pytest.raises(AssertionError, match="differs"):
        check("flash_attention", defines, sizes, "sm90", result=r)


def test_persistent_gemm_keeps_four_stages_and_stores_the_accumulator_in_groups_of_panels():
    """128x256x64 persistent on 4 stages: the whole 64 KiB staging tile does not fit beside the 192 KiB pipeline,
    so half of it does: panels 0-1 are written, stored and read back by TMA before panels 2-3 are written."""
    r = _compile("gemm", HOPPER_GEMM + ["-Dpersistent=True"])
    plan = next(iter(r.module.kernels[0].schedule.loops.values()))
    assert plan.stages == 4 and r.module.kernels[0].schedule.persistent
    src = r.source[:r.source.index("__no_tma(")]
    assert "2 of 4 panels at a time" in src
    assert src.count("tl::tma_store_2d(") == 4 and src.count("tl::tma_store_wait();") == 2
    first_wait = src.index("tl::tma_store_wait();")
    # the staging writes: a warpgroup's 64 rows x 2 panels of 64 columns a group, 16 columns an stmatrix_x4; the
    # second group's wait behind the barrier that follows thread 0's wait
    assert src.count("tl::stmatrix_x4(") == 2 * 8
    assert src.index("tl::named_barrier(1, 256);", first_wait) < src.index("tl::stmatrix_x4(", first_wait)
    kernel = r.simt.kernels[0]
    assert sum(b.size * b.dtype.bytes for b in kernel.shared if b.alias_of is None) <= 227 * 1024


def test_tma_preload_moves_the_q_tile_to_the_producer():
    """tma_preload=True: the producer warpgroup loads Q_s (one box per 128-byte panel) on its own mbarrier before
    its loop; the consumers no longer copy it, wait for that barrier before the loop, and need no proxy fence."""
    r = _compile("flash_attention", HOPPER_ATTN + ["-Dtma_preload=True"])
    plan = next(iter(r.module.kernels[0].schedule.loops.values()))
    assert [p.dst.buffer.name for p in plan.preloads] == ["Q_s"]
    main = r.source[:r.source.index("__no_tma(")]
    producer, consumers = main.split("tl::setmaxnreg_inc<232>();")
    assert producer.count("&Q_s[") == 2 and "tl::mbar_expect_tx(&tl_mbar[0], 32768);" in producer
    assert producer.index("&Q_s[0]") < producer.index("for (int k_load")
    assert "Q_s[" not in consumers.split("for (int k = 0;")[0] and "tl::mbar_wait(&tl_mbar[0], 0);" in consumers
    assert "fence_proxy_async" not in consumers.split("for (int k = 0;")[0]
    assert {"tensor": "Q", "box": [1, 128, 1, 64], "swizzle": 128} in r.simt.kernels[0].attrs["tensor_maps"]
    assert not _compile("flash_attention", HOPPER_ATTN).module.kernels[0].schedule.loops[plan_uid(r)].preloads
    r = _compile("flash_attention", HOPPER_ATTN + ["-Dtma_preload=True"], disable={"warp_specialize"})
    assert any("tma_preload=True has no effect" in d.message for d in r.diagnostics)


def plan_uid(r) -> int:
    return next(iter(r.module.kernels[0].schedule.loops))


def test_simt_interpreter_catches_a_consumer_that_does_not_wait_for_the_preload():
    from test_simt_interp import check

    from tilec.simt.interp import SimtInterpreterError

    defines = {"tma_preload": True}
    r = tilec.compile(ROOT / "samples" / "flash_attention.tile", target="sm90", defines=defines)

    def drop_preload_wait(body):
        out = []
        for st in body:
            if isinstance(st, S.SCall) and st.name == "mbar_wait" and as_int(st.args[0].index) == 0:
                continue
            for field in ("body", "then_body", "else_body"):
                if hasattr(st, field):
                    setattr(st, field, drop_preload_wait(getattr(st, field)))
            out.append(st)
        return out

    r.simt.kernels[0].body = drop_preload_wait(r.simt.kernels[0].body)
    with pytest.raises(SimtInterpreterError, match="missing mbar_wait"):
        check("flash_attention", defines, {"B": 1, "S": 130, "H": 1}, "sm90", result=r)


def test_tma_stages_of_small_tiles_start_128_byte_aligned():
    """A TMA box must land 128-byte aligned: a pipelined tile of 64 bytes (gemv's 32-element f16 slice of A) gets a
    stage stride of 128 bytes, not 64 (which faulted with a misaligned address on the H200). The SIMT model refuses
    a misaligned box, and the kernel matches the interpreter at a regular and a ragged shape."""
    import numpy as np

    from tilec.interp import run_kernel
    from tilec.interp.run import random_inputs
    from tilec.simt.interp import run_simt

    path = ROOT / "examples" / "tilelang" / "gemv.tile"
    defines = {"block_N": 32, "block_K": 32}
    kernel = tilec.compile(path, defines=defines).module.kernels[0]
    lowered = tilec.compile(path, "sm90", defines=defines)
    sk = next(s for s in lowered.simt.kernels if s.name == "gemv")
    assert sk.attrs.get("tensor_maps"), "the slice of A should come by TMA"
    assert re.search(r"B_shared = reinterpret_cast<half\*>\(tl_smem \+ 256\)", lowered.source)
    for sizes in ({"N": 128, "K": 128}, {"N": 70, "K": 99}):
        args = random_inputs(kernel, sizes, seed=5)
        want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
        run_kernel(kernel, want)
        run_simt(sk, args, sizes, warp_size=32)
        np.testing.assert_allclose(args["C"].astype(np.float32), want["C"].astype(np.float32), rtol=2e-3, atol=2e-3)


def test_a_pipelined_loop_run_again_by_an_outer_loop_uses_cp_async_and_is_right(tmp_path):
    """TMA's mbarrier phases count one run of a pipelined loop from zero; a loop inside a Serial loop runs again and
    would wait on the previous run's phases (the SIMT model hung on it), so it is pipelined with cp.async."""
    src = tmp_path / "nest.tile"
    src.write_text(
        "kernel k(A: f16[M, N], B: out f16[M, N]):\n"
        "    with Kernel(1, threads=128) as bx:\n"
        "        s = alloc_shared((1, 256), f16)\n"
        "        f = alloc_fragment((1, 256), f32)\n"
        "        for r in Serial(M):\n"
        "            for t in Pipelined(ceildiv(N, 256), num_stages=2):\n"
        "                copy(A[r, t * 256], s)\n"
        "                copy(s, f)\n"
        "                copy(f, B[r, t * 256])\n")
    from tilec.simt.interp import run_simt

    r = tilec.compile(src, target="sm90", verify=True)
    loop = next(p for p in r.module.kernels[0].schedule.loops.values())
    assert loop.mechanism == "cp.async"
    a = np.random.default_rng(1).standard_normal((3, 600)).astype(np.float16)
    args = {"A": a, "B": np.full((3, 600), np.nan, np.float16)}
    run_simt(r.simt.kernels[0], args, {"M": 3, "N": 600}, warp_size=32)
    np.testing.assert_array_equal(args["B"], a)
