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
  gives way only inside an mbarrier wait that cannot return yet. If both groups wait, the kernel
  deadlocks, which is an error. The consumers' named barrier is a barrier of the declared threads;
  the ping-pong named barriers between consumer warpgroups order nothing in a lockstep group and are
  accepted without effect.
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


class HopperModel:
    """Mixin of the interpreter's block run (tilec.testing.simt_interp._BlockRun)."""

    def hopper_init(self, raw: np.ndarray | None) -> None:
        self.raw = raw
        self.barriers: dict[int, _Barrier] = {}
        self.in_flight: dict[int, np.ndarray] = {}  # shared buffer id -> bool per element (TMA not waited for)
        self.turn: threading.Condition | None = None  # set while two thread groups run concurrently
        self.waiting = 0
        self.groups_left = 0
        self.progress = 0  # mbarrier state changes so far
        self.progress_at_wait = -1
        self.wgmma_open: list[tuple] = []  # issued wgmma instructions not committed yet
        self.wgmma_groups: list[list[tuple]] = []  # committed groups not retired by a wgmma_wait yet

    def give_way(self) -> bool:
        """Let the other thread group run until it changes something (one group runs at a time); False when
        it cannot (no other group, or it is waiting too, or it has finished): a deadlock."""
        if self.turn is None or self.groups_left < 2:
            return False
        if self.waiting and self.progress == self.progress_at_wait:  # the other waits, and nothing changed since
            return False
        self.waiting += 1
        self.progress_at_wait = self.progress
        self.turn.notify_all()
        self.turn.wait()
        self.waiting -= 1
        return True

    def run_concurrently(self, s, then_mask: np.ndarray, else_mask: np.ndarray) -> None:
        self.turn = threading.Condition()
        self.groups_left = 2
        errors: list[BaseException] = []

        def group(body, mask):
            with self.turn:
                try:
                    self.stmts(body, mask)
                except BaseException as e:  # noqa: BLE001  (re-raised below, in the calling thread)
                    errors.append(e)
                finally:
                    self.groups_left -= 1
                    self.turn.notify_all()

        worker = threading.Thread(target=group, args=(s.then_body, then_mask))
        with self.turn:
            worker.start()
            self.turn.wait_for(lambda: self.waiting == 1 or self.groups_left < 2, timeout=60)
        group(s.else_body, else_mask)
        worker.join(timeout=600)
        self.turn = None
        if errors:
            raise errors[0]

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

    def barrier_of(self, e, mask, span) -> _Barrier:
        b, idx = self.addr(e, mask)
        key = self.uniform(self.shared_byte(b, 0) + idx * 8, self.active(mask), "mbarrier address", span)
        bar = self.barriers.get(key)
        if bar is None:
            raise self.err("mbarrier used before mbar_init", span)
        return bar

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
            self.progress += 1
            if s.op == "mbar_expect_tx":
                bar.tx += int(self.full(self.eval(s.args[1], mask))[t])
            bar.maybe_complete()

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
        entry = self.tensor_map(s.args[0])
        dst, didx = self.addr(s.args[1], mask)
        bar_m = np.zeros(self.n, bool)
        bar_m[t] = True
        bar = self.barrier_of(s.args[2], bar_m, s.span)
        coords = list(reversed(self.thread_values(s.args[3:], mask, t)))  # outermost first
        src = self.map_memory(entry)[0]
        flat = self.box_elements(entry, coords)
        eb = storage_dtype(dst.dtype).itemsize
        values = np.zeros(flat.shape, storage_dtype(dst.dtype))
        ok = flat >= 0
        values[ok] = src[flat[ok]]
        start = self.shared_byte(dst, int(didx[t]))
        addr = swizzle(start + np.arange(flat.size) * eb, entry["swizzle"])
        b, elems = self.buffer_at(addr)
        self.raw[(addr[:, None] + np.arange(eb)).ravel()] = values.view(np.uint8)
        flags = self.in_flight.setdefault(id(b), np.zeros(b.size, bool))
        flags[elems] = True
        bar.in_flight.append((id(b), elems))
        sh = self.shared[id(b)]
        sh.write_epoch[elems] = -1  # written by the async proxy, published by the barrier
        bar.tx -= values.nbytes
        self.progress += 1
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
        flags = self.in_flight.get(id(b))
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
            self.wgmma_open.append((s, threads, acc, acc_i.copy(), a_desc, a_regs, b_desc, n, kdim, eb, np_t,
                                    tnsp_b == "0"))

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

    def wgmma_commit(self, s: S.SCall, mask) -> None:
        self.wgmma_groups.append(self.wgmma_open)
        self.wgmma_open = []

    def wgmma_wait(self, s: S.SCall, mask) -> None:
        """Retire the oldest committed groups until at most N are pending."""
        pending = self.uniform(self.full(self.eval(s.args[0], mask)), self.active(mask), "wgmma_wait", s.span)
        while len(self.wgmma_groups) > pending:
            for instr in self.wgmma_groups.pop(0):
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
# the fences and register hints that order nothing in this model (consumer warpgroups run in lockstep, so
# named barriers hold trivially).
HOPPER_SEMANTICS = {
    "mbar_init": "mbar_init", "mbar_expect_tx": "mbar_arrive", "mbar_arrive": "mbar_arrive",
    "mbar_arrive_warp": "mbar_arrive", "mbar_wait": "mbar_wait", "tma_load": "tma_loads", "tma_store": "tma_stores",
    "wgmma": "wgmma", "wgmma_commit": "wgmma_commit", "wgmma_wait": "wgmma_wait",
    **dict.fromkeys(("fence_mbar_init", "fence_proxy_async", "wgmma_fence",
                     "wgmma_fence_regs", "setmaxnreg_inc", "setmaxnreg_dec", "tma_store_commit", "tma_store_wait",
                     "named_barrier_sync", "named_barrier_arrive"), ""),
}
