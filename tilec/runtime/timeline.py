"""Reading a profiled kernel's record buffer: per-warp timelines, a Chrome/Perfetto trace, a text summary.

numpy and the standard library only (it runs on the GPU machine, and its tests feed it synthetic buffers on a
CPU). The buffer's layout is fixed by tilec/targets/cuda/include/tilec_profile.h and described by the kernel's
manifest entry `profile` (tilec/ir/profile.py): per warp slot, a header of `header_words` 64-bit words
(%globaltimer and clock64 at kernel entry, %smid, %globaltimer at kernel exit) and `capacity` marks, each
`tag << 48 | clock64 (low 48 bits)`, tag = 2 * phase + 1 at a phase's begin, + 2 at its end, 0 for an unused
slot. Warp slots are ordered by linear block index, then warp.

Clock cycles become nanoseconds with the SM clock measured by the record itself (cycles over %globaltimer
nanoseconds between each warp's entry and exit, summed over the warps) unless the caller knows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

WARPGROUP = 4  # warps per warpgroup: the summary's columns


@dataclass
class WarpTimeline:
    block: int  # linear block index
    warp: int
    sm: int
    start_ns: float  # %globaltimer at kernel entry, from the timeline's origin
    spans: list[tuple[str, float, float, int]] = field(default_factory=list)  # (phase, begin, end, depth), ns
    exclusive: dict[str, float] = field(default_factory=dict)  # ns in each phase, innermost phase only
    full: bool = False  # the slot filled up: later marks were dropped

    @property
    def duration_ns(self) -> float:
        kernel = [b - a for name, a, b, depth in self.spans if name == "kernel" and depth == 0]
        return kernel[0] if kernel else (max((s[2] for s in self.spans), default=self.start_ns) - self.start_ns)


@dataclass
class Timeline:
    kernel: str
    grid: tuple[int, int, int]
    threads: int
    blocks_recorded: int
    warps: list[WarpTimeline]
    phases: list[str]
    waits: list[str]
    clock_ghz: float
    clock_source: str  # "measured" (cycles over %globaltimer) or "given"
    origin_ns: int = 0  # the %globaltimer value (ns since an epoch) every time here is counted from

    # ------------------------------------------------------------ aggregates
    def shares(self) -> dict[int, dict[str, float]]:
        """{warpgroup: {phase: fraction of the warpgroup's warp-time}}; the kernel phase's own time (outside
        every other phase) is reported as "other", the wait phases' sum as "stall"."""
        out: dict[int, dict[str, float]] = {}
        groups: dict[int, list[WarpTimeline]] = {}
        for w in self.warps:
            groups.setdefault(w.warp // WARPGROUP, []).append(w)
        for g, ws in sorted(groups.items()):
            total = sum(w.duration_ns for w in ws)
            if total <= 0:
                continue
            share = {p: sum(w.exclusive.get(p, 0.0) for w in ws) / total for p in self.phases}
            share["other"] = share.pop("kernel", 0.0)
            share["stall"] = sum(share.get(p, 0.0) for p in self.waits)
            out[g] = share
        return out

    def warpgroup_time_us(self) -> dict[int, float]:
        """Mean kernel time of a warp in each warpgroup, in microseconds."""
        groups: dict[int, list[float]] = {}
        for w in self.warps:
            groups.setdefault(w.warp // WARPGROUP, []).append(w.duration_ns)
        return {g: sum(v) / len(v) / 1e3 for g, v in sorted(groups.items())}

    def summary(self) -> str:
        """A text table: the time share of each phase per warpgroup, and the stall fraction."""
        nblocks = self.grid[0] * self.grid[1] * self.grid[2]
        warps = -(-self.threads // 32)
        dropped = sum(w.full for w in self.warps)
        lines = [f"{self.kernel}: grid {self.grid[0]}x{self.grid[1]}x{self.grid[2]}, {self.threads} threads; "
                 f"{self.blocks_recorded} of {nblocks} blocks recorded ({warps} warps each), SM clock "
                 f"{self.clock_ghz:.3f} GHz ({self.clock_source})"
                 + (f"; {dropped} warps ran out of record slots (raise --capacity)" if dropped else "")]
        shares, times = self.shares(), self.warpgroup_time_us()
        if not shares:
            return "\n".join([*lines, "no warp recorded anything"])
        cols = list(shares)
        rows = [p for p in [*self.phases[1:], "other"] if any(shares[g].get(p, 0.0) >= 0.0005 for g in cols)]
        width = max(len(r) for r in [*rows, "time per warp"]) + 2
        head = "".join(f"{'wg' + str(g):>10}" for g in cols)
        lines.append(f"{'phase':<{width}}{head}")
        lines.append(f"{'time per warp':<{width}}" + "".join(f"{times[g]:>8.1f}us" for g in cols))
        for r in rows:
            mark = " *" if r in self.waits else ""
            lines.append(f"{r + mark:<{width}}" + "".join(f"{100 * shares[g].get(r, 0.0):>9.1f}%" for g in cols))
        lines.append(f"{'stall (*)':<{width}}" + "".join(f"{100 * shares[g]['stall']:>9.1f}%" for g in cols))
        return "\n".join(lines)

    # ------------------------------------------------------------ Chrome / Perfetto trace
    def chrome_trace(self, max_blocks: int = 16, pid_base: int = 0, label: str = "") -> dict:
        """A Chrome trace (JSON object format; Perfetto and chrome://tracing open it): a process per block
        (its SM in the name), a thread per warp, a complete event per phase span; the first `max_blocks`
        blocks only (a whole grid's marks would make a file of hundreds of megabytes)."""
        keep = sorted({w.block for w in self.warps})[:max_blocks]
        chosen = [w for w in self.warps if w.block in set(keep)]
        t0 = min((w.start_ns for w in chosen), default=0.0)
        events: list[dict] = []
        prefix = f"{label}: " if label else ""
        for b in keep:
            sm = next(w.sm for w in chosen if w.block == b)
            events.append({"ph": "M", "name": "process_name", "pid": pid_base + b,
                           "args": {"name": f"{prefix}{self.kernel} block {self._block_xyz(b)} (SM {sm})"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid_base + b, "args": {"sort_index": b}})
        for w in chosen:
            events.append({"ph": "M", "name": "thread_name", "pid": pid_base + w.block, "tid": w.warp,
                           "args": {"name": f"warp {w.warp} (wg{w.warp // WARPGROUP})"}})
            for name, a, b, _depth in w.spans:
                events.append({"ph": "X", "name": name, "cat": "wait" if name in self.waits else "work",
                               "pid": pid_base + w.block, "tid": w.warp, "ts": round((a - t0) / 1e3, 4),
                               "dur": round((b - a) / 1e3, 4)})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"kernel": self.kernel, "clock_ghz": self.clock_ghz, "summary": self.summary()}}

    def _block_xyz(self, linear: int) -> str:
        gx, gy = self.grid[0], self.grid[1]
        return f"({linear % gx}, {linear // gx % gy}, {linear // (gx * gy)})"


def decode(words: np.ndarray, profile: dict, *, kernel: str, grid: tuple[int, int, int], threads: int,
           capacity: int, blocks: int, clock_ghz: float | None = None) -> Timeline:
    """The timelines in a record buffer of `blocks` blocks (uint64 words, as the device wrote them)."""
    header = int(profile["header_words"])
    phases, waits = list(profile["phases"]), list(profile["waits"])
    bits = int(profile.get("clock_bits", 48))
    mask = (1 << bits) - 1
    warps = -(-threads // 32)
    slot = header + capacity
    words = np.asarray(words, dtype=np.uint64)[:blocks * warps * slot].reshape(blocks * warps, slot)
    raw = []  # (block, warp, sm, gt0, gt_end, cycles since entry per mark, tags)
    cycles_sum = ns_sum = 0.0
    for i, row in enumerate(words):
        if row[0] == 0:  # this warp never ran its entry mark (or its block was not recorded)
            continue
        gt0, clk0, sm, gt_end = (int(v) for v in row[:4])
        marks = row[header:]
        used = int(np.argmin(marks != 0)) if not marks.all() else capacity
        marks = marks[:used]
        tags = (marks >> np.uint64(bits)).astype(np.int64)
        cyc = ((marks & np.uint64(mask)).astype(np.int64) - (clk0 & mask)) % (1 << bits)
        raw.append((i // warps, i % warps, sm, gt0, gt_end, cyc, tags, used == capacity))
        ends = np.nonzero(tags == 2)[0]  # the kernel phase's end: the exit timestamp's cycle count
        if gt_end > gt0 and len(ends):
            cycles_sum += float(cyc[ends[-1]])
            ns_sum += gt_end - gt0
    # %globaltimer counts nanoseconds since an epoch (about 2^60): as a float its last 8 bits would be lost, so
    # times are kept from the earliest entry
    origin = min((r[3] for r in raw), default=0)
    source = "given"
    if clock_ghz is None:
        measured = cycles_sum / ns_sum if ns_sum > 0 else 0.0
        clock_ghz, source = (measured, "measured") if measured > 0 else (1.0, "unknown: times are in cycles")
    out = []
    for block, warp, sm, gt0, _end, cyc, tags, full in raw:
        w = WarpTimeline(block, warp, sm, float(gt0 - origin), full=full)
        times = (gt0 - origin) + cyc / clock_ghz
        stack: list[tuple[str, float]] = []
        last = None
        for tag, t in zip(tags.tolist(), times.tolist(), strict=True):
            if last is not None and stack:  # the time since the last mark belongs to the innermost open phase
                top = stack[-1][0]
                w.exclusive[top] = w.exclusive.get(top, 0.0) + (t - last)
            last = t
            phase = phases[(tag - 1) // 2] if 0 < tag <= 2 * len(phases) else f"phase{(tag - 1) // 2}"
            if tag % 2 == 1:
                stack.append((phase, t))
            elif any(p == phase for p, _ in stack):  # an end: close it (and anything left open inside it)
                while stack:
                    p, begin = stack.pop()
                    if p == phase:
                        w.spans.append((p, begin, t, len(stack)))
                        break
        out.append(w)
    return Timeline(kernel, tuple(grid), threads, blocks, out, phases, waits, clock_ghz, source, origin)


def write_trace(path: str, timelines: list[Timeline], max_blocks: int = 16) -> None:
    """One trace file for several launches (each launch's blocks are processes of their own)."""
    events: list[dict] = []
    summaries = []
    for i, tl in enumerate(timelines):
        trace = tl.chrome_trace(max_blocks, pid_base=i * 1_000_000, label=f"launch {i}" if len(timelines) > 1 else "")
        events.extend(trace["traceEvents"])
        summaries.append(trace["otherData"]["summary"])
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"summaries": summaries}}, f)
