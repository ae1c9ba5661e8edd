"""What WebGPU refuses, checked by tilec before any WGSL is printed.

naga (wgpu's shader compiler) validates types and syntax but not, or not with a useful message, the
things a tile kernel can run into: types WGSL does not have, 16-bit atomics, resource limits and
barriers in non-uniform control flow. Each is reported here as a diagnostic at the user's line (the
kernel's line for signature and resource problems, the statement's for the rest). docs/webgpu.md
lists them with the reasons.

Runs after storage-planning (which already refuses more threads per block, and more workgroup
storage, than the target allows); the driver calls `check` of a back end's codegen module when it
has one.
"""

from __future__ import annotations

from ...diagnostics import Diagnostic, Reporter, Span
from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.visit import sub_exprs
from ...targets.registry import Target

# Types WGSL can hold, and why the others are refused.
_NO_TYPE = {
    "f64": "WGSL has no 64-bit floats; use f32",
}
# held in 32 bits in registers and workgroup memory
WIDENED = frozenset({D.BF16, D.I8, D.U8, D.I16, D.U16, D.F8E4M3, D.F8E5M2})
F8 = frozenset({D.F8E4M3, D.F8E5M2})
# Allowed inside the kernel (8- and 16-bit integers held in 32 bits, wrapped after each operation; input tensors
# read from their words) but not in its signature (an output tensor).
_NOT_IN_SIGNATURE = {
    "i8": ("WGSL has no 8-bit integers and a storage buffer holds 32-bit words: tilec reads an i8 input "
           "tensor from its words and keeps i8 values in 32-bit registers and workgroup memory, but cannot write "
           "an i8 tensor (invocations would race on the words they share); make the output i32"),
    "u8": ("WGSL has no 8-bit integers and a storage buffer holds 32-bit words: tilec reads a u8 input "
           "tensor from its words and keeps u8 values in 32-bit registers and workgroup memory, but cannot write "
           "a u8 tensor (invocations would race on the words they share); make the output u32"),
    "i16": ("WGSL has no 16-bit integers and a storage buffer holds 32-bit words: tilec reads an i16 input "
           "tensor from its words and keeps i16 values in 32-bit registers and workgroup memory, but cannot write "
           "an i16 tensor (invocations would race on the words they share); make the output i32"),
    "u16": ("WGSL has no 16-bit integers and a storage buffer holds 32-bit words: tilec reads a u16 input "
           "tensor from its words and keeps u16 values in 32-bit registers and workgroup memory, but cannot write "
           "a u16 tensor (invocations would race on the words they share); make the output u32"),

    "i64": "WGSL has no 64-bit integers; use i32 (tilec computes addresses in 32 bits on WebGPU)",
    "bool": "WGSL storage buffers cannot hold bool (tilec reads a bool input tensor from its bytes); use i32 or u32",
}


def check(module: S.SModule, rep: Reporter, target: Target) -> None:
    for k in module.kernels:
        _check_kernel(k, rep, target)
    rep.check()


def bind_views(k: S.SKernel) -> None:
    """A view of a tensor with the tensor's element type reads the tensor's own binding: its accesses are
    rewritten to the tensor (with its row-major offsets, which are the view's) and its declaration dropped. A
    view of another type stays, for _check_kernel to refuse (WebGPU binds a storage buffer with one type). The
    same for a view of a shared buffer (WGSL cannot view a workgroup array as another type either)."""
    same = {b: b.alias_of for b in k.shared if b.alias_of is not None and b.alias_of.dtype == b.dtype}
    k.shared = [b for b in k.shared if b not in same]

    def walk(body: list[S.SStmt]) -> list[S.SStmt]:
        out = []
        for s in body:
            if isinstance(s, S.DeclareArray) and s.buffer.scope == "global" and s.buffer.alias_of is not None:
                root = s.buffer.alias_of
                if root.dtype == s.buffer.dtype:
                    same[s.buffer] = root
                    continue
            if isinstance(s, S.SStore) and s.buffer in same:
                s.buffer = same[s.buffer]
            for e in _stmt_exprs(s):
                for x in sub_exprs(e):
                    if isinstance(x, S.Ref | S.AddrOf) and x.buffer in same:
                        x.buffer = same[x.buffer]
            if isinstance(s, S.SFor | S.SWhile):
                s.body = walk(s.body)
            elif isinstance(s, S.SIf):
                s.then_body, s.else_body = walk(s.then_body), walk(s.else_body)
            out.append(s)
        return out

    k.body = walk(k.body)


def _check_kernel(k: S.SKernel, rep: Reporter, target: Target) -> None:
    reported: set = set()

    def bad_type(dt: D.DType, what: str, span: Span | None, signature: bool) -> None:
        why = _NO_TYPE.get(dt.name) or (_NOT_IN_SIGNATURE.get(dt.name) if signature else None)
        if why is None or (dt.name, signature) in reported:
            return
        if dt.name == "bool" and what.startswith("scalar"):
            return  # bool scalars travel as u32 in the uniform block
        reported.add((dt.name, signature))
        rep.error(f"kernel '{k.name}': {what} is {dt.name}, which WebGPU cannot run: {why}", span or k.span)

    for p in k.params:
        if isinstance(p, S.SBuffer) and p.const and p.dtype in (D.BOOL, D.I8, D.U8, D.I16, D.U16, *F8):
            continue  # an input tensor of bytes or halves is read from the u32 words that hold them (codegen.py)
        if isinstance(p, S.SBuffer) and p.dtype in F8:
            continue  # an fp8 output: atomic u32 words, each element's byte stored by two atomics (codegen.py)
        if isinstance(p, S.SBuffer):
            bad_type(p.dtype, f"tensor '{p.name}'", k.span, True)
        else:
            bad_type(p.dtype, f"scalar '{p.name}'", k.span, True)
    for b in k.shared:
        bad_type(b.dtype, f"shared buffer '{b.origin or b.name}'", k.span, False)
        if b.alias_of is not None:
            rep.error(f"kernel '{k.name}': view '{b.origin or b.name}' reads shared buffer '{b.alias_of.origin}' "
                      f"({b.alias_of.dtype}) as {b.dtype}, which WGSL cannot do (a workgroup array has one element "
                      "type); view it with its own dtype (T.reshape)", b.span or k.span)
    for s, _ in _walk(k.body):
        if isinstance(s, S.DeclareArray) and s.buffer.scope == "global":
            rep.error(f"kernel '{k.name}': view '{s.buffer.name}' reads tensor '{s.buffer.alias_of.name}' "
                      f"({s.buffer.alias_of.dtype}) as {s.buffer.dtype}, which WebGPU cannot do: a storage buffer is "
                      "bound with one element type; view it with its own dtype (T.reshape), or unpack the bits "
                      "with shifts and masks", s.span or k.span)
        elif isinstance(s, S.DeclareArray):
            bad_type(s.buffer.dtype, f"buffer '{s.buffer.origin or s.buffer.name}'", s.span, False)
        elif isinstance(s, S.Declare):
            bad_type(s.var.dtype, f"'{s.var.name}'", s.span, False)
        for e in _stmt_exprs(s):
            for x in sub_exprs(e):
                if isinstance(x, T.Cast):  # (to fp8: rounded in f32, codegen.py)
                    bad_type(x.dtype, "a cast's result", s.span, False)
                elif isinstance(x, T.Call) and x.func == "reinterpret" and (x.span, "bitcast") not in reported:
                    src = x.args[0].dtype
                    if not {src, x.dtype} <= {D.F32, D.I32, D.U32} and {src, x.dtype} not in (
                            {D.F16, D.U16}, {D.F16, D.I16}):  # (16-bit patterns: through vec2<f16>)
                        reported.add((x.span, "bitcast"))
                        rep.error(f"kernel '{k.name}': reinterpret of {src} as {x.dtype} cannot run on WebGPU: WGSL's "
                                  "bitcast is tilec's only bit cast there and it converts 32-bit types (f32, i32, u32) "
                                  "and f16 with i16/u16 alone, since WGSL has no 16-bit integers and no 8-bit types; "
                                  "reinterpret f32 with i32/u32, or build the value with arithmetic",
                                  x.span or s.span or k.span)
                elif (isinstance(x, T.Const) and x.dtype == D.I64 and not -(2**31) <= int(x.value) < 2**31
                      and "i64 constant" not in reported):
                    reported.add("i64 constant")
                    rep.error(f"kernel '{k.name}': the constant {int(x.value)} does not fit the 32-bit integers "
                              "WGSL has (WebGPU computes i64 arithmetic in 32 bits)", s.span or k.span)

    _check_atomics_and_print(k, rep)
    _check_limits(k, rep, target)
    _check_barrier_uniformity(k, rep)


# ---------------------------------------------------------------- atomics, print


def _check_atomics_and_print(k: S.SKernel, rep: Reporter) -> None:
    printed: set[object] = set()  # a print lowers to several lines: one error for each print statement
    for s, _ in _walk(k.body):
        if not isinstance(s, S.SCall):
            continue
        if s.name.startswith("atomic_"):
            addr = s.args[-2]  # (atomic_prev: after the register that receives the previous value)
            dt = addr.buffer.dtype if isinstance(addr, S.AddrOf) else s.args[-1].dtype
            if dt not in (D.I32, D.U32, D.F32):  # (f32: a compare-exchange loop on the bits, codegen.py)
                name = (addr.buffer.origin or addr.buffer.name) if isinstance(addr, S.AddrOf) else "?"
                rep.error(f"{s.name} on {dt.name} '{name}' cannot run on WebGPU: WGSL atomics "
                          "exist only for 32-bit words (tilec makes i32, u32 and f32 ones); accumulate in f32, or "
                          "reduce into a fragment and write the result once", s.span or k.span)
        elif s.op == "print" and s.span not in printed:
            printed.add(s.span)
            rep.error("print cannot run on WebGPU: WGSL has no printf; `tilec run --device cpu` runs the kernel in the "
                      "interpreter, which prints it (or remove the print for this target)", s.span or k.span)


# ---------------------------------------------------------------- limits


def _check_limits(k: S.SKernel, rep: Reporter, target: Target) -> None:
    widened = [b for b in k.shared if b.dtype in WIDENED]
    if widened:
        # storage-planning counted bf16 at 2 bytes and 8/16-bit integers at theirs; WGSL holds them as 32-bit values
        # in workgroup memory (a u32 word shared by several invocations' parts would race), so the size is counted
        # again as codegen.py declares it
        need = sum(-(-(b.size or 0) * (4 if b.dtype in WIDENED else b.dtype.bytes) // 16) * 16 for b in k.shared)
        if need > target.shared_memory_bytes:
            names = ", ".join(b.origin or b.name for b in widened)
            rep.error(f"kernel '{k.name}' needs {need} bytes of workgroup storage on {target.name}, over its "
                      f"{target.shared_memory_bytes}: WGSL has no 8- or 16-bit type a workgroup can share, so the "
                      f"shared buffers {names} are held as 32-bit values (4 bytes an element: bf16 and fp8 held as "
                      "f32, 8- and 16-bit integers as i32/u32) — use smaller tiles, "
                      f"or build with --max-workgroup-storage {need} for devices that grant more", k.span)
    tensors = [p for p in k.params if isinstance(p, S.SBuffer)]
    if target.max_storage_buffers is not None and len(tensors) > target.max_storage_buffers:
        rep.error(f"kernel '{k.name}' has {len(tensors)} tensor parameters ({', '.join(p.name for p in tensors)}); "
                  f"{target.name} binds each as a storage buffer and allows at most {target.max_storage_buffers} per "
                  f"shader stage — pass fewer tensors (pack several into one), or build with --max-storage-buffers "
                  f"{len(tensors)} for devices that grant more (most desktop adapters do; the ES module asks for "
                  "it)", k.span)
    if target.max_grid is not None:
        for axis, g in enumerate(k.grid):
            if isinstance(g, T.Const) and int(g.value) > target.max_grid:
                rep.error(f"kernel '{k.name}' launches {int(g.value)} blocks along {'xyz'[axis]}; {target.name} "
                          f"dispatches at most {target.max_grid} workgroups per dimension — use larger tiles, or "
                          "spread the blocks over another grid dimension", k.span)


# ---------------------------------------------------------------- barrier uniformity


def _check_barrier_uniformity(k: S.SKernel, rep: Reporter) -> None:
    """WGSL requires workgroupBarrier() in uniform control flow: every invocation of the workgroup must
    reach it. Following WGSL's uniformity rules (simplified to what lowering emits), a value is
    non-uniform when it depends on the thread index, on workgroup memory, on a read-write storage buffer
    or on anything assigned under non-uniform control; an `if` on such a value, or a loop bounded by
    one, makes its body non-uniform."""
    nonuniform: set[T.Var | S.SBuffer] = set()  # the Vars and of local/shared SBuffers holding non-uniform values

    def nu(e: T.Expr | None) -> bool:
        if e is None:
            return False
        for x in sub_exprs(e):
            if isinstance(x, S.ThreadIdx):
                return True
            if isinstance(x, T.Var) and x in nonuniform:
                return True
            if isinstance(x, S.Ref | S.AddrOf):
                b = x.buffer
                if b.scope == "shared" or (b.scope == "global" and not b.const) or b in nonuniform:
                    return True
                if nu(x.index):
                    return True
        return False

    def mark(key: int) -> bool:
        if key in nonuniform:
            return False
        nonuniform.add(key)
        return True

    def scan(body: list[S.SStmt], divergent: bool) -> bool:
        changed = False
        for s in body:
            if isinstance(s, S.Declare | S.SAssign):
                if divergent or nu(s.value):
                    changed |= mark(s.var)
            elif isinstance(s, S.SStore):
                if s.buffer.scope == "local" and (divergent or nu(s.index) or nu(s.value)):
                    changed |= mark(s.buffer)
            elif isinstance(s, S.DeclareArray):
                if s.init is not None and (divergent or nu(s.init)):
                    changed |= mark(s.buffer)
            elif isinstance(s, S.SFor):
                d = divergent or nu(s.begin) or nu(s.extent) or nu(s.step)
                if d:
                    changed |= mark(s.var)
                changed |= scan(s.body, d)
            elif isinstance(s, S.SWhile):
                changed |= scan(s.body, divergent or nu(s.cond))
            elif isinstance(s, S.SIf):
                d = divergent or nu(s.cond)
                changed |= scan(s.then_body, d)
                changed |= scan(s.else_body, d)
        return changed

    for _ in range(64):  # to a fixed point: a loop may assign a variable that an earlier statement reads
        if not scan(k.body, False):
            break

    found: list[Diagnostic] = []

    def find(body: list[S.SStmt], where: S.SStmt | None) -> None:
        for i, s in enumerate(body):
            if isinstance(s, S.Barrier) and where is not None:
                why = _why(where, nu)
                d = Diagnostic("error", f"kernel '{k.name}': this {why} so the workgroupBarrier() that tilec "
                               "places inside it (between a shared-memory write and the reads of other threads) "
                               "would run in non-uniform control flow, which WGSL forbids (and which hangs or "
                               "corrupts results on GPUs); move the tile operations out of the branch, or make the "
                               "condition depend only on block indices, sizes and scalar parameters",
                               where.span or k.span)
                nxt = next((t for t in body[i + 1:] if t.span is not None), None)
                if nxt is not None and nxt.span != where.span:
                    d.notes.append(Diagnostic("note", "the barrier is placed before this statement", nxt.span))
                found.append(d)
                return  # one report per branch
            if isinstance(s, S.SFor):
                d = where if where is not None else (s if nu(s.begin) or nu(s.extent) or nu(s.step) else None)
                find(s.body, d)
            elif isinstance(s, S.SWhile):
                find(s.body, where if where is not None else (s if nu(s.cond) else None))
            elif isinstance(s, S.SIf):
                d = where if where is not None else (s if nu(s.cond) else None)
                find(s.then_body, d)
                find(s.else_body, d)

    find(k.body, None)
    seen: set = set()
    for d in found:
        key = (d.span, d.message)
        if key not in seen:
            seen.add(key)
            rep.diagnostics.append(d)


def _why(s: S.SStmt, nu) -> str:
    if isinstance(s, S.SIf):
        return f"condition {_reason(s.cond)}"
    if isinstance(s, S.SWhile):
        return f"while loop's condition {_reason(s.cond)}"
    assert isinstance(s, S.SFor)
    bound = next(x for x in (s.extent, s.begin, s.step) if x is not None and nu(x))
    return f"loop's trip count {_reason(bound)}"


def _reason(e: T.Expr) -> str:
    for x in sub_exprs(e):
        if isinstance(x, S.ThreadIdx):
            return "depends on the thread index,"
        if isinstance(x, S.Ref) and x.buffer.scope == "shared":
            return (f"reads shared memory ('{x.buffer.origin or x.buffer.name}'), which WGSL treats as different "
                    "in every invocation,")
        if isinstance(x, S.Ref) and x.buffer.scope == "global":
            return f"reads the output tensor '{x.buffer.name}', which WGSL treats as different in every invocation,"
    return "depends on values that differ between threads,"


# ---------------------------------------------------------------- walking


def _walk(body: list[S.SStmt], depth: int = 0):
    for s in body:
        yield s, depth
        if isinstance(s, S.SFor | S.SWhile):
            yield from _walk(s.body, depth + 1)
        elif isinstance(s, S.SIf):
            yield from _walk(s.then_body, depth + 1)
            yield from _walk(s.else_body, depth + 1)


def _stmt_exprs(s: S.SStmt) -> list[T.Expr]:
    if isinstance(s, S.Declare):
        return [s.value] if s.value is not None else []
    if isinstance(s, S.SAssign):
        return [s.value]
    if isinstance(s, S.SStore):
        return [s.index, s.value]
    if isinstance(s, S.SFor):
        return [x for x in (s.begin, s.extent, s.step) if x is not None]
    if isinstance(s, S.SIf | S.SWhile):
        return [s.cond]
    if isinstance(s, S.SCall):
        return list(s.args)
    if isinstance(s, S.DeclareArray):
        return [s.init] if s.init is not None else []
    return []
