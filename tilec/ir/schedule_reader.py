"""The schedule block of a printed Tile IR kernel (`schedule:`, KernelSchedule.__str__) read back: gemms and Pipelined
loops by their labels (the k-th label of each kind names the k-th such statement of the kernel, which takes the
label's id), layouts from their printed names. Part of tilec/ir/reader.py."""

from __future__ import annotations

import re

from . import tile as T
from .text_lexer import Line, ReadError


def _copy_into(copies: list[T.Copy], name: str, line: Line) -> T.Copy:
    for c in copies:
        if c.dst.buffer.name == name:
            return c
    raise ReadError(f"the schedule names a copy into '{name}', which the loop does not have", line.number,
                    line.indent + 1)


def read_schedule(k: T.Kernel, lines: list[Line]):
    from .layout import BlockRow, MfmaTiled, MmaTiled, Projected, SharedLayout, WgmmaTiled
    from .schedule import GemmSchedule, KernelSchedule, LoopSchedule
    from .visit import walk_stmts

    sched = KernelSchedule()
    stmts = list(walk_stmts(k.body))
    gemms = [s for s in stmts if isinstance(s, T.Gemm)]
    loops = [s for s in stmts if isinstance(s, T.For) and s.kind == "pipelined"]
    allocs = {s.buffer.name: s.buffer for s in stmts if isinstance(s, T.Alloc)}
    annotated = {s.buffer.name: s.index_map for s in stmts if isinstance(s, T.AnnotateLayout) and s.index_map}
    used = {s.uid for s in stmts} | {b.uid for b in allocs.values()}

    def relabel(s: T.Stmt, label: str) -> None:
        m = re.match(r"#(\d+)", label)
        if m is None:
            return
        uid = int(m.group(1))
        if uid != s.uid:
            clash = next((x for x in [*stmts, *allocs.values()] if x.uid == uid), None)
            if clash is not None:
                clash.uid = max(used) + 1
                used.add(clash.uid)
            s.uid = uid
            used.add(uid)

    def fragment(text: str, line: Line):
        m = re.fullmatch(r"(rows|cols)_of\((.*)\)", text)
        if m:
            return Projected(fragment(m.group(2), line), 0 if m.group(1) == "rows" else 1)
        m = re.fullmatch(r"mma_m16n8\[(\d+)x(\d+), warps (\d+)x(\d+)\]", text)
        if m:
            return MmaTiled(*map(int, m.groups()))
        m = re.fullmatch(r"wgmma_m64n\d+\[(\d+)x(\d+), warpgroups (\d+)x(\d+)\]", text)
        if m:
            return WgmmaTiled(*map(int, m.groups()))
        m = re.fullmatch(r"mfma_16x16(T?)\[(\d+)x(\d+), waves (\d+)x(\d+)\]", text)
        if m:
            return MfmaTiled(*map(int, m.groups()[1:]), transposed=m.group(1) == "T")
        m = re.fullmatch(r"block_row\[([\dx]+), (\d+) threads/row, vec (\d+)\]", text)
        if m:
            dims = tuple(int(d) for d in m.group(1).split("x"))
            rows = 1
            for d in dims[:-1]:
                rows *= d
            return BlockRow(rows, dims[-1], k.threads, int(m.group(2)), int(m.group(3)), dims)
        raise ReadError(f"unknown fragment layout '{text}'", line.number, line.indent + 1)

    def shared(name: str, text: str, line: Line) -> SharedLayout:
        m = re.fullmatch(r"(custom|linear|swizzled|tma_swizzled\d+)( k-major)?( interleaved)?\[([\dx]+)\]", text)
        b = allocs.get(name)
        if m is None or b is None:
            raise ReadError(f"unknown shared layout '{text}' (of '{name}')", line.number, line.indent + 1)
        shape = tuple(int(d) for d in m.group(4).split("x"))
        kind = m.group(1)
        return SharedLayout(shape, b.dtype.bytes, swizzle=kind != "linear" and kind != "custom",
                            panel=kind.startswith("tma_"), transposed=bool(m.group(2)),
                            interleave=bool(m.group(3)), index_map=annotated.get(name) if kind == "custom" else None)

    for line in lines:
        text = line.text
        m = re.fullmatch(r"gemm (#\d+(?: \(line \d+\))?): (.*)", text)
        if m:
            if not gemms:
                raise ReadError("the schedule names more gemms than the kernel has", line.number, line.indent + 1)
            g = gemms.pop(0)
            relabel(g, m.group(1))
            d = re.fullmatch(r"(\w+) m(\d+)n(\d+)k(\d+)(?:, (?:warps|warpgroups|waves) (\d+)x(\d+))?", m.group(2))
            if d:
                warps = (int(d.group(5)), int(d.group(6))) if d.group(5) else None
                gs = GemmSchedule(d.group(1), (int(d.group(2)), int(d.group(3)), int(d.group(4))), warps)
            else:
                gs = GemmSchedule(m.group(2).split(" ")[0])
            sched.gemms[g.uid] = gs
            sched.labels[g.uid] = m.group(1)
            continue
        m = re.fullmatch(r"loop (#\d+ \w+(?: \(line \d+\))?): (\d+) stage\(s\), ([\w.]+)(, warp-specialized)?"
                         r"(, softmax overlapped with the gemms)?, prefetched: ([^,]+(?:, [^,:]+)*?)"
                         r"(?:, preloaded by TMA: (.+?))?(?:, multicast: (.+))?", text)
        if m:
            if not loops:
                raise ReadError("the schedule names more Pipelined loops than the kernel has", line.number,
                                line.indent + 1)
            lp = loops.pop(0)
            relabel(lp, m.group(1))
            names = [] if m.group(6) == "none" else m.group(6).split(", ")
            inside = [s for s in walk_stmts(lp.body) if isinstance(s, T.Copy)]
            producers = [_copy_into(inside, n, line) for n in names]
            pre = m.group(7).split(", ") if m.group(7) else []
            preloads = [_copy_into([s for s in stmts if isinstance(s, T.Copy)], n, line) for n in pre]
            mc = m.group(8).split(", ") if m.group(8) else []
            multicast = [_copy_into(producers, n, line) for n in mc]
            sched.loops[lp.uid] = LoopSchedule(int(m.group(2)), m.group(3), producers, bool(m.group(4)),
                                               bool(m.group(5)), preloads, multicast)
            sched.labels[lp.uid] = m.group(1)
            continue
        m = re.fullmatch(r"persistent: (yes|no)(, ping-pong.*)?", text)
        if m:
            sched.persistent, sched.pingpong = m.group(1) == "yes", bool(m.group(2))
            continue
        m = re.fullmatch(r"cluster: (\d+)x(\d+) blocks .*", text)
        if m:
            sched.cluster = (int(m.group(1)), int(m.group(2)))
            continue
        m = re.fullmatch(r"rasterization: grouped, panel (\d+)", text)
        if m:
            sched.rasterization = int(m.group(1))
            first = k.body[:2]
            if len(first) == 2 and all(isinstance(s, T.Assign) for s in first):
                sched.raster_assigns = (first[1], first[0])
            continue
        m = re.fullmatch(r"(fragment|shared) (\w+): (.*)", text)
        if m:
            b = allocs.get(m.group(2))
            if b is None:
                raise ReadError(f"the schedule names '{m.group(2)}', which the kernel does not allocate",
                                line.number, line.indent + 1)
            if m.group(1) == "fragment":
                sched.fragments[b.uid] = fragment(m.group(3), line)
            else:
                sched.shared[b.uid] = shared(b.name, m.group(3), line)
            sched.labels[b.uid] = b.name
            continue
        raise ReadError(f"unknown schedule line '{text}'", line.number, line.indent + 1)
    return sched
