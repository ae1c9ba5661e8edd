"""HIP C++ from SIMT IR: a dialect of the C-style printer plus tilec's own device prelude (tilec_hip.h).

The generated file includes no HIP header and calls no device library: thread and block indices, barriers,
wavefront shuffles (ds_bpermute over 64 lanes), atomics and math are clang amdgcn builtins wrapped in
tilec_hip.h, so the same source builds with hipcc (clang-15) and with plain clang-19 (`-nogpuinc -nogpulib`).
Shared memory is a static LDS array of the kernel's planned size (so the code object's metadata states it).
There is no cp.async, ldmatrix or mma.sync on AMD: the lowering does not produce them for these targets; meeting
one here is a tilec bug. Gemm on the "mfma" path calls tl::mfma_16x16x16_{f16,bf16} (v_mfma_f32_16x16x16*), or
for 8-bit floats on gfx942 tl::mfma_16x16x32_{f8e4m3,f8e5m2} (v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8}).
"""

from __future__ import annotations

from pathlib import Path

from ...diagnostics import Diagnostic, Reporter
from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.simt_printer import PORTABLE_CALLS, CStylePrinter, spelled
from ..registry import check_spellings

HEADER = Path(__file__).parent / "include" / "tilec_hip.h"
PRINTF_HEADER = Path(__file__).parent / "include" / "tilec_hip_printf.h"  # only where a kernel prints
# only where a kernel has T.sync_threads(id, count): AMD has no named barriers, this is a software one in LDS
NAMED_BARRIER_HEADER = Path(__file__).parent / "include" / "tilec_hip_named_barrier.h"

_MATH = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil", "abs", "max", "min",
         "pow"}

# The HIP spelling of every intrinsic statement, by op (checked complete below) ...
_CALLS = {
    **PORTABLE_CALLS,
    "mfma": spelled("tl::mfma_16x16x16_{dtype}({0}, {1}, {2})"),
    "mfma_fp8": spelled("tl::mfma_16x16x32_{dtype}({0}, {1}, {2})"),
    # T.fence_global's fence: acquire-release at agent (device) scope, between the block's barriers
    "fence_device": spelled('__builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "agent")'),
}

# ... and of every intrinsic expression.
_VALUES = {
    "shfl_xor": lambda a: f"tl::shfl_xor({a[0]}, {a[1]})",
    "aligned16": lambda a: f"tl::aligned16({a[0]})",
    "aligned": lambda a: f"tl::aligned({a[0]}, {a[1]})",
}

check_spellings("HIP", {*_CALLS, *_VALUES}, "hip")


class HipPrinter(CStylePrinter):
    types = {
        "bool": "bool", "i8": "signed char", "u8": "unsigned char", "i16": "short", "u16": "unsigned short",
        "i32": "int",
        "u32": "unsigned", "i64": "long long", "f16": "tl::half", "bf16": "tl::bf16", "f32": "float",
        "f64": "double", "f8e4m3": "tl::fp8_e4m3", "f8e5m2": "tl::fp8_e5m2",
    }
    thread_idx = "tl::thread_idx()"
    block_idx = ("tl::block_idx_x()", "tl::block_idx_y()", "tl::block_idx_z()")
    barrier = "tl::sync_threads();"

    def binary(self, e: T.Binary, parent: int) -> str:
        if e.op == "%" and e.dtype.is_float:
            return f"tl::fmod({self.expr(e.a)}, {self.expr(e.b)})"
        if e.op == "**":
            return f"tl::pow({self.expr(e.a)}, {self.expr(e.b)})"
        return super().binary(e, parent)

    narrow_floats = frozenset({D.F16, D.BF16, D.F8E4M3, D.F8E5M2})

    def call(self, e: T.Call) -> str:
        if e.func == "reinterpret":
            return f"tl::bit_cast<{self.type(e.dtype)}>({self.typed(e.args[0])})"
        if e.func == "ceildiv":
            return f"tl::ceildiv({self.expr(e.args[0])}, {self.expr(e.args[1])})"
        dt = e.dtype
        if not dt.is_float:
            if e.func in ("max", "min"):
                return f"tl::{e.func}({self.expr(e.args[0])}, {self.expr(e.args[1])})"
            if e.func == "abs":
                return f"tl::iabs({self.expr(e.args[0])})"
            raise TypeError(f"{e.func} on {dt}")
        wide = D.F64 if dt == D.F64 else D.F32
        cty = self.type(wide)
        args = [self.expr(a) if a.dtype == wide else f"static_cast<{cty}>({self.expr(a)})" for a in e.args]
        if e.func == "sigmoid":
            text = f"(1.0f / (1.0f + tl::exp(-{args[0]})))"
        elif e.func in _MATH:
            text = f"tl::{e.func}({', '.join(args)})"
        else:
            raise TypeError(f"unknown math function {e.func}")
        return text if dt == wide else f"static_cast<{self.type(dt)}>({text})"

    def intrinsic(self, e: S.Intrinsic) -> str:
        return _VALUES[e.name]([self.expr(a) for a in e.args])

    def call_stmt(self, s: S.SCall) -> str:
        return _CALLS[s.op](self, s, [self.expr(a) for a in s.args])

    def named_barrier(self, threads: int, index: T.Expr | None = None) -> str:
        """The kernel's own T.sync_threads(id, count): the software barrier on its LDS words (lower-to-simt made
        them, zeroed at kernel entry)."""
        if not isinstance(index, T.Const):
            raise TypeError("a named barrier with a computed id on HIP (only sm90's warp specialization makes one)")
        return f"tl::named_barrier_lds(tl_named_barrier, {int(index.value)}, {threads});"

    def kernel(self, k: S.SKernel) -> str:
        self.lines = []
        self.line(f'extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(1, {k.threads}))) '
                  f'void {k.name}({self.c_params(k)}) {{')
        self.indent += 1
        if k.shared:
            self.line(f"__shared__ __attribute__((aligned(16))) unsigned char tl_smem[{max(k.shared_bytes, 16)}];")
            for b in k.shared:
                self.line(f"{self.type(b.dtype)}* {b.name} = reinterpret_cast<{self.type(b.dtype)}*>(tl_smem + "
                          f"{b.offset});")
        self.stmts(k.body)
        self.indent -= 1
        self.line("}")
        return "\n".join(self.lines)


def check(module: S.SModule, rep: Reporter, target) -> None:
    """What the HIP back end cannot express, reported at the kernel."""
    from ...diagnostics import CompileError

    errors = []
    for k in module.kernels:
        for p in k.params:
            if p.dtype.name not in HipPrinter.types:
                errors.append(Diagnostic("error", f"{p.dtype} is not supported on {target.name} yet "
                                         f"(parameter '{p.name}' of kernel '{k.name}')", k.span))
    if errors:
        raise CompileError(errors)


def generate(module: S.SModule, banner: str) -> str:
    """A self-contained .hip file: the device prelude inlined, then every kernel."""
    parts = [f"// {banner}", "// Generated code; edit the .tile source instead.", ""]
    parts.append(HEADER.read_text())
    if any(s.op == "print" for k in module.kernels for s in S.walk_simt(k.body) if isinstance(s, S.SCall)):
        parts.append(PRINTF_HEADER.read_text())
    if any(isinstance(s, S.Barrier) and s.index is not None for k in module.kernels for s in S.walk_simt(k.body)):
        parts.append(NAMED_BARRIER_HEADER.read_text())
    for k in module.kernels:
        parts.append(HipPrinter().kernel(k))
        parts.append("")
    return "\n".join(parts)
