"""The Hopper (sm90) instructions for the SIMT-level interpreter: TMA boxes, mbarriers and wgmma.

Modelled from the PTX ISA, independently of the lowering that emits them:
* TMA (`tma_load_Nd`, `tma_store_Nd`): the tensor map is the kernel's manifest entry (tensor, box,
  swizzle); a box is copied in row-major box order, out-of-bounds elements read as zero and are not
  stored; shared-memory bytes are swizzled as the hardware does it, from the absolute shared address
  (the 16-byte chunk bits 4.. XOR the 128-byte row bits 7.., over log2(span/16) bits).
* mbarriers: `mbar_init` sets the expected arrivals; `mbar_expect_tx` is an arrival that also expects
  transaction bytes, which TMA loads complete. A phase completes when both reach zero.
  `mbar_wait(parity)` returns when the phase of that parity has completed — in this lockstep model
  a wait that could not return is a deadlock and an error. The bytes a TMA load writes count as in
  flight until a thread has waited for their barrier's phase: reading them before is an error (a
  missing wait).
* wgmma (`wgmma_ss:nN:dtype:tnspB`, `wgmma_rs:...`): issuing one reads its descriptors and register
  addresses; `wgmma_commit` closes a group; `wgmma_wait N` retires the oldest groups until N are pending,
  and only then are their operands read and their accumulators updated -- so a statement that reads an
  accumulator, or overwrites an operand (registers, or a stage given back to the producer), before the
  wait that retires the group computes a wrong result. A and B are read from shared memory through the
  descriptor's start address, leading and stride byte offsets and swizzle mode, with the canonical
  K-major and MN-major layouts of the PTX ISA (K-major: 8-row core groups SBO apart, rows `span` bytes
  apart; MN-major: 8-k groups SBO apart, 128-byte MN panels LBO apart);
  a register A operand follows the m16n8k16 A fragment per warp; D is the documented accumulator
  fragment (warp w rows 16w..16w+15, register i of lane l at row l/4 + 8((i%4)/2), column
  8(i/4) + 2(l%4) + i%2).
* Warp specialization: the two branches of the producer/consumer split (`SIf(concurrent=True)`) run as
  two groups, each in lockstep, on two Python threads of which only one executes at a time; a group
  gives way only inside a wait that cannot return yet. If every group waits, the kernel
  deadlocks, which is an error. The consumers' named barrier is a barrier of the declared threads;
  the ping-pong named barriers between consumer warpgroups order nothing in a lockstep group and are
  accepted without effect. When the split's consumer branch is several groups (`SIf.groups`: a persistent
  ping-pong kernel's consumer warpgroups), each runs as a thread group of its own, and then `named_barrier_sync`
  / `named_barrier_arrive` are modelled as bar.sync / bar.arrive: a barrier id completes a generation when its
  thread count has arrived, a sync returns once the generation it arrived in has completed (else a deadlock, an
  error), and arrivals nobody completed when the block exits are an error; a `Barrier` with an id (`index`) must
  be reached by exactly its thread count per id. wgmma groups are per warpgroup: a warpgroup's commit and wait
  concern only its own instructions.
* Thread-block clusters (the kernel's `cluster` attribute, blocks ranked x fastest): the blocks of a cluster run
  as thread groups that take turns the same way. `tma_load_multicast_Nd` lands its box at the same shared offset
  in every block of its mask and completes the bytes on each one's mbarrier at the same offset (a block's
  transaction count may go below zero until its own expect_tx arrives, as on the hardware);
  `mbar_arrive_cluster_warp` arrives on the mbarrier at that offset in every block of its mask; `cluster_sync`
  returns once every block of the cluster has reached it. A multicast into, or an arrival on, a block whose
  barriers are not initialised yet or that has exited is an error.
"""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np

from ..interp.tile_interp import storage_dtype
from ..ir import dtypes as D
from ..ir import simt as S

_NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
       "f8e5m2": ml_dtypes.float8_e5m2}
_SPAN = {1: 128, 2: 64, 3: 32}


def swizzle(addr: np.ndarray, span: int) -> np.ndarray:
    if span == 0:
        return addr
    bits = {128: 3, 64: 2, 32: 1}[span]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


class _Barrier:
    def __init__(self, count: int):
        self.count = count
        self.arrivals = 0
        self.tx = 0
        self.phase = 0  # completed phases
        self.in_flight: list[tuple[int, np.ndarray]] = []  # (shared buffer id, element indices)

    def maybe_complete(self) -> bool:
        if self.arrivals >= self.count and self.tx == 0:
            self.phase += 1
            self.arrivals = 0
            return True
        return False


class Turns:
    """Python threads (thread groups of the model: a block's producers or consumers, the blocks of a cluster) that
    run one at a time, each holding `cond` while it runs. A thread gives the turn to the next one only inside a
    wait that cannot return yet; when every live thread has had its turn since anything changed (`progress`),
    nothing can: a deadlock, and give_way returns False."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.order: list[int] = []  # the live threads' idents, in turn order
        self.holder: int | None = None
        self.progress = 0
        self.mark = 0
        self.stalled = 0
        self.errors: list[BaseException] = []

    def enter(self) -> None:
        """The calling thread joins and takes the turn (it must not hold it already)."""
        self.cond.acquire()
        me = threading.get_ident()
        self.order.append(me)
        self.holder = me

    def leave(self) -> None:
        me = threading.get_ident()
        i = self.order.index(me)
        self.order.remove(me)
        self.stalled = 0
        if self.holder == me:
            self.holder = self.order[i % len(self.order)] if self.order else None
        self.cond.notify_all()
        self.cond.release()

    def spawn(self, fn, first: bool = False) -> threading.Thread:
        """A new thread running fn, next in turn after the caller (the holder); with first, it runs now and the
        caller gets the turn back when it gives way or finishes."""
        me = threading.get_ident()

        def body():
            self.cond.acquire()
            mine = threading.get_ident()
            self.order.insert(self.order.index(me) + 1, mine)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.holder == mine)
            try:
                fn()
            except BaseException as e:  # noqa: BLE001  (re-raised by whoever waits for this thread)
                self.errors.append(e)
            finally:
                self.leave()

        t = threading.Thread(target=body, daemon=True)
        t.start()
        self.cond.wait_for(lambda: t.ident in self.order)
        if first:
            self.holder = t.ident
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.holder == me)
        return t

    def alive(self, t: threading.Thread) -> bool:
        return t.ident in self.order

    def give_way(self) -> bool:
        me = threading.get_ident()
        if self.progress != self.mark:
            self.mark, self.stalled = self.progress, 0
        self.stalled += 1
        if len(self.order) < 2 or self.stalled > len(self.order):
            return False
        self.holder = self.order[(self.order.index(me) + 1) % len(self.order)]
        self.cond.notify_all()
        self.cond.wait_for(lambda: self.holder == me)
        return True


class HopperModel:
    """Mixin of the interpreter's block run (tilec.simt.interp._BlockRun)."""

    def hopper_init(self, raw: np.ndarray | None) -> None:
        self.raw = raw
        self.barriers: dict[int, _Barrier] = {}
        self.in_flight: dict[S.SBuffer, np.ndarray] = {}  # shared buffer -> bool per element (TMA not waited for)
        self.wgmma_open: dict[int, list[tuple]] = {}  # per warpgroup: issued wgmma instructions not committed yet
        self.wgmma_groups: dict[int, list[list[tuple]]] = {}  # per warpgroup: committed groups not retired yet
        self.split_consumers = False  # the consumer warpgroups run as thread groups of their own (SIf.groups)
        self.named: dict[int, list[int]] = {}  # named barrier id -> [threads arrived, generations completed]
        self.cluster_blocks: list = [self]  # the blocks of this block's cluster, by rank (set by the grid's run)
        self.cluster_rank = 0
        self.cluster_syncs = 0  # cluster barriers this block has passed
        self.exited = False  # the block has finished: its shared memory and barriers are gone

    @property
    def turns(self) -> Turns | None:
        return self.sim.turns

    def progressed(self) -> None:
        """Something another thread group may be waiting for changed (an mbarrier, a cluster barrier)."""
        if self.turns is not None:
            self.turns.progress += 1

    def give_way(self) -> bool:
        """Let the other thread groups run (one at a time) until one changes something; False when none can: a
        deadlock."""
        return self.turns is not None and self.turns.give_way()

    def run_concurrently(self, s, then_mask: np.ndarray, else_mask: np.ndarray) -> None:
        """The producer branch as a thread group of its own, started first; this group runs the consumers (with
        SIf.groups > 1, the first consumer group, the others each a thread group of its own) and then waits for the
        other groups to finish."""
        own = self.turns is None
        if own:
            self.sim.turns = Turns()
            self.sim.turns.enter()
        turns = self.sim.turns
        try:
            child = turns.spawn(lambda: self.stmts(s.then_body, then_mask), first=True)
            members = np.nonzero(else_mask)[0]
            if len(members) % s.groups:
                raise self.err(f"{len(members)} consumer threads do not split into {s.groups} groups", s.span)
            parts = []
            for chunk in np.split(members, s.groups):
                part = np.zeros(self.n, bool)
                part[chunk] = True
                parts.append(part)
            self.split_consumers = s.groups > 1
            others = [turns.spawn(lambda m=m: self.stmts(s.else_body, m)) for m in parts[1:]]
            self.stmts(s.else_body, parts[0])
            while turns.alive(child) or any(turns.alive(t) for t in others):
                if not self.give_way():
                    raise self.err("the warp-specialized branches never finish: the producers wait for a stage "
                                   "nobody releases, or a consumer warpgroup for a turn nobody hands on", s.span)
            if turns.errors:
                raise turns.errors[0]
            for bar_id, (arrived, _) in self.named.items():
                if arrived:
                    raise self.err(f"named barrier {bar_id} has {arrived} arrival(s) nobody completed when the block "
                                   "exits (a bar.arrive without its bar.sync)", s.span)
        finally:
            if own:
                turns.leave()
                self.sim.turns = None

    def named_barrier(self, s: S.SCall, mask) -> None:
        """bar.sync / bar.arrive between thread groups (only when the consumer warpgroups run as groups of their own;
        in a lockstep group they order nothing)."""
        if not self.split_consumers:
            return
        act = self.active(mask)
        bar_id = self.uniform(self.full(self.eval(s.args[0], mask)), act, "named barrier id", s.span)
        count = self.uniform(self.full(self.eval(s.args[1], mask)), act, "named barrier thread count", s.span)
        state = self.named.setdefault(bar_id, [0, 0])
        generation = state[1]
        state[0] += int(act.sum())
        if state[0] >= count:
            state[0] -= count
            state[1] += 1
            self.progressed()
        if s.op == "named_barrier_sync":
            while state[1] == generation:
                if not self.give_way():
                    raise self.err(f"named barrier {bar_id} never completes ({state[0]} of {count} threads arrived): "
                                   "a bar.arrive is missing", s.span)
            self.epoch += 1

    def indexed_barrier(self, s: S.Barrier, mask) -> None:
        """A named barrier per id (a ping-pong consumer warpgroup's block barrier): every id reached by exactly its
        thread count."""
        act = self.active(mask)
        ids = self.full(self.eval(s.index, mask))[act]
        for bar_id in np.unique(ids):
            if int((ids == bar_id).sum()) != s.threads:
                raise self.err(f"named barrier {int(bar_id)} of {s.threads} threads reached by "
                               f"{int((ids == bar_id).sum())} (under a thread-dependent condition)", s.span)
        self.epoch += 1

    # ------------------------------------------------------------ clusters
    def peer(self, rank: int):
        if not 0 <= rank < len(self.cluster_blocks):
            raise self.err(f"cluster rank {rank} outside the cluster of {len(self.cluster_blocks)} block(s)")
        return self.cluster_blocks[rank]

    def ranks(self, mask_value: int, span) -> list[int]:
        ranks = [r for r in range(16) if mask_value >> r & 1]
        if not ranks:
            raise self.err("an empty cluster mask", span)
        for r in ranks:
            self.peer(r)
        return ranks

    def cluster_sync(self, s: S.SCall, mask) -> None:
        """barrier.cluster arrive + wait: every thread of every block of the cluster (the block's whole thread
        set, in this lockstep model), then a new epoch."""
        if mask is not None and not np.all(mask):
            raise self.err("cluster_sync reached by only some threads of the block (undefined behaviour)", s.span)
        self.cluster_syncs += 1
        self.progressed()
        while any(b.cluster_syncs < self.cluster_syncs for b in self.cluster_blocks):
            if not self.give_way():
                raise self.err("cluster barrier never completes: a block of the cluster does not reach it", s.span)
        self.epoch += 1

    # ------------------------------------------------------------ helpers
    def uniform(self, values: np.ndarray, act: np.ndarray, what: str, span) -> int:
        v = np.asarray(values)[act] if np.ndim(values) else np.asarray([values])
        if v.size == 0 or np.any(v != v[0]):
            raise self.err(f"{what} differs between the threads that issue it", span)
        return int(v[0])

    def shared_byte(self, b: S.SBuffer, idx: int) -> int:
        return int(b.offset) + idx * storage_dtype(b.dtype).itemsize

    def buffer_at(self, byte: np.ndarray) -> tuple[S.SBuffer, np.ndarray]:
        for b in self.k.shared:
            if b.alias_of is not None:
                continue
            eb = storage_dtype(b.dtype).itemsize
            lo, hi = int(b.offset), int(b.offset) + b.size * eb
            if np.all((byte >= lo) & (byte < hi)):
                return b, (byte - lo) // eb
        raise self.err("a TMA or wgmma access outside any one shared buffer")

    def barrier_key(self, e, mask, span) -> int:
        b, idx = self.addr(e, mask)
        return self.uniform(self.shared_byte(b, 0) + idx * 8, self.active(mask), "mbarrier address", span)

    def barrier_at(self, key: int, span) -> _Barrier:
        bar = self.barriers.get(key)
        if bar is None:
            raise self.err("mbarrier used before mbar_init", span)
        return bar

    def barrier_of(self, e, mask, span) -> _Barrier:
        return self.barrier_at(self.barrier_key(e, mask, span), span)

    def tensor_map(self, var) -> dict:
        names = [v.name for v in self.k.attrs.get("tensor_map_params", [])]
        return self.k.attrs["tensor_maps"][names.index(var.name)]

    def map_memory(self, entry: dict) -> tuple[np.ndarray, tuple[int, ...]]:
        """The flat memory a tensor map reads (a view's: the tensor's bytes as the view's type) and its dims."""
        data = self.sim.globals[entry["tensor"]]
        view = entry.get("view")
        if view is None:
            return data, self.sim.shapes[entry["tensor"]]
        funcs = {"ceildiv": lambda a, b: -(-a // b), "min": min, "max": max}
        shape = tuple(d if type(d) is int else eval(d, {"__builtins__": {}, **funcs}, dict(self.sim.sizes))
                      for d in view["shape"])  # the compiler's size formulas
        dt = storage_dtype(D.BY_NAME[view["dtype"]])
        raw = data.view(np.uint8)
        return raw[:raw.size // dt.itemsize * dt.itemsize].view(dt), shape

    def box_elements(self, entry: dict, coords: list[int]):
        """Global flat indices (or -1 when out of bounds) of a box, in row-major box order."""
        shape = self.map_memory(entry)[1]
        box = entry["box"]
        grids = np.meshgrid(*[np.arange(n) for n in box], indexing="ij")
        inside = np.ones(grids[0].shape, bool)
        flat = np.zeros(grids[0].shape, np.int64)
        for d, (g, start) in enumerate(zip(grids, coords, strict=True)):
            pos = g + start
            inside &= (pos >= 0) & (pos < shape[d])
            flat = flat * shape[d] + pos
        return np.where(inside, flat, -1).ravel()

    # ------------------------------------------------------------ statements
    def hopper_call(self, s: S.SCall, mask) -> bool:
        """The Hopper intrinsics' semantics, registered by op in HOPPER_SEMANTICS; False: not one of them."""
        semantics = HOPPER_SEMANTICS.get(s.op)
        if semantics is None:
            return False
        if semantics:
            getattr(self, semantics)(s, mask)
        return True

    def mbar_init(self, s: S.SCall, mask) -> None:
        act = self.active(mask)
        b, idx = self.addr(s.args[0], mask)
        counts = self.full(self.eval(s.args[1], mask))
        for t in np.nonzero(act)[0]:
            self.barriers[self.shared_byte(b, int(idx[t]))] = _Barrier(int(counts[t]))

    def mbar_arrive(self, s: S.SCall, mask) -> None:
        """mbar_arrive, mbar_arrive_warp (lane 0 of each warp arrives) and mbar_expect_tx (arrives, expecting
        transaction bytes)."""
        for t in np.nonzero(self.active(mask))[0]:
            m = np.zeros(self.n, bool)
            m[t] = True
            bar = self.barrier_of(s.args[0], m, s.span)
            if s.op == "mbar_arrive_warp" and t % 32:
                continue
            bar.arrivals += 1
            self.progressed()
            if s.op == "mbar_expect_tx":
                bar.tx += int(self.full(self.eval(s.args[1], mask))[t])
            self.check_arrivals(bar, s.span)
            bar.maybe_complete()

    def check_arrivals(self, bar: _Barrier, span) -> None:
        if bar.arrivals > bar.count:
            raise self.err(f"more arrivals on an mbarrier than its phase expects ({bar.count}): a stage released "
                           "twice, or the next phase's arrival before this one completed", span)

    def mbar_wait(self, s: S.SCall, mask) -> None:
        bar = self.barrier_of(s.args[0], mask, s.span)
        parity = self.uniform(self.full(self.eval(s.args[1], mask)), self.active(mask), "mbar_wait parity", s.span)
        while parity == bar.phase % 2:  # that phase has not completed yet
            if not self.give_way():
                raise self.err(f"mbarrier wait for phase parity {parity} never completes (expected arrivals "
                               f"{bar.count}, arrived {bar.arrivals}, {bar.tx} transaction bytes "
                               "outstanding)", s.span)
        for key, idx in bar.in_flight:
            self.in_flight[key][idx] = False
        bar.in_flight = []

    def tma_loads(self, s: S.SCall, mask) -> None:
        for t in np.nonzero(self.active(mask))[0]:
            self.tma_load(s, t, mask)

    def tma_stores(self, s: S.SCall, mask) -> None:
        for t in np.nonzero(self.active(mask))[0]:
            self.tma_store(s, t, mask)

    def thread_values(self, args, mask, t: int) -> list[int]:
        return [int(self.full(self.eval(a, mask))[t]) for a in args]

    def tma_load(self, s: S.SCall, t: int, mask) -> None:
        """tma_load_Nd: into this block; tma_load_multicast_Nd: into the same shared offset of every block of the
        cluster in its mask, each completing the bytes on its own mbarrier at the same offset."""
        entry = self.tensor_map(s.args[0])
        dst, didx = self.addr(s.args[1], mask)
        bar_m = np.zeros(self.n, bool)
        bar_m[t] = True
        key = self.barrier_key(s.args[2], bar_m, s.span)
        first = 3
        targets = [self]
        if s.op == "tma_load_multicast":
            targets = [self.peer(r) for r in self.ranks(self.thread_values(s.args[3:4], mask, t)[0], s.span)]
            first = 4
        coords = list(reversed(self.thread_values(s.args[first:], mask, t)))  # outermost first
        src = self.map_memory(entry)[0]
        flat = self.box_elements(entry, coords)
        values = np.zeros(flat.shape, storage_dtype(dst.dtype))
        ok = flat >= 0
        values[ok] = src[flat[ok]]
        start = self.shared_byte(dst, int(didx[t]))
        if start % 128:  # cp.async.bulk.tensor faults (misaligned address) on a destination not 128-byte aligned
            raise self.err(f"TMA box lands at shared byte {start}, which is not 128-byte aligned", s.span)
        for blk in targets:
            blk.land(entry, start, values, key, s.span)

    def land(self, entry: dict, start: int, values: np.ndarray, key: int, span) -> None:
        """A TMA box's bytes arrive in this block's shared memory at `start` (swizzled by the address) and complete
        their transaction bytes on this block's mbarrier `key`."""
        if self.exited:
            raise self.err("a TMA multicast into a block of the cluster that has exited (no cluster barrier before "
                           "its exit)", span)
        bar = self.barrier_at(key, span)
        eb = values.dtype.itemsize
        addr = swizzle(start + np.arange(values.size) * eb, entry["swizzle"])
        b, elems = self.buffer_at(addr)
        self.raw[(addr[:, None] + np.arange(eb)).ravel()] = values.view(np.uint8)
        flags = self.in_flight.setdefault(b, np.zeros(b.size, bool))
        flags[elems] = True
        bar.in_flight.append((b, elems))
        sh = self.shared[b]
        sh.write_epoch[elems] = -1  # written by the async proxy, published by the barrier
        bar.tx -= values.nbytes
        self.progressed()
        bar.maybe_complete()

    def mbar_arrive_cluster(self, s: S.SCall, mask) -> None:
        """mbar_arrive_cluster_warp: lane 0 of each warp arrives on the mbarrier at this offset in every block of
        the cluster in the mask (its own included)."""
        for t in np.nonzero(self.active(mask))[0]:
            if t % 32:
                continue
            m = np.zeros(self.n, bool)
            m[t] = True
            key = self.barrier_key(s.args[0], m, s.span)
            for r in self.ranks(self.thread_values(s.args[1:2], mask, t)[0], s.span):
                if self.peer(r).exited:
                    raise self.err(f"an arrival on an mbarrier of block {self.peer(r).block_idx} of the cluster, "
                                   "which has exited (no cluster barrier before its exit)", s.span)
                bar = self.peer(r).barrier_at(key, s.span)
                bar.arrivals += 1
                self.progressed()
                self.check_arrivals(bar, s.span)
                bar.maybe_complete()

    def tma_store(self, s: S.SCall, t: int, mask) -> None:
        entry = self.tensor_map(s.args[0])
        src_b, sidx = self.addr(s.args[1], mask)
        coords = list(reversed(self.thread_values(s.args[2:], mask, t)))
        flat = self.box_elements(entry, coords)
        eb = storage_dtype(src_b.dtype).itemsize
        addr = swizzle(self.shared_byte(src_b, int(sidx[t])) + np.arange(flat.size) * eb, entry["swizzle"])
        b, elems = self.buffer_at(addr)
        self.check_in_flight(b, elems, s.span)
        values = self.raw[(addr[:, None] + np.arange(eb)).ravel()].view(storage_dtype(src_b.dtype))
        ok = flat >= 0
        self.map_memory(entry)[0][flat[ok]] = values[ok]

    def check_in_flight(self, b: S.SBuffer, elems: np.ndarray, span) -> None:
        flags = self.in_flight.get(b)
        if flags is not None and np.any(flags[elems]):
            raise self.err(f"read of shared '{b.name}' written by a TMA load nobody waited for (missing "
                           "mbar_wait)", span)

    # ------------------------------------------------------------ wgmma
    def operand(self, start: int, lbo: int, sbo: int, swz: int, rows: int, cols: int, eb: int, k_major: bool,
                np_t, span) -> np.ndarray:
        """A rows x cols operand tile (rows: M or N, cols: K) read through a descriptor."""
        span_b = _SPAN[swz] if swz else 0
        r = np.arange(rows)[:, None]
        k = np.arange(cols)[None, :]
        if k_major:
            off = (r // 8) * sbo + (r % 8) * span_b + k * eb
        else:  # MN-major: panels of span/eb elements along rows, 8-k groups SBO apart
            width = span_b // eb
            off = (r // width) * lbo + (k // 8) * sbo + (k % 8) * span_b + (r % width) * eb
        addr = swizzle(start + off, span_b)
        b, elems = self.buffer_at(addr.ravel())
        self.check_in_flight(b, elems, span)
        raw = self.raw[(int(b.offset) + elems * storage_dtype(b.dtype).itemsize)[:, None] + np.arange(eb)]
        return raw.reshape(-1).view(np_t).astype(np.float32).reshape(rows, cols)

    def wgmma(self, s: S.SCall, mask) -> None:
        """Issue: the descriptors and register addresses are read now; the operands are read and the
        accumulator updated when a wgmma_wait retires the instruction's group (wgmma_complete)."""
        p = s.params
        kind, n, dt, tnsp_b = f"wgmma_{p['operands']}", p["n"], p["dtype"], str(p["b_k_major"])
        np_t = _NP[dt]
        eb = np.dtype(np_t).itemsize
        kdim = 32 if eb == 1 else 16
        act = self.active(mask)
        acc_b, acc_i = self.addr(s.args[0], mask)
        acc = self.storage(acc_b)  # this declaration's registers (a later one is other registers)
        for g in range(self.n // 128):
            threads = np.arange(128 * g, 128 * g + 128)
            if not act[threads].any():
                continue
            if not act[threads].all():
                raise self.err("wgmma issued by part of a warpgroup", s.span)
            wg_act = np.zeros(self.n, bool)
            wg_act[threads] = True
            if kind == "wgmma_ss":
                a_b, a_i = self.addr(s.args[1], mask)
                a_start = self.uniform(self.shared_byte(a_b, 0) + a_i * storage_dtype(a_b.dtype).itemsize,
                                       wg_act, "A descriptor", s.span)
                a_desc = (a_start, *(int(self.full(self.eval(x, mask))[threads[0]]) for x in s.args[2:5]))
                a_regs = None
                b_args = s.args[5:]
            else:
                a_desc = None
                regs_b, regs_i = self.addr(s.args[1], mask)
                a_regs = (self.storage(regs_b), regs_i.copy())
                b_args = s.args[2:]
            b_b, b_i = self.addr(b_args[0], mask)
            b_start = self.uniform(self.shared_byte(b_b, 0) + b_i * storage_dtype(b_b.dtype).itemsize,
                                   wg_act, "B descriptor", s.span)
            b_desc = (b_start, *(int(self.full(self.eval(x, mask))[threads[0]]) for x in b_args[1:4]))
            self.wgmma_open.setdefault(g, []).append((s, threads, acc, acc_i.copy(), a_desc, a_regs, b_desc, n, kdim,
                                                      eb, np_t, tnsp_b == "0"))

    def wgmma_complete(self, s, threads, acc, acc_i, a_desc, a_regs, b_desc, n, kdim, eb, np_t, b_k_major) -> None:
        if a_desc is not None:
            a = self.operand(*a_desc, 64, kdim, eb, True, np_t, s.span)
        else:
            a = self.register_a(*a_regs, threads, np_t)
        b = self.operand(*b_desc, n, kdim, eb, b_k_major, np_t, s.span)  # (N, K)
        d = a @ b.T  # (64, N)
        lane = threads % 32
        warp = (threads % 128) // 32
        for i in range(n // 2):
            row = 16 * warp + lane // 4 + 8 * ((i % 4) // 2)
            col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
            idx = acc_i[threads] + i
            acc[threads, idx] = (acc[threads, idx].astype(np.float32) + d[row, col]).astype(acc.dtype)

    def warpgroups(self, mask) -> list[int]:
        act = self.active(mask)
        return [g for g in range(-(-self.n // 128)) if act[128 * g:128 * g + 128].any()]

    def wgmma_commit(self, s: S.SCall, mask) -> None:
        for g in self.warpgroups(mask):
            self.wgmma_groups.setdefault(g, []).append(self.wgmma_open.pop(g, []))

    def wgmma_wait(self, s: S.SCall, mask) -> None:
        """Retire each warpgroup's oldest committed groups until at most N of its own are pending."""
        pending = self.uniform(self.full(self.eval(s.args[0], mask)), self.active(mask), "wgmma_wait", s.span)
        for g in self.warpgroups(mask):
            groups = self.wgmma_groups.get(g, [])
            while len(groups) > pending:
                for instr in groups.pop(0):
                    self.wgmma_complete(*instr)

    def register_a(self, regs: np.ndarray, regs_i: np.ndarray, threads: np.ndarray, np_t) -> np.ndarray:
        """The 64 x 16 A operand from each warp's four u32 registers (m16n8k16 A fragment per warp)."""
        a = np.full((64, 16), np.nan, np.float32)
        lane = threads % 32
        warp = (threads % 128) // 32
        for r in range(4):
            word = regs[threads, regs_i[threads] + r].astype(np.uint32)
            row = 16 * warp + lane // 4 + 8 * (r % 2)
            for h in range(2):
                col = 2 * (lane % 4) + 8 * (r // 2) + h
                bits = ((word >> (16 * h)) & 0xFFFF).astype(np.uint16)
                a[row, col] = bits.view(np_t).astype(np.float32)
        return a


# The semantics of the Hopper intrinsics (tilec/ir/intrinsics.py), by op: a method of HopperModel, or "" for
# the fences and register hints that order nothing in this model.
HOPPER_SEMANTICS = {
    "mbar_init": "mbar_init", "mbar_expect_tx": "mbar_arrive", "mbar_arrive": "mbar_arrive",
    "mbar_arrive_warp": "mbar_arrive", "mbar_wait": "mbar_wait", "tma_load": "tma_loads", "tma_store": "tma_stores",
    "tma_load_multicast": "tma_loads", "mbar_arrive_cluster_warp": "mbar_arrive_cluster",
    "cluster_sync": "cluster_sync", "named_barrier_sync": "named_barrier", "named_barrier_arrive": "named_barrier",
    "wgmma": "wgmma", "wgmma_commit": "wgmma_commit", "wgmma_wait": "wgmma_wait",
    **dict.fromkeys(("fence_mbar_init", "fence_proxy_async", "wgmma_fence",
                     "wgmma_fence_regs", "setmaxnreg_inc", "setmaxnreg_dec", "tma_store_commit", "tma_store_wait"), ""),
}
