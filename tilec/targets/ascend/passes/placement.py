"""Buffer placement by role, and the cube/vector split.

Assumes: checked Tile IR (shapes constant, dtypes known). Guarantees: every on-chip buffer of each kernel has a
TPosition in `kernel.attrs["ascend"].position` -- a gemm's A operand in L1 (A1), its B operand in L1 (B1), its
accumulator in L0C (CO1), everything else in UB (VECCALC; queue planning later makes some VECIN/VECOUT) -- and the
kernel's type is decided: vector-only (no gemm), cube-only (gemms whose operands come from global memory and whose
accumulator goes straight back to it), or mixed (AIC + 2 AIVs): then a gemm operand the vector cores compute stays
in UB and reaches the cube through a GM workspace, and an accumulator they compute on stays in UB and receives
each product through a GM workspace. An operand that is A of one gemm and B of another keeps one L1 position
(LoadData moves either to L0A or L0B). Refused at the user's line: fp8 (the 910B has none), operand types the cube
does not take. Atomic updates of global memory become copies in the 910B's atomic mode (AtomicCopy,
AtomicStore); alloc_var buffers stay scalars of the scalar unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....diagnostics import Reporter, error
from ....ir import tile as T
from ....ir.threads import is_thread_index, stmt_exprs
from ....ir.visit import sub_exprs, walk_stmts
from ..chip import SCALAR_GM_TYPES, STORAGE_TYPES

NAME = "ascend-placement"


@dataclass
class AscendPlan:
    kernel_type: str = "AIV_ONLY"  # AIV_ONLY | AIC_ONLY | MIX_AIC_1_2
    position: dict[str, str] = field(default_factory=dict)  # on-chip buffer -> TPosition
    queues: dict[str, int] = field(default_factory=dict)  # buffer -> queue depth (queue planning)
    # Mixed kernels: gemm operands the vector cores compute (-> GM workspace -> L1), and accumulators they
    # compute on (the cube's product goes through a GM workspace and is added on the vector core).
    workspace_operands: dict[str, str] = field(default_factory=dict)  # buffer -> A1 | B1
    vector_accumulators: set[str] = field(default_factory=set)


def _check_types(k: T.Kernel) -> None:
    """fp8 does not exist on the 910B; other types the back end does not move or compute are refused too; so are
    views of a buffer's storage (T.reshape, T.view, T.Tensor(..., A.data)), which its placement does not model."""
    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc) and s.buffer.view_of is not None and s.buffer.scope != "global":
            raise error(f"'{s.buffer.name}' is a view of the on-chip '{s.buffer.view_of.name}': the AscendC back end "
                        "supports views of global tensors (another GlobalTensor over the same memory) but not of "
                        "tiles, whose rows it pads in UB; allocate a tile of the view's shape and copy into it",
                        s.span)
    # (name, dtype, span, kind): a global tensor, an on-chip tile, or a scalar variable (alloc_var)
    named = [(p.name, p.dtype, p.span, "tensor") for p in k.params if isinstance(p, T.Buffer)]
    named += [(s.buffer.name, s.buffer.dtype, s.span, "var" if s.buffer.scope == "var" else
               "tensor" if s.buffer.scope == "global" else "tile")
              for s in walk_stmts(k.body) if isinstance(s, T.Alloc)]
    for name, dt, span, kind in named:
        if dt.name.startswith("f8"):
            raise error(f"'{name}' is {dt}: the Ascend 910B has no fp8 types (its cube unit takes f16, bf16 "
                        "and int8); declare it f16 or bf16 (where a const gives the type, -D NAME=f16 does it)", span)
        if kind == "var" and (dt.is_float and dt.name == "f32" or not dt.is_float):
            continue  # a scalar-unit variable (int64_t, float or bool in C++)
        if kind == "tensor" and dt.name in SCALAR_GM_TYPES:
            continue  # read by the scalar unit (GlobalTensor::GetValue); a copy into a tile is refused there
        if dt.name not in STORAGE_TYPES:
            what = {"var": "scalar variables", "tensor": "tensors", "tile": "tiles"}[kind]
            extra = (f" ({', '.join(SCALAR_GM_TYPES)} tensors are read element by element by the scalar unit, "
                     "not moved into tiles)" if kind == "tile" else "")
            raise error(f"'{name}' is {dt}: the AscendC back end handles {', '.join(STORAGE_TYPES)} {what}"
                        f"{extra}", span)


def _users(k: T.Kernel) -> dict[str, list[T.Stmt]]:
    """On-chip buffer -> the statements (outside gemms) that touch it."""
    from ..regions import touched

    out: dict[str, list[T.Stmt]] = {}
    for s in walk_stmts(k.body):
        if isinstance(s, T.For | T.While | T.If | T.Alloc | T.Gemm):
            continue
        for name in touched(s):
            out.setdefault(name, []).append(s)
    return out


@dataclass(eq=False)
class AtomicCopy(T.Copy):
    """A tile-wide `atomic_KIND(global box, tile)`: the copy out runs in the 910B's atomic mode (SetAtomicAdd /
    SetAtomicMax / SetAtomicMin around the DataCopyPad or Fixpipe that writes global memory)."""

    kind: str = "add"


@dataclass(eq=False)
class AtomicStore(T.Store):
    """A per-element `atomic_KIND(C[...], v)` inside a Parallel loop: stored into the loop's output tile, which is
    copied out in atomic mode."""

    kind: str = "add"


ATOMIC_TYPES = ("f16", "bf16", "f32", "i32")  # SetAtomicAdd's types that tilec's tiles hold (also i8, i16)


def _rewrite_atomics(body: list[T.Stmt], in_parallel: bool = False) -> list[T.Stmt]:
    """Atomic updates of global memory become copies (stores) in atomic mode; what the 910B cannot do is refused:
    an atomic on an on-chip buffer (its cores have no threads: write the tile op), the previous value
    (`return_prev`: the atomic mode writes, it does not return), a type SetAtomicAdd does not take."""
    out = []
    for s in body:
        if isinstance(s, T.Atomic):
            dst = s.dst.buffer
            if dst.scope != "global":
                raise error(f"atomic_{s.kind} on the on-chip buffer '{dst.name}': AscendC cores have no threads that "
                            "could race, so write it as a plain store or tile op", s.span)
            if s.result is not None:
                raise error(f"atomic_{s.kind} with return_prev=True: the 910B's atomic mode adds into global memory "
                            "as a copy writes it and returns nothing", s.span)
            if dst.dtype.name not in ATOMIC_TYPES:
                raise error(f"atomic_{s.kind} into '{dst.name}' ({dst.dtype}): the 910B's atomic mode takes "
                            f"{', '.join(ATOMIC_TYPES)} here", s.span)
            if s.per_element:
                if not in_parallel:
                    raise error(f"a per-element atomic_{s.kind} outside a Parallel loop has no AscendC lowering",
                                s.span)
                out.append(AtomicStore(s.span, dst, list(s.dst.starts), s.value, kind=s.kind, uid=s.uid))
            elif isinstance(s.value, T.Region):
                out.append(AtomicCopy(s.span, s.value, s.dst, kind=s.kind, uid=s.uid))
            else:
                raise error(f"atomic_{s.kind} of one scalar into a global box has no AscendC lowering; fill a tile "
                            "and add the tile", s.span)
            continue
        if isinstance(s, T.For):
            s.body = _rewrite_atomics(s.body, in_parallel or s.kind == "parallel")
        elif isinstance(s, T.While):
            s.body = _rewrite_atomics(s.body, in_parallel)
        elif isinstance(s, T.If):
            s.then_body = _rewrite_atomics(s.then_body, in_parallel)
            s.else_body = _rewrite_atomics(s.else_body, in_parallel)
        out.append(s)
    return out


def plan_kernel(k: T.Kernel) -> AscendPlan:
    _check_types(k)
    k.body = _rewrite_atomics(k.body)
    plan = AscendPlan()
    allocs = [s.buffer for s in walk_stmts(k.body) if isinstance(s, T.Alloc)]
    gemms = [s for s in walk_stmts(k.body) if isinstance(s, T.Gemm)]
    for b in allocs:
        if b.scope in ("shared", "fragment"):
            plan.position[b.name] = "VECCALC"
        elif b.scope == "local":
            raise error(f"'{b.name}' is a per-thread local buffer; AscendC cores have no threads: use "
                        "alloc_fragment (a tile in the vector core's UB)", b.span)
        elif b.scope == "var" and b.const_shape not in ((1,), ()):
            raise error(f"'{b.name}' is a var buffer of {b.const_shape} elements; the AscendC back end keeps "
                        "alloc_var scalars on the scalar unit (one element)", b.span)
    if not gemms:
        return plan
    users = _users(k)
    roles: dict[str, str] = {}
    for g in gemms:
        for role, region in (("A1", g.a), ("B1", g.b), ("CO1", g.c)):
            b = region.buffer
            if role != "CO1" and b.dtype.name not in ("f16", "bf16"):
                raise error(f"gemm operand '{b.name}' is {b.dtype}; the 910B cube unit takes f16 or bf16", g.span)
            if role == "CO1" and b.dtype.name != "f32":
                raise error(f"gemm accumulator '{b.name}' is {b.dtype}; L0C accumulates f32", g.span)
            have = roles.setdefault(b.name, role)
            # A1 and B1 are both L1, and LoadData moves either to L0A or L0B: an operand that is A of one gemm and B
            # of another keeps its first position. An accumulator that is also an operand is handed over instead.
            if have != role and "CO1" in (have, role):
                raise error(f"'{b.name}' is both a gemm's accumulator and another's operand; copy it into an "
                            "operand tile (T.copy) between the gemms", g.span)
    for name, role in roles.items():
        # The cube reads only what DataCopy brings from GM and writes only what Fixpipe takes to GM; a buffer the
        # vector cores also compute on is handed over through a GM workspace with cross-core flags.
        vector_work = False
        for s in users.get(name, []):
            from_gm = isinstance(s, T.Copy) and s.src.buffer.scope == "global" and s.dst.buffer.name == name
            to_gm = isinstance(s, T.Copy) and s.dst.buffer.scope == "global" and s.src.buffer.name == name
            zero = isinstance(s, T.Fill) and isinstance(s.value, T.Const) and s.value.value == 0
            ok = from_gm if role != "CO1" else (to_gm or zero)
            vector_work |= not ok
        buf = next(b for b in allocs if b.name == name)
        if role != "CO1" and (vector_work or buf.scope != "shared"):
            plan.workspace_operands[name] = role
        elif role == "CO1" and vector_work:
            plan.vector_accumulators.add(name)
        else:
            plan.position[name] = role
    vector = [b for b in allocs if plan.position.get(b.name) == "VECCALC"]
    plan.kernel_type = "MIX_AIC_1_2" if vector else "AIC_ONLY"
    return plan


def run(module: T.Module, rep: Reporter, target) -> T.Module:
    for k in module.kernels:
        _check_no_thread_index(k)
        k.attrs["ascend"] = plan_kernel(k)
    return module


def _check_no_thread_index(k: T.Kernel) -> None:
    """AscendC has no SIMT threads: per-thread code (get_thread_binding) has nothing to run on."""
    for s in walk_stmts(k.body):
        for e in stmt_exprs(s):
            if any(is_thread_index(x) for x in sub_exprs(e)):
                raise error("the AscendC back end has no SIMT threads, so the thread index (get_thread_binding, "
                            "thread_binding) has no meaning there: write the per-thread work as a Parallel loop over "
                            "the tile, and reduce with reduce_*", s.span)
