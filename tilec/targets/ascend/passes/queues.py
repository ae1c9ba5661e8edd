"""Queue planning: which on-chip buffers become TQue buffers (whose EnQue/DeQue/AllocTensor/FreeTensor events
order the pipes) and how deep each queue is.

Assumes: placement has run. Guarantees: `plan.queues[name] = depth` and `plan.queue_home[name] = the
statement lists that use it` (an identity set) for every buffer that each such list fills from global memory and
then only reads (VECIN, or A1/B1 for the cube), or that one list computes and finally stores to global memory
(VECOUT, or CO1 for the accumulator), touching it nowhere else.
A queue in a `Pipelined(num_stages=s)` loop is s buffers deep (the copy of iteration k+1 overlaps the compute of
iteration k); one in the body of a tile is 2 deep (tiles of consecutive iterations of the core's tile loop
overlap). Every other UB buffer stays a TBuf, ordered by sync insertion. Cube operands must be queues.
"""

from __future__ import annotations

from ....diagnostics import Reporter, error
from ....identity import IdentityDict, IdentitySet
from ....ir import tile as T
from ..regions import reads_writes, touched

NAME = "ascend-queues"


def _lists(body: list[T.Stmt], depth: int):
    """Every statement list with the queue depth its copies get."""
    yield body, depth
    for s in body:
        if isinstance(s, T.For):
            yield from _lists(s.body, s.num_stages if s.kind == "pipelined" and s.num_stages > 0 else 2)
        elif isinstance(s, T.While):
            yield from _lists(s.body, 2)
        elif isinstance(s, T.If):
            yield from _lists(s.then_body, depth)
            yield from _lists(s.else_body, depth)


def plan_queues(k: T.Kernel) -> None:
    plan = k.attrs["ascend"]
    plan.queue_home = {}
    homes: dict[str, IdentityDict] = {}  # buffer -> {list: depth} of the statement lists that use it as a queue
    refused: set[str] = set()
    for body, depth in _lists(k.body, 2):
        for i, s in enumerate(body):
            if not isinstance(s, T.Copy):
                continue
            if s.src.buffer.scope == "global" and s.dst.buffer.scope != "global":
                buf, direction = s.dst.buffer, "in"
            elif s.dst.buffer.scope == "global" and s.src.buffer.scope != "global":
                buf, direction = s.src.buffer, "out"
            else:
                continue
            name = buf.name
            if s.src.buffer.dtype != s.dst.buffer.dtype and plan.position[name] != "CO1":
                # a converting copy stages through a TBuf (Fixpipe converts on its own)
                refused.add(name)
                continue
            inside = [j for j, x in enumerate(body) if name in touched(x)]
            if direction == "in":
                ok = inside[0] == i and not any(name in reads_writes(body[j])[1] for j in inside if j != i)
            else:
                ok = inside[-1] == i and not homes.get(name)
            if not ok or (name in plan.queues and plan.queues[name] != direction):
                refused.add(name)
                continue
            plan.queues[name] = direction
            homes.setdefault(name, IdentityDict())[body] = depth
    for name in list(plan.queues):
        lists = homes.get(name, IdentityDict())
        if name in refused or _touches_outside_all(k.body, IdentitySet(lists), name):
            del plan.queues[name]
            continue
        pos = plan.position[name]
        if pos == "VECCALC":
            plan.position[name] = "VECIN" if plan.queues[name] == "in" else "VECOUT"
        plan.queues[name] = 1 if pos == "CO1" else max(lists.values())
        plan.queue_home[name] = IdentitySet(lists)
    for name, pos in plan.position.items():
        if pos in ("A1", "B1", "CO1") and name not in plan.queues:
            raise error(f"'{name}' feeds the cube unit but is not filled from global memory in the loop that uses "
                        "it (or its accumulator is not stored by the loop's end); the AscendC back end needs that "
                        "shape to hand it between pipes through queues", k.span)


def _touches_outside_all(body: list[T.Stmt], homes: IdentitySet, name: str, inside: bool = False) -> bool:
    """Whether a statement in none of the lists `homes` touches `name`."""
    inside = inside or body in homes
    for s in body:
        if isinstance(s, T.For | T.While):
            if _touches_outside_all(s.body, homes, name, inside):
                return True
        elif isinstance(s, T.If):
            if _touches_outside_all(s.then_body, homes, name, inside) or \
                    _touches_outside_all(s.else_body, homes, name, inside):
                return True
        elif not inside and name in touched(s):
            return True
    return False


def run(module: T.Module, rep: Reporter, target) -> T.Module:
    for k in module.kernels:
        plan_queues(k)
    return module
