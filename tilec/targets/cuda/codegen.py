"""CUDA C++ from SIMT IR: a dialect of the C-style printer plus tilec's own device header."""

from __future__ import annotations

from pathlib import Path

from ...diagnostics import Diagnostic, Reporter
from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.fold import fold_multiples, split_constant
from ...ir.simt_printer import PORTABLE_CALLS, CStylePrinter, spelled
from ..registry import check_spellings

HEADER = Path(__file__).parent / "include" / "tilec_cuda.h"
PROFILE_HEADER = Path(__file__).parent / "include" / "tilec_profile.h"  # only in a profiled build
CLUSTER_HEADER = Path(__file__).parent / "include" / "tilec_cluster.h"  # only with thread-block clusters (sm90)
PAD_HEADER = Path(__file__).parent / "include" / "tilec_pad.h"  # only with TMA: the runtime's padded-row copy

_MATH = {"exp": "expf", "exp2": "tl::exp2f_approx", "log": "logf", "log2": "log2f", "sqrt": "sqrtf", "rsqrt": "rsqrtf",
         "tanh": "tanhf", "sin": "sinf", "cos": "cosf", "floor": "floorf", "ceil": "ceilf", "abs": "fabsf",
         "max": "fmaxf", "min": "fminf", "pow": "powf"}
_MATH64 = {k: v[:-1] for k, v in _MATH.items()}
_MATH64["exp2"] = "exp2"  # (f64 keeps the accurate libdevice function)
_MATH64["rsqrt"] = "rsqrt"

def _tma(printer, s: S.SCall, args: list[str]) -> str:
    return f"tl::{s.name}(&{args[0]}, {', '.join(args[1:])});"


def _ldmatrix(printer, s: S.SCall, args: list[str]) -> str:
    return f"tl::ldmatrix_x{s.params['count']}{'_trans' if s.params['trans'] else ''}_p({args[0]}, {args[1]});"


# The CUDA spelling of every intrinsic statement, by op (checked complete below).
_CALLS = {
    **PORTABLE_CALLS,
    "cp_async16": spelled("tl::cp_async_cg_16({0}, {1}, {2})"),
    "copy16_realign": spelled("tl::copy16_realign({0}, {1}, {2}, {3})"),
    "load_realign": lambda printer, s, args: f"tl::load_realign<{s.params['n']}>({', '.join(args)});",
    "copy_shifted": lambda printer, s, args: f"tl::copy_shifted({args[-1]}, {', '.join(args[:-1])});",
    "cp_async_commit": spelled("tl::cp_async_commit()"),
    "cp_async_wait": spelled("tl::cp_async_wait<{0}>()"),
    "ldmatrix": _ldmatrix,
    "mma": spelled("tl::mma_{dtype}({0}, {1}, {2})"),
    "stmatrix": lambda printer, s, args: f"tl::stmatrix_x{s.params['count']}({', '.join(args)});",
    "wgmma": lambda printer, s, args: printer.wgmma_call(s, args),
    "tma_load": _tma,
    "tma_load_multicast": _tma,
    "mbar_arrive_cluster_warp": spelled("tl::mbar_arrive_cluster_warp({0}, {1})"),
    "cluster_sync": spelled("tl::cluster_sync()"),
    "tma_store": _tma,
    "mbar_init": spelled("tl::mbar_init({0}, {1})"),
    "fence_mbar_init": spelled("tl::fence_mbar_init()"),
    "mbar_expect_tx": spelled("tl::mbar_expect_tx({0}, {1})"),
    "mbar_arrive": spelled("tl::mbar_arrive({0})"),
    "mbar_arrive_warp": spelled("tl::mbar_arrive_warp({0})"),
    "mbar_wait": spelled("tl::mbar_wait({0}, {1})"),
    "setmaxnreg_inc": spelled("tl::setmaxnreg_inc<{0}>()"),
    "setmaxnreg_dec": spelled("tl::setmaxnreg_dec<{0}>()"),
    "wgmma_fence": spelled("tl::wgmma_fence()"),
    "fence_proxy_async": spelled("tl::fence_proxy_async()"),
    "fence_device": spelled("tl::fence_acq_rel_gpu()"),
    "named_barrier_sync": spelled("tl::named_barrier({0}, {1})"),
    "named_barrier_arrive": spelled("tl::named_barrier_arrive({0}, {1})"),
    "tma_store_commit": spelled("tl::tma_store_commit()"),
    "tma_store_wait": spelled("tl::tma_store_wait()"),
    "wgmma_commit": spelled("tl::wgmma_commit()"),
    "wgmma_wait": spelled("tl::wgmma_wait<{0}>()"),
    "wgmma_fence_regs": spelled("tl::fence_regs<{1}>({0})"),
    "prof_init": spelled("tl::Prof tl_prof = tl::prof_init()"),
    "prof_mark": lambda printer, s, args: f"tl::prof_mark(tl_prof, {2 * s.params['phase'] + 1 + s.params['end']}u);",
}

# ... and of every intrinsic expression.
_VALUES = {
    "shfl_xor": lambda a: f"__shfl_xor_sync(0xffffffffu, {a[0]}, {a[1]})",
    "pack_half2": lambda a: f"tl::pack_half2({a[0]}, {a[1]})",
    "pack_bf162": lambda a: f"tl::pack_bf162({a[0]}, {a[1]})",
    "pack2": lambda a: f"tl::pack2({a[0]}, {a[1]})",
    "grid_dim_x": lambda a: "int(gridDim.x)",
    "aligned16": lambda a: f"tl::aligned16({a[0]})",
    "aligned": lambda a: f"tl::aligned({a[0]}, {a[1]})",
}

check_spellings("CUDA", {*_CALLS, *_VALUES}, "cuda")

_FP8 = (D.F8E4M3, D.F8E5M2)


class CudaPrinter(CStylePrinter):
    types = {
        "bool": "bool", "i8": "signed char", "u8": "unsigned char", "i16": "short", "u16": "unsigned short",
        "i32": "int",
        "u32": "unsigned", "i64": "long long", "f16": "half", "bf16": "__nv_bfloat16", "f32": "float",
        "f64": "double", "f8e4m3": "__nv_fp8_e4m3", "f8e5m2": "__nv_fp8_e5m2",
    }

    narrow_floats = frozenset({D.F16, D.BF16, D.F8E4M3, D.F8E5M2})

    def expr(self, e: T.Expr, parent: int = 0) -> str:
        if self.warpgroup_uniform and isinstance(e, T.Binary) and e.op == "//" and isinstance(e.a, S.ThreadIdx) \
                and isinstance(e.b, T.Const) and int(e.b.value) == 128:
            return "tl_warpgroup"
        # cuda_fp8.h's types have no arithmetic or comparisons: compute in f32 (rounded back for arithmetic)
        if isinstance(e, T.Binary) and e.dtype in _FP8 and e.op in ("+", "-", "*", "/"):
            return f"{self.type(e.dtype)}({self.f32(e.a)} {e.op} {self.f32(e.b)})"
        if isinstance(e, T.Compare) and e.a.dtype in _FP8:
            return f"({self.f32(e.a)} {e.op} {self.f32(e.b)})"
        if isinstance(e, T.Unary) and e.op == "-" and e.dtype in _FP8:
            return f"{self.type(e.dtype)}(-{self.f32(e.a)})"
        return super().expr(e, parent)

    def f32(self, e: T.Expr) -> str:
        return f"static_cast<float>({self.expr(e)})"

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
        return _VALUES[e.name]([self.expr(a) for a in e.args])

    def __init__(self):
        super().__init__()
        self.helpers: dict[str, str] = {}
        self.warpgroup_uniform = False

    def named_barrier(self, threads: int, index: T.Expr | None = None) -> str:
        if isinstance(index, T.Const):  # the kernel's own T.sync_threads(id, count): any arch (the header's is sm90's)
            return f'asm volatile("bar.sync {int(index.value)}, {threads};" ::: "memory");'
        return f"tl::named_barrier({1 if index is None else self.expr(index)}, {threads});"

    def call_stmt(self, s: S.SCall) -> str:
        return _CALLS[s.op](self, s, [self.expr(a) for a in s.args])

    def wgmma_call(self, s: S.SCall, args: list[str]) -> str:
        fn = self.wgmma_helper(s.params)
        if s.params["operands"] == "rs":
            return f"{fn}({args[0]}, {args[1]}, {self.wgmma_descriptor(s.args[2], args[3:6])});"
        a_desc, b_desc = self.wgmma_descriptor(s.args[1], args[2:5]), self.wgmma_descriptor(s.args[5], args[6:])
        return f"{fn}({args[0]}, {a_desc}, {b_desc});"

    def wgmma_descriptor(self, addr: S.Expr, fields: list[str]) -> str:
        """The descriptor of a wgmma operand tile: the descriptor of the start of dynamic shared memory (a constant)
        advanced by the tile's byte offset, in two adds: the offset's runtime part (the stage, the warpgroup's rows:
        the same for every wgmma of a k-loop step, so nvcc computes it once), then its constant part (the k-step
        within the tile: one add a wgmma). A descriptor built from the tile's own address cost about a dozen
        instructions per wgmma inside the loop (masking, shifting and merging every address anew), one advanced by
        the whole offset four to seven (its runtime and constant parts added, then shifted, for each wgmma).
        `fields`: the leading and stride byte offsets and the swizzle."""
        assert isinstance(addr, S.AddrOf) and addr.buffer.scope == "shared" and addr.buffer.offset is not None
        base = f"tl::wgmma_desc(tl_smem, {', '.join(fields)})"
        size = addr.buffer.dtype.bytes
        runtime, constant = split_constant(fold_multiples(addr.index))
        constant_bytes = addr.buffer.offset + constant * size
        if runtime is not None and constant_bytes % 16 == 0:
            # the whole offset is a multiple of 16 bytes (the SIMT model checks), so its runtime part is too
            base = f"tl::wgmma_desc_advance({base}, ({self.expr(runtime)}) * {size})"
            return f"tl::wgmma_desc_advance({base}, {constant_bytes})"
        offset = f"{addr.buffer.offset} + ({self.expr(addr.index)}) * {size}"
        return f"tl::wgmma_desc_advance({base}, {offset})"

    def wgmma_helper(self, params: dict) -> str:
        """A device function issuing one wgmma.mma_async of this shape and operand kind (generated:
        the accumulator operand list grows with N)."""
        kind, n, dt, tnsp_b = f"wgmma_{params['operands']}", params["n"], params["dtype"], params["b_k_major"]
        zero_d = params["zero_d"]  # scale-d 0: the product replaces the accumulator
        name = f"tl_{kind}_n{n}_{dt}_t{tnsp_b}{'_zero_d' if zero_d else ''}"
        if name in self.helpers:
            return name
        ptx_t = {"f16": "f16", "bf16": "bf16", "f8e4m3": "e4m3", "f8e5m2": "e5m2"}[dt]
        k = 32 if dt.startswith("f8") else 16
        nacc = n // 2
        acc = ", ".join(f"%{i}" for i in range(nacc))
        if kind == "wgmma_rs":
            a = "{" + ", ".join(f"%{nacc + i}" for i in range(4)) + "}"
            b, pred = f"%{nacc + 4}", nacc + 5
            tail = f"1, 1, {tnsp_b}"
            params = "float* d, const unsigned* a, unsigned long long db"
            ins = [f'"r"(a[{i}])' for i in range(4)] + ['"l"(db)']
        else:
            a, b, pred = f"%{nacc}", f"%{nacc + 1}", nacc + 2
            tail = "1, 1" if dt.startswith("f8") else f"1, 1, 0, {tnsp_b}"
            params = "float* d, unsigned long long da, unsigned long long db"
            ins = ['"l"(da)', '"l"(db)']
        ins.append(f'"n"({0 if zero_d else 1})')
        # scale-d 0 does not read the accumulator: outputs alone, so that its registers' earlier values are dead
        # (read-write operands kept them live around a loop, and ptxas then packed P for P.V in twice the instructions)
        outs = ", ".join(f'"{"=" if zero_d else "+"}f"(d[{i}])' for i in range(nacc))
        body = (f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{pred}, 0;\\n"\n'
                f'               "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_t}.{ptx_t} "\n'
                f'               "{{{acc}}}, {a}, {b}, p, {tail};\\n}}\\n"\n'
                f'               : {outs}\n               : {", ".join(ins)});')
        self.helpers[name] = (f"__device__ __forceinline__ void {name}({params}) {{\n"
                              f"#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n{body}\n#endif\n}}")
        return name

    def c_params(self, k: S.SKernel) -> str:
        text = super().c_params(k)
        maps = [f"const __grid_constant__ tl::TensorMap {v.name}" for v in k.attrs.get("tensor_map_params", [])]
        return ", ".join([text, *maps]) if maps and text else text or ", ".join(maps)

    def kernel(self, k: S.SKernel) -> str:
        self.lines = []
        self.line(f'extern "C" __global__ void __launch_bounds__({k.threads}, 1) {k.name}({self.c_params(k)}) {{')
        self.indent += 1
        # A wgmma kernel's warpgroup index, broadcast from lane 0 while every thread is still converged: nvcc then
        # knows it is the same across the warp and keeps what depends on it (the wgmma descriptors of a consumer
        # warpgroup's rows) in uniform registers, instead of moving it to them before every wgmma.
        self.warpgroup_uniform = k.threads % 128 == 0 and any(
            isinstance(st, S.SCall) and st.op == "wgmma" for st in S.walk_simt(k.body))
        if self.warpgroup_uniform:
            self.line("const int tl_warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);")
        if k.shared:
            align = max(b.align for b in k.shared)
            self.line(f"extern __shared__ __align__({align}) unsigned char tl_smem[];")
            for b in k.shared:
                self.line(f"{self.type(b.dtype)}* {b.name} = reinterpret_cast<{self.type(b.dtype)}*>(tl_smem + "
                          f"{b.offset});")
        self.stmts(k.body)
        self.indent -= 1
        self.line("}")
        return "\n".join(self.lines)


# A block's register file and one thread's share of it (sm80 to sm100): ptxas gives each thread of a block of T
# threads at most min(255, 65536 / T) registers, in steps of 8 (registers are allocated per warp, 256 at a time).
REGISTERS_PER_BLOCK = 65536
MAX_THREAD_REGISTERS = 255


def thread_register_limit(threads: int) -> int:
    warps_threads = -(-threads // 32) * 32
    return min(MAX_THREAD_REGISTERS, REGISTERS_PER_BLOCK // warps_threads // 8 * 8)


def _registers(b: S.SBuffer) -> int:
    return -(-(b.size or 0) * b.dtype.bytes // 4)


def check(module: S.SModule, rep: Reporter, target) -> None:
    """What ptxas would refuse obscurely, reported at the user's line: a wgmma keeps its whole accumulator, its
    register A operand and its shared-memory descriptors in registers at once, so a block whose threads leave
    each thread fewer registers than that cannot be compiled ("Insufficient registers", C7602). The operands are
    a lower bound: ptxas also needs registers for addresses and counters (26 more in gemm.tile's main loop), so
    a tile just under the bound may still fail there, with ptxas's own message."""
    for k in module.kernels:
        limit = thread_register_limit(k.threads)
        worst = None
        for st in S.walk_simt(k.body):
            if not (isinstance(st, S.SCall) and st.op == "wgmma"):
                continue
            acc = st.args[0].buffer
            a_regs = st.args[1].buffer if st.params["operands"] == "rs" else None
            need = _registers(acc) + (_registers(a_regs) + 2 if a_regs is not None else 4)
            if need > limit and (worst is None or need > worst[0]):
                worst = (need, st, acc, a_regs)
        if worst is None:
            continue
        need, st, acc, a_regs = worst
        producer = any(isinstance(s, S.SCall) and s.op == "setmaxnreg_dec" for s in S.walk_simt(k.body))
        who = (f"{k.threads} threads a block ({k.threads - 128} and the producer warpgroup's 128)" if producer
               else f"{k.threads} threads a block")
        parts = [f"its accumulator '{acc.origin or acc.name}' ({_registers(acc)})"]
        if a_regs is not None:
            parts.append(f"its register A operand ({_registers(a_regs)})")
        parts.append(f"{2 if a_regs is not None else 4} of shared-memory descriptors")
        rep.diagnostics.append(Diagnostic(
            "error",
            f"kernel '{k.name}' runs {who}, which leaves each thread at most {limit} of the block's "
            f"{REGISTERS_PER_BLOCK} registers; this gemm's wgmma holds {need} a thread at once: "
            f"{', '.join(parts[:-1])} and {parts[-1]} — use fewer threads a block or a smaller tile",
            st.span or k.threads_span or k.span, category="registers"))
    rep.check()


def generate(module: S.SModule, banner: str) -> str:
    """A self-contained .cu file: the device header inlined, then every kernel."""
    parts = [f"// {banner}", "// Generated code; edit the .tile source instead.", ""]
    parts.append(HEADER.read_text())
    if any(k.attrs.get("profile") for k in module.kernels):
        parts.append(PROFILE_HEADER.read_text())
    if any(k.attrs.get("cluster") for k in module.kernels):
        parts.append(CLUSTER_HEADER.read_text())
    parts.append("#define TL_INF __int_as_float(0x7f800000)\n#define TL_NAN __int_as_float(0x7fffffff)\n")
    emitted: set[str] = set()
    for k in module.kernels:
        printer = CudaPrinter()
        text = printer.kernel(k)
        parts.extend(code for name, code in printer.helpers.items() if name not in emitted)
        emitted.update(printer.helpers)
        parts.append(text)
        parts.append("")
    if any(k.attrs.get("tensor_maps") for k in module.kernels):
        parts += [PAD_HEADER.read_text(), ""]  # (ending in a blank line, as merged_source hoists it)
    if any("__nv_fp8_" in p for p in parts[4:]):  # an 8-bit float anywhere, not only in the signature
        parts.insert(4, "#include <cuda_fp8.h>")
    return "\n".join(parts)
