"""The CUDA back end's own intrinsics (tilec/ir/intrinsics.py `define`): mma.sync and ldmatrix (sm80+), and sm90's
mbarriers, TMA, thread-block clusters, warp specialization and wgmma. Each names its semantics in the SIMT
interpreter: tilec/targets/cuda/simt_semantics.py (mma.sync) and tilec/targets/cuda/simt_hopper.py (sm90); they
are spelled in tilec/targets/cuda/codegen.py and implemented in include/tilec_cuda.h."""

from __future__ import annotations

from ...ir import dtypes as D
from ...ir.intrinsics import IntrinsicDef, define

_MMA = "mma.sync.m16n8k16"
# the intrinsic that rounds two f32 values to a 16-bit float type and packs them into a u32 (low half first)
PACK_PAIR = {D.F16: "pack_half2", D.BF16: "pack_bf162"}
_WGMMA = "wgmma.m64nNk16"
_SM80 = "tilec.targets.cuda.simt_semantics:"
_SM90 = "tilec.targets.cuda.simt_hopper:"

define(
    # mma.sync (sm80+)
    IntrinsicDef("ldmatrix", {"count": int, "trans": bool}, _MMA,
                 key=lambda p: f"ldmatrix_x{p['count']}" + ("_trans" if p["trans"] else ""),
                 pattern=r"ldmatrix_x(?P<count>[24])(?P<trans>_trans)?", semantics=_SM80 + "ldmatrix"),
    IntrinsicDef("mma", {"dtype": str}, _MMA, key=lambda p: f"mma_{p['dtype']}", pattern=r"mma_(?P<dtype>f16|bf16)",
                 semantics=_SM80 + "mma"),
    IntrinsicDef("pack_half2", feature=_MMA, statement=False, value_type=D.U32, semantics=_SM80 + "pack_half2"),
    IntrinsicDef("pack_bf162", feature=_MMA, statement=False, value_type=D.U32, semantics=_SM80 + "pack_bf162"),
    # Hopper: mbarriers, TMA, warp specialization, wgmma
    IntrinsicDef("mbar_init", feature="tma", semantics=_SM90 + "mbar_init"),
    IntrinsicDef("fence_mbar_init", feature="tma", semantics=_SM90 + "no_effect"),
    IntrinsicDef("mbar_expect_tx", feature="tma", semantics=_SM90 + "mbar_arrive"),
    IntrinsicDef("mbar_arrive", feature="tma", semantics=_SM90 + "mbar_arrive"),
    IntrinsicDef("mbar_arrive_warp", feature="tma", semantics=_SM90 + "mbar_arrive"),
    IntrinsicDef("mbar_wait", feature="tma", semantics=_SM90 + "mbar_wait"),
    IntrinsicDef("tma_load", {"rank": int}, "tma", key=lambda p: f"tma_load_{p['rank']}d",
                 pattern=r"tma_load_(?P<rank>\d)d", semantics=_SM90 + "tma_loads"),
    IntrinsicDef("tma_load_multicast", {"rank": int}, "tma", key=lambda p: f"tma_load_multicast_{p['rank']}d",
                 pattern=r"tma_load_multicast_(?P<rank>\d)d", semantics=_SM90 + "tma_loads",
                 doc="one box into the same shared offset of every block of the cluster in a mask, completing each "
                     "one's mbarrier at the same offset"),
    IntrinsicDef("mbar_arrive_cluster_warp", feature="tma", semantics=_SM90 + "mbar_arrive_cluster",
                 doc="lane 0 of the warp arrives on the mbarrier at this offset in every block of the cluster in a "
                     "mask (after __syncwarp)"),
    IntrinsicDef("cluster_sync", feature="tma", semantics=_SM90 + "cluster_sync",
                 doc="barrier.cluster arrive (release) + wait (acquire): every thread of every block of the cluster"),
    IntrinsicDef("tma_store", {"rank": int}, "tma", key=lambda p: f"tma_store_{p['rank']}d",
                 pattern=r"tma_store_(?P<rank>\d)d", semantics=_SM90 + "tma_stores"),
    IntrinsicDef("tma_store_commit", feature="tma", semantics=_SM90 + "no_effect"),
    IntrinsicDef("tma_store_wait", feature="tma", semantics=_SM90 + "no_effect"),
    IntrinsicDef("fence_proxy_async", feature="tma", semantics=_SM90 + "no_effect"),
    IntrinsicDef("setmaxnreg_inc", feature="tma", semantics=_SM90 + "no_effect"),
    IntrinsicDef("setmaxnreg_dec", feature="tma", semantics=_SM90 + "no_effect"),
    IntrinsicDef("named_barrier_sync", feature="tma", semantics=_SM90 + "named_barrier"),
    IntrinsicDef("named_barrier_arrive", feature="tma", semantics=_SM90 + "named_barrier"),
    # operands "ss": A and B from shared memory (descriptors), "rs": A from registers; zero_d: the product replaces
    # the accumulator (scale-d 0: the first k-step of gemm(..., clear_accum=True)) instead of adding to it
    IntrinsicDef("wgmma", {"operands": str, "n": int, "dtype": str, "b_k_major": int, "zero_d": bool}, _WGMMA,
                 key=lambda p: (f"wgmma_{p['operands']}:n{p['n']}:{p['dtype']}:{p['b_k_major']}"
                                f"{':zero_d' if p['zero_d'] else ''}"),
                 pattern=r"wgmma_(?P<operands>rs|ss):n(?P<n>\d+):(?P<dtype>\w+):(?P<b_k_major>[01])(?P<zero_d>:zero_d)?",
                 semantics=_SM90 + "wgmma"),
    IntrinsicDef("wgmma_fence", feature=_WGMMA, semantics=_SM90 + "no_effect"),
    IntrinsicDef("wgmma_commit", feature=_WGMMA, semantics=_SM90 + "wgmma_commit"),
    IntrinsicDef("wgmma_wait", feature=_WGMMA, semantics=_SM90 + "wgmma_wait"),
    IntrinsicDef("wgmma_fence_regs", feature=_WGMMA, semantics=_SM90 + "no_effect"),
    IntrinsicDef("stmatrix", {"count": int}, _WGMMA, key=lambda p: f"stmatrix_x{p['count']}",
                 pattern=r"stmatrix_x(?P<count>[24])", semantics=_SM80 + "stmatrix",
                 doc="args: a shared row address, then count u32 registers of packed 16-bit halves (ldmatrix's "
                     "inverse, sm90)"),
    IntrinsicDef("pack2", feature=_WGMMA, statement=False, value_type=D.U32, semantics=_SM90 + "pack2"),
    IntrinsicDef("grid_dim_x", feature="tma", statement=False, value_type=D.I32, semantics=_SM90 + "grid_dim_x"),
)
