"""Scalar Tile IR expressions printed as AscendC scalar C++ (the scalar unit's code: indices, sizes, loop
bounds, the scalar operands of vector calls). Integers are int64_t, floats are float."""

from __future__ import annotations

import contextvars
import math

from ...diagnostics import error
from ...ir import tile as T

# Device code has no <cmath>: infinities and NaN are made from their bit patterns, as CANN's own library does.
PRELUDE = """\
__aicore__ inline float tilec_float_bits(uint32_t bits) { union { uint32_t u; float f; } v; v.u = bits; return v.f; }
__aicore__ inline int64_t tilec_floordiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
__aicore__ inline int64_t tilec_floormod(int64_t a, int64_t b) { return a - tilec_floordiv(a, b) * b; }
__aicore__ inline int64_t tilec_ceildiv(int64_t a, int64_t b) { return tilec_floordiv(a + b - 1, b); }
__aicore__ inline int64_t tilec_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
template <typename T> __aicore__ inline T tilec_max(T a, T b) { return a > b ? a : b; }
template <typename T> __aicore__ inline T tilec_min(T a, T b) { return a < b ? a : b; }
"""

_SCALAR_MATH = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf", "abs": "fabsf"}

# (also raised by vector.py)
NO_REINTERPRET = ("T.reinterpret is supported by the AscendC back end between 16-bit integers and f16 or bf16 "
                   "inside Parallel loops only (tilec computes in f32 and views an int16 tile's bits as the float "
                   "type, or back); unpack other bits with shifts and masks, or compile for a SIMT target")


def float_literal(v: float) -> str:
    if math.isinf(v):
        return "tilec_float_bits(0xff800000u)" if v < 0 else "tilec_float_bits(0x7f800000u)"
    if math.isnan(v):
        return "tilec_float_bits(0x7fc00000u)"
    text = repr(float(v))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def cpp(e: T.Expr) -> str:
    """C++ text of a scalar expression (no tile loads)."""
    if isinstance(e, T.Const):
        if e.dtype.is_bool:
            return "true" if e.value else "false"
        if e.dtype.is_float:
            return float_literal(float(e.value))
        return f"int64_t({int(e.value)})" if int(e.value) < 0 else str(int(e.value))
    if isinstance(e, T.Var):
        return e.name
    if isinstance(e, T.Binary):
        a, b = cpp(e.a), cpp(e.b)
        if e.op == "//":
            return f"tilec_floordiv({a}, {b})"
        if e.op == "%":
            return f"tilec_floormod({a}, {b})"
        if e.op == "/" and not e.dtype.is_float:
            return f"tilec_floordiv({a}, {b})"
        op = {"and": "&&", "or": "||"}.get(e.op, e.op)
        return f"({a} {op} {b})"
    if isinstance(e, T.Compare):
        return f"({cpp(e.a)} {e.op} {cpp(e.b)})"
    if isinstance(e, T.Unary):
        return f"({'!' if e.op == 'not' else e.op}{cpp(e.a)})"
    if isinstance(e, T.Select):
        return f"({cpp(e.cond)} ? {cpp(e.a)} : {cpp(e.b)})"
    if isinstance(e, T.Call):
        args = [cpp(a) for a in e.args]
        if e.func == "reinterpret":
            raise error(NO_REINTERPRET, e.span)
        if e.func == "ceildiv":
            return f"tilec_ceildiv({args[0]}, {args[1]})"
        if e.func in ("max", "min"):
            ty = "float" if e.dtype.is_float else "int64_t"
            return f"tilec_{e.func}<{ty}>({args[0]}, {args[1]})"
        if e.func == "rsqrt":
            return f"(1.0f / sqrtf({args[0]}))"
        if e.func in _SCALAR_MATH:
            return f"{_SCALAR_MATH[e.func]}({args[0]})"
        raise error(f"the AscendC back end cannot compute {e.func}() on the scalar unit", e.span)
    if isinstance(e, T.Cast):
        ty = "float" if e.dtype.is_float else ("bool" if e.dtype.is_bool else "int64_t")
        return f"static_cast<{ty}>({cpp(e.value)})"
    if isinstance(e, T.Load) and e.buffer.scope == "var":
        return e.buffer.name  # alloc_var: a scalar of the scalar unit
    if isinstance(e, T.Load) and e.buffer.scope == "global":
        return _gm_read(e)
    if isinstance(e, T.Load) and UB_READS.get() is not None and e.buffer.name in UB_READS.get()[0]:
        return _ub_read(e)
    if isinstance(e, T.Load):
        raise error(f"'{e.buffer.name}' is read as a scalar here; the AscendC back end computes on-chip tiles with "
                    "vector instructions only (inside Parallel loops and tile operations)", e.span)
    raise error(f"cannot print {type(e).__name__} for AscendC", getattr(e, "span", None))


# Set by the lowering of one side: (UB tile -> its layout, the tiles read since the last statement). A tile's
# element read in scalar code (`lse_max = T.max(lse_max, lse_shared[k])`) is LocalTensor::GetValue on the scalar
# unit; the statement that reads it is tagged as a scalar-pipe read of the tile, so that sync orders it after the
# copy or vector call that wrote the tile.
UB_READS: contextvars.ContextVar = contextvars.ContextVar("ascend_ub_reads", default=None)


def _ub_read(e: T.Load) -> str:
    layouts, read = UB_READS.get()
    lay = layouts[e.buffer.name]
    idx = [cpp(i) for i in e.indices]
    offset = f"({idx[0]}) * {lay.cols_pad} + ({idx[1]})" if lay.is_2d else idx[0]
    read.add(e.buffer.name)
    value = f"{e.buffer.name}.GetValue((uint32_t)({offset}))"
    if e.buffer.dtype.is_bool:
        return f"({value} != 0)"
    return f"static_cast<{scalar_type(e)}>({value})"


def _gm_read(e: T.Load) -> str:
    """One element of a global tensor, read by the scalar unit (GlobalTensor::GetValue: masks, offsets, sizes)."""
    b = e.buffer
    if b.is_output:
        raise error(f"'{b.name}' is an output the kernel writes; the AscendC back end reads only input tensors on the "
                    "scalar unit (its reads are not ordered after the copies that write global memory)", e.span)
    dims = [cpp(d) for d in b.shape]
    offset = cpp(e.indices[0]) if e.indices else "0"
    for d, ix in zip(dims[1:], e.indices[1:], strict=True):
        offset = f"({offset}) * ({d}) + {cpp(ix)}"
    value = f"{b.name}.GetValue((uint64_t)({offset}))"
    if b.dtype.is_bool:
        return f"({value} != 0)"
    return f"static_cast<{scalar_type(e)}>({value})"


def scalar_ctype(dt) -> str:
    """The C++ type of a scalar-unit variable of dtype `dt`."""
    return "float" if dt.is_float else ("bool" if dt.is_bool else "int64_t")


def scalar_type(e: T.Expr) -> str:
    return "float" if e.dtype.is_float else ("bool" if e.dtype.is_bool else "int64_t")
