"""The semantics of the Hopper (sm90) instructions in the SIMT-level interpreter (tilec/simt/interp.py): TMA boxes,
mbarriers and wgmma, named by their definitions in tilec/targets/cuda/intrinsics.py.

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

import ml_dtypes
import numpy as np

from ...ir import dtypes as D
from ...ir import simt as S

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


class Hopper:
    """sm90's state in one block run (its mbarriers, each warpgroup's wgmma groups) and its instructions'
    semantics; what is not its own it reads from the block run (tilec.simt.interp._BlockRun: memory, evaluation,
    thread groups, the cluster)."""

    def __init__(self, run) -> None:
        self.__dict__["run"] = run
        self.barriers: dict[int, _Barrier] = {}
        self.wgmma_open: dict[int, list[tuple]] = {}  # per warpgroup: issued wgmma instructions not committed yet
        self.wgmma_groups: dict[int, list[list[tuple]]] = {}  # per warpgroup: committed groups not retired yet

    def __getattr__(self, name: str):
        return getattr(self.run, name)

    def __setattr__(self, name: str, value) -> None:
        if name in self.__dict__ or not hasattr(self.run, name):
            self.__dict__[name] = value
        else:
            setattr(self.run, name, value)

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

    # ------------------------------------------------------------ clusters
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
        dt = self.storage_dtype(D.BY_NAME[view["dtype"]])
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
        targets = [self.run]
        if s.op == "tma_load_multicast":
            targets = [self.peer(r) for r in self.ranks(self.thread_values(s.args[3:4], mask, t)[0], s.span)]
            first = 4
        coords = list(reversed(self.thread_values(s.args[first:], mask, t)))  # outermost first
        src = self.map_memory(entry)[0]
        offset = coords[-1] * src.dtype.itemsize
        if offset % 16:
            # the H200 stops the kernel with an illegal instruction (bench/RESULTS.md, s22: boxes starting 3 bytes
            # into a row); the map's base and pitches are multiples of 16 bytes, so the column decides
            raise self.err(f"TMA box starts at column {coords[-1]} of '{entry['tensor']}', {offset} bytes into its "
                           "row: not a multiple of 16 bytes", s.span)
        flat = self.box_elements(entry, coords)
        values = np.zeros(flat.shape, self.storage_dtype(dst.dtype))
        ok = flat >= 0
        values[ok] = src[flat[ok]]
        start = self.shared_byte(dst, int(didx[t]))
        if start % 128:  # cp.async.bulk.tensor faults (misaligned address) on a destination not 128-byte aligned
            raise self.err(f"TMA box lands at shared byte {start}, which is not 128-byte aligned", s.span)
        for blk in targets:
            of(blk).land(entry, start, values, key, s.span)

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
                bar = of(self.peer(r)).barrier_at(key, s.span)
                bar.arrivals += 1
                self.progressed()
                self.check_arrivals(bar, s.span)
                bar.maybe_complete()

    def tma_store(self, s: S.SCall, t: int, mask) -> None:
        entry = self.tensor_map(s.args[0])
        src_b, sidx = self.addr(s.args[1], mask)
        coords = list(reversed(self.thread_values(s.args[2:], mask, t)))
        flat = self.box_elements(entry, coords)
        eb = self.storage_dtype(src_b.dtype).itemsize
        addr = swizzle(self.shared_byte(src_b, int(sidx[t])) + np.arange(flat.size) * eb, entry["swizzle"])
        b, elems = self.buffer_at(addr)
        self.check_in_flight(b, elems, s.span)
        values = self.raw[(addr[:, None] + np.arange(eb)).ravel()].view(self.storage_dtype(src_b.dtype))
        ok = flat >= 0
        self.map_memory(entry)[0][flat[ok]] = values[ok]

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
        raw = self.raw[(int(b.offset) + elems * self.storage_dtype(b.dtype).itemsize)[:, None] + np.arange(eb)]
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
                a_start = self.uniform(self.shared_byte(a_b, 0) + a_i * self.storage_dtype(a_b.dtype).itemsize,
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
            b_start = self.uniform(self.shared_byte(b_b, 0) + b_i * self.storage_dtype(b_b.dtype).itemsize,
                                   wg_act, "B descriptor", s.span)
            b_desc = (b_start, *(int(self.full(self.eval(x, mask))[threads[0]]) for x in b_args[1:4]))
            for what, start in (("A", a_desc[0] if a_desc else None), ("B", b_start)):
                if start is not None and start % 16:  # the hardware would drop the low bits: another tile
                    raise self.err(f"wgmma's {what} descriptor starts at byte {start} of shared memory, not a "
                                   "multiple of 16 (a descriptor's start address counts 16-byte units)", s.span)
            self.wgmma_open.setdefault(g, []).append((s, threads, acc, acc_i.copy(), a_desc, a_regs, b_desc, n, kdim,
                                                      eb, np_t, tnsp_b == "0", p["zero_d"]))

    def wgmma_complete(self, s, threads, acc, acc_i, a_desc, a_regs, b_desc, n, kdim, eb, np_t, b_k_major,
                       zero_d) -> None:
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
            before = 0 if zero_d else acc[threads, idx].astype(np.float32)  # scale-d 0: the accumulator is not read
            acc[threads, idx] = (before + d[row, col]).astype(acc.dtype)

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


def of(run) -> Hopper:
    """The Hopper state of a block run."""
    return run.model(Hopper)


def _on(method):
    def semantics(run, s, mask) -> None:
        method(of(run), s, mask)
    semantics.__doc__ = method.__doc__
    return semantics


# The semantics each definition of tilec/targets/cuda/intrinsics.py names
mbar_init = _on(Hopper.mbar_init)
mbar_arrive = _on(Hopper.mbar_arrive)
mbar_wait = _on(Hopper.mbar_wait)
mbar_arrive_cluster = _on(Hopper.mbar_arrive_cluster)
tma_loads = _on(Hopper.tma_loads)
tma_stores = _on(Hopper.tma_stores)
cluster_sync = _on(Hopper.cluster_sync)
named_barrier = _on(Hopper.named_barrier)
wgmma = _on(Hopper.wgmma)
wgmma_commit = _on(Hopper.wgmma_commit)
wgmma_wait = _on(Hopper.wgmma_wait)


def no_effect(run, s, mask) -> None:
    """The fences and register hints, which order nothing in this lockstep model."""


def pack2(run, e, mask) -> np.ndarray:
    """Two 16-bit floats' bits side by side."""
    bits = [run.full(run.to_storage(run.full(run.eval(a, mask)), a.dtype)).view(np.uint16).astype(np.int64)
            for a in e.args]
    return bits[0] | (bits[1] << 16)


def grid_dim_x(run, e, mask) -> np.ndarray:
    return np.asarray(run.sim.grid_x, np.int64)
