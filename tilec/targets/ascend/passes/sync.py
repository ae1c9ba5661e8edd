"""Sync insertion: SetFlag/WaitFlag and PipeBarrier from the buffers each call reads and writes.

Assumes: a lowered KernelProgram whose calls carry their pipe and read/write sets; queue operations carry the
buffers their events order (`ordered`). Guarantees: before every call, each earlier access to a buffer it touches
by another pipe (a write before a read or write, a read before a write) is ordered by a
`SetFlag/WaitFlag<HardEvent::SRC_DST>` pair, and each earlier vector write it depends on by a
`PipeBarrier<PIPE_V>` (the vector pipe overlaps consecutive instructions). One flag orders the destination pipe
after *every* earlier operation of the source pipe, so it settles all such pending accesses at once. Loops are
analysed with the state their back edge carries; branches merge conservatively. Queues order their own buffers,
so a vector kernel made of queues gets few or no flags.
"""

from __future__ import annotations

import copy

from ....diagnostics import Reporter
from ..program import Block, Call, KernelProgram

NAME = "ascend-sync"

EVENTS = {"MTE2_V", "V_MTE2", "V_MTE3", "MTE3_V", "MTE2_MTE3", "MTE3_MTE2", "S_V", "V_S", "S_MTE2", "MTE2_S",
          "S_MTE3", "MTE3_S", "MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1", "M_FIX", "FIX_M", "FIX_MTE2",
          "MTE2_FIX", "MTE3_MTE1", "FIX_S", "S_FIX"}

# buffer -> {"w": {pipe: pipes ordered after its write}, "r": {pipe: pipes ordered after its read}}
State = dict[str, dict[str, dict[str, set[str]]]]


def _flag(src: str, dst: str) -> Call:
    event = f"{src}_{dst}"
    if event not in EVENTS:
        return Call("PipeBarrier<PIPE_ALL>();")
    return Call(f"{{ event_t ev = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::{event})); "
                f"SetFlag<HardEvent::{event}>(ev); WaitFlag<HardEvent::{event}>(ev); }}")


def _settle(state: State, src: str, dst: str) -> None:
    """After a src->dst flag (or barrier, src == dst), dst is ordered after every earlier src access."""
    for entry in state.values():
        for kind in ("w", "r"):
            if src in entry[kind]:
                entry[kind][src].add(dst)


def _syncs_for(call: Call, state: State) -> list[Call]:
    out: list[Call] = []
    pipe = call.pipe
    for name in list(call.reads) + list(call.writes):
        entry = state.get(name)
        if entry is None:
            continue
        pending = [p for p, ok in entry["w"].items() if pipe not in ok]
        if name in call.writes:
            pending += [p for p, ok in entry["r"].items() if p != pipe and pipe not in ok]
        for src in sorted(set(pending)):
            if src == pipe:
                if pipe == "V":
                    out.append(Call("PipeBarrier<PIPE_V>();"))
                _settle(state, pipe, pipe)
            else:
                out.append(_flag(src, pipe))
                _settle(state, src, pipe)
    return out


def _apply(call: Call, state: State) -> None:
    pipe = call.pipe
    for name in call.reads:
        entry = state.setdefault(name, {"w": {}, "r": {}})
        entry["r"][pipe] = {pipe}
    for name in call.writes:
        state[name] = {"w": {pipe: set() if pipe == "V" else {pipe}}, "r": {}}


def _merge(a: State, b: State) -> State:
    out: State = {}
    for name in set(a) | set(b):
        ea, eb = a.get(name, {"w": {}, "r": {}}), b.get(name, {"w": {}, "r": {}})
        merged = {}
        for kind in ("w", "r"):
            pipes = set(ea[kind]) | set(eb[kind])
            merged[kind] = {p: (ea[kind].get(p, set(_ALL)) & eb[kind].get(p, set(_ALL))) for p in pipes}
        out[name] = merged
    return out


_ALL = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")


def insert(stmts: list, state: State) -> tuple[list, State]:
    out = []
    for s in stmts:
        if isinstance(s, Call):
            # A queue event orders its buffer's last accesses before the other pipes that use tiles, but not before the
            # scalar unit (LocalTensor::GetValue after DeQue still needs an MTE2_S flag) nor before the same pipe (a
            # zero-fill Duplicate, then a copy skipped because the box is empty, then a vector read: PIPE_V barrier).
            for name in s.ordered:
                entry = state.get(name)
                for kind in entry or {}:
                    for p in entry[kind]:
                        entry[kind][p] |= set(_ALL) - {"S", p}
            if s.pipe:
                out.extend(_syncs_for(s, state))
                _apply(s, state)
            out.append(s)
        elif s.loop:
            _, after_once = insert(s.body, copy.deepcopy(state))
            entry = _merge(state, after_once)
            body, after = insert(s.body, entry)
            out.append(Block(s.head, body, None, True))
            state = _merge(state, after)
        else:
            then, st_then = insert(s.body, copy.deepcopy(state))
            other, st_else = insert(s.orelse or [], copy.deepcopy(state))
            out.append(Block(s.head, then, other if s.orelse else None))
            state = _merge(st_then, st_else)
    return out, state


def run_program(prog: KernelProgram) -> KernelProgram:
    for side in prog.sides:  # each kind of core orders its own pipes
        setup, state = insert(side.setup, {})
        tile_loop = Block("tiles", side.body, loop=True)
        [looped], _ = insert([tile_loop], state)
        side.setup = setup
        side.body = looped.body
    return prog


def run(programs: list[KernelProgram], rep: Reporter, target) -> list[KernelProgram]:
    programs[:] = [run_program(p) for p in programs]  # in place: the list also carries the launch sequences
    return programs
