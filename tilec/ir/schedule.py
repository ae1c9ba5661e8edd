"""A kernel's schedule: every decision the planning passes make, typed, printable and final.

layout-inference decides the instruction of each gemm (with its warp partition), the register layout of
every fragment and the layout of every shared tile; pipeline-planning decides, per Pipelined loop, the
stages, the copy mechanism and the prefetched copies, whether a producer warpgroup issues them (warp
specialization), and whether the kernel is persistent (and ping-pong); rasterization records the block order.
Lowering reads the schedule and obeys it: it never revisits a decision.

Entries are keyed by the stable ids the builder gives tile ops and buffers (`Stmt.uid`, `Buffer.uid`,
see visit.number_ops), so a schedule survives copies of the kernel and can be named from outside:
a ScheduleRequest (tilec.compile(..., schedule=...), the tuner's handle) pins parts of it before the
planners run, and `resources` prices a scheduled kernel before lowering.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from . import copy_mechanisms as mechanisms
from . import dtypes as D
from . import tile as T
from .layout import Fragment, SharedLayout

GEMM_INSTRUCTIONS = ("wgmma", "mma", "mfma", "fma")
COPY_MECHANISMS = ("tma", "cp.async", "registers", "sync")
# instruction -> what its warp partition counts ("warps" when absent); filled by the gemm implementations'
# registration (tilec/ops/gemm_impl.py)
PARTITION_UNITS: dict[str, str] = {}


@dataclass(frozen=True)
class GemmSchedule:
    """How one gemm runs: the matrix instruction family, its shape (m, n, k of one instruction; None for
    scalar FMA) and the partition of the block's warps (warpgroups for wgmma, waves for MFMA) over M x N."""

    instruction: str  # one of GEMM_INSTRUCTIONS
    shape: tuple[int, int, int] | None = None
    warps: tuple[int, int] | None = None

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.instruction} (scalar multiply-add per thread)"
        m, n, k = self.shape
        unit = PARTITION_UNITS.get(self.instruction, "warps")
        warps = f", {unit} {self.warps[0]}x{self.warps[1]}" if self.warps else ""
        return f"{self.instruction} m{m}n{n}k{k}{warps}"


@dataclass
class LoopSchedule:
    """How one Pipelined loop overlaps its loads with its compute (see passes/pipeline_planning.py)."""

    stages: int
    mechanism: str  # one of COPY_MECHANISMS
    producers: list[T.Copy] = field(default_factory=list)  # the copies issued `stages - 1` iterations ahead
    warp_specialized: bool = False  # tma only: a producer warpgroup issues the copies
    # warp-specialized only: each iteration's last gemm is issued one iteration late, together with the next
    # iteration's first gemm, so the work between the two gemms overlaps both (pipeline_planning.overlap_split)
    overlap_softmax: bool = False
    # warp-specialized only: copies before the loop (FlashAttention's Q tile) that the producer warpgroup issues
    # through TMA, first thing, instead of the threads copying (pipeline_planning.preload_copies)
    preloads: list[T.Copy] = field(default_factory=list)
    # clustered kernels only (KernelSchedule.cluster): the producers whose tile is the same for every block of a
    # cluster; each block loads its share of the tile's rows and TMA multicasts it into every block's stage
    multicast: list[T.Copy] = field(default_factory=list)

    def __str__(self) -> str:
        bufs = ", ".join(p.dst.buffer.name for p in self.producers) or "none"
        ws = ", warp-specialized" if self.warp_specialized else ""
        ws += ", softmax overlapped with the gemms" if self.overlap_softmax else ""
        pre = f", preloaded by TMA: {', '.join(p.dst.buffer.name for p in self.preloads)}" if self.preloads else ""
        mc = f", multicast: {', '.join(p.dst.buffer.name for p in self.multicast)}" if self.multicast else ""
        return f"{self.stages} stage(s), {self.mechanism}{ws}, prefetched: {bufs}{pre}{mc}"


@dataclass
class KernelSchedule:
    gemms: dict[int, GemmSchedule] = field(default_factory=dict)  # gemm uid ->
    fragments: dict[int, Fragment] = field(default_factory=dict)  # fragment buffer uid ->
    shared: dict[int, SharedLayout] = field(default_factory=dict)  # shared buffer uid ->
    loops: dict[int, LoopSchedule] = field(default_factory=dict)  # Pipelined loop uid ->
    persistent: bool = False  # at most one block per multiprocessor, each looping over output tiles
    # persistent only (sm90, a gemm pipeline on one consumer warpgroup): the block runs two consumer warpgroups that
    # take its output tiles alternately and take turns in the main loop, so one's epilogue runs under the other's
    # wgmma (docs/hopper.md#persistent-ping-pong)
    pingpong: bool = False
    rasterization: int | None = None  # panel size of the grouped block order (use_swizzle), None: row order
    # the block indices rasterization computes (its two assignments, x then y), which a clustered launch recomputes
    # over the grid of clusters
    raster_assigns: tuple[T.Assign, T.Assign] | None = None
    # thread-block cluster (blocks along grid x, along grid y): (1, 1) none; (2, 1) or (1, 2) on sm90 for a
    # warp-specialized TMA pipeline with a producer whose tile both blocks share (LoopSchedule.multicast)
    cluster: tuple[int, int] = (1, 1)
    labels: dict[int, str] = field(default_factory=dict)  # uid -> how the printout names it

    # ---- lookups by the Tile IR objects (what lowering holds)
    def instruction(self, g: T.Gemm) -> str:
        return self.gemms[g.uid].instruction if g.uid in self.gemms else "fma"

    def fragment(self, b: T.Buffer) -> Fragment:
        return self.fragments[b.uid]

    def shared_layout(self, b: T.Buffer) -> SharedLayout:
        return self.shared[b.uid]

    def loop(self, s: T.For) -> LoopSchedule | None:
        return self.loops.get(s.uid)

    def __str__(self) -> str:
        lines = []
        for uid, g in self.gemms.items():
            lines.append(f"gemm {self.labels.get(uid, f'#{uid}')}: {g}")
        for uid, lp in self.loops.items():
            lines.append(f"loop {self.labels.get(uid, f'#{uid}')}: {lp}")
        if self.loops or self.persistent:
            ping = ", ping-pong: 2 consumer warpgroups take alternate tiles" if self.pingpong else ""
            lines.append(f"persistent: {'yes' if self.persistent else 'no'}{ping}")
        if self.cluster != (1, 1):
            lines.append(f"cluster: {self.cluster[0]}x{self.cluster[1]} blocks (grid x by y), TMA multicast")
        if self.rasterization is not None:
            lines.append(f"rasterization: grouped, panel {self.rasterization}")
        for uid, lay in self.fragments.items():
            lines.append(f"fragment {self.labels.get(uid, f'#{uid}')}: {lay}")
        for uid, lay in self.shared.items():
            lines.append(f"shared {self.labels.get(uid, f'#{uid}')}: {lay}")
        return "".join(f"\n    {line}" for line in lines)


def grouped_order(bx: T.Expr, by: T.Expr, gx: T.Expr, gy: T.Expr, panel: int) -> tuple[T.Expr, T.Expr]:
    """The (x, y) block indices of block (bx, by) of a gx x gy grid in the grouped order (use_swizzle): consecutive
    blocks walk down a panel of `panel` block rows before moving one block column right. A bijection of the grid;
    rasterization applies it to the block grid, a clustered sm90 launch to the grid of clusters."""
    def b(op, x, y):
        return T.Binary(D.I32, None, op, x, y if isinstance(y, T.Expr) else T.Const(D.I32, None, y))

    pid = b("+", b("*", by, gx), bx)
    per_group = b("*", gx, panel)
    first_y = b("*", b("//", pid, per_group), panel)
    size_y = T.Call(D.I32, None, "min", [b("-", gy, first_y), T.Const(D.I32, None, panel)])
    in_group = b("%", pid, per_group)
    return b("//", in_group, size_y), b("+", first_y, b("%", in_group, size_y))


# ---------------------------------------------------------------- requests (pinned before planning)


@dataclass(frozen=True)
class GemmRequest:
    instruction: str | None = None  # one of GEMM_INSTRUCTIONS
    warps: tuple[int, int] | None = None  # the warp (warpgroup, wave) partition over M x N


@dataclass(frozen=True)
class LoopRequest:
    stages: int | None = None
    mechanism: str | None = None  # one of COPY_MECHANISMS
    warp_specialized: bool | None = None
    overlap_softmax: bool | None = None


@dataclass(frozen=True)
class KernelKeywords:
    """What a kernel's source asks of its schedule: `Kernel(..., warp_specialize=, persistent=, pingpong=,
    overlap_softmax=, tma_preload=, cluster=)` and `T.disable_warp_group_reg_alloc()`, read by the builder. These
    are wishes: a planner grants one where it can and says why not where it cannot (a warning or a remark), where a
    caller's pin (the rest of ScheduleRequest) that cannot be honoured is an error."""

    warp_specialize: bool = True
    persistent: bool = False
    pingpong: bool = False
    overlap_softmax: bool = False
    tma_preload: bool = False
    cluster: tuple[int, int] = (1, 1)  # blocks along grid x, along grid y; (1, 1): no cluster
    warp_group_reg_alloc: bool = True  # sm90: the producer warpgroup hands registers to the consumers (setmaxnreg)

    def lines(self) -> list[str]:
        """The keywords that differ from their defaults, as `--emit-ir` prints them."""
        return [f"{f.name} = {getattr(self, f.name)}" for f in fields(self)
                if getattr(self, f.name) != f.default]


@dataclass(frozen=True)
class ScheduleRequest:
    """Parts of a schedule a caller pins; everything left None is decided by the planners. Gemms are named
    by uid (as `--emit-ir` prints them: `gemm #7 (line 52)`) or "*" for every gemm; loops by uid or by
    their variable's name. A pinned choice the kernel cannot honour is an error at the op's line."""

    gemms: Mapping[int | str, GemmRequest] = field(default_factory=dict)
    loops: Mapping[int | str, LoopRequest] = field(default_factory=dict)
    persistent: bool | None = None
    cluster: tuple[int, int] | None = None  # blocks along grid x, along grid y: (1, 1), (2, 1) or (1, 2)
    pingpong: bool | None = None  # persistent ping-pong (KernelSchedule.pingpong)
    keywords: KernelKeywords = KernelKeywords()  # what the source asks (the builder's; the caller's pins rule)

    def gemm(self, g: T.Gemm) -> GemmRequest:
        return self.gemms.get(g.uid) or self.gemms.get("*") or GemmRequest()

    def loop(self, s: T.For) -> LoopRequest:
        return self.loops.get(s.uid) or self.loops.get(s.vars[0].name) or self.loops.get("*") or LoopRequest()

    @staticmethod
    def parse(spec: ScheduleRequest | Mapping | None) -> ScheduleRequest | None:
        """A request from its plain form: {"gemms": {7: {"instruction": "mma"}}, "loops": {"k": {"stages": 2}},
        "persistent": False, "cluster": [2, 1], "pingpong": True}. Raises ValueError naming what is wrong."""
        if spec is None or isinstance(spec, ScheduleRequest):
            return spec
        unknown = set(spec) - {"gemms", "loops", "persistent", "cluster", "pingpong"}
        if unknown:
            raise ValueError(f"unknown schedule part(s) {', '.join(sorted(map(str, unknown)))}; "
                             "known: gemms, loops, persistent, cluster, pingpong")
        gemms = {key: _entry(GemmRequest, v, f"gemm {key}") for key, v in dict(spec.get("gemms", {})).items()}
        loops = {key: _entry(LoopRequest, v, f"loop {key}") for key, v in dict(spec.get("loops", {})).items()}
        for key, g in gemms.items():
            if g.instruction is not None and g.instruction not in GEMM_INSTRUCTIONS:
                raise ValueError(f"gemm {key}: unknown instruction '{g.instruction}' "
                                 f"(known: {', '.join(GEMM_INSTRUCTIONS)})")
        for key, lp in loops.items():
            if lp.mechanism is not None and lp.mechanism not in COPY_MECHANISMS:
                raise ValueError(f"loop {key}: unknown copy mechanism '{lp.mechanism}' "
                                 f"(known: {', '.join(COPY_MECHANISMS)})")
            if lp.stages is not None and (not isinstance(lp.stages, int) or lp.stages < 1):
                raise ValueError(f"loop {key}: stages must be a positive integer")
        cluster = spec.get("cluster")
        if cluster is not None:
            cluster = check_cluster(cluster)
        for name in ("persistent", "pingpong"):
            if spec.get(name) is not None and not isinstance(spec[name], bool):
                raise ValueError(f"{name} must be true or false, not {spec[name]!r}")
        return ScheduleRequest(gemms, loops, spec.get("persistent"), cluster, spec.get("pingpong"))


def request_of(k: T.Kernel) -> ScheduleRequest:
    """The kernel's request: the caller's pins with the source's keywords (ScheduleRequest.keywords); the defaults
    for a kernel that has none."""
    return k.request if k.request is not None else ScheduleRequest()


def pin(k: T.Kernel, request: ScheduleRequest | None) -> None:
    """Lay the caller's pins (tilec.compile(..., schedule=...)) over the kernel's request, keeping its keywords."""
    if request is not None:
        k.request = replace(request, keywords=request_of(k).keywords)


CLUSTER_SHAPES = ((1, 1), (2, 1), (1, 2))


def check_cluster(value) -> tuple[int, int]:
    """A cluster shape from its plain form ([2, 1], (1, 2)); ValueError naming the shapes there are."""
    try:
        shape = tuple(int(x) for x in value)
    except (TypeError, ValueError):
        shape = None
    if shape not in CLUSTER_SHAPES:
        raise ValueError(f"cluster must be one of {', '.join(f'({x}, {y})' for x, y in CLUSTER_SHAPES)} "
                         f"(blocks along grid x, along grid y), not {value!r}")
    return shape


def _entry(cls, value, what: str):
    if isinstance(value, cls):
        return value
    try:
        if cls is GemmRequest and value.get("warps") is not None:
            value = {**value, "warps": tuple(value["warps"])}
        return cls(**dict(value))
    except (TypeError, AttributeError) as e:
        raise ValueError(f"{what}: {e}") from None


# ---------------------------------------------------------------- resources (priced before lowering)


@dataclass(frozen=True)
class Resources:
    shared_bytes: int  # shared memory of the scheduled tiles (stages included) and pipeline barriers
    threads: int  # threads per block as launched (a producer warpgroup and a ping-pong's second consumer included)
    registers: int  # estimated 32-bit registers per thread: fragments plus a fixed allowance for addresses
    cluster: tuple[int, int] = (1, 1)  # blocks of a thread-block cluster, along grid x and y
    # bytes a block loads from L2 per pipeline iteration (its own tiles, its share of the multicast ones)
    loaded_bytes: int = 0

    def __str__(self) -> str:
        text = f"shared {self.shared_bytes} B, threads {self.threads}, ~{self.registers} registers/thread"
        if self.cluster != (1, 1):
            text += f", cluster {self.cluster[0]}x{self.cluster[1]}, {self.loaded_bytes} B loaded/iteration"
        return text


REGISTER_ALLOWANCE = 32  # addresses, loop counters and temporaries, on top of the fragments
TILE_ALIGN = 128  # storage-planning's alignment of each shared buffer


def resources(k: T.Kernel) -> Resources:
    """What kernel k, scheduled (layout-inference and pipeline-planning have run), will ask of a block.

    Shared memory counts every shared tile in its scheduled layout times its pipeline stages, each rounded
    to storage-planning's 128-byte alignment, plus 8 bytes per mbarrier of the TMA pipelines; lowering may
    add a reduction scratch buffer and operand staging on top. Registers are an estimate (fragments'
    elements per thread, in 32-bit registers, plus a fixed allowance)."""
    sched = k.schedule
    if sched is None:
        raise ValueError(f"kernel '{k.name}' has no schedule yet (run layout-inference and pipeline-planning)")
    stages: dict[int, int] = {}
    tma_staged: set[int] = set()
    barriers = 0
    warp_specialized = False
    blocks = sched.cluster[0] * sched.cluster[1]
    loaded = 0
    for lp in sched.loops.values():
        for p in lp.producers:
            tile = p.dst.buffer.dtype.bytes
            for e in p.dst.buffer.const_shape or ():
                tile *= e
            loaded += tile // blocks if any(p is m for m in lp.multicast) else tile
        if lp.stages > 1:
            for p in lp.producers:
                stages[p.dst.buffer.uid] = lp.stages
                if mechanisms.named(lp.mechanism).stages_aligned:
                    tma_staged.add(p.dst.buffer.uid)
        if mechanisms.named(lp.mechanism).mbarriers:
            # full barriers per producer and stage; empty barriers per stage, or per producer and stage when
            # the producers are released at different points of an iteration (overlap_softmax)
            empties = lp.stages * (len(lp.producers) if lp.overlap_softmax else 1) if lp.warp_specialized else 0
            barriers += lp.stages * len(lp.producers) + empties + len(lp.preloads)
        warp_specialized |= lp.warp_specialized
    shared = 0
    for uid, lay in sched.shared.items():
        per_stage = lay.stage_size if uid in tma_staged else lay.size
        shared += -(-per_stage * lay.elem_bytes * stages.get(uid, 1) // TILE_ALIGN) * TILE_ALIGN
    if barriers:
        shared += -(-barriers * 8 // TILE_ALIGN) * TILE_ALIGN
    regs = 0
    for uid, lay in sched.fragments.items():
        regs += -(-lay.num_local * _fragment_bytes(k, uid) // 4)
    # lowering adds a ping-pong's TMA-store staging tiles on top, as for any persistent kernel
    return Resources(shared, consumer_threads(k.threads, sched) + (128 if warp_specialized else 0),
                     regs + REGISTER_ALLOWANCE, sched.cluster, loaded)


def consumer_threads(threads: int, sched: KernelSchedule) -> int:
    """The threads that run a kernel body declared with `threads`: twice as many with ping-pong, where a second
    consumer warpgroup runs it on alternate tiles with its own accumulator (the same registers per thread)."""
    return threads * (2 if sched.pingpong else 1)


def _fragment_bytes(k: T.Kernel, uid: int) -> int:
    from .visit import walk_stmts

    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc) and s.buffer.uid == uid:
            return s.buffer.dtype.bytes
    return 4
