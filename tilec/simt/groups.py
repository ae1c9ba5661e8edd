"""Thread groups, clusters and asynchronous shared-memory writes for the SIMT-level interpreter (tilec/simt/interp.py):
what the SIMT IR itself can express, whatever instructions a back end adds.

* A concurrent branch (`SIf(concurrent=True)`: a warp-specialized kernel's producer/consumer split) runs its two
  sides as two groups, each in lockstep, on two Python threads of which only one executes at a time; a group
  gives way only inside a wait that cannot return yet. If every group waits, the kernel deadlocks, which is an
  error. When the consumer side is several groups (`SIf.groups`: a persistent ping-pong kernel's consumer
  warpgroups), each runs as a thread group of its own; named barriers (`Barrier` with an id) must be reached by
  exactly their thread count per id, and arrivals nobody completed when the block exits are an error.
* Thread-block clusters (the kernel's `cluster` attribute, blocks ranked x fastest): the blocks of a cluster run as
  thread groups that take turns the same way (`peer`, `ranks`).
* Asynchronous writes into shared memory (a TMA load) are marked in flight until a thread has waited for them;
  reading them before is an error (a missing wait).

A back end's instructions that act on these (sm90's mbarriers, TMA and wgmma: tilec/targets/cuda/simt_hopper.py)
keep their own state per block in `run.model(cls)`.
"""

from __future__ import annotations

import threading

import numpy as np

from ..interp.tile_interp import storage_dtype
from ..ir import simt as S


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
        self.causes: list[BaseException] = []  # errors raised before any thread found a deadlock
        self.deadlocked = False

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
                if not self.deadlocked:
                    self.causes.append(e)
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
            self.deadlocked = True
            return False
        self.holder = self.order[(self.order.index(me) + 1) % len(self.order)]
        self.cond.notify_all()
        self.cond.wait_for(lambda: self.holder == me)
        return True


class ThreadGroups:
    """Mixin of the interpreter's block run (tilec.simt.interp._BlockRun)."""

    def model(self, cls):
        """The state `cls(run)` a back end keeps in this block run, made on first use (sm90's mbarriers and wgmma
        groups: tilec/targets/cuda/simt_hopper.py)."""
        m = self.models.get(cls)
        if m is None:
            m = self.models[cls] = cls(self)
        return m

    def groups_init(self, raw: np.ndarray | None) -> None:
        self.raw = raw
        self.in_flight: dict[S.SBuffer, np.ndarray] = {}  # shared buffer -> bool per element (asynchronous writes
        #   nobody waited for: TMA loads)
        self.models: dict[type, object] = {}  # a back end's state in this block (model)
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
        deadlock -- unless a group stopped on an error before it, whose error this raises instead (the others wait
        for that group forever: the deadlock is not the cause)."""
        if self.turns is None:
            return False
        if self.turns.give_way():
            return True
        if self.turns.causes:
            raise self.turns.causes[0]
        return False

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

    def check_in_flight(self, b: S.SBuffer, elems: np.ndarray, span) -> None:
        flags = self.in_flight.get(b)
        if flags is not None and np.any(flags[elems]):
            raise self.err(f"read of shared '{b.name}' written by a TMA load nobody waited for (missing "
                           "mbar_wait)", span)
