"""Deterministic text form of Tile IR (`tilec --emit-ir`).

The format is meant to be read and to be matched by `# CHECK:` lines: one statement a line,
indentation for nesting, regions as `buf[start +: extent, ...]`, non-default literal types as a
`:dtype` suffix.
"""

from __future__ import annotations

import dataclasses

from . import dtypes
from . import tile as T

_PREC = {
    "or": 1, "and": 2, "cmp": 4, "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10, "unary": 11,
}


def expr_str(e: T.Expr) -> str:
    return _expr(e, 0)


def _literal(e: T.Const) -> str:
    v = e.value
    if e.dtype.is_bool:
        return "true" if v else "false"
    if e.dtype.is_float:
        f = float(v)
        text = repr(f) if f == f and f not in (float("inf"), float("-inf")) else str(f)
        return text if e.dtype == dtypes.F32 else f"{text}:{e.dtype}"
    return str(int(v)) if e.dtype == dtypes.I32 else f"{int(v)}:{e.dtype}"


def _expr(e: T.Expr, parent: int) -> str:
    if isinstance(e, T.Const):
        return _literal(e)
    if isinstance(e, T.Var):
        return e.name
    if isinstance(e, T.Binary):
        p = _PREC[e.op]
        text = f"{_expr(e.a, p)} {e.op} {_expr(e.b, p + 1)}"
        return f"({text})" if p < parent else text
    if isinstance(e, T.Compare):
        p = _PREC["cmp"]
        text = f"{_expr(e.a, p + 1)} {e.op} {_expr(e.b, p + 1)}"
        return f"({text})" if p < parent else text
    if isinstance(e, T.Unary):
        p = _PREC["unary"]
        op = "not " if e.op == "not" else e.op
        return f"{op}{_expr(e.a, p)}"
    if isinstance(e, T.Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, T.Call) and e.func == "reinterpret":
        return f"reinterpret<{e.dtype}>({expr_str(e.args[0])})"
    if isinstance(e, T.Call):
        return f"{e.func}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, T.Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, T.Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    raise TypeError(f"cannot print {type(e).__name__}")


def region_str(r: T.Region) -> str:
    parts = [f"{expr_str(s)} +: {expr_str(x)}" for s, x in zip(r.starts, r.extents, strict=True)]
    return f"{r.buffer.name}[{', '.join(parts)}]"


def _operand(v) -> str:
    return region_str(v) if isinstance(v, T.Region) else expr_str(v)


def buffer_type(b: T.Buffer) -> str:
    return f"{b.dtype}[{', '.join(expr_str(d) for d in b.shape)}]"


def generic_op_str(s: T.Stmt) -> str:
    """A tile op in the generic form its class declares (T.Stmt.keyword): `KEYWORD READS -> WRITES [ATTRS]`."""
    cls = type(s)
    names = T.operand_fields(cls)
    reads = [_operand(getattr(s, f)) for f in names if f in cls.read_fields]
    writes = [_operand(getattr(s, f)) for f in names if f in cls.written_fields]
    attrs = []
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        if f.name in ("span", "uid") or f.name in names or v is False:
            continue
        if v is True:
            attrs.append(f.name)
        elif isinstance(v, int | str):
            attrs.append(f"{f.name}={v}")
        else:
            raise TypeError(f"cannot print the field '{f.name}' of {cls.__name__} in the generic form")
    text = f"{cls.keyword} {', '.join(reads)}" + (f" -> {', '.join(writes)}" if writes else "")
    return text + (f" [{', '.join(attrs)}]" if attrs else "")


def stmt_lines(s: T.Stmt, indent: int) -> list[str]:
    pad = "  " * indent
    if isinstance(s, T.Alloc):
        b = s.buffer
        if b.view_of is not None:
            return [f"{pad}{b.name} = view {b.view_of.name} as {buffer_type(b)}"]
        init = f" = {expr_str(s.init)}" if s.init is not None else ""
        return [f"{pad}{b.name} = alloc_{b.scope} {buffer_type(b)}{init}"]
    if isinstance(s, T.Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}"]
    if isinstance(s, T.Assign):
        return [f"{pad}{s.var.name}: {s.var.dtype} = {expr_str(s.value)}"]
    if isinstance(s, T.For):
        names = ", ".join(v.name for v in s.vars)
        args = [expr_str(x) for x in s.extents]
        if s.begin is not None:
            args.insert(0, f"start={expr_str(s.begin)}")
        if s.step is not None:
            args.append(f"step={expr_str(s.step)}")
        if s.kind == "pipelined":
            args.append(f"num_stages={s.num_stages}")
        head = f"{pad}for {names} in {s.kind}({', '.join(args)}):"
        return [head] + _body(s.body, indent + 1)
    if isinstance(s, T.If):
        lines = [f"{pad}if {expr_str(s.cond)}:"] + _body(s.then_body, indent + 1)
        if s.else_body:
            lines += [f"{pad}else:"] + _body(s.else_body, indent + 1)
        return lines
    if isinstance(s, T.While):
        return [f"{pad}while {expr_str(s.cond)}:"] + _body(s.body, indent + 1)
    if type(s).keyword is not None:
        return [pad + generic_op_str(s)]
    if isinstance(s, T.Copy):
        return [f"{pad}copy {region_str(s.src)} -> {region_str(s.dst)}"]
    if isinstance(s, T.Gemm):
        flags = []
        if s.transpose_a:
            flags.append("transpose_A")
        if s.transpose_b:
            flags.append("transpose_B")
        if s.clear_accum:
            flags.append("clear_accum")
        flags.append(f"policy={s.policy}")
        return [f"{pad}gemm {region_str(s.a)}, {region_str(s.b)} -> {region_str(s.c)} [{', '.join(flags)}]"]
    if isinstance(s, T.Reduce):
        clear = "clear" if s.clear else "accumulate"
        return [f"{pad}reduce_{s.kind} {region_str(s.src)} -> {region_str(s.dst)} [dim={s.dim}, {clear}]"]
    if isinstance(s, T.Fill):
        return [f"{pad}fill {region_str(s.dst)}, {expr_str(s.value)}"]
    if isinstance(s, T.Atomic):
        each = " [per element]" if s.per_element else ""
        prev = f" -> {s.result.name}" if s.result is not None else ""
        return [f"{pad}atomic_{s.kind} {region_str(s.dst)}, {_operand(s.value)}{prev}{each}"]
    if isinstance(s, T.Print):
        where = ([f"block={s.block}"] if s.block is not None else []) + (
            [f"thread={s.thread}"] if s.thread is not None else [])
        return [f"{pad}print {s.label!r}, {_operand(s.value)}" + (f" [{', '.join(where)}]" if where else "")]
    if isinstance(s, T.AnnotateLayout) and s.index_map is not None:
        m = s.index_map
        outs = ", ".join(expr_str(o) for o in m.outputs)
        return [f"{pad}annotate_layout {s.buffer.name}: custom ({', '.join(v.name for v in m.vars)}) -> [{outs}]"]
    if isinstance(s, T.AnnotateLayout):
        return [f"{pad}annotate_layout {s.buffer.name}: {s.layout}"]
    if isinstance(s, T.UseSwizzle):
        return [f"{pad}use_swizzle panel_size={s.panel_size}, enable={str(s.enable).lower()}"]
    if isinstance(s, T.NamedBarrier):
        return [f"{pad}named_barrier id={s.barrier_id}, threads={s.threads}"]
    if isinstance(s, T.FenceGlobal):
        return [f"{pad}fence_global"]
    raise TypeError(f"cannot print {type(s).__name__}")


def _body(body: list[T.Stmt], indent: int) -> list[str]:
    if not body:
        return ["  " * indent + "pass"]
    out: list[str] = []
    for s in body:
        out += stmt_lines(s, indent)
    return out


def _params_str(params: list[T.Buffer | T.Var]) -> str:
    out = []
    for p in params:
        if isinstance(p, T.Buffer):
            out.append(f"{p.name}: {'out ' if p.is_output else ''}{buffer_type(p)}")
        else:
            out.append(f"{p.name}: {p.dtype}")
    return ", ".join(out)


def kernel_str(k: T.Kernel) -> str:
    grid = ", ".join(expr_str(g) for g in k.grid)
    blocks = ", ".join(v.name for v in k.block_vars)
    lines = [f"kernel {k.name}({_params_str(k.params)})"]
    if k.size_vars:
        lines.append(f"  sizes {', '.join(v.name for v in k.size_vars)}")
    lines.append(f"  grid ({grid}) threads {k.threads} as ({blocks})")
    for key in sorted(k.attrs):
        if key == "launch_checks":  # conditions on the sizes tested before each launch (views)
            lines += [f"  check {c['lhs']} {c['op']} {c['rhs']}" for c in k.attrs[key]]
            continue
        lines.append(f"  attr {key} = {_attr_text(k.attrs[key])}")
    if k.request is not None:  # the source's schedule keywords (tilec.ir.schedule.KernelKeywords), where not defaults
        lines += [f"  keyword {line}" for line in k.request.keywords.lines()]
    if k.schedule is not None:
        lines.append(f"  schedule:{k.schedule}")
    lines.append("body:")
    lines += _body(k.body, 1)
    return "\n".join(lines)


def launches_str(seq: T.Launches) -> str:
    """A multi-launch kernel function: its signature, scratch tensors and launches in order."""
    lines = [f"launches {seq.name}({_params_str(seq.params)})"]
    lines += [f"  scratch {b.name}: {buffer_type(b)}{' zeroed' if b.zeroed else ''}" for b in seq.scratch]
    lines += [f"  launch {st.kernel}({', '.join(st.args)})" for st in seq.stages]
    return "\n".join(lines)


def module_str(m: T.Module) -> str:
    return "\n\n".join([*(kernel_str(k) for k in m.kernels), *(launches_str(s) for s in m.launches)]) + "\n"


def _attr_text(value) -> str:
    """A kernel attribute as printed: a set of names in sorted order (a frozenset's own order follows the process's
    string hashing, and the same compile must print the same text); anything else as str() gives it."""
    if type(value) is frozenset and value and all(isinstance(x, str) for x in value):
        return "frozenset({" + ", ".join(repr(x) for x in sorted(value)) + "})"
    return str(value)
