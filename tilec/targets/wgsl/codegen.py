"""WGSL from SIMT IR: a dialect of the C-style printer, one compute entry point per kernel.

The shader interface (what tilec.runtime.wgsl binds) is recorded in each kernel's `attrs["abi"]` and
copied into the manifest:

* every tensor parameter is a storage buffer `@group(0) @binding(i)` in signature order, `read` for
  inputs and `read_write` for outputs (`array<atomic<i32>>` when the kernel updates it atomically, an f32
  tensor as `array<atomic<u32>>` of its bits);
* the runtime sizes and scalar parameters are the fields of one uniform struct, bound after the tensors:
  scalars first in signature order, then the sizes; every field is 4 bytes (i32, u32 or f32; an f16
  scalar travels as f32, a bool as u32);
* each shared buffer is its own `var<workgroup>` array (WGSL has no dynamic workgroup memory, so the
  offsets of storage planning are not used);
* the thread index is `local_invocation_index`, block indices `workgroup_id`.

WGSL has no 64-bit integers: the i64 global offsets that lowering computes are printed as i32, which is
exact as long as every tensor has fewer than 2**31 elements (the runtime checks it at launch; WebGPU's
binding-size limits keep tensors far below that anyway).
"""

from __future__ import annotations

import math
import struct

from ...diagnostics import Reporter
from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.simt_printer import CStylePrinter
from ...ir.visit import sub_exprs
from ...targets.registry import Target, check_spellings
from . import checks

# WGSL keywords, reserved words and the built-in functions a kernel could shadow: a tile name that is one of
# these is printed with a `_tl` suffix.
RESERVED = frozenset("""
alias break case const const_assert continue continuing default diagnostic discard else enable false fn for if
let loop override requires return struct switch true var while
NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto await become cast catch class
co_await co_return co_yield coherent column_major common compile compile_fragment concept const_cast consteval
constexpr constinit crate debugger decltype delete demote demote_to_helper do dynamic_cast enum explicit export
extends extern external fallthrough filter final finally friend from fxgroup get goto groupshared highp impl
implements import inline instanceof interface layout lowp macro macro_rules match mediump meta mod module move mut
mutable namespace new nil noexcept noinline nointerpolation non_coherent noncoherent noperspective null nullptr
of operator package packoffset partition pass patch pixelfragment precise precision premerge priv protected pub
public readonly ref regardless register reinterpret_cast require resource restrict self set shared sizeof smooth
snorm static static_assert static_cast std subroutine super target template this thread_local throw trait try
type typedef typeid typename typeof union unless unorm unsafe unsized use using varying virtual volatile wgsl
where with writeonly yield
array atomic bool f16 f32 i32 u32 mat2x2 mat2x3 mat2x4 mat3x2 mat3x3 mat3x4 mat4x2 mat4x3 mat4x4 ptr sampler
sampler_comparison texture_1d texture_2d texture_2d_array texture_3d texture_cube texture_cube_array
texture_multisampled_2d texture_storage_1d texture_storage_2d texture_storage_2d_array texture_storage_3d
texture_depth_2d texture_depth_2d_array texture_depth_cube texture_depth_cube_array
texture_depth_multisampled_2d texture_external vec2 vec3 vec4 read write read_write function private
workgroup uniform storage
abs acos acosh all any arrayLength asin asinh atan atan2 atanh bitcast ceil clamp cos cosh countLeadingZeros
countOneBits countTrailingZeros cross degrees determinant distance dot dpdx dpdy exp exp2 extractBits faceForward
firstLeadingBit firstTrailingBit floor fma fract frexp fwidth insertBits inverseSqrt ldexp length log log2 max
min mix modf normalize pow quantizeToF16 radians reflect refract reverseBits round saturate select sign sin sinh
smoothstep sqrt step tan tanh transpose trunc workgroupBarrier storageBarrier atomicLoad atomicStore atomicAdd
atomicMax atomicMin
""".split())

_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "inverseSqrt",
         "tanh": "tanh", "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil", "abs": "abs", "max": "max",
         "min": "min", "pow": "pow"}

_ARITH_PREC = {"+": 8, "-": 8, "*": 9, "/": 9, "%": 9}
F32_MAX = 3.4028234663852886e38
F16_MAX = 65504.0

_HELPERS = {
    "tl_floordiv": """fn tl_floordiv(a: i32, b: i32) -> i32 {
  let q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) { return q - 1; }
  return q;
}""",
    "tl_floormod": """fn tl_floormod(a: i32, b: i32) -> i32 {
  let r = a % b;
  if ((r != 0) && ((r < 0) != (b < 0))) { return r + b; }
  return r;
}""",
    "tl_ceildiv": """fn tl_ceildiv(a: i32, b: i32) -> i32 {
  return -tl_floordiv(-a, b);
}""",
    # The bits go through a variable: Tint (the WGSL compiler of Chromium's Dawn) refuses a constant expression
    # whose value is not finite, and bitcast of a literal is one (naga accepts it).
    "tl_inf": """fn tl_inf() -> f32 {
  var bits = 0x7f800000u;
  return bitcast<f32>(bits);
}""",
    "tl_nan": """fn tl_nan() -> f32 {
  var bits = 0x7fc00000u;
  return bitcast<f32>(bits);
}""",
    # bf16 lives in registers and shared memory as an f32 that a bf16 can hold; a bf16 tensor is bound as the u32
    # words holding its 16-bit patterns. f32 -> bf16 rounds the bits to nearest even; a NaN stays a (quiet) NaN.
    "tl_bf16_bits": """fn tl_bf16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}""",
    "tl_bf16": """fn tl_bf16(x: f32) -> f32 {
  return bitcast<f32>(tl_bf16_bits(x) << 16u);
}""",
    # an f16's 16-bit pattern and back (exact: every f16 is an f32, and pack2x16float of one rounds nothing)
    "tl_f16_from_bits": """fn tl_f16_from_bits(b: u32) -> f16 {
  return f16(unpack2x16float(b & 0xffffu).x);
}""",
    "tl_f16_bits": """fn tl_f16_bits(x: f16) -> u32 {
  return pack2x16float(vec2<f32>(f32(x), 0.0)) & 0xffffu;
}""",
    # an fp8 byte's value (e4m3fn: bias 7, no infinities, S.1111.111 NaN; e5m2: bias 15, IEEE-like)
    "tl_f8e4m3": """fn tl_f8e4m3(b: u32) -> f32 {
  let e = i32((b >> 3u) & 15u);
  let m = f32(b & 7u);
  var v = select(ldexp(1.0 + m / 8.0, e - 7), ldexp(m, -9), e == 0);
  if (e == 15 && (b & 7u) == 7u) { v = bitcast<f32>(0x7fc00000u + 0u * b); }
  return select(v, -v, (b & 0x80u) != 0u);
}""",
    "tl_f8e5m2": """fn tl_f8e5m2(b: u32) -> f32 {
  let e = i32((b >> 2u) & 31u);
  let m = f32(b & 3u);
  var v = select(ldexp(1.0 + m / 4.0, e - 15), ldexp(m, -16), e == 0);
  if (e == 31) { v = bitcast<f32>(select(0x7fc00000u, 0x7f800000u, (b & 3u) == 0u) + 0u * b); }
  return select(v, -v, (b & 0x80u) != 0u);
}""",
    # f32 -> the fp8 byte nearest (ties to even), as ml_dtypes (the interpreter) converts: a subnormal result is
    # the f32 scaled by the smallest subnormal's inverse and rounded (WGSL's round() ties to even), a normal one the
    # f32 pattern with its mantissa rounded to the fp8's bits and its exponent rebiased. Past the largest finite
    # value: e4m3fn (no infinities) NaN, e5m2 infinity; a NaN stays a NaN.
    "tl_f8e4m3_bits": """fn tl_f8e4m3_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let s = (b >> 24u) & 0x80u;
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7fu; }
  if (a < 0x3c800000u) { return s | u32(round(bitcast<f32>(a) * 512.0)); }
  let c = ((a + 0x7ffffu + ((a >> 20u) & 1u)) >> 20u) - 960u;
  return s | select(c, 0x7fu, c > 0x7eu);
}""",
    "tl_f8e5m2_bits": """fn tl_f8e5m2_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let s = (b >> 24u) & 0x80u;
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7eu; }
  if (a < 0x38800000u) { return s | u32(round(bitcast<f32>(a) * 65536.0)); }
  let c = ((a + 0xfffffu + ((a >> 21u) & 1u)) >> 21u) - 448u;
  return s | min(c, 0x7cu);
}""",
    # an f32 rounded to the fp8 value nearest, kept as the f32 holding it (fp8 registers and workgroup memory)
    "tl_f8e4m3_round": """fn tl_f8e4m3_round(x: f32) -> f32 {
  return tl_f8e4m3(tl_f8e4m3_bits(x));
}""",
    "tl_f8e5m2_round": """fn tl_f8e5m2_round(x: f32) -> f32 {
  return tl_f8e5m2(tl_f8e5m2_bits(x));
}""",
    "tl_bf16_get": """fn tl_bf16_get(w: u32, i: i32) -> f32 {
  return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1) != 0));
}""",
}
_HELPER_DEPS = {"tl_ceildiv": ["tl_floordiv"], "tl_bf16": ["tl_bf16_bits"],
                "tl_f8e4m3_round": ["tl_f8e4m3", "tl_f8e4m3_bits"], "tl_f8e5m2_round": ["tl_f8e5m2", "tl_f8e5m2_bits"]}


def bf16_bits(f: float) -> int:
    """The bfloat16 pattern of f (as an f32 first), rounded to nearest even; a NaN stays a quiet NaN."""
    b = struct.unpack("<I", struct.pack("<f", f))[0]
    if b & 0x7FFFFFFF > 0x7F800000:
        return (b >> 16) | 0x40
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def ident(name: str) -> str:
    """A WGSL identifier for a tile-language name."""
    if name in RESERVED or name.startswith("__") or name == "_":
        return f"{name}_tl"
    return name


# The WGSL spelling of every intrinsic statement a WebGPU target may receive, by op (checked complete below);
# WebGPU offers no intrinsic expression (no subgroups, no reinterpreting 16-byte copies).
_CALLS = {
    "atomic": lambda printer, s, args: f"_ = atomic{s.params['kind'].capitalize()}({args[0]}, {args[1]});",
    "atomic_prev": lambda printer, s, args: f"{args[0]} = atomic{s.params['kind'].capitalize()}({args[1]}, "
                                            f"{args[2]});",
    "print": lambda printer, s, args: "// print: refused by checks.py (WGSL has no printf)",
}

check_spellings("WGSL", _CALLS, "wgsl")


_NARROW = frozenset({D.I8, D.U8, D.I16, D.U16})
_F8 = frozenset({D.F8E4M3, D.F8E5M2})  # input tensors' bytes, decoded to the f32 holding them everywhere else
_WIDENED = _NARROW | _F8 | {D.BF16}


class WgslPrinter(CStylePrinter):
    # (i8/u8/i16/u16 values are 32-bit integers, wrapped to their width after each operation that can leave it; their
    # input tensors u32 words of bytes or halves; bf16 values are f32s rounded to bf16, and a bf16 tensor u32 words
    # of 16-bit patterns)
    types = {"bool": "bool", "i8": "i32", "u8": "u32", "i16": "i32", "u16": "u32", "i32": "i32", "u32": "u32",
             "i64": "i32", "f16": "f16", "bf16": "f32", "f32": "f32", "f8e4m3": "f32", "f8e5m2": "f32"}
    barrier = "workgroupBarrier();"

    def __init__(self, module_prefix: str = "") -> None:
        super().__init__()
        self.prefix = module_prefix  # for module-scope names when one file holds several kernels
        self.helpers: set[str] = set()
        self.uses_f16 = False
        self.assigned: set[T.Var] = set()  # Vars assigned after their declaration (printed as `var`)
        self.atomic: set[S.SBuffer] = set()  # SBuffers updated atomically
        self.module_names: dict[S.SBuffer, str] = {}  # SBuffer -> module-scope name
        self.storage_barrier = False
        # writable bf16 and fp8 tensors: atomic<u32> words, stored a half (a byte) at a time
        self.packed_out: set[S.SBuffer] = set()

    # ------------------------------------------------------------ types and literals
    def type(self, dt: D.DType) -> str:
        if dt == D.F16:
            self.uses_f16 = True
        if dt.name not in self.types:  # checks.py reports these with the user's line first
            raise TypeError(f"WGSL has no type for {dt.name}")
        return self.types[dt.name]

    def helper(self, name: str) -> str:
        self.helpers.add(name)
        self.helpers.update(_HELPER_DEPS.get(name, []))
        return name

    def literal(self, e: T.Const) -> str:
        dt, v = e.dtype, e.value
        if dt.is_bool:
            return "true" if v else "false"
        if dt.is_float:
            f = float(v)
            self.uses_f16 |= dt == D.F16
            limit = F16_MAX if dt == D.F16 else F32_MAX
            if dt == D.BF16 and not math.isnan(f):
                f = struct.unpack("<f", struct.pack("<I", bf16_bits(f) << 16))[0]
            if dt in _F8:  # the fp8 value, as the interpreter rounds it (ml_dtypes)
                import ml_dtypes
                import numpy as np

                with np.errstate(all="ignore"):
                    f = float(np.float32(f).astype(getattr(ml_dtypes, dt.numpy_name)).astype(np.float32))
            if math.isnan(f):
                text = f"{self.helper('tl_nan')}()"
            elif math.isinf(f) or abs(f) > limit:
                text = f"{'-' if f < 0 else ''}{self.helper('tl_inf')}()"
            else:
                if dt == D.F32:
                    f = struct.unpack("f", struct.pack("f", f))[0]
                text = repr(f) + ("h" if dt == D.F16 else "f")
                return f"({text})" if f < 0 else text
            if dt == D.F16:
                return f"f16({text})"
            return f"({text})" if text.startswith("-") else text
        if dt.kind == "uint":
            return f"{int(v)}u"
        iv = int(v)
        if dt == D.I64 and not -(2**31) <= iv < 2**31:
            raise TypeError(f"the constant {iv} does not fit the 32-bit integers WGSL has")
        return str(iv) if iv >= 0 else f"({iv})"

    # ------------------------------------------------------------ expressions
    def var_name(self, v: T.Var) -> str:
        return ident(v.name)

    def buf_name(self, b: S.SBuffer) -> str:
        return self.module_names.get(b) or ident(b.name)

    def expr(self, e: T.Expr, parent: int = 0) -> str:
        if isinstance(e, T.Var):
            return self.var_name(e)
        if isinstance(e, S.ThreadIdx):
            return "tl_tid"
        if isinstance(e, S.BlockIdx):
            return ("tl_bx", "tl_by", "tl_bz")[e.axis]
        if isinstance(e, S.Ref):
            if e.buffer.dtype in _F8 and e.buffer.scope == "global":  # its byte, decoded (exact in f32)
                return f"{self.helper('tl_' + e.buffer.dtype.name)}({self.byte_element(e, D.U8)})"
            if e.buffer.dtype.bits == 8 and e.buffer.scope == "global":
                return self.byte_element(e)
            if e.buffer.dtype in (D.I16, D.U16) and e.buffer.scope == "global":
                return self.half_element(e)
            if e.buffer.dtype == D.BF16 and e.buffer.scope == "global":
                i = self.expr(e.index)
                word = f"{self.buf_name(e.buffer)}[({i}) >> 1u]"
                if e.buffer in self.packed_out:
                    word = f"atomicLoad(&{word})"
                return f"{self.helper('tl_bf16_get')}({word}, {i})"
            elem = f"{self.buf_name(e.buffer)}[{self.expr(e.index)}]"
            if e.buffer not in self.atomic:
                return elem
            return f"bitcast<f32>(atomicLoad(&{elem}))" if e.buffer.dtype == D.F32 else f"atomicLoad(&{elem})"
        if isinstance(e, S.AddrOf):
            return f"&{self.buf_name(e.buffer)}[{self.expr(e.index)}]"
        if isinstance(e, T.Select):
            return f"select({self.expr(e.b)}, {self.expr(e.a)}, {self.expr(e.cond)})"
        if isinstance(e, T.Unary):
            op = {"not": "!", "-": "-", "~": "~"}[e.op]
            return f"{op}{self.operand(e.a)}"
        if isinstance(e, T.Compare):
            text = f"{self.cmp_operand(e.a)} {e.op} {self.cmp_operand(e.b)}"
            return f"({text})" if parent else text
        if isinstance(e, T.Binary) and e.dtype == D.BF16:  # computed in f32, rounded as the interpreter does
            return f"{self.helper('tl_bf16')}({super().expr(e, 0)})"
        if isinstance(e, T.Binary | T.Unary | T.Call) and e.dtype in _F8:  # computed in f32, rounded to the fp8
            return f"{self.helper(f'tl_{e.dtype.name}_round')}({super().expr(e, 0)})"
        if isinstance(e, T.Binary | T.Unary | T.Cast) and e.dtype in _NARROW:  # computed in 32 bits, wrapped
            inner = super().expr(e, 0)
            bits = e.dtype.bits
            if e.dtype.kind == "uint":
                return f"(({inner}) & {(1 << bits) - 1:#x}u)"
            return f"((({inner}) << {32 - bits}u) >> {32 - bits}u)"
        return super().expr(e, parent)

    def half_element(self, e: S.Ref) -> str:
        """An element of an i16/u16 input tensor, bound as the u32 words holding its halves: the word's half
        `index % 2`, sign-extended i32 or u32."""
        i = f"({self.expr(e.index)})"
        word = f"{self.buf_name(e.buffer)}[{i} >> 1u]"
        shift = f"(16u * u32({i} & 1))"
        if e.buffer.dtype == D.I16:
            return f"(bitcast<i32>({word} << (16u - {shift})) >> 16u)"
        return f"(({word} >> {shift}) & 0xffffu)"

    def byte_element(self, e: S.Ref, as_type: D.DType | None = None) -> str:
        """An element of a bool/i8/u8 input tensor, bound as the u32 words holding its bytes (WGSL has no 8-bit
        types): the word's byte `index % 4`, as bool, sign-extended i32 or u32."""
        i = f"({self.expr(e.index)})"
        word = f"{self.buf_name(e.buffer)}[{i} >> 2u]"
        if e.buffer in self.packed_out:  # an fp8 output read back
            word = f"atomicLoad(&{word})"
        shift = f"(8u * u32({i} & 3))"
        dt = as_type or e.buffer.dtype
        if dt == D.I8:
            return f"(bitcast<i32>({word} << (24u - {shift})) >> 24u)"
        byte = f"(({word} >> {shift}) & 0xffu)"
        return f"({byte} != 0u)" if dt.is_bool else byte

    def operand(self, e: T.Expr) -> str:
        """e as the operand of a unary operator: parenthesized unless it is atomic."""
        text = self.expr(e)
        if isinstance(e, T.Binary | T.Compare | T.Unary) or text.startswith("-"):
            return f"({text})"
        return text

    def cmp_operand(self, e: T.Expr) -> str:
        if isinstance(e, T.Binary) and e.op in (*_ARITH_PREC, "//"):
            return self.expr(e, 0)
        if isinstance(e, T.Binary | T.Compare):
            return f"({self.expr(e)})"
        return self.expr(e)

    def binary(self, e: T.Binary, parent: int) -> str:
        """WGSL forbids mixing bitwise, shift, logical and comparison operators without parentheses, so
        only arithmetic nests by precedence; everything else is parenthesized."""
        op = e.op
        if op in ("//", "%") and not e.dtype.is_float:
            if e.dtype.kind == "uint" or (self.is_nonneg(e.a) and self.is_nonneg(e.b)):
                op = "/" if op == "//" else "%"
            else:
                fn = self.helper("tl_floordiv" if op == "//" else "tl_floormod")
                return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
        elif op == "**":
            return f"pow({self.expr(e.a)}, {self.expr(e.b)})"
        elif op in ("and", "or"):
            op = "&&" if op == "and" else "||"
        if op in _ARITH_PREC:
            p = _ARITH_PREC[op]
            a = self.arith_operand(e.a, p, left=True)
            b = self.arith_operand(e.b, p, left=False)
            text = f"{a} {op} {b}"
            return f"({text})" if parent >= p or parent == -1 else text
        a = self.chain_operand(e.a, e.op, left=True)
        b = self.chain_operand(e.b, e.op, left=False)
        if op in ("<<", ">>") and e.b.dtype.kind != "uint" and not isinstance(e.b, T.Const):
            b = f"u32({self.expr(e.b)})"  # WGSL shifts by a u32 (a literal converts itself)
        text = f"{a} {op} {b}"
        return f"({text})" if parent else text

    def arith_operand(self, e: T.Expr, p: int, left: bool) -> str:
        if isinstance(e, T.Binary):
            inner = e.op if not (e.op in ("//", "%") and not e.dtype.is_float) else "%"
            ip = _ARITH_PREC.get(inner)
            if ip is not None and e.op not in ("**",) and (ip > p or (ip == p and left)):
                return self.expr(e, 0)
            return f"({self.expr(e, 0)})"
        if isinstance(e, T.Compare):
            return f"({self.expr(e)})"
        text = self.expr(e)
        return f"({text})" if text.startswith("-") and not left else text

    def chain_operand(self, e: T.Expr, op: str, left: bool) -> str:
        if isinstance(e, T.Compare) and op in ("and", "or"):
            return self.expr(e, 0)
        if isinstance(e, T.Binary) and e.op == op and left and op in ("and", "or", "&", "|", "^"):
            return self.expr(e, 0)
        if isinstance(e, T.Binary | T.Compare):
            return f"({self.expr(e, 0)})"
        return self.operand(e) if isinstance(e, T.Unary) else self.expr(e)

    def cast(self, e: T.Cast) -> str:
        if e.dtype == D.BF16 and e.value.dtype != D.BF16:
            inner = self.expr(e.value)
            return f"{self.helper('tl_bf16')}({inner if e.value.dtype == D.F32 else f'f32({inner})'})"
        if e.dtype in _F8 and e.value.dtype != e.dtype:  # (held as f32 whatever the source; rounded to the fp8)
            inner = self.expr(e.value)
            wide = e.value.dtype in (D.F32, D.BF16) or e.value.dtype in _F8
            return f"{self.helper(f'tl_{e.dtype.name}_round')}({inner if wide else f'f32({inner})'})"
        to = self.type(e.dtype)
        if to == self.type(e.value.dtype):  # i64 -> i32 and back: the same WGSL type
            inner = self.expr(e.value)
            return f"({inner})" if isinstance(e.value, T.Binary | T.Compare) or inner.startswith("-") else inner
        return f"{to}({self.expr(e.value)})"

    def call(self, e: T.Call) -> str:
        args = [self.expr(a) for a in e.args]
        if e.func == "reinterpret" and e.dtype == D.F16:  # a 16-bit integer's bits (checks.py allows i16/u16 alone)
            self.uses_f16 = True
            return f"{self.helper('tl_f16_from_bits')}(u32({args[0]}))"
        if e.func == "reinterpret" and e.args[0].dtype == D.F16:  # an f16's bits as i16/u16, held in 32 bits
            bits = f"{self.helper('tl_f16_bits')}({args[0]})"
            return bits if e.dtype == D.U16 else f"((bitcast<i32>({bits}) << 16u) >> 16u)"
        if e.func == "reinterpret":  # (32-bit types only: checks.py refuses the others)
            return f"bitcast<{self.type(e.dtype)}>({args[0]})"
        if e.func == "ceildiv":
            if all(self.is_nonneg(a) for a in e.args):
                return f"(({args[0]} + {args[1]} - 1) / {args[1]})"
            return f"{self.helper('tl_ceildiv')}({args[0]}, {args[1]})"
        dt = e.dtype
        if not dt.is_float:
            if e.func in ("max", "min", "abs"):
                return f"{e.func}({', '.join(args)})"
            raise TypeError(f"{e.func} on {dt}")
        if dt not in (D.F32, D.BF16):  # f16 math in f32, as the CUDA back end and the interpreter do
            args = [f"f32({a})" for a in args]
        if e.func == "sigmoid":
            text = f"(1.0f / (1.0f + exp(-{args[0]})))"
        else:
            text = f"{_MATH[e.func]}({', '.join(args)})"
        if dt == D.BF16:
            return f"{self.helper('tl_bf16')}({text})"
        return text if dt == D.F32 else f"{self.type(dt)}({text})"

    def intrinsic(self, e: S.Intrinsic) -> str:
        raise TypeError(f"intrinsic {e.name} has no WGSL form (the SIMT IR verifier should have refused it)")

    # ------------------------------------------------------------ statements
    def stmt(self, s: S.SStmt) -> None:
        if isinstance(s, S.Declare):
            if s.value is not None and self.is_nonneg(s.value):
                self.nonneg.add(s.var)
            name, ty = self.var_name(s.var), self.type(s.var.dtype)
            if s.value is None:
                self.line(f"var {name}: {ty};")
            else:
                kw = "var" if s.var in self.assigned else "let"
                self.line(f"{kw} {name}: {ty} = {self.expr(s.value)};")
        elif isinstance(s, S.SStore) and s.buffer.dtype == D.BF16 and s.buffer.scope == "global":
            self.bf16_store(s)
        elif isinstance(s, S.SStore) and s.buffer.dtype in _F8 and s.buffer.scope == "global":
            self.f8_store(s)
        elif isinstance(s, S.SStore):
            elem = f"{self.buf_name(s.buffer)}[{self.expr(s.index)}]"
            if s.buffer in self.atomic:
                value = self.expr(s.value)
                self.line(f"atomicStore(&{elem}, {f'bitcast<u32>({value})' if s.buffer.dtype == D.F32 else value});")
            else:
                self.line(f"{elem} = {self.expr(s.value)};")
        elif isinstance(s, S.SAssign):
            self.line(f"{self.var_name(s.var)} = {self.expr(s.value)};")
        elif isinstance(s, S.SCall) and s.op in ("atomic", "atomic_prev") and isinstance(s.args[-2], S.AddrOf) and \
                s.args[-2].buffer.dtype == D.F32:
            self.float_atomic(s)
        elif isinstance(s, S.Barrier):
            if self.storage_barrier:
                self.line("storageBarrier();")
            self.line(self.barrier)
        else:
            super().stmt(s)

    def bf16_store(self, s: S.SStore) -> None:
        """A bf16 element is half of a u32 word whose other half another invocation may be writing: the word's
        half is cleared and set with two atomics, which leave the other half alone."""
        self.line("{")
        self.indent += 1
        self.line(f"let tl_i = {self.expr(s.index)};")
        self.line(f"let tl_h = {self.helper('tl_bf16_bits')}({self.expr(s.value)});")
        self.line("let tl_s = 16u * u32(tl_i & 1);")
        self.line(f"let tl_w = &{self.buf_name(s.buffer)}[tl_i >> 1u];")
        self.line("_ = atomicAnd(tl_w, ~(0xffffu << tl_s));")
        self.line("_ = atomicOr(tl_w, tl_h << tl_s);")
        self.indent -= 1
        self.line("}")

    def f8_store(self, s: S.SStore) -> None:
        """An fp8 element is a byte of a u32 word whose other bytes other invocations may be writing: the byte is
        cleared and set with two atomics, which leave the rest of the word alone. (The value is an fp8 value held
        as f32 already: its pattern is exact.)"""
        self.line("{")
        self.indent += 1
        self.line(f"let tl_i = {self.expr(s.index)};")
        self.line(f"let tl_h = {self.helper(f'tl_{s.buffer.dtype.name}_bits')}({self.expr(s.value)});")
        self.line("let tl_s = 8u * u32(tl_i & 3);")
        self.line(f"let tl_w = &{self.buf_name(s.buffer)}[tl_i >> 2u];")
        self.line("_ = atomicAnd(tl_w, ~(0xffu << tl_s));")
        self.line("_ = atomicOr(tl_w, tl_h << tl_s);")
        self.indent -= 1
        self.line("}")

    def float_atomic(self, s: S.SCall) -> None:
        """WGSL has atomics only for i32 and u32: an f32 buffer updated atomically is an array<atomic<u32>> of its
        bits, and an update a compare-exchange loop that retries until no other invocation wrote in between."""
        *prev, addr, value = s.args  # (atomic_prev: the register that receives the previous value first)
        combine = {"add": "tl_old + tl_v", "max": "max(tl_old, tl_v)", "min": "min(tl_old, tl_v)"}[s.params["kind"]]
        self.line("{")
        self.indent += 1
        self.line(f"let tl_p = {self.expr(addr)};")
        self.line(f"let tl_v = {self.expr(value)};")
        self.line("loop {")
        self.indent += 1
        self.line("let tl_bits = atomicLoad(tl_p);")
        self.line("let tl_old = bitcast<f32>(tl_bits);")
        done = f"{self.expr(prev[0])} = tl_old; break;" if prev else "break;"
        self.line(f"if (atomicCompareExchangeWeak(tl_p, tl_bits, bitcast<u32>({combine})).exchanged) {{ {done} }}")
        self.indent -= 1
        self.line("}")
        self.indent -= 1
        self.line("}")

    def declare_array(self, s: S.DeclareArray) -> None:
        b = s.buffer
        self.line(f"var {self.buf_name(b)}: array<{self.type(b.dtype)}, {b.size}>;")
        if s.init is not None:  # C's `T x[N] = {v}`: the first element is v, the rest zero
            self.line(f"{self.buf_name(b)}[0] = {self.expr(s.init)};")

    def loop(self, s: S.SFor) -> None:
        # WGSL has no unroll pragma; naga and the driver unroll constant-trip loops themselves.
        if self.is_nonneg(s.begin) and (s.step is None or self.is_nonneg(s.step)):
            self.nonneg.add(s.var)
        name = self.var_name(s.var)
        begin_zero = isinstance(s.begin, T.Const) and int(s.begin.value) == 0
        ext = self.cmp_operand(s.extent)
        if begin_zero and s.step is None:
            self.line(f"for (var {name}: i32 = 0; {name} < {ext}; {name}++) {{")
            self.block(s.body)
            self.line("}")
            return
        t = f"{name}_t"
        self.line(f"for (var {t}: i32 = 0; {t} < {ext}; {t}++) {{")
        step = f" * {self.arith_operand(s.step, 9, False)}" if s.step is not None else ""
        self.indent += 1
        self.line(f"let {name}: i32 = {self.arith_operand(s.begin, 8, True)} + {t}{step};")
        self.indent -= 1
        self.block(s.body)
        self.line("}")

    def call_stmt(self, s: S.SCall) -> str:
        return _CALLS[s.op](self, s, [self.expr(a) for a in s.args])

    # ------------------------------------------------------------ the kernel
    def kernel(self, k: S.SKernel) -> tuple[str, str, dict]:
        """(module-scope declarations, the entry point, the kernel's binding interface)."""
        self._scan(k)
        decls: list[str] = []
        bindings = []
        binding = 0
        for p in k.params:
            if not isinstance(p, S.SBuffer):
                continue
            name = self.prefix + ident(p.name)
            self.module_names[p] = name
            access = "read" if p.const else "read_write"
            elem = "u32" if p.dtype.bits == 8 or p.dtype == D.BF16 else self.type(p.dtype)
            if (p.dtype == D.BF16 or p.dtype in _F8) and not p.const:
                self.packed_out.add(p)
                elem = "atomic<u32>"
            if p in self.atomic:
                elem = f"atomic<{'u32' if p.dtype == D.F32 else elem}>"
            decls.append(f"@group(0) @binding({binding}) var<storage, {access}> {name}: array<{elem}>;")
            bindings.append({"binding": binding, "param": p.name, "access": access})
            binding += 1
        fields, prologue = [], []
        uniform_name = self.prefix + "tl_u"
        scalars = [p for p in k.params if isinstance(p, T.Var)] + list(k.size_vars)
        for i, v in enumerate(scalars):
            name = ident(v.name)
            if v.kind == "size" or v.dtype in (D.I32, D.I64):
                ty, read = "i32", f"{uniform_name}.{name}"
            elif v.dtype == D.U32:
                ty, read = "u32", f"{uniform_name}.{name}"
            elif v.dtype == D.BOOL:
                ty, read = "u32", f"{uniform_name}.{name} != 0u"
            elif v.dtype == D.F16:
                ty, read = "f32", f"f16({uniform_name}.{name})"
            elif v.dtype == D.BF16:
                ty, read = "f32", f"{self.helper('tl_bf16')}({uniform_name}.{name})"
            elif v.dtype in _F8:
                ty, read = "f32", f"{self.helper(f'tl_{v.dtype.name}_round')}({uniform_name}.{name})"
            else:
                ty, read = self.type(v.dtype), f"{uniform_name}.{name}"
            fields.append({"name": v.name, "field": name, "offset": 4 * i, "type": ty})
            prologue.append(f"let {name}: {self.type(D.I32 if v.kind == 'size' else v.dtype)} = {read};")
        uniform = None
        if fields:
            struct_name = f"{self.prefix}tl_params"
            decls.append(f"struct {struct_name} {{\n" + "".join(f"  {f['field']}: {f['type']},\n" for f in fields)
                         + "}")
            decls.append(f"@group(0) @binding({binding}) var<uniform> {uniform_name}: {struct_name};")
            uniform = {"binding": binding, "size": -(-4 * len(fields) // 16) * 16, "fields": fields}
        workgroup_bytes = 0
        for b in k.shared:
            name = self.prefix + ident(b.name)
            self.module_names[b] = name
            elem = self.type(b.dtype)
            if b in self.atomic:
                elem = f"atomic<{'u32' if b.dtype == D.F32 else elem}>"
            decls.append(f"var<workgroup> {name}: array<{elem}, {b.size}>;")
            width = 4 if b.dtype in _WIDENED else b.dtype.bytes  # (bf16: an array of f32; 8/16-bit integers: of 32-bit)
            workgroup_bytes += -(-(b.size or 0) * width // 16) * 16  # WebGPU counts roundUp(16, size)
        entry = ident(k.name)
        self.lines = []
        self.line(f"@compute @workgroup_size({k.threads})")
        self.line(f"fn {entry}(@builtin(local_invocation_index) tl_lid: u32, "
                  "@builtin(workgroup_id) tl_wid: vec3<u32>) {")
        self.indent += 1
        self.line("let tl_tid: i32 = i32(tl_lid);")
        for axis in range(max(1, len(k.grid))):
            self.line(f"let tl_b{'xyz'[axis]}: i32 = i32(tl_wid.{'xyz'[axis]});")
        for text in prologue:
            self.line(text)
        self.stmts(k.body)
        self.indent -= 1
        self.line("}")
        abi = {"entry_point": entry, "bindings": bindings, "uniform": uniform,
               "workgroup_storage_bytes": workgroup_bytes,
               "features": ["shader-f16"] if self.uses_f16 else []}
        return "\n".join(decls), "\n".join(self.lines), abi

    def _scan(self, k: S.SKernel) -> None:
        declared: set[T.Var] = set()
        reads_outputs = False

        def walk(body: list[S.SStmt]) -> None:
            nonlocal reads_outputs
            for s in body:
                if isinstance(s, S.Declare):
                    declared.add(s.var)
                elif isinstance(s, S.SAssign):
                    self.assigned.add(s.var)
                elif isinstance(s, S.SCall) and s.name.startswith("atomic_") and isinstance(s.args[-2], S.AddrOf):
                    self.atomic.add(s.args[-2].buffer)
                for e in checks._stmt_exprs(s):
                    for x in sub_exprs(e):
                        if isinstance(x, S.Ref) and x.buffer.scope == "global" and not x.buffer.const:
                            reads_outputs = True
                if isinstance(s, S.SFor | S.SWhile):
                    walk(s.body)
                elif isinstance(s, S.SIf):
                    walk(s.then_body)
                    walk(s.else_body)

        walk(k.body)
        # CUDA's __syncthreads also orders global memory; WGSL's workgroupBarrier only workgroup memory.
        self.storage_barrier = reads_outputs or bool(self.atomic)


def check(module: S.SModule, rep: Reporter, target: Target) -> None:
    """WebGPU's legality checks (types, atomics, limits, barrier uniformity): see checks.py."""
    checks.check(module, rep, target)


def generate(module: S.SModule, banner: str) -> str:
    """One WGSL module: `enable f16;` if needed, helpers, then each kernel's resources and entry point."""
    prefix_needed = len(module.kernels) > 1
    decls, entries, helpers = [], [], set()
    uses_f16 = False
    for k in module.kernels:
        pr = WgslPrinter(f"{ident(k.name)}_" if prefix_needed else "")
        d, body, abi = pr.kernel(k)
        k.attrs["abi"] = abi
        decls.append(d)
        entries.append(body)
        helpers |= pr.helpers
        uses_f16 |= pr.uses_f16
    parts = [f"// {banner}", "// Generated code; edit the .tile source instead.", ""]
    if uses_f16:
        parts += ["enable f16;", ""]
    for d in decls:
        if d:
            parts += [d, ""]
    for name in _HELPERS:
        if name in helpers:
            parts += [_HELPERS[name], ""]
    for body in entries:
        parts += [body, ""]
    return "\n".join(parts)
