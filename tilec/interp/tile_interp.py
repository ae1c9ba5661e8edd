"""Reference interpreter: executes Tile IR on numpy arrays, block by block.

It is the oracle of every test and the `cpu` device of `tilec run`, so its rules are the
language's semantics:

* Values are computed in f32 for f16/bf16/f8 (f64 for f64) and rounded to the expression's dtype
  after every operation, as the GPU does for half-precision arithmetic; stores round to the
  buffer's dtype (ml_dtypes for bf16 and f8). Integers wrap around at their width; `//` and `%`
  floor.
* A Parallel loop runs vectorized: its variables are broadcast index arrays, `if` and
  `if_then_else`, `and`, `or` evaluate their branches under a mask, so a guarded access is only
  performed where its guard holds.
* Tile operations run for the whole block at once. Global regions are bounds-guarded: reads
  outside the tensor give zero, writes outside it are dropped. Element accesses outside a buffer
  are errors (InterpreterError), as they would be undefined behaviour on a GPU.
* On-chip buffers are fresh for every block and start as NaN (floats) so that reading what was
  never written shows up in the results.
* gemm multiplies in f32 (i32 for i8) and accumulates into C's dtype.
* An atomic inside a Parallel loop updates one element per active iteration; iterations that hit
  the same element all apply their update (in f64 / i64, rounded once to the buffer's dtype);
  updates past a tensor's edge are dropped, as for tile operations.
* A `while` loop inside a Parallel loop runs each iteration until its own condition fails (the
  body runs masked to the iterations still looping).
* cumsum sums 16-bit floats in f32, like the reductions.
* A kernel that reads the thread index (`get_thread_binding`) runs its block-level code vectorized over the
  block's threads: the thread index is the array 0..threads-1, values computed from it are arrays over the
  threads, an `if`, `while` or serial loop on such a value runs its body under the mask of the threads it
  holds for, and `alloc_local` / `alloc_var` buffers hold one copy per thread (check-threads guarantees that a
  Parallel loop or a tile operation reads none that differs between threads: they see thread 0's). Threads
  that store different values to one element of shared or global memory in one statement are an error (a
  data race on a GPU); the same value from several threads is one store.
"""

from __future__ import annotations

import itertools
import sys

import ml_dtypes  # noqa: F401  (registers bfloat16 and float8 with numpy)
import numpy as np

from ..errors import UserFacingError
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.threads import uses_thread_index
from ..ops.registry import op_module


class InterpreterError(UserFacingError):
    """The kernel did something undefined (an access out of bounds, a division by zero)."""

    def __init__(self, message: str, span=None):
        super().__init__(f"{span}: {message}" if span else message)
        self.message = message
        self.span = span


def storage_dtype(dt: D.DType) -> np.dtype:
    return np.dtype(dt.numpy_name)


_COMPUTE_DTYPES: dict[D.DType, np.dtype] = {}


def compute_dtype(dt: D.DType) -> np.dtype:
    cached = _COMPUTE_DTYPES.get(dt)
    if cached is None:
        if dt.is_bool:
            cached = np.dtype(bool)
        elif dt.is_float:
            cached = np.dtype(np.float64 if dt == D.F64 else np.float32)
        else:
            cached = np.dtype(np.int64)
        _COMPUTE_DTYPES[dt] = cached
    return cached


def to_compute(x: np.ndarray, dt: D.DType) -> np.ndarray:
    return np.asarray(x).astype(compute_dtype(dt))


def round_to(x: np.ndarray, dt: D.DType) -> np.ndarray:
    """Round a compute-representation value to `dt`, staying in the compute representation."""
    if dt.is_float and dt not in (D.F32, D.F64):  # a cast to a narrow float may overflow to inf, as it should
        with np.errstate(all="ignore"):
            return _round_quietly(x, dt)
    return _round_quietly(x, dt)


def _round_quietly(x: np.ndarray, dt: D.DType) -> np.ndarray:
    """round_to for callers that already ignore numpy's floating-point errors (the operators below): one errstate
    per operator instead of two measured a fifth of the interpreters' time in the suite."""
    x = np.asarray(x)
    if dt.is_bool:
        return x.astype(bool)
    if dt.is_float:
        if dt in (D.F32, D.F64):
            return x.astype(compute_dtype(dt))
        return x.astype(storage_dtype(dt)).astype(np.float32)
    return _wrap(x, dt)


# integer casts wrap around (two's complement), so a round trip through the narrow type is the wrap
_NARROW_INTS = {("int", 8): np.int8, ("int", 16): np.int16, ("int", 32): np.int32,
                ("uint", 8): np.uint8, ("uint", 16): np.uint16, ("uint", 32): np.uint32}


def _wrap(x: np.ndarray, dt: D.DType) -> np.ndarray:
    if x.dtype.kind == "f":
        with np.errstate(all="ignore"):
            x = np.where(np.isfinite(x), np.trunc(x), 0).astype(np.int64)
    x = x.astype(np.int64)
    narrow = _NARROW_INTS.get((dt.kind, dt.bits))
    if narrow is not None:
        return x.astype(narrow).astype(np.int64)
    if dt.bits >= 64:
        return x
    span = 1 << dt.bits
    if dt.kind == "int":
        half = 1 << (dt.bits - 1)
        return (x + half) % span - half
    return x % span


def to_storage(x: np.ndarray, dt: D.DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        return round_to(x, dt).astype(storage_dtype(dt))


_UNARY_MATH = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "floor": np.floor, "ceil": np.ceil, "abs": np.abs, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}




_FLOAT_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power, "%": np.fmod}
_BOOL_BINARY = {"&": np.logical_and, "|": np.logical_or, "^": np.logical_xor}
_INT_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
               "^": np.bitwise_xor, "<<": np.left_shift, ">>": np.right_shift, "//": np.floor_divide, "%": np.mod,
               "**": np.power}
_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
            "!=": np.not_equal}


class ScalarOps:
    """Evaluation of the scalar operators, shared by this interpreter and the SIMT-level one
    (tilec/simt/interp.py): subclasses evaluate the leaves (constants, variables, loads)
    in `eval` and say which lanes are active under a mask and how to report an error."""

    def eval(self, e: T.Expr, mask) -> np.ndarray:
        raise NotImplementedError

    def error(self, message: str, span) -> Exception:
        return InterpreterError(message, span)

    def active_lanes(self, mask, shape) -> np.ndarray:
        return np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)

    def check_divisor(self, e: T.Expr, a, b, mask, message: str):
        """Refuse a zero divisor where the computation is live; elsewhere substitute 1 so numpy
        computes nothing undefined."""
        zero = np.asarray(b) == 0
        if not zero.any():
            return b
        shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(mask) if mask is not None else ())
        if (np.broadcast_to(zero, shape) & self.active_lanes(mask, shape)).any():
            raise self.error(message, e.span)
        return np.where(zero, 1, b)

    def eval_operator(self, e: T.Expr, mask) -> np.ndarray | None:
        """Value of an operator node (None for the leaves, which the subclass evaluates)."""
        if isinstance(e, T.Binary):
            if e.op in ("and", "or"):
                a = self.eval(e.a, mask).astype(bool)
                sub = _and(mask, a) if e.op == "and" else _and(mask, ~a)
                b = self.eval(e.b, sub).astype(bool)
                return (a & b) if e.op == "and" else (a | b)
            a, b = self.eval(e.a, mask), self.eval(e.b, mask)
            if e.op in ("//", "%") and not e.dtype.is_float:
                b = self.check_divisor(e, a, b, mask, "integer division by zero")
            return self.binary(e, a, b)
        if isinstance(e, T.Compare):
            a, b = self.eval(e.a, mask), self.eval(e.b, mask)
            return _COMPARE[e.op](a, b)
        if isinstance(e, T.Unary):
            a = self.eval(e.a, mask)
            if e.op == "not":
                return ~a.astype(bool)
            if e.op == "~":
                return round_to(~a.astype(np.int64), e.dtype) if not e.dtype.is_bool else ~a
            return round_to(-a, e.dtype)
        if isinstance(e, T.Select):
            c = self.eval(e.cond, mask).astype(bool)
            a = self.eval(e.a, _and(mask, c))
            b = self.eval(e.b, _and(mask, ~c))
            return np.where(c, a, b).astype(compute_dtype(e.dtype))
        if isinstance(e, T.Cast):
            v = self.eval(e.value, mask)
            return (v != 0) if e.dtype.is_bool else round_to(v, e.dtype)
        if isinstance(e, T.Call):
            args = [self.eval(a, mask) for a in e.args]
            if e.func == "ceildiv":
                args[1] = self.check_divisor(e, args[0], args[1], mask, "ceildiv by zero")
            return self.call(e, args)
        return None

    def binary(self, e: T.Binary, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        op, dt = e.op, e.dtype
        with np.errstate(all="ignore"):
            if dt.is_float:
                return _round_quietly(_FLOAT_BINARY[op](a, b), dt)
            if dt.is_bool:
                return _BOOL_BINARY[op](a, b)
            return _round_quietly(_INT_BINARY[op](a, b), dt)

    def call(self, e: T.Call, args: list[np.ndarray]) -> np.ndarray:
        if e.func == "reinterpret":  # the stored bits of the operand, viewed as the result's storage type
            bits = np.array(to_storage(args[0], e.args[0].dtype))  # (a contiguous copy, 0-d kept)
            return to_compute(bits.view(storage_dtype(e.dtype)), e.dtype)
        with np.errstate(all="ignore"):
            if e.func == "ceildiv":
                return -(-args[0] // args[1])
            if e.func == "max":
                return np.maximum(args[0], args[1])
            if e.func == "min":
                return np.minimum(args[0], args[1])
            if e.func == "pow":
                return round_to(np.power(args[0], args[1]), e.dtype)
            if e.func == "abs" and not e.dtype.is_float:
                return round_to(np.abs(args[0]), e.dtype)
            return round_to(_UNARY_MATH[e.func](args[0]), e.dtype)


class _Block(ScalarOps):
    """Execution state of one thread block."""

    def __init__(self, interp: Interpreter, block_idx: tuple[int, int, int]):
        self.interp = interp
        self.env: dict[T.Var, np.ndarray] = dict(interp.globals_env)
        for v, i in zip(interp.kernel.block_vars, block_idx, strict=True):
            self.env[v] = np.asarray(i, dtype=np.int64)
        self.buffers: dict[T.Buffer, np.ndarray] = dict(interp.global_buffers)
        self.block_idx = block_idx
        self.lanes = interp.lanes  # threads, when the kernel has per-thread code (its local buffers per thread)
        self.per_thread: set[T.Buffer] = set()  # the local / var buffers that hold one copy per thread
        self.in_parallel = 0

    # ---------------------------------------------------------------- expressions
    def eval(self, e: T.Expr, mask: np.ndarray | None) -> np.ndarray:
        if isinstance(e, T.Const):
            return np.asarray(e.value, dtype=compute_dtype(e.dtype)) if not (
                e.dtype.is_float and e.dtype not in (D.F32, D.F64)) else round_to(np.float32(e.value), e.dtype)
        if isinstance(e, T.Var):
            if e.kind == "thread":
                return np.arange(self.lanes, dtype=np.int64)
            try:
                return self.env[e]
            except KeyError:
                raise InterpreterError(f"variable '{e.name}' has no value", e.span) from None
        if isinstance(e, T.Load):
            return self.load(e, mask)
        out = self.eval_operator(e, mask)
        if out is None:
            raise InterpreterError(f"cannot evaluate {type(e).__name__}", e.span)
        return out

    def _indices(self, buf: T.Buffer, indices: list[T.Expr], mask, span, what: str):
        data = self.buffers.get(buf)
        if data is None:
            raise InterpreterError(f"buffer '{buf.name}' used before its allocation", span)
        idx = [self.eval(i, mask).astype(np.int64) for i in indices]
        shape = data.shape[1:] if buf in self.per_thread else data.shape
        bad = None
        for axis, (ix, dim) in enumerate(zip(idx, shape, strict=True)):
            out = (ix < 0) | (ix >= dim)
            if mask is not None:
                out = out & mask
            if np.any(out):  # the mask may have more axes than the index (a condition on another loop variable)
                shape = np.broadcast_shapes(np.shape(ix), np.shape(out))
                bad = (axis, int(np.broadcast_to(ix, shape)[np.nonzero(np.broadcast_to(out, shape))][0]), dim)
                break
        if bad is not None:
            axis, value, dim = bad
            raise InterpreterError(
                f"out-of-bounds {what} of '{buf.name}': index {value} in dimension {axis} of size {dim} "
                f"(block {self.block_idx})", span)
        if mask is not None:
            idx = [np.where(mask, ix, 0) for ix in idx]
        if buf in self.per_thread:  # each thread its own copy (inside a Parallel loop: thread 0's)
            idx = [np.asarray(0 if self.in_parallel else np.arange(self.lanes))] + idx
        return data, tuple(idx)

    def load(self, e: T.Load, mask) -> np.ndarray:
        data, idx = self._indices(e.buffer, e.indices, mask, e.span, "read")
        return to_compute(data[idx], e.buffer.dtype)

    # ---------------------------------------------------------------- statements
    def run(self, body: list[T.Stmt], mask: np.ndarray | None = None) -> None:
        for s in body:
            self.stmt(s, mask)

    def stmt(self, s: T.Stmt, mask) -> None:
        if isinstance(s, T.Store) and self.in_parallel and s.buffer in self.per_thread:
            data = self.buffers[s.buffer]
            self.in_parallel -= 1  # a store in a Parallel loop updates every thread's copy alike
            try:
                self.per_thread.discard(s.buffer)
                for lane in range(self.lanes):
                    self.buffers[s.buffer] = data[lane]
                    self.stmt(s, mask)
            finally:
                self.buffers[s.buffer] = data
                self.per_thread.add(s.buffer)
                self.in_parallel += 1
            return
        if isinstance(s, T.Store):
            data, idx = self._indices(s.buffer, s.indices, mask, s.span, "write")
            value = to_storage(self.eval(s.value, mask), s.buffer.dtype)
            if mask is None and all(np.ndim(i) == 0 for i in idx):
                # every point of a Parallel loop whose store ignores the loop's variables writes the one element
                # (`for i in Parallel(1)` has one point): fine while they agree, a race on a GPU where they do not
                if np.ndim(value):
                    flat = np.ravel(value)
                    self.check_conflicts(s, data, tuple(np.full(flat.shape, i) for i in idx), flat)
                    value = flat[-1]
                data[idx] = value
                return
            shape = np.broadcast_shapes(*(np.shape(i) for i in idx), np.shape(value),
                                        () if mask is None else np.shape(mask))
            idx_b = tuple(np.broadcast_to(i, shape) for i in idx)
            val_b = np.broadcast_to(value, shape)
            if mask is not None:
                sel = np.broadcast_to(mask, shape)
                idx_b = tuple(i[sel] for i in idx_b)
                val_b = val_b[sel]
            if self.lanes and not self.in_parallel and s.buffer not in self.per_thread:
                self.check_conflicts(s, data, idx_b, val_b)
            data[idx_b] = val_b
        elif isinstance(s, T.Assign):
            value = self.eval(s.value, mask)
            old = self.env.get(s.var)
            if mask is not None and old is not None:
                value = np.where(mask, value, old)
            self.env[s.var] = value
        elif isinstance(s, T.Alloc):
            self.alloc(s, mask)
        elif isinstance(s, T.For):
            self.loop(s, mask)
        elif isinstance(s, T.If):
            c = self.eval(s.cond, mask).astype(bool)
            if mask is None and np.ndim(c) == 0:
                self.run(s.then_body if bool(c) else s.else_body, None)
            else:
                then_mask, else_mask = _and(mask, c), _and(mask, ~c)
                if np.any(then_mask):
                    self.run(s.then_body, then_mask)
                if s.else_body and np.any(else_mask):
                    self.run(s.else_body, else_mask)
        elif isinstance(s, T.While):
            self.while_loop(s, mask)
        elif isinstance(s, T.Atomic) and s.per_element:  # needs the Parallel loop's lanes (the mask)
            self.atomic_element(s, mask)
        elif op_module(s) is not None:  # a tile op: its home defines its semantics (tilec/ops/<op>.py)
            op_module(s).interpret(self, s)
        elif isinstance(s, T.AnnotateLayout | T.UseSwizzle):
            pass
        elif isinstance(s, T.NamedBarrier):
            self.named_barrier(s, mask)
        elif isinstance(s, T.FenceGlobal):  # blocks run one after another here: every earlier write is visible
            if mask is not None and not np.all(mask):
                raise InterpreterError("fence_global() is block-wide (a barrier follows the fence): every thread of "
                                       "the block must reach it, not only those of a thread-dependent condition",
                                       s.span)
        else:
            raise InterpreterError(f"cannot execute {type(s).__name__}", s.span)

    def named_barrier(self, s: T.NamedBarrier, mask) -> None:
        """The threads run in step, so a barrier waits for nothing here; what a GPU needs is that exactly
        `threads` threads reach it (fewer: they wait forever; more: some pass before the others arrive)."""
        lanes = max(self.lanes, 1)
        arrived = lanes if mask is None else int(np.count_nonzero(np.broadcast_to(mask, (lanes,))))
        if arrived != s.threads:
            raise InterpreterError(f"named barrier {s.barrier_id} waits for {s.threads} threads but {arrived} of "
                                   f"the block's {lanes} reach it: on a GPU they would "
                                   f"{'wait forever' if arrived < s.threads else 'pass before the others arrive'};"
                                   f" guard it with a condition that {s.threads} threads take", s.span)

    def check_conflicts(self, s: T.Store, data: np.ndarray, idx: tuple, values: np.ndarray) -> None:
        """Per-thread code: threads that store different values to one element in one statement race on a GPU."""
        flat = np.ravel_multi_index(tuple(np.ravel(i) for i in idx), data.shape)
        vals = np.ravel(values)
        vals = vals.astype(np.float64) if vals.dtype.kind in "fV" else vals.astype(np.int64)
        order = np.argsort(flat, kind="stable")
        flat, vals = flat[order], vals[order]
        a, b = vals[1:], vals[:-1]
        equal = ((a == b) | (np.isnan(a) & np.isnan(b))) if vals.dtype.kind == "f" else a == b
        differ = (flat[1:] == flat[:-1]) & ~equal
        if np.any(differ):
            where = np.unravel_index(int(flat[1:][differ][0]), data.shape)
            raise InterpreterError(f"threads store different values to '{s.buffer.name}'{list(map(int, where))} in "
                                   f"one statement (block {self.block_idx}): a data race on a GPU; guard the store "
                                   "so that one thread makes it, or index the element by the thread", s.span)

    def alloc(self, s: T.Alloc, mask=None) -> None:
        b = s.buffer
        if b.view_of is not None:
            return self.view(s)
        shape = b.const_shape
        if shape is None:
            raise InterpreterError(f"buffer '{b.name}' has no compile-time shape", s.span)
        if self.lanes and b.scope in ("local", "var"):
            shape = (self.lanes, *shape)
            self.per_thread.add(b)
        fill = np.nan if b.dtype.is_float else 0
        data = np.full(shape, fill, dtype=np.float64).astype(storage_dtype(b.dtype)) if b.dtype.is_float else \
            np.zeros(shape, dtype=storage_dtype(b.dtype))
        if s.init is not None:
            init = to_storage(self.eval(s.init, mask), b.dtype)
            if b in self.per_thread and np.ndim(init) == 1:
                init = init.reshape((self.lanes,) + (1,) * (len(shape) - 1))
            if mask is not None and b in self.per_thread:
                sel = np.broadcast_to(mask, (self.lanes,))
                data[sel] = np.broadcast_to(init, data.shape)[sel]
            else:
                data[...] = init
        self.buffers[b] = data

    def view(self, s: T.Alloc) -> None:
        """A view: the same memory as its base, read row-major with its own shape and dtype (writes through
        either are seen through the other)."""
        b = s.buffer
        base = self.buffers.get(b.view_of)
        if base is None:
            raise InterpreterError(f"view '{b.name}' of '{b.view_of.name}' made before its storage", s.span)
        if not base.flags.c_contiguous:
            raise InterpreterError(f"'{b.view_of.name}' must be C-contiguous to be viewed as '{b.name}'", s.span)
        shape = tuple(self.scalar_int(d, "view dimension") for d in b.shape)
        need = int(np.prod(shape, dtype=np.int64)) * b.dtype.bytes
        if need > base.nbytes:
            raise InterpreterError(f"view '{b.name}' {list(shape)} of {b.dtype} needs {need} bytes; "
                                   f"'{b.view_of.name}' has {base.nbytes}", s.span)
        flat = base.reshape(-1).view(np.uint8)[:need]
        self.buffers[b] = flat.view(storage_dtype(b.dtype)).reshape(shape)

    def loop(self, s: T.For, mask) -> None:
        if s.kind == "parallel":
            exts = [self.scalar_int(e, "Parallel extent") for e in s.extents]
            n = len(exts)
            for axis, (v, ext) in enumerate(zip(s.vars, exts, strict=True)):
                shape = [1] * n
                shape[axis] = ext
                self.env[v] = np.arange(ext, dtype=np.int64).reshape(shape)
            if mask is not None:
                raise InterpreterError("a Parallel loop inside a masked region", s.span)
            self.in_parallel += 1
            try:
                self.run(s.body, None)
            finally:
                self.in_parallel -= 1
            for v in s.vars:
                self.env.pop(v, None)
            return
        v = s.vars[0]
        if self.lanes and not self.in_parallel and any(
                np.ndim(self.eval(x, mask)) for x in (s.extents[0], s.begin, s.step) if x is not None):
            return self.thread_loop(s, mask)
        extent = self.scalar_int(s.extents[0], "loop extent")
        begin = self.scalar_int(s.begin, "loop start") if s.begin is not None else 0
        step = self.scalar_int(s.step, "loop step") if s.step is not None else 1
        for t in range(extent):
            self.env[v] = np.asarray(begin + step * t, dtype=np.int64)
            self.run(s.body, mask)
        self.env.pop(v, None)

    def thread_loop(self, s: T.For, mask) -> None:
        """A serial loop whose bounds differ between threads: iteration t runs under the threads that have it."""
        extent = np.broadcast_to(self.eval(s.extents[0], mask), (self.lanes,))
        begin = self.eval(s.begin, mask) if s.begin is not None else np.int64(0)
        step = self.eval(s.step, mask) if s.step is not None else np.int64(1)
        live_all = np.ones(self.lanes, bool) if mask is None else np.broadcast_to(mask, (self.lanes,))
        top = int(extent[live_all].max()) if np.any(live_all) else 0
        v = s.vars[0]
        for t in range(top):
            live = live_all & (t < extent)
            if not np.any(live):
                continue
            self.env[v] = np.asarray(begin + step * t, dtype=np.int64)
            self.run(s.body, live)
        self.env.pop(v, None)

    def while_loop(self, s: T.While, mask) -> None:
        """Lanes of a Parallel loop leave the loop one by one: each iteration runs under the lanes
        whose condition still holds."""
        while True:
            c = self.eval(s.cond, mask).astype(bool)
            if mask is None and np.ndim(c) == 0:
                if not c:
                    return
                self.run(s.body, None)
                continue
            live = _and(mask, c)
            if not np.any(live):
                return
            self.run(s.body, live)

    def scalar_int(self, e: T.Expr, what: str) -> int:
        v = self.eval(e, None)
        if np.ndim(v) != 0:
            raise InterpreterError(f"{what} differs between iterations of a Parallel loop", e.span)
        return int(v)

    # ---------------------------------------------------------------- regions
    def extents(self, r: T.Region) -> tuple[int, ...]:
        return tuple(self.scalar_int(e, "tile extent") for e in r.extents)

    def _box(self, r: T.Region):
        """(buffer data, starts, extents, per-axis valid [lo, hi) inside the tile)."""
        data = self.buffers.get(r.buffer)
        if data is None:
            raise InterpreterError(f"buffer '{r.buffer.name}' used before its allocation", r.span)
        if r.buffer in self.per_thread:
            data = data[0]  # a tile op reads a per-thread buffer that is the same in every thread
        starts = [self.scalar_int(e, "region start") for e in r.starts]
        exts = self.extents(r)
        valid = []
        for axis, (st, ex, dim) in enumerate(zip(starts, exts, data.shape, strict=True)):
            lo, hi = max(0, -st), min(ex, dim - st)
            if r.buffer.scope != "global" and (lo != 0 or hi != ex):
                raise InterpreterError(
                    f"region [{st}:{st + ex}] is outside dimension {axis} of '{r.buffer.name}' (size {dim})", r.span)
            valid.append((lo, max(lo, hi)))
        return data, starts, exts, valid

    def read_region(self, r: T.Region) -> np.ndarray:
        """The region as a compute-representation array of its extents; outside a tensor reads 0."""
        data, starts, exts, valid = self._box(r)
        out = np.zeros(exts, dtype=compute_dtype(r.buffer.dtype))
        src = tuple(slice(st + lo, st + hi) for st, (lo, hi) in zip(starts, valid, strict=True))
        dst = tuple(slice(lo, hi) for lo, hi in valid)
        out[dst] = to_compute(data[src], r.buffer.dtype)
        return out

    def atomic_element(self, s: T.Atomic, mask) -> None:
        """Each active lane of the enclosing Parallel loop updates its element; lanes that hit the
        same element all apply their update (numpy's unbuffered ufunc.at)."""
        r = s.dst
        data = self.buffers.get(r.buffer)
        if data is None:
            raise InterpreterError(f"buffer '{r.buffer.name}' used before its allocation", s.span)
        idx = [self.eval(i, mask).astype(np.int64) for i in r.starts]
        value = self.eval(s.value, mask)
        shape = np.broadcast_shapes(*(np.shape(i) for i in idx), np.shape(value),
                                    () if mask is None else np.shape(mask))
        live = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape).copy()
        idx = [np.broadcast_to(i, shape) for i in idx]
        if r.buffer.scope == "global":  # like copies to a tensor: updates past its edge are dropped
            for i, dim in zip(idx, data.shape, strict=True):
                live &= (i >= 0) & (i < dim)
        else:
            for axis, (i, dim) in enumerate(zip(idx, data.shape, strict=True)):
                if np.any(live & ((i < 0) | (i >= dim))):
                    raise InterpreterError(f"out-of-bounds atomic update of '{r.buffer.name}' in dimension {axis} "
                                           f"(size {dim})", s.span)
        sel = tuple(i[live] for i in idx)
        vals = np.broadcast_to(value, shape)[live]
        acc = to_compute(data, r.buffer.dtype).astype(np.float64 if r.buffer.dtype.is_float else np.int64)
        op = {"add": np.add, "max": np.maximum, "min": np.minimum}[s.kind]
        if s.result is not None:  # return_prev: lane by lane, in lane order, each sees the ones before it
            prev = np.zeros(shape, acc.dtype)
            for lane, at in zip(zip(*np.nonzero(live), strict=True), zip(*sel, strict=True), strict=True):
                prev[lane] = acc[at]
                acc[at] = op(acc[at], np.broadcast_to(value, shape)[lane])
                if r.buffer.dtype.is_float:
                    acc[at] = round_to(acc[at], r.buffer.dtype)
            prev = prev.astype(compute_dtype(r.buffer.dtype))
            old = self.env.get(s.result)
            self.env[s.result] = prev if mask is None or old is None else np.where(live, prev, old)
        else:
            op.at(acc, sel, vals)
        data[...] = to_storage(round_to(acc, r.buffer.dtype) if r.buffer.dtype.is_float else acc, r.buffer.dtype)

    round_to = staticmethod(round_to)  # (what the tile ops' semantics need of this module)

    def write_region(self, r: T.Region, value: np.ndarray) -> None:
        data, starts, exts, valid = self._box(r)
        value = np.asarray(value).reshape(exts)
        src = tuple(slice(lo, hi) for lo, hi in valid)
        dst = tuple(slice(st + lo, st + hi) for st, (lo, hi) in zip(starts, valid, strict=True))
        if r.buffer in self.per_thread:  # every thread's copy
            dst = (slice(None), *dst)
            data = self.buffers[r.buffer]
        data[dst] = to_storage(value[src], r.buffer.dtype)


def _and(mask: np.ndarray | None, cond: np.ndarray) -> np.ndarray:
    return cond if mask is None else (mask & cond)


class Interpreter:
    """Runs one kernel over its whole grid, updating the output arrays in place."""

    def __init__(self, kernel: T.Kernel, args: dict[str, object], stdout=None):
        self.kernel = kernel
        self.stdout = stdout or sys.stdout
        self.lanes = kernel.threads if uses_thread_index(kernel) else 0
        self.global_buffers: dict[T.Buffer, np.ndarray] = {}
        self.globals_env: dict[T.Var, np.ndarray] = {}
        sizes: dict[str, int] = {}
        for p in kernel.params:
            if p.name not in args:
                raise InterpreterError(f"missing argument '{p.name}' of kernel '{kernel.name}'")
            value = args[p.name]
            if isinstance(p, T.Var):
                self.globals_env[p] = round_to(np.asarray(value, dtype=compute_dtype(p.dtype)), p.dtype)
                continue
            arr = value
            if not isinstance(arr, np.ndarray):
                raise InterpreterError(f"argument '{p.name}' must be a numpy array")
            if arr.dtype != storage_dtype(p.dtype):
                raise InterpreterError(f"argument '{p.name}' has dtype {arr.dtype}, the kernel expects "
                                       f"{p.dtype} ({storage_dtype(p.dtype)})")
            if arr.ndim != len(p.shape):
                raise InterpreterError(f"argument '{p.name}' has {arr.ndim} dimension(s), expected {len(p.shape)}")
            for axis, (dim, n) in enumerate(zip(p.shape, arr.shape, strict=True)):
                if isinstance(dim, T.Const):
                    if int(dim.value) != n:
                        raise InterpreterError(f"dimension {axis} of '{p.name}' is {n}, the kernel fixes it at "
                                               f"{dim.value}")
                elif isinstance(dim, T.Var):
                    if sizes.setdefault(dim.name, n) != n:
                        raise InterpreterError(f"runtime size {dim.name} is {sizes[dim.name]} from an earlier "
                                               f"argument but {n} from '{p.name}'")
            self.global_buffers[p] = arr
        for v in kernel.size_vars:
            self.globals_env[v] = np.asarray(sizes[v.name], dtype=np.int64)
        self.sizes = sizes
        probe = None
        for p in kernel.params:  # dimensions that are formulas of the sizes (ceildiv(N, 128))
            if isinstance(p, T.Buffer):
                for axis, (dim, n) in enumerate(zip(p.shape, args[p.name].shape, strict=True)):
                    if not isinstance(dim, T.Const | T.Var):
                        probe = probe or _Block(self, (0, 0, 0))
                        want = probe.scalar_int(dim, "tensor dimension")
                        if want != n:
                            raise InterpreterError(f"dimension {axis} of '{p.name}' is {n}, the kernel expects "
                                                   f"{want} from its sizes", p.span)

        self.check_launch()

    def check_launch(self) -> None:
        """The kernel's conditions on its sizes (a view must fit its storage), as tilec.runtime tests them."""
        funcs = {"ceildiv": lambda a, b: -(-a // b), "min": min, "max": max}
        for c in self.kernel.launch_checks:
            # the compiler's own formulas over the sizes (tilec/ir/formula.py): integers, names, + - * // %
            lhs, rhs = (eval(c[x], {"__builtins__": {}, **funcs}, dict(self.sizes)) for x in ("lhs", "rhs"))
            if not (lhs == rhs if c["op"] == "==" else lhs <= rhs):
                raise InterpreterError(f"kernel '{self.kernel.name}': {c['message']}: {c['lhs']} = {lhs}, "
                                       f"{c['rhs']} = {rhs}")

    def grid(self) -> tuple[int, int, int]:
        probe = _Block(self, (0, 0, 0))
        dims = tuple(probe.scalar_int(g, "grid extent") for g in self.kernel.grid)
        return dims  # type: ignore[return-value]

    def run(self) -> None:
        gx, gy, gz = self.grid()
        for bz, by, bx in itertools.product(range(gz), range(gy), range(gx)):
            _Block(self, (bx, by, bz)).run(self.kernel.body)
