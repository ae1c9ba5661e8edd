"""Scalar element types of the tile language."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # the language spelling: f16, bf16, i32, ...
    kind: str  # "float" | "int" | "uint" | "bool"
    bits: int

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def numpy_name(self) -> str:
        """Name of the numpy (or ml_dtypes) type that stores this dtype."""
        return NUMPY_NAMES[self.name]


BOOL = DType("bool", "bool", 8)
I8 = DType("i8", "int", 8)
U8 = DType("u8", "uint", 8)
I16 = DType("i16", "int", 16)
U16 = DType("u16", "uint", 16)
I32 = DType("i32", "int", 32)
U32 = DType("u32", "uint", 32)
I64 = DType("i64", "int", 64)
F16 = DType("f16", "float", 16)
BF16 = DType("bf16", "float", 16)
F32 = DType("f32", "float", 32)
F64 = DType("f64", "float", 64)
F8E4M3 = DType("f8e4m3", "float", 8)
F8E5M2 = DType("f8e5m2", "float", 8)

ALL = [BOOL, I8, U8, I16, U16, I32, U32, I64, F16, BF16, F32, F64, F8E4M3, F8E5M2]
BY_NAME = {d.name: d for d in ALL}

# TileLang and numpy spellings, so TileLang kernel bodies port unchanged.
ALIASES = {
    "float16": F16, "half": F16, "bfloat16": BF16, "float32": F32, "float": F32,
    "float64": F64, "double": F64, "int8": I8, "uint8": U8, "int16": I16, "uint16": U16, "int32": I32,
    "uint32": U32, "int64": I64, "float8_e4m3": F8E4M3, "float8_e4m3fn": F8E4M3,
    "float8_e5m2": F8E5M2, "boolean": BOOL,
}

NUMPY_NAMES = {
    "bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32",
    "u32": "uint32", "i64": "int64", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
    "f64": "float64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}


def lookup(name: str) -> DType | None:
    return BY_NAME.get(name) or ALIASES.get(name)


# Significand digits (the implicit bit included) and exponent bits of each float type.
_FLOAT_FORMAT = {"f16": (11, 5), "bf16": (8, 8), "f32": (24, 8), "f64": (53, 11), "f8e4m3": (4, 4), "f8e5m2": (3, 5)}


def holds(dst: DType, src: DType) -> bool:
    """Whether every value of `src` converts to `dst` exactly (what -Wconversion warns about when it does not)."""
    if dst == src or src.is_bool:
        return True
    if dst.is_bool:
        return False
    if src.is_float:
        if not dst.is_float:
            return False
        (sd, se), (dd, de) = _FLOAT_FORMAT[src.name], _FLOAT_FORMAT[dst.name]
        return dd >= sd and de >= se
    magnitude = src.bits - (src.kind == "int")  # the bits of |value|
    if dst.is_float:
        return _FLOAT_FORMAT[dst.name][0] >= magnitude
    if src.kind == "int" and dst.kind == "uint":
        return False  # a negative value changes
    return dst.bits - (dst.kind == "int") >= magnitude


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary arithmetic operation on two typed operands.

    Floats win over integers; among floats and among integers the wider wins; f16 with bf16
    gives f32 because neither holds the other.
    """
    if a == b:
        return a
    if a.is_float and b.is_float:
        if {a, b} == {F16, BF16} or a.bits == b.bits:
            return F32
        return a if a.bits > b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "int" else b
