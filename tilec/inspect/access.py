"""The shared-memory accesses a kernel's lowered code really makes, and their bank conflicts.

Assumes: a kernel compiled for a SIMT target (its SKernel and Tile IR kernel). The SIMT interpreter
(tilec/simt/interp.py) runs block (0, 0, 0) on random inputs of the given sizes; every shared-memory
read and write it performs -- plain loads and stores, 16-byte copies and cp.async, ldmatrix (each row address a
lane supplies), MFMA operand loads -- is recorded with the statement that made it. TMA writes and wgmma reads go
through the tensor-memory hardware, not through lanes, and are not traced (they follow the hardware's swizzle
modes, which the layouts match by construction).

Guarantees: per traced access, its bank conflicts under this model of the hardware: a warp's access is split
into phases of 128 bytes (whole warps for accesses of up to 4 bytes a lane, half warps for 8, quarter warps for
16 -- ldmatrix reads one 8-row matrix per phase); within a phase, distinct 4-byte words in one of the 32 banks
are served one after another, the same word is broadcast. A phase needing more passes than its data's width
requires (ceil(distinct words / 32)) is conflicting; its elements are reported. The same model is used for
AMD's LDS (32 banks of 4 bytes; a wave's lanes in groups of 32), an approximation there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .views import BANK_BYTES, BANKS

PHASE_BYTES = 128
MAX_PHASE_LANES = 32
DEFAULT_SIZE = 256  # runtime sizes not given ...
MAX_INPUT_BYTES = 64 << 20  # ... are halved together until the random inputs fit in this (only block 0 runs)


@dataclass
class AccessStats:
    """One statement's accesses to one shared buffer, over every time block (0, 0, 0) ran it."""

    buffer: str  # the Tile IR buffer's name
    kind: str  # "read" | "write"
    op: str  # the SIMT statement: ldmatrix_x4, cp_async16, store, load, ...
    line: int | None  # the source line of the tile op it was lowered from
    lane_bytes: int  # bytes one lane accesses at once
    phases: int = 0  # warp phases executed
    conflicting: int = 0  # ... of which needed extra passes
    worst: float = 1.0  # the largest passes / ideal passes of one phase (2.0: a 2-way conflict)
    offsets: set[int] = field(default_factory=set)  # element offsets (within one stage) of conflicting accesses
    # the lanes that collide in the worst phase: (bank, {element offset within one stage: the lanes accessing it})
    collision: tuple[int, dict[int, tuple[int, ...]]] | None = None
    worst_seen: float = 0.0

    def describe(self) -> str:
        where = f"line {self.line}" if self.line else "lowered code"
        verdict = (f"{self.conflicting} of {self.phases} phases conflict (up to {self.worst:g}-way)"
                   if self.conflicting else f"conflict-free ({self.phases} phases)")
        return f"{self.kind} by {self.op} ({self.lane_bytes} B/lane, {where}): {verdict}"


@dataclass
class AccessReport:
    stats: list[AccessStats]  # every traced access pattern
    traced: bool  # False: the kernel could not be run (see `reason`)
    reason: str = ""

    def of(self, buffer: str) -> list[AccessStats]:
        return [s for s in self.stats if s.buffer == buffer]

    def conflicting_offsets(self, buffer: str) -> set[int]:
        out: set[int] = set()
        for s in self.of(buffer):
            out |= s.offsets
        return out

    def worst_collision(self, buffer: str) -> tuple[AccessStats, int, dict[int, tuple[int, ...]]] | None:
        """The buffer's worst conflicting access, the bank of its worst phase and the lanes of one warp (by their
        index in it) that access that bank in that phase, by element offset: the lanes that collide."""
        worst = max((s for s in self.of(buffer) if s.collision), key=lambda s: s.worst, default=None)
        return None if worst is None else (worst, *worst.collision)


def trace(tile_kernel, simt_kernel, warp_size: int, sizes: dict[str, int] | None = None,
          tile_sizes: dict[str, int] | None = None, seed: int = 0) -> AccessReport:
    """Run block (0, 0, 0) of `simt_kernel` and analyse its shared accesses. `sizes` gives runtime sizes (the others:
    launch_sizes); `tile_sizes` maps a shared buffer's Tile IR name to its elements per stage (multi-buffered copies
    are folded onto one stage)."""
    from ..interp.run import random_inputs
    from ..simt import interp as SI

    run_sizes = launch_sizes(tile_kernel, sizes)
    events: list[tuple] = []

    class Tracer(SI._BlockRun):
        """The interpreter's block, recording each shared access with the statement that made it."""

        op = "?"
        line: int | None = None
        waiting = False
        context = ""  # the lowering's last comment in the enclosing bodies ("store C_local through shared ...")

        def stmts(self, body, mask):
            outer = self.context
            try:
                super().stmts(body, mask)
            finally:
                self.context = outer

        def stmt(self, s, mask):
            outer = (self.op, self.line)
            if s.span is not None:
                self.line = s.span.line
            from ..ir import simt as S

            why = f" [{self.context}]" if self.context and self.line is None else ""  # where no source line says
            if isinstance(s, S.SComment):
                self.context = s.text.strip()
            elif isinstance(s, S.SStore):
                self.op = "store" + why
            elif isinstance(s, S.SCall):
                self.op = s.name + why
            elif isinstance(s, S.Declare | S.SAssign):
                self.op = "load" + why
            try:
                super().stmt(s, mask)
            finally:
                self.op, self.line = outer

        def cp_async_wait(self, s, mask):  # the write was recorded when issued (same addresses)
            self.waiting = True
            try:
                super().cp_async_wait(s, mask)
            finally:
                self.waiting = False

        def copy16(self, s, mask):
            if s.op == "cp_async16":
                db, di = self.addr(s.args[0], mask)
                if db.scope == "shared":
                    act = self.active(mask)
                    width = 16 // db.dtype.bytes
                    cols = (di[:, None] + np.arange(width))[act]
                    events.append((db, "write", cols.ravel(), np.repeat(self.tid[act], width), self.op, self.line, 1))
            super().copy16(s, mask)

        # (no race checks here: the interpreter's runs check those; a trace only records the addresses)
        def track_read(self, b, idx, threads, span):
            events.append((b, "read", np.asarray(idx), np.asarray(threads), self.op, self.line, 1))

        def track_write(self, b, idx, threads, span):
            if not self.waiting:
                events.append((b, "write", np.asarray(idx), np.asarray(threads), self.op, self.line, 1))

    class Counting(Tracer):
        """A loop whose iteration makes the shared accesses of the one before it (folded onto one stage) has
        reached its steady state: the iterations after it, up to the last few, are counted as repeats of it, not
        run. The last iterations still run (from one at the same place in the stages' cycle), so a ragged last
        tile's accesses are traced."""

        def loop(self, s, mask):
            act, begin, extent, step, ext_act = self.loop_bounds(s, mask)
            if ext_act.size == 0:
                return
            n = int(ext_act.max())
            if not np.all(ext_act == n) or n < 3 + cycle:
                return super().loop(s, mask)
            before = None
            t = 0
            while t < n:
                start = len(events)
                self.assign(s.var, begin + t * step, mask)
                self.stmts(s.body, mask)
                if before is not None:
                    now = _signature(events[start:], folds)
                    if now and now == before[1] and t + 1 < n - cycle:
                        jump = t + 1 + ((n - cycle - t - 1) // cycle) * cycle  # same place in the stages' cycle
                        skipped = jump - t - 1
                        if skipped > 0:
                            events.extend((*e[:6], e[6] * skipped) for e in events[start:])
                            t = jump
                            before = None
                            continue
                    before = (start, now)
                else:
                    before = (start, _signature(events[start:], folds))
                t += 1

    # the stages' cycle: multi-buffered tiles rotate through their stages, one a loop iteration
    folds = {}
    cycle = 1
    for b in simt_kernel.shared:
        stage = (tile_sizes or {}).get(b.origin or b.name)
        if stage and b.size and b.size % stage == 0:
            folds[b.origin or b.name] = stage
            cycle = math.lcm(cycle, b.size // stage)
    try:
        args = random_inputs(tile_kernel, run_sizes, seed)
        sim = SI._Sim(simt_kernel, args, run_sizes, warp_size, None)
        Counting(sim, (0, 0, 0)).stmts(simt_kernel.body, None)
    except Exception:  # noqa: BLE001 -- a skipped iteration left state the rest did not expect: run them all
        events.clear()
        try:
            args = random_inputs(tile_kernel, run_sizes, seed)
            sim = SI._Sim(simt_kernel, args, run_sizes, warp_size, None)
            Tracer(sim, (0, 0, 0)).stmts(simt_kernel.body, None)
        except Exception as e:  # noqa: BLE001 -- any failure only means no trace; the plot says why
            return AccessReport([], False, f"{type(e).__name__}: {e}")
    return AccessReport(_analyse(events, warp_size, tile_sizes or {}), True)


def _signature(events: list[tuple], folds: dict[str, int]) -> tuple:
    """What one loop iteration's shared accesses are, with multi-buffered tiles folded onto one stage."""
    out = []
    for b, kind, idx, threads, op, line, _times in events:
        name = b.origin or b.name
        folded = idx % folds[name] if name in folds else idx
        out.append((name, kind, op, line, folded.tobytes(), threads.tobytes(), _times))
    return tuple(out)


def launch_sizes(tile_kernel, given: dict[str, int] | None = None) -> dict[str, int]:
    """The runtime sizes of the traced launch: `given`, the others DEFAULT_SIZE, halved together while the kernel's
    arguments would exceed MAX_INPUT_BYTES (a batched kernel's B x H x S tensors would not fit otherwise)."""
    from ..interp.run import shape_of
    from ..ir import tile as T

    names = {v.name for v in tile_kernel.size_vars}
    given = {n: v for n, v in (given or {}).items() if n in names}
    free = names - set(given)
    size = DEFAULT_SIZE
    while True:
        sizes = {**{n: size for n in free}, **given}
        total = sum(math.prod(shape_of(p, sizes)) * max(p.dtype.bytes, 1) for p in tile_kernel.params
                    if isinstance(p, T.Buffer))
        if total <= MAX_INPUT_BYTES or size == 1 or not free:
            return sizes
        size //= 2


def _analyse(events: list[tuple], warp_size: int, tile_sizes: dict[str, int]) -> list[AccessStats]:
    stats: dict[tuple, AccessStats] = {}
    # A loop repeats its accesses: each k step of a pipeline touches the same addresses of its stage. An event
    # identical to one already analysed (same statement, threads and elements) adds that one's phases again.
    seen: dict[tuple, tuple[AccessStats, int, int]] = {}
    for b, kind, idx, threads, op, line, times in events:
        if idx.size == 0:
            continue
        name = b.origin or b.name
        eb = b.dtype.bytes
        same = (name, kind, op, line, eb, idx.dtype.str, threads.dtype.str, idx.tobytes(), threads.tobytes())
        if same in seen:
            st, phases, conflicting = seen[same]
            st.phases += phases * times
            st.conflicting += conflicting * times
            continue
        pairs = np.unique(np.stack([threads, idx], axis=1), axis=0)  # one entry per (thread, element)
        threads, idx = pairs[:, 0], pairs[:, 1]
        per_thread = np.bincount(threads - threads.min())
        lane_bytes = int(per_thread.max()) * eb
        lanes = max(1, min(MAX_PHASE_LANES, warp_size, PHASE_BYTES // max(BANK_BYTES, min(lane_bytes, 16))))
        group = (threads // warp_size) * warp_size + (threads % warp_size) // lanes
        word = (idx * eb) // BANK_BYTES
        gw = np.unique(np.stack([group, word], axis=1), axis=0)
        groups, g_inv = np.unique(gw[:, 0], return_inverse=True)
        bank = gw[:, 1] % BANKS
        counts = np.zeros((len(groups), BANKS), np.int64)
        np.add.at(counts, (g_inv, bank), 1)
        words_per_group = counts.sum(axis=1)
        ideal = -(-words_per_group // BANKS)
        passes = counts.max(axis=1)
        bad = passes > ideal
        key = (name, kind, op, line)
        st = stats.get(key)
        if st is None:
            st = stats[key] = AccessStats(name, kind, op, line, lane_bytes)
        st.phases += len(groups) * times
        st.conflicting += int(bad.sum()) * times
        if bad.any():
            st.worst = max(st.worst, float((passes[bad] / ideal[bad]).max()))
            hot_banks = counts > ideal[:, None]  # (group, bank) pairs that serialise
            g_of = np.searchsorted(groups, group)
            hot = bad[g_of] & hot_banks[g_of, word % BANKS]
            stage = tile_sizes.get(name)
            offs = idx[hot] % stage if stage else idx[hot]
            st.offsets.update(int(o) for o in np.unique(offs))
            ratio = np.where(bad, passes / ideal, 0)
            g = int(np.argmax(ratio))  # the worst phase, its most loaded bank: the lanes there collide
            if st.collision is None or ratio[g] > st.worst_seen:
                st.worst_seen = float(ratio[g])
                b_hot = int(np.argmax(counts[g]))
                sel = (g_of == g) & (word % BANKS == b_hot)
                where: dict[int, set[int]] = {}
                for t, i in zip(threads[sel].tolist(), idx[sel].tolist(), strict=True):
                    where.setdefault(i % stage if stage else i, set()).add(t % warp_size)
                st.collision = (b_hot, {o: tuple(sorted(v)) for o, v in sorted(where.items())})
        seen[same] = (st, len(groups), int(bad.sum()))
    return list(stats.values())
