"""What the Ascend 910B offers, as data: memories with their usable capacities and alignments. Read by the
placement and capacity passes, the code generator and the launcher."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Memory:
    name: str  # UB, L1, L0A, L0B, L0C
    bytes: int
    align: int  # start-address alignment of a buffer in it
    positions: tuple[str, ...]  # the TPosition names that live in it


MEMORIES = {
    m.name: m
    for m in [
        # UB is 192 KB, but the library's Select (both modes) and a few other calls use a 32-byte scratch at
        # TMP_UB_OFFSET = 184 KB, and CANN's CPU-debug checks keep every buffer below it: tilec always leaves the
        # top 8 KB free rather than only when it emits Select (a tile size must not stop fitting when a kernel
        # gains a comparison).
        Memory("UB", 184 * 1024, 32, ("VECIN", "VECOUT", "VECCALC")),
        Memory("L1", 512 * 1024 - 128, 32, ("A1", "B1", "C1")),  # TOTAL_L1_SIZE: the top 128 B are the runtime's
        Memory("L0A", 64 * 1024, 512, ("A2",)),
        Memory("L0B", 64 * 1024, 512, ("B2",)),
        Memory("L0C", 128 * 1024, 64, ("CO1",)),
    ]
}
POSITION_MEMORY = {p: m.name for m in MEMORIES.values() for p in m.positions}

MAX_REPEAT = 255
FRACTAL = 16  # cube fractals are 16 x 16 (16-bit inputs), 512 bytes
# Core counts differ between 910B SKUs: the launcher asks ACL, never assumes them.

# Tensor and tile types the back end moves and computes (the vector unit of 910B has no bf16 arithmetic: tilec
# computes in f32 and casts; the chip has no fp8 at all).
# 8- and 16-bit integer tiles (and bool, one byte of 0 or 1) are storage too: converted to f32 through the Cast
# pairs the 910B has (u8/i8 <-> half <-> float, i16 <-> float) when they are read or written.
STORAGE_TYPES = ("f16", "bf16", "f32", "i32", "i16", "i8", "u8", "bool")
CPP_TYPES = {"f16": "half", "bf16": "bfloat16_t", "f32": "float", "i32": "int32_t", "u8": "uint8_t",
             "i8": "int8_t", "i16": "int16_t", "bool": "uint8_t"}
# Global tensors the scalar unit reads element by element (GlobalTensor::GetValue: masks, offsets, indices); they
# are not moved into on-chip tiles. bool is stored as one byte (0 or 1), as numpy and the other targets store it.
SCALAR_GM_TYPES = {"u16": "uint16_t", "u32": "uint32_t", "i64": "int64_t"}


def ctype(dt) -> str:
    """The AscendC C++ type of a tilec dtype (ValueError for one the back end does not support)."""
    if dt.name in CPP_TYPES:
        return CPP_TYPES[dt.name]
    if dt.name in SCALAR_GM_TYPES:
        return SCALAR_GM_TYPES[dt.name]
    raise ValueError(dt.name)


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m

# The 910B's atomic modes: global-memory writes of MTE3 (DataCopy) and FIX (Fixpipe) combine with what is there.
ATOMIC_MODE = {"add": "SetAtomicAdd", "max": "SetAtomicMax", "min": "SetAtomicMin"}
