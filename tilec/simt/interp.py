"""SIMT-level interpreter: executes lowered SIMT IR (an SKernel) for a whole grid on numpy.

The Tile IR interpreter (tilec/interp) is the language's oracle; this one runs what the lowering
*produced* — per-thread code with registers, shared memory, barriers, shuffles, async copies and
matrix instructions — so a wrong layout, a missing predicate or a missing barrier shows up on a
CPU as a difference from the oracle (tests/test_simt_interp.py), before any GPU sees the code.

Execution model
* Blocks run one after another. Inside a block every statement is executed for all threads at
  once: values are numpy arrays indexed by thread id (shape (threads,)), and divergent control
  flow (`SIf` with a thread-dependent condition, loops whose trip count differs per thread) runs
  its body under a per-thread mask; inactive threads neither store nor fault.
* Because all threads execute each statement together (lockstep), `Barrier` needs no waiting.
  It is still checked and used:
    - a barrier reached by only some threads of the block (under a partial mask) is an error
      (undefined behaviour / deadlock on a GPU);
    - barriers delimit *epochs*; a shared-memory element written by one thread and read or
      written by another within one epoch (no barrier between) is reported as a data race, so
      the lockstep model does not hide a missing barrier.
* `shfl_xor` exchanges values between lanes of a warp (`warp_size` lanes: 32 on NVIDIA, 64 on
  AMD wavefronts); every lane of a warp that executes it must be active. A block that is not a
  whole number of warps runs as on the GPU: its last warp has fewer lanes; a shuffle reading past
  the last thread, or a matrix instruction in that partial warp, is an error.
* cp.async (`cp_async16`) reads its source when issued and lands in shared memory at the latest
  moment the PTX rules allow: when a `cp_async_wait(N)` retires its commit group. Reading a
  shared element with a copy still in flight is an error (a missing wait).
* A back end's instructions are modelled in its folder, by the function their definition names
  (`IntrinsicDef.semantics`, tilec/ir/intrinsics.py), called with the block run: mma.sync and ldmatrix lane by
  lane from the PTX ISA fragment layouts (tilec/targets/cuda/simt_semantics.py; 16-bit register halves packed
  into u32 registers exactly as on the hardware, low half first), sm90's TMA boxes, mbarriers and wgmma
  (tilec/targets/cuda/simt_hopper.py), AMD's MFMA on 64-lane waves (tilec/targets/hip/simt_semantics.py).
* A warp-specialized kernel's producer and consumer branches run as two thread groups that hand over inside
  waits (a ping-pong kernel's consumer warpgroups as two more, which also hand over inside named barriers); the
  blocks of a thread-block cluster (the kernel's `cluster` attribute) run together the same way (groups.py).
* Values follow the Tile IR interpreter: f16/bf16 arithmetic in f32 rounded after every
  operation, stores round to the buffer's dtype (ml_dtypes), integers wrap, `//` and `%` floor.
  Shared memory and register arrays start as NaN so that reading what was never written shows.
* Global tensors are the caller's numpy arrays (flattened views), assumed 16-byte aligned, so
  `aligned16` / `aligned` check the element offset only.
"""

from __future__ import annotations

import importlib
import itertools
import sys

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
import numpy as np

from ..interp.run import check_zeroed_left_zero, fresh_scratch, shape_of
from ..interp.tile_interp import InterpreterError, ScalarOps, compute_dtype, round_to, storage_dtype, to_storage
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.intrinsics import get as intrinsic_def
from .groups import ThreadGroups, Turns

__all__ = ["SimtInterpreterError", "run_simt"]


class SimtInterpreterError(InterpreterError):
    """The lowered code did something undefined: out-of-bounds access, data race, divergent barrier."""


def _and(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a & b


class _Shared:
    """One shared-memory buffer of a block with its race-detection state."""

    def __init__(self, data: np.ndarray):
        self.data = data
        n = data.shape[0]
        self.writer = np.full(n, -1, np.int64)
        self.write_epoch = np.full(n, -1, np.int64)
        self.reader = np.full(n, -1, np.int64)
        self.read_epoch = np.full(n, -1, np.int64)
        self.pending = np.zeros(n, bool)  # a cp.async into this element is in flight


class _BlockRun(ScalarOps, ThreadGroups):
    storage_dtype = staticmethod(storage_dtype)  # (for a back end's semantics, which import no interpreter)
    to_storage = staticmethod(to_storage)

    def __init__(self, sim: _Sim, block_idx: tuple[int, int, int]):
        self.sim = sim
        self.k = sim.k
        self.n = sim.k.threads
        self.lanes_shape = (self.n,)
        self.tid = np.arange(self.n, dtype=np.int64)
        self.block_idx = block_idx
        self.env: dict[T.Var, np.ndarray] = dict(sim.scalars)
        self.epoch = 0
        self.local: dict[S.SBuffer, np.ndarray] = {}
        self.shared: dict[S.SBuffer, _Shared] = {}
        self.groups: list[list[tuple]] = []  # committed cp.async groups, oldest first
        self.open_group: list[tuple] = []
        self.make_shared()

    # ------------------------------------------------------------ memory
    def make_shared(self) -> None:
        k = self.k
        planned = all(b.offset is not None for b in k.shared) and k.shared_bytes
        raw = np.zeros(int(k.shared_bytes) if planned else 0, np.uint8)
        self.groups_init(raw if planned else None)
        for b in k.shared:
            dt = storage_dtype(b.dtype)
            if planned:
                data = raw[b.offset: b.offset + b.size * dt.itemsize].view(dt)
            else:
                data = np.zeros(b.size, dt)
            if b.dtype.is_float:
                data[...] = np.nan
            self.shared[b] = _Shared(data)
        if planned:  # overlapping buffers: fill every view first, then nothing else is written
            for b in k.shared:
                if b.dtype.is_float:
                    self.shared[b].data[...] = np.nan

    def err(self, msg: str, span=None) -> SimtInterpreterError:
        return SimtInterpreterError(f"{msg} (kernel {self.k.name}, block {self.block_idx})", span)

    def full(self, x) -> np.ndarray:
        if type(x) is np.ndarray and x.shape == self.lanes_shape:  # most values are per-lane already
            return x
        return np.broadcast_to(np.asarray(x), self.lanes_shape)

    def active(self, mask) -> np.ndarray:
        return np.ones(self.n, bool) if mask is None else np.broadcast_to(mask, (self.n,))

    def storage(self, b: S.SBuffer) -> np.ndarray:
        if b.scope == "global":
            if b.alias_of is not None:  # a view: the tensor's bytes as its own element type
                return self.sim.view_of(b)
            return self.sim.globals[b.name]
        if b.scope == "shared":
            return self.shared[b].data
        arr = self.local.get(b)
        if arr is None:
            raise self.err(f"register array '{b.name}' used before its declaration")
        return arr

    def check_index(self, b: S.SBuffer, idx: np.ndarray, act: np.ndarray, width: int, what: str, span):
        size = self.storage(b).shape[-1]
        bad = act & ((idx < 0) | (idx + width > size))
        if bad.any():
            t = int(np.nonzero(bad)[0][0])
            raise self.err(f"out-of-bounds {what} of '{b.name}' ({b.scope}): index {int(idx[t])}"
                           f"{f' +{width}' if width > 1 else ''} of {size} by thread {t}", span)

    def track_read(self, b: S.SBuffer, idx: np.ndarray, threads: np.ndarray, span) -> None:
        """idx, threads: flat arrays of the shared elements read and the threads reading them."""
        sh = self.shared[b]
        if idx.size == 0:
            return
        self.check_in_flight(b, idx, span)
        if sh.pending[idx].any():
            i = int(idx[np.nonzero(sh.pending[idx])[0][0]])
            raise self.err(f"read of shared '{b.name}'[{i}] while a cp.async into it is in flight "
                           "(missing cp_async_wait)", span)
        raw = (sh.write_epoch[idx] == self.epoch) & (sh.writer[idx] != threads)
        if raw.any():
            j = int(np.nonzero(raw)[0][0])
            raise self.err(f"data race on shared '{b.name}'[{int(idx[j])}]: written by thread "
                           f"{int(sh.writer[idx[j]])} and read by thread {int(threads[j])} with no barrier between",
                           span)
        multi = (sh.read_epoch[idx] == self.epoch) & (sh.reader[idx] != threads)
        sh.reader[idx] = threads
        multi |= sh.reader[idx] != threads
        sh.reader[idx[multi]] = -2
        sh.read_epoch[idx] = self.epoch

    def track_write(self, b: S.SBuffer, idx: np.ndarray, threads: np.ndarray, span) -> None:
        sh = self.shared[b]
        if idx.size == 0:
            return
        war = (sh.read_epoch[idx] == self.epoch) & (sh.reader[idx] != threads) & (sh.reader[idx] != -1)
        if war.any():
            j = int(np.nonzero(war)[0][0])
            who = int(sh.reader[idx[j]])
            raise self.err(f"data race on shared '{b.name}'[{int(idx[j])}]: read by "
                           f"{'several threads' if who == -2 else f'thread {who}'} and written by thread "
                           f"{int(threads[j])} with no barrier between", span)
        waw = (sh.write_epoch[idx] == self.epoch) & (sh.writer[idx] != threads)
        if waw.any():
            j = int(np.nonzero(waw)[0][0])
            raise self.err(f"data race on shared '{b.name}'[{int(idx[j])}]: written by threads "
                           f"{int(sh.writer[idx[j]])} and {int(threads[j])} with no barrier between", span)
        sh.writer[idx] = threads
        sh.write_epoch[idx] = self.epoch

    def read(self, b: S.SBuffer, idx, mask, width: int = 1, span=None, by=None) -> np.ndarray:
        """Storage values b[idx + j], j < width, for every thread: shape (n, width); zeros where inactive."""
        act = self.active(mask)
        idx = np.where(act, self.full(idx).astype(np.int64), 0)
        self.check_index(b, idx, act, width, "read", span)
        data = self.storage(b)
        cols = idx[:, None] + np.arange(width)
        if b.scope == "local":
            return data[self.tid[:, None], cols]
        if b.scope == "shared":
            who = self.tid if by is None else by
            self.track_read(b, cols[act].ravel(), np.repeat(who[act], width), span)
        return data[cols]

    def write(self, b: S.SBuffer, idx, values: np.ndarray, mask, span=None, track: bool = True) -> None:
        """Store storage values (n, width) (or (n,)) at b[idx + j] for active threads."""
        act = self.active(mask)
        if not act.any():
            return
        values = np.asarray(values)
        if values.ndim <= 1:
            values = np.broadcast_to(values, (self.n,))[:, None]
        width = values.shape[1]
        idx = np.where(act, self.full(idx).astype(np.int64), 0)
        self.check_index(b, idx, act, width, "write", span)
        data = self.storage(b)
        cols = (idx[:, None] + np.arange(width))[act]
        vals = values[act]
        if b.scope == "local":
            data[np.repeat(self.tid[act], width).reshape(cols.shape), cols] = vals
            return
        flat, fv = cols.ravel(), vals.ravel()
        if b.scope == "shared" and track:
            self.track_write(b, flat, np.repeat(self.tid[act], width), span)
        if len(np.unique(flat)) != len(flat):  # several threads store to one element in one statement
            order = np.argsort(flat, kind="stable")
            fs, vs = flat[order], fv[order]
            same = fs[1:] == fs[:-1]
            bits = vs.view(np.uint8).reshape(len(vs), -1)
            differ = same & np.any(bits[1:] != bits[:-1], axis=1)
            if np.any(differ):
                raise self.err(f"threads store different values to '{b.name}'[{int(fs[1:][differ][0])}] in one "
                               "statement (a write conflict)", span)
        data[flat] = fv

    # ------------------------------------------------------------ expressions
    def eval(self, e: T.Expr, mask) -> np.ndarray:
        if isinstance(e, T.Const):
            if e.dtype.is_float and e.dtype not in (D.F32, D.F64):
                return round_to(np.float32(e.value), e.dtype)
            return np.asarray(e.value, dtype=compute_dtype(e.dtype))
        if isinstance(e, S.ThreadIdx):
            return self.tid
        if isinstance(e, S.BlockIdx):
            return np.asarray(self.block_idx[e.axis], np.int64)
        if isinstance(e, T.Var):
            try:
                return self.env[e]
            except KeyError:
                raise self.err(f"variable '{e.name}' has no value", e.span) from None
        if isinstance(e, S.Ref):
            v = self.read(e.buffer, self.eval(e.index, mask), mask, 1, e.span)[:, 0]
            return v.astype(compute_dtype(e.buffer.dtype))
        if isinstance(e, S.Intrinsic):
            return self.intrinsic(e, mask)
        if isinstance(e, S.AddrOf):
            raise self.err("an address (AddrOf) used as a value", e.span)
        out = self.eval_operator(e, mask)
        if out is None:
            raise self.err(f"cannot evaluate {type(e).__name__}", e.span)
        return out

    def error(self, message: str, span) -> Exception:
        return self.err(message, span)

    def active_lanes(self, mask, shape) -> np.ndarray:
        return np.broadcast_to(self.active(mask).reshape((-1,) + (1,) * (len(shape) - 1)) if len(shape) > 1
                               else self.active(mask), shape)

    def addr(self, e: T.Expr, mask) -> tuple[S.SBuffer, np.ndarray]:
        if not isinstance(e, S.AddrOf):
            raise self.err(f"expected an address, got {type(e).__name__}", e.span)
        return e.buffer, self.full(self.eval(e.index, mask)).astype(np.int64)

    def warp_check(self, mask, what: str, span) -> None:
        """Every existing lane of each warp that takes part must take part (a block that is not a
        whole number of warps has a last warp with fewer lanes, as on the GPU)."""
        if mask is None:
            return
        ws = self.sim.warp_size
        act, pad = self.active(mask), -self.n % ws
        some = np.concatenate([act, np.zeros(pad, bool)]).reshape(-1, ws).any(axis=1)
        every = np.concatenate([act, np.ones(pad, bool)]).reshape(-1, ws).all(axis=1)
        if np.any(some & ~every):
            raise self.err(f"{what} executed by only some lanes of a warp (all {ws} must take part)", span)

    def whole_warps_only(self, mask, what: str, span) -> None:
        """Matrix instructions need all lanes of a warp: none may run in a block's partial last warp."""
        first_partial = self.n - self.n % self.sim.warp_size
        if first_partial < self.n and self.active(mask)[first_partial:].any():
            raise self.err(f"{what} executed in the block's partial last warp ({self.n - first_partial} of "
                           f"{self.sim.warp_size} lanes exist)", span)

    def intrinsic(self, e: S.Intrinsic, mask) -> np.ndarray:
        if e.name == "shfl_xor":
            v = self.full(self.eval(e.args[0], mask))
            off = self.eval(e.args[1], mask)
            if np.ndim(off) or not 0 < int(off) < self.sim.warp_size:
                raise self.err(f"shfl_xor offset {off} outside the warp of {self.sim.warp_size} lanes", e.span)
            self.warp_check(mask, "shfl_xor", e.span)
            partner = self.tid ^ int(off)
            if np.any(self.active(mask) & (partner >= self.n)):
                raise self.err(f"shfl_xor reads lane {int(partner.max())}, past the block's {self.n} threads "
                               "(undefined on the GPU)", e.span)
            return v[np.minimum(partner, self.n - 1)]
        if e.name in ("aligned16", "aligned"):
            b, idx = self.addr(e.args[0], mask)
            nbytes = 16 if e.name == "aligned16" else int(self.eval(e.args[1], mask))
            return (idx * storage_dtype(b.dtype).itemsize) % nbytes == 0
        semantics = _backend_semantics(e.name)
        if semantics is None:
            raise self.err(f"unknown intrinsic {e.name}", e.span)
        return semantics(self, e, mask)

    # ------------------------------------------------------------ statements
    def stmts(self, body: list[S.SStmt], mask) -> None:
        for s in body:
            self.stmt(s, mask)

    def assign(self, var: T.Var, value, mask) -> None:
        value = self.full(value)
        old = self.env.get(var)
        if mask is not None and old is not None:
            value = np.where(mask, value, old)
        self.env[var] = value

    def stmt(self, s: S.SStmt, mask) -> None:
        if isinstance(s, S.Declare):
            if s.value is not None:
                self.assign(s.var, round_to(self.eval(s.value, mask), s.var.dtype), mask)
        elif isinstance(s, S.SAssign):
            self.assign(s.var, round_to(self.eval(s.value, mask), s.var.dtype), mask)
        elif isinstance(s, S.DeclareArray) and s.buffer.scope == "global":
            self.sim.view_of(s.buffer)  # a view of a tensor: nothing per thread
        elif isinstance(s, S.DeclareArray):
            b = s.buffer
            dt = storage_dtype(b.dtype)
            arr = np.full((self.n, b.size), np.nan).astype(dt) if b.dtype.is_float else np.zeros((self.n, b.size), dt)
            if s.init is not None:
                arr[...] = to_storage(self.full(self.eval(s.init, mask)), b.dtype)[:, None]
            old = self.local.get(b)
            if mask is not None and old is not None:
                # in place: another thread group (a ping-pong consumer warpgroup) may have a wgmma in flight on its
                # own threads' rows of these registers
                act = self.active(mask)
                old[act] = arr[act]
                arr = old
            self.local[b] = arr
        elif isinstance(s, S.SStore):
            value = to_storage(self.full(self.eval(s.value, mask)), s.buffer.dtype)
            self.write(s.buffer, self.eval(s.index, mask), value, mask, s.span)
        elif isinstance(s, S.SIf):
            c = self.full(self.eval(s.cond, mask)).astype(bool)
            then_mask = c if mask is None else (mask & c)
            else_mask = ~c if mask is None else (mask & ~c)
            if s.concurrent and np.any(then_mask) and np.any(else_mask):
                return self.run_concurrently(s, then_mask, else_mask)
            if np.any(then_mask):
                self.stmts(s.then_body, None if then_mask.all() else then_mask)
            if s.else_body and np.any(else_mask):
                self.stmts(s.else_body, None if else_mask.all() else else_mask)
        elif isinstance(s, S.SFor):
            self.loop(s, mask)
        elif isinstance(s, S.SWhile):
            self.while_loop(s, mask)
        elif isinstance(s, S.Barrier) and s.index is not None:
            self.indexed_barrier(s, mask)
        elif isinstance(s, S.Barrier):
            want = self.n if s.threads is None else s.threads
            if int(self.active(mask).sum()) != want or (s.threads is not None and
                                                         not self.active(mask)[:s.threads].all()):
                n = int(self.active(mask).sum())
                what = "barrier" if s.threads is None else f"named barrier of the first {want} threads"
                raise self.err(f"{what} reached by {n} of {self.n} threads (under a thread-dependent condition)",
                               s.span)
            self.epoch += 1
        elif isinstance(s, S.SCall):
            self.call_stmt(s, mask)
        elif isinstance(s, S.SComment):
            pass
        else:
            raise self.err(f"cannot execute {type(s).__name__}", s.span)

    def loop_bounds(self, s: S.SFor, mask):
        """(active lanes, begin, extent, step, the active lanes' extents) of a loop, per lane."""
        act = self.active(mask)
        begin = self.full(self.eval(s.begin, mask)).astype(np.int64)
        extent = self.full(self.eval(s.extent, mask)).astype(np.int64)
        step = self.full(self.eval(s.step, mask)).astype(np.int64) if s.step is not None else 1
        return act, begin, extent, step, extent[act]

    def loop(self, s: S.SFor, mask) -> None:
        act, begin, extent, step, ext_act = self.loop_bounds(s, mask)
        if ext_act.size == 0:
            return
        uniform = np.all(ext_act == ext_act[0])
        for t in range(int(ext_act.max())):
            m = mask if uniform else (act & (t < extent))
            # (masked: the threads outside the mask may be another thread group, inside its own run of this loop)
            self.assign(s.var, begin + t * step, mask)
            self.stmts(s.body, m)

    def while_loop(self, s: S.SWhile, mask) -> None:
        """Each thread leaves the loop when its condition turns false; the others go on without it."""
        running = self.active(mask)
        for _ in range(_MAX_WHILE_ITERATIONS):
            running = running & self.full(self.eval(s.cond, running)).astype(bool)
            if not running.any():
                return
            self.stmts(s.body, None if running.all() else running)
        raise self.err(f"while loop still running after {_MAX_WHILE_ITERATIONS} iterations", s.span)

    # ------------------------------------------------------------ intrinsic statements
    def call_stmt(self, s: S.SCall, mask) -> None:
        if self.sim.op_counts is not None:
            self.sim.op_counts[s.op] += int(np.count_nonzero(self.active(mask)))
        own = _SEMANTICS.get(s.op)
        if own is not None:
            return getattr(self, own)(s, mask)
        semantics = _backend_semantics(s.op)
        if semantics is None:
            raise self.err(f"unknown intrinsic statement {s.name}", s.span)
        semantics(self, s, mask)

    def call_print(self, s: S.SCall, mask) -> None:
        """One line per active lane, in lane order: printf's format read by Python's `%` (tilec/ops/print.py uses
        only %d and %.5g, on which C and Python agree)."""
        act = self.active(mask)
        cols = [self.full(self.eval(a, mask)) for a in s.args]
        for t in np.nonzero(act)[0]:
            vals = tuple(float(v[t]) if a.dtype.is_float else int(v[t]) for a, v in zip(s.args, cols, strict=True))
            print(s.params["fmt"] % vals, file=self.sim.stdout)

    def profile_mark(self, s: S.SCall, mask) -> None:
        """prof_init and prof_mark (tilec/ir/profile.py). The instrumented kernel must compute what the plain one
        does; with `profile_marks` given to run_simt, lane 0 of each 32-thread warp (the recording lane on the
        device) appends (tag, step) to its warp's list, the step counting marks over the whole run in place of
        a clock: the order and nesting of a warp's marks are checked on a CPU."""
        marks = self.sim.profile_marks
        if marks is None or s.op != "prof_mark":
            return
        self.sim.profile_step += 1
        tag = 2 * s.params["phase"] + 1 + int(s.params["end"])
        for t in np.nonzero(self.active(mask))[0]:
            if t % 32 == 0:
                marks.setdefault((self.block_idx, int(t) // 32), []).append((tag, self.sim.profile_step))

    def copy16(self, s: S.SCall, mask) -> None:
        """copy16, copy16_or_zero and cp_async16 (which lands at the group's cp_async_wait)."""
        name, act = s.name, self.active(mask)
        db, di = self.addr(s.args[0], mask)
        sb, si = self.addr(s.args[1], mask)
        pred = self.full(self.eval(s.args[2], mask)).astype(bool) if len(s.args) > 2 else np.ones(self.n, bool)
        if db.dtype.bytes != sb.dtype.bytes:
            raise self.err(f"{name} between {sb.dtype} and {db.dtype}", s.span)
        width = 16 // db.dtype.bytes
        for b, i in ((db, di), (sb, si)):
            if np.any(act & ((i * b.dtype.bytes) % 16 != 0)):
                raise self.err(f"{name}: address into '{b.name}' not 16-byte aligned", s.span)
        vals = self.read(sb, si, _and(mask, pred), width, s.span)
        vals = np.where(pred[:, None], vals, np.zeros((), vals.dtype))
        if s.op == "cp_async16":
            if db.scope != "shared" or sb.scope != "global":
                raise self.err("cp.async copies global -> shared only", s.span)
            self.check_index(db, np.where(act, di, 0), act, width, "write", s.span)
            sh = self.shared[db]
            cols = (di[:, None] + np.arange(width))[act]
            sh.pending[cols.ravel()] = True
            self.open_group.append((db, di[act], vals[act], self.tid[act], s.span))
        else:
            self.write(db, di, vals, mask, s.span)

    def copy16_realign(self, s: S.SCall, mask) -> None:
        """copy_shifted and copy16_realign: 16-byte chunks of shared memory from a global address aligned to its
        element only. The GPU reads the aligned 16-byte chunks covering them (with 16 bytes more), which must lie
        inside the tensor: copy_shifted's caller promised it, copy16_realign checks `end` (else it reads its n
        elements one by one, zeros after them)."""
        act = self.active(mask)
        shifted = s.op == "copy_shifted"
        chunks = s.params["chunks"] if shifted else 1
        dsts = [self.addr(a, mask) for a in (s.args[:chunks] if shifted else s.args[:1])]
        sb, si = self.addr(s.args[chunks] if shifted else s.args[1], mask)
        width = 16 // sb.dtype.bytes
        for db, di in dsts:
            if db.scope != "shared" or sb.scope != "global" or db.dtype.bytes != sb.dtype.bytes:
                raise self.err(f"{s.name} copies global -> shared of one element size", s.span)
            if np.any(act & ((di * db.dtype.bytes) % 16 != 0)):
                raise self.err(f"{s.name}: address into '{db.name}' not 16-byte aligned", s.span)
        if shifted:
            n = np.full(self.n, width, np.int64)
            whole = act
        else:
            n = np.clip(self.full(self.eval(s.args[2], mask)).astype(np.int64), 0, width)
            eb, ei = self.addr(s.args[3], mask)
            if eb is not sb or np.any(act & (ei != self.storage(sb).shape[-1])):
                raise self.err(f"{s.name}: the end address is not the end of '{sb.name}'", s.span)
            whole = act & (n == width) & (ei - si >= 2 * width)
        self.check_index(sb, si, whole, (chunks + 1) * width, "read (aligned 16-byte chunks)", s.span)
        for g, (db, di) in enumerate(dsts):
            base = si + g * width
            vals = np.stack([self.read(sb, base + j, _and(mask, n > j), 1, s.span)[:, 0] for j in range(width)], axis=1)
            vals = np.where(np.arange(width)[None, :] < n[:, None], vals, np.zeros((), vals.dtype))
            self.write(db, di, vals, mask, s.span)

    def fence_device(self, s: S.SCall, mask) -> None:
        """The blocks run one after another here, each store landing at once: every write is already visible."""

    def cp_async_commit(self, s: S.SCall, mask) -> None:
        self.groups.append(self.open_group)
        self.open_group = []

    def cp_async_wait(self, s: S.SCall, mask) -> None:
        keep = int(self.eval(s.args[0], mask))
        while len(self.groups) > keep:
            for db, di, vals, threads, span in self.groups.pop(0):
                sh = self.shared[db]
                cols = di[:, None] + np.arange(vals.shape[1])
                sh.pending[cols.ravel()] = False
                self.track_write(db, cols.ravel(), np.repeat(threads, vals.shape[1]), span)
                sh.data[cols.ravel()] = vals.ravel()

    def vector_copy(self, s: S.SCall, mask) -> None:
        """load_vec / store_vec: n elements, converted to the destination's type."""
        name, act, width = s.name, self.active(mask), s.params["n"]
        db, di = self.addr(s.args[0], mask)
        sb, si = self.addr(s.args[1], mask)
        mem_b, mem_i = (sb, si) if s.op == "load_vec" else (db, di)
        if np.any(act & ((mem_i * mem_b.dtype.bytes) % (width * mem_b.dtype.bytes) != 0)):
            raise self.err(f"{name}: address into '{mem_b.name}' not aligned to {width} elements", s.span)
        pred = self.full(self.eval(s.args[2], mask)).astype(bool) if len(s.args) > 2 else np.ones(self.n, bool)
        vals = self.read(sb, si, _and(mask, pred), width, s.span)
        vals = vals.astype(compute_dtype(sb.dtype)).astype(np.float32)
        vals = np.where(pred[:, None], vals, np.float32(0))
        self.write(db, di, to_storage(vals, db.dtype), mask, s.span)

    def load_realign(self, s: S.SCall, mask) -> None:
        """load_realign: n elements at unit + shift into registers, converted; the first `count` read, zeros after
        them. The unit must be aligned to n elements; where the GPU takes both aligned units at once (all n wanted,
        and the second unit below `end`, or shift 0), those units must lie inside the tensor."""
        act, width = self.active(mask), s.params["n"]
        db, di = self.addr(s.args[0], mask)
        sb, si = self.addr(s.args[1], mask)
        shift = self.full(self.eval(s.args[2], mask)).astype(np.int64)
        count = self.full(self.eval(s.args[3], mask)).astype(np.int64)
        eb, ei = self.addr(s.args[4], mask)
        if sb.scope != "global" or eb is not sb or np.any(act & (ei != self.storage(sb).shape[-1])):
            raise self.err(f"{s.name}: the end address is not the end of global '{sb.name}'", s.span)
        if np.any(act & ((si * sb.dtype.bytes) % (width * sb.dtype.bytes) != 0)):
            raise self.err(f"{s.name}: unit address into '{sb.name}' not aligned to {width} elements", s.span)
        if np.any(act & ((shift < 0) | (shift >= width) | (count < 0) | (count > width))):
            raise self.err(f"{s.name}: shift or count out of range", s.span)
        whole = act & (count == width) & ((shift == 0) | (ei - si >= 2 * width))
        self.check_index(sb, si, whole & (shift == 0), width, "read (an aligned unit)", s.span)
        self.check_index(sb, si, whole & (shift != 0), 2 * width, "read (two aligned units)", s.span)
        vals = np.stack([self.read(sb, si + shift + j, _and(mask, count > j), 1, s.span)[:, 0] for j in range(width)],
                        axis=1)
        vals = vals.astype(compute_dtype(sb.dtype)).astype(np.float32)
        vals = np.where(np.arange(width)[None, :] < count[:, None], vals, np.float32(0))
        self.write(db, di, to_storage(vals, db.dtype), mask, s.span)

    def atomic(self, s: S.SCall, mask) -> None:
        """atomic and atomic_prev (whose first argument, a register, receives each thread's previous value)."""
        *prev_reg, addr, value = s.args
        act = self.active(mask)
        b, idx = self.addr(addr, mask)
        v = self.full(self.eval(value, mask))
        self.check_index(b, np.where(act, idx, 0), act, 1, "atomic update", s.span)
        data = self.storage(b)
        op = {"add": np.add, "max": np.maximum, "min": np.minimum}[s.params["kind"]]
        cd = compute_dtype(b.dtype)
        prev = np.zeros(self.n, cd)
        for t in np.nonzero(act)[0]:  # in thread order; float sums round after each update as on the GPU
            old = np.asarray(data[idx[t]]).astype(cd)
            prev[t] = old
            data[idx[t]] = to_storage(op(old, np.asarray(v[t]).astype(cd)), b.dtype)
        if prev_reg:
            self.assign(prev_reg[0], prev, mask)


class _Sim:
    def __init__(self, k: S.SKernel, args: dict[str, object], sizes: dict[str, int], warp_size: int, stdout,
                 num_sms: int = 3):
        self.k = k
        self.warp_size = warp_size
        self.stdout = stdout or sys.stdout
        self.scalars: dict[T.Var, np.ndarray] = {}
        self.sizes = dict(sizes)
        for v in k.size_vars:
            if v.name not in sizes:
                raise SimtInterpreterError(f"kernel {k.name}: no value for runtime size '{v.name}'")
            self.scalars[v] = np.asarray(int(sizes[v.name]), np.int64)
        from ..ir.visit import sub_exprs

        for g in k.grid:  # a persistent kernel's grid: min(tiles, num_sms) -- few "SMs", so blocks loop
            for x in sub_exprs(g):
                if isinstance(x, T.Var) and x.name == "num_sms":
                    self.scalars[x] = np.asarray(num_sms, np.int64)
        self.globals: dict[str, np.ndarray] = {}
        self.views: dict[S.SBuffer, np.ndarray] = {}  # views of tensors (global SBuffers with alias_of), by id
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.grid_x = 1
        self.turns: Turns | None = None  # the thread groups taking turns (warp specialization, clusters)
        self.writeback: list[tuple[np.ndarray, np.ndarray]] = []
        self.memo: dict = {}  # what a back end's semantics compute once per run (instruction lane tables)
        self.op_counts: dict | None = None  # lanes that ran each intrinsic statement, where run_simt asks
        for p in k.params:
            if isinstance(p, S.SBuffer):
                arr = args[p.name]
                if not isinstance(arr, np.ndarray) or arr.dtype != storage_dtype(p.dtype):
                    raise SimtInterpreterError(f"argument '{p.name}' must be a numpy array of {p.dtype}")
                flat = arr.reshape(-1)
                if not np.shares_memory(flat, arr) and arr.size:
                    flat = np.ascontiguousarray(arr).reshape(-1)
                    self.writeback.append((arr, flat))
                self.globals[p.name] = flat
                self.shapes[p.name] = arr.shape
            else:
                self.scalars[p] = round_to(np.asarray(args[p.name]), p.dtype)

    def grid(self) -> list[int]:
        b = _BlockRun(self, (0, 0, 0))
        out = []
        for g in self.k.grid:
            v = b.eval(g, None)
            if np.ndim(v):
                raise SimtInterpreterError(f"kernel {self.k.name}: grid size depends on the thread")
            out.append(int(v))
        while len(out) < 3:
            out.append(1)
        return out

    def view_of(self, b: S.SBuffer) -> np.ndarray:
        """A tensor's memory as view b's element type (flat; the kernel addresses it row-major)."""
        arr = self.views.get(b)
        if arr is None:
            raw = self.globals[b.alias_of.name].view(np.uint8)
            size = raw.size // b.dtype.bytes * b.dtype.bytes
            arr = self.views[b] = raw[:size].view(storage_dtype(b.dtype))
        return arr

    def run(self) -> None:
        gx, gy, gz = self.grid()
        self.grid_x = gx
        cluster = tuple(self.k.attrs.get("cluster") or (1, 1, 1))
        if cluster == (1, 1, 1):
            for bz, by, bx in itertools.product(range(gz), range(gy), range(gx)):
                self.run_block(_BlockRun(self, (bx, by, bz)))
        else:
            cx, cy, cz = cluster
            if gx % cx or gy % cy or gz % cz:
                raise SimtInterpreterError(f"kernel {self.k.name}: grid ({gx}, {gy}, {gz}) is not a whole number of "
                                           f"{cx}x{cy}x{cz} clusters")
            for z0, y0, x0 in itertools.product(range(0, gz, cz), range(0, gy, cy), range(0, gx, cx)):
                self.run_cluster([_BlockRun(self, (x0 + i, y0 + j, z0 + m))
                                  for m in range(cz) for j in range(cy) for i in range(cx)])
        for arr, flat in self.writeback:
            arr[...] = flat.reshape(arr.shape)

    def run_block(self, blk: _BlockRun) -> None:
        blk.stmts(self.k.body, None)
        if blk.open_group or blk.groups:
            blk.call(S.SCall(None, "cp_async_wait", [T.Const(D.I32, None, 0)]), None)
        blk.exited = True

    def run_cluster(self, blocks: list[_BlockRun]) -> None:
        """The blocks of one thread-block cluster (by rank: x fastest), each a thread group of its own taking turns
        with the others inside their waits (mbarriers, cluster barriers), so that one block's multicast loads and
        remote arrivals reach the other while it runs."""
        for rank, b in enumerate(blocks):
            b.cluster_blocks, b.cluster_rank = blocks, rank
        turns = self.turns = Turns()
        turns.enter()
        threads = [turns.spawn(lambda b=b: self.run_block(b)) for b in blocks]
        turns.leave()  # the blocks take turns among themselves (and report their own deadlocks)
        with turns.cond:
            turns.cond.wait_for(lambda: not any(turns.alive(t) for t in threads))
        self.turns = None
        if turns.errors:
            raise turns.errors[0]


_MAX_WHILE_ITERATIONS = 1 << 20  # (a model of a loop that never ends would never return)


def run_simt(kernel: S.SKernel, args: dict[str, object], sizes: dict[str, int], warp_size: int = 32,
             stdout=None, profile_marks: dict | None = None, op_counts: dict | None = None) -> dict[str, object]:
    """Execute `kernel` over its whole grid on `args` (numpy arrays in the declared dtypes, scalars by name);
    `sizes` gives every runtime size by name. Output arrays are updated in place. Raises
    SimtInterpreterError on undefined behaviour (out-of-bounds, races, divergent barriers or shuffles).
    `profile_marks` (a dict) receives a profiled kernel's marks by (block, warp) (see _BlockRun.profile_mark);
    `op_counts` (a collections.Counter) how many lanes ran each intrinsic statement, by op."""
    sim = _Sim(kernel, args, sizes, warp_size, stdout)
    sim.profile_marks, sim.profile_step = profile_marks, 0
    sim.op_counts = op_counts
    sim.run()
    return args


def run_simt_sequence(result, args: dict[str, object], sizes: dict[str, int]) -> dict[str, object]:
    """Execute a compile result's public kernel lane by lane (run_simt): its one kernel, or a multi-launch kernel's
    stages in order on fresh scratch tensors (floats NaN, as the Tile IR interpreter starts them). Output arrays are
    updated in place."""
    warp = result.target.warp_size
    if not result.module.launches:
        return run_simt(result.simt.kernels[0], args, sizes, warp_size=warp)
    seq = result.module.launches[0]
    lowered = {k.name: k for k in result.simt.kernels}
    space = dict(args)
    for b in seq.scratch:
        space[b.name] = fresh_scratch(b.dtype, shape_of(b, sizes), b.zeroed)
    for st in seq.stages:
        run_simt(lowered[st.kernel], {a: space[a] for a in st.args}, sizes, warp_size=warp)
    check_zeroed_left_zero(seq, space)
    return args


# The semantics of each generic intrinsic statement (tilec/ir/intrinsics.py), by op: a method of _BlockRun. A back
# end's intrinsics name their own (IntrinsicDef.semantics: "module:function", called with the block run).
_SEMANTICS = {
    "print": "call_print", "prof_init": "profile_mark", "prof_mark": "profile_mark",
    "copy16": "copy16", "copy16_or_zero": "copy16", "cp_async16": "copy16",
    "copy_shifted": "copy16_realign", "copy16_realign": "copy16_realign",
    "cp_async_commit": "cp_async_commit", "cp_async_wait": "cp_async_wait", "load_vec": "vector_copy",
    "store_vec": "vector_copy", "load_realign": "load_realign",
    "atomic": "atomic", "atomic_prev": "atomic", "fence_device": "fence_device",
}


_RESOLVED: dict[str, object] = {}


def _backend_semantics(op: str):
    """The function a back end's definition of `op` names for this interpreter (imported once), or None."""
    d = intrinsic_def(op)
    if d is None or d.semantics is None:
        return None
    fn = _RESOLVED.get(d.semantics)
    if fn is None:
        module, _, name = d.semantics.partition(":")
        fn = _RESOLVED[d.semantics] = getattr(importlib.import_module(module), name)
    return fn
