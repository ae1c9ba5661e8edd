"""CUDA C++ from SIMT IR: a dialect of the C-style printer plus tilec's own device header."""

from __future__ import annotations

from pathlib import Path

from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.simt_printer import CStylePrinter

HEADER = Path(__file__).parent / "include" / "tilec_cuda.h"

_MATH = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf", "rsqrt": "rsqrtf",
         "tanh": "tanhf", "sin": "sinf", "cos": "cosf", "floor": "floorf", "ceil": "ceilf", "abs": "fabsf",
         "max": "fmaxf", "min": "fminf", "pow": "powf"}
_MATH64 = {k: v[:-1] for k, v in _MATH.items()}
_MATH64["rsqrt"] = "rsqrt"

_CALLS = {
    "cp_async16": "tl::cp_async_cg_16({0}, {1}, {2})",
    "copy16_or_zero": "tl::copy16_or_zero({0}, {1}, {2})",
    "copy16": "tl::st_128({0}, tl::ld_128({1}))",
    "cp_async_commit": "tl::cp_async_commit()",
    "ldmatrix_x4": "tl::ldmatrix_x4_p({0}, {1})",
    "ldmatrix_x2": "tl::ldmatrix_x2_p({0}, {1})",
    "ldmatrix_x4_trans": "tl::ldmatrix_x4_trans_p({0}, {1})",
    "ldmatrix_x2_trans": "tl::ldmatrix_x2_trans_p({0}, {1})",
    "mma_f16": "tl::mma_f16({0}, {1}, {2})",
    "mma_bf16": "tl::mma_bf16({0}, {1}, {2})",
    "atomic_add": "tl::atomic_add({0}, {1})",
    "atomic_max": "tl::atomic_max({0}, {1})",
    "atomic_min": "tl::atomic_min({0}, {1})",
}


class CudaPrinter(CStylePrinter):
    types = {
        "bool": "bool", "i8": "signed char", "u8": "unsigned char", "i16": "short", "i32": "int",
        "u32": "unsigned", "i64": "long long", "f16": "half", "bf16": "__nv_bfloat16", "f32": "float",
        "f64": "double", "f8e4m3": "__nv_fp8_e4m3", "f8e5m2": "__nv_fp8_e5m2",
    }

    narrow_floats = frozenset({D.F16, D.BF16, D.F8E4M3, D.F8E5M2})

    def call(self, e: T.Call) -> str:
        if e.func == "ceildiv":
            return f"tl::ceildiv({self.expr(e.args[0])}, {self.expr(e.args[1])})"
        dt = e.dtype
        if not dt.is_float:
            if e.func in ("max", "min"):
                return f"tl::{e.func}({self.expr(e.args[0])}, {self.expr(e.args[1])})"
            if e.func == "abs":
                return f"abs({self.expr(e.args[0])})"
            raise TypeError(f"{e.func} on {dt}")
        if dt == D.F64:
            return f"{_MATH64[e.func]}({', '.join(self.expr(a) for a in e.args)})"
        args = [self.expr(a) if a.dtype == D.F32 else f"static_cast<float>({self.expr(a)})" for a in e.args]
        if e.func == "sigmoid":
            text = f"(1.0f / (1.0f + expf(-{args[0]})))"
        else:
            text = f"{_MATH[e.func]}({', '.join(args)})"
        return text if dt == D.F32 else f"static_cast<{self.type(dt)}>({text})"

    def intrinsic(self, e: S.Intrinsic) -> str:
        args = [self.expr(a) for a in e.args]
        if e.name == "shfl_xor":
            return f"__shfl_xor_sync(0xffffffffu, {args[0]}, {args[1]})"
        if e.name in ("pack_half2", "pack_bf162"):
            return f"tl::{e.name}({args[0]}, {args[1]})"
        if e.name == "aligned16":
            return f"tl::aligned16({args[0]})"
        if e.name == "aligned":
            return f"tl::aligned({args[0]}, {args[1]})"
        raise TypeError(f"unknown intrinsic {e.name}")

    def call_stmt(self, s: S.SCall) -> str:
        args = [self.expr(a) for a in s.args]
        if s.name == "cp_async_wait":
            return f"tl::cp_async_wait<{args[0]}>();"
        if s.name.startswith("print:"):
            label = s.name[6:].replace("\\", "\\\\").replace('"', '\\"')
            v = s.args[0]
            fmt, val = ("%f", f"static_cast<double>(static_cast<float>({args[0]}))") if v.dtype.is_float else (
                "%lld", f"static_cast<long long>({args[0]})")
            prefix = f"{label}: " if label else ""
            return f'printf("block (%d,%d,%d) {prefix}{fmt}\\n", blockIdx.x, blockIdx.y, blockIdx.z, {val});'
        if s.name.startswith(("load_vec", "store_vec")):
            n = s.name.removeprefix("load_vec").removeprefix("store_vec")
            fn = "load_cvt" if s.name.startswith("load") else "store_cvt"
            return f"tl::{fn}<{n}>({', '.join(args)});"
        return _CALLS[s.name].format(*args) + ";"

    def kernel(self, k: S.SKernel) -> str:
        self.lines = []
        self.line(f'extern "C" __global__ void __launch_bounds__({k.threads}, 1) {k.name}({self.c_params(k)}) {{')
        self.indent += 1
        if k.shared:
            self.line("extern __shared__ __align__(128) unsigned char tl_smem[];")
            for b in k.shared:
                self.line(f"{self.type(b.dtype)}* {b.name} = reinterpret_cast<{self.type(b.dtype)}*>(tl_smem + "
                          f"{b.offset});")
        self.stmts(k.body)
        self.indent -= 1
        self.line("}")
        return "\n".join(self.lines)


def generate(module: S.SModule, banner: str) -> str:
    """A self-contained .cu file: the device header inlined, then every kernel."""
    uses_fp8 = any(p.dtype in (D.F8E4M3, D.F8E5M2) for k in module.kernels for p in k.params)
    parts = [f"// {banner}", "// Generated code; edit the .tile source instead.", ""]
    parts.append(HEADER.read_text())
    if uses_fp8:
        parts.append("#include <cuda_fp8.h>")
    parts.append("#define TL_INF __int_as_float(0x7f800000)\n#define TL_NAN __int_as_float(0x7fffffff)\n")
    for k in module.kernels:
        parts.append(CudaPrinter().kernel(k))
        parts.append("")
    return "\n".join(parts)
