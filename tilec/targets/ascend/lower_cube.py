"""Gemms on the cube unit (part of the lowering): the shared operand tiles live in L1 as NZ fractals filled by
Nd2Nz DataCopy (zero-filled first with InitConstValue when the box is ragged, since Mmad multiplies whole 16x16
fractals), LoadData moves them to L0A (zZ, one call per row of fractals; a [K, M] operand (transpose_A) transposes
each fractal) and L0B (nZ: a transpose of each
fractal for a [K, N] operand, a plain copy for a [N, K] one), Mmad accumulates into L0C (its first call of a
tile zeroes C: `clear(acc)` becomes cmatrixInitVal), and Fixpipe writes the accumulator's valid box to GM in
the output type. Every hand-over between pipes goes through a queue (A1/B1: MTE2 -> MTE1, A2/B2: MTE1 -> M,
CO1: M -> FIX)."""

from __future__ import annotations

from ...diagnostics import error
from ...ir import tile as T
from ...ir.visit import walk_stmts
from .chip import ATOMIC_MODE, FRACTAL, MAX_REPEAT, ctype, round_up
from .program import Alloc, Block, Call

QUANT = {"half": "F322F16", "bfloat16_t": "F322BF16", "float": "NoQuant"}
UINT16_MAX = 65535


def _constant(text: str) -> int | None:
    """The value of a C++ row stride that is an integer literal, else None."""
    return int(text) if text.isdigit() else None


class CubeLowering:
    def __init__(self, lw):
        self.lw = lw
        plan = lw.plan
        # Each gemm operand gets its own L0 queue, each holding an M_MTE1 event id, of which the cube core's TPipe
        # leaves 5 (passes/event_ids.py); more operands than that share one L0A and one L0B queue.
        operands = {(r.buffer.name, role) for g in walk_stmts(lw.k.body) if isinstance(g, T.Gemm)
                    for r, role in ((g.a, "A2"), (g.b, "B2"))}
        self.shared_l0 = len(operands) > 5
        self.shape: dict[str, tuple[int, int]] = {}  # L1/L0C buffer -> padded (rows, cols)
        for s in walk_stmts(lw.k.body):
            if not isinstance(s, T.Alloc):
                continue
            b = s.buffer
            pos = plan.position.get(b.name)
            if b.name in plan.workspace_operands:  # computed by the AIVs: an L1 copy of its workspace slot
                name, pos, depth = f"{b.name}_l1", plan.workspace_operands[b.name], 1
            elif b.name in plan.vector_accumulators:  # added to by the AIVs: a fresh L0C product per gemm
                name, pos, depth = f"{b.name}_l0c", "CO1", 1
            elif pos in ("A1", "B1", "CO1"):
                name, depth = b.name, plan.queues[b.name]
            else:
                continue
            shape = b.const_shape
            if len(shape) != 2:
                raise error(f"cube operand '{b.name}' must be a 2-D tile", s.span)
            rows, cols = (round_up(x, FRACTAL) for x in shape)
            self.shape[name] = (rows, cols)
            self.shape[b.name] = (rows, cols)
            lw.add_alloc(Alloc(name, pos, ctype(b.dtype) if pos != "CO1" else "float", rows * cols, depth, s.span,
                               b.name))
            if pos == "CO1" and name == b.name:
                lw.setup.append(Call(f"bool {b.name}_init = true;"))

    def clear(self, s: T.Fill) -> None:
        if not (isinstance(s.value, T.Const) and float(s.value.value) == 0.0):
            raise error("an L0C accumulator can only be cleared (Mmad zeroes it on its first step)", s.span)
        self.lw.first_touch(s.dst.buffer.name)
        self.lw.emit(f"{s.dst.buffer.name}_init = true;")

    def copy(self, s: T.Copy, atomic: str | None = None) -> None:
        if s.dst.buffer.scope == "global":
            return self.fixpipe(s.src.buffer.name, s.dst, s.src.buffer.const_shape, s.span, atomic)
        self.lw.queue_alloc(s.dst.buffer.name)
        self.load_l1(s.dst.buffer.name, s.src, s.dst.buffer.const_shape, s.span)

    def load_l1(self, name: str, src: T.Region, tile: tuple[int, int], span) -> None:
        """Nd2Nz DataCopy of a global box into the L1 tile `name` (allocated), zero-filled when ragged; then EnQue
        and DeQue (MTE2 -> MTE1)."""
        lw = self.lw
        a = lw.allocs[name]
        rows_pad, cols_pad = self.shape[name]
        nrows, ncols = tile
        offset, ld, vrows, vcols, _, _ = lw.gm_box(src, (nrows, ncols), span)
        if ld == "0":
            raise error("a cube operand is copied from a 2-D box of global memory", span)
        blocks = rows_pad * cols_pad * 2 // 32
        zero = [Call(f"InitConstValueParams<{a.ctype}> z; z.repeatTimes = 1; z.blockNum = {blocks}; z.dstGap = 0; "
                     f"z.initValue = {a.ctype}(0);"),
                Call(f"InitConstValue({name}, z);", "MTE2", (), (name,))]
        whole = [Call(f"Nd2NzParams p; p.ndNum = 1; p.nValue = (uint16_t)rows; p.dValue = (uint16_t)cols; "
                      f"p.srcNdMatrixStride = 0; p.srcDValue = (uint16_t)({ld}); p.dstNzC0Stride = {rows_pad}; "
                      "p.dstNzNStride = 1; p.dstNzMatrixStride = 0;"),
                 Call(f"DataCopy({name}, {src.buffer.name}[{offset}], p);", "MTE2", (src.buffer.name,), (name,))]
        # srcDValue (the source row stride) is a uint16_t: a longer row is copied one row at a time (a single
        # row's stride is never read); row r of an NZ tile starts 16 elements after row r - 1.
        by_row = [Block("for (int64_t r = 0; r < rows; ++r)", [
            Call(f"Nd2NzParams p; p.ndNum = 1; p.nValue = 1; p.dValue = (uint16_t)cols; p.srcNdMatrixStride = 0; "
                 f"p.srcDValue = (uint16_t)cols; p.dstNzC0Stride = {rows_pad}; p.dstNzNStride = 1; "
                 "p.dstNzMatrixStride = 0;"),
            Call(f"DataCopy({name}[r * {FRACTAL}], {src.buffer.name}[{offset} + r * ({ld})], p);", "MTE2",
                 (src.buffer.name,), (name,))], loop=True)]
        ld_value = _constant(ld)
        if ld_value is not None:
            copy = whole if ld_value <= UINT16_MAX else by_row
        else:
            copy = [Block(f"if (({ld}) <= {UINT16_MAX})", whole, by_row)]
        lw.out.append(Block("", [Call(f"int64_t rows = {vrows}, cols = {vcols};"),
                                 Block(f"if (rows < {nrows} || cols < {ncols})", zero),
                                 Block("if (rows > 0 && cols > 0)", copy)]))
        lw.queue_pass(name)

    def _l0(self, name: str, pos: str, ctype: str, count: int, span) -> str:
        if self.shared_l0:  # one L0A and one L0B queue for every gemm (each gemm allocates and frees its tensors)
            l0 = f"l0{pos[0].lower()}_{ctype.replace('_t', '')}"
            if l0 in self.lw.allocs:
                self.lw.allocs[l0].count = max(self.lw.allocs[l0].count, count)
            else:
                self.lw.add_alloc(Alloc(l0, pos, ctype, count, 1, span, None))
            return l0
        l0 = f"{name}_l0"
        if l0 in self.lw.allocs and self.lw.allocs[l0].position != pos:  # A of one gemm, B of another
            l0 = f"{name}_l0{pos[0].lower()}"
        if l0 not in self.lw.allocs:  # double-buffered unless the event-id pass single-buffers it
            self.lw.add_alloc(Alloc(l0, pos, ctype, count, 2, span, name))
        return l0

    def gemm(self, s: T.Gemm) -> None:
        """One gemm, in its own C++ scope: the local tensors it allocates from its L1 copies', L0 and fresh L0C
        queues are declared again by the next gemm that uses the same queues. Only a kept accumulator (declared
        at its first touch) outlives it, so it is touched before the scope opens."""
        lw = self.lw
        c = s.c.buffer.name
        if c not in lw.plan.vector_accumulators:
            lw.first_touch(c)
            if s.clear_accum:  # gemm(..., clear_accum=True): this Mmad starts the accumulator afresh
                lw.emit(f"{c}_init = true;")
        saved, lw.out = lw.out, []
        self._gemm(s)
        body, lw.out = lw.out, saved
        lw.out.append(Block("", body))

    def _gemm(self, s: T.Gemm) -> None:
        from .handover import flags

        lw = self.lw
        plan = lw.plan
        a, b, c = s.a.buffer.name, s.b.buffer.name, s.c.buffer.name
        ready, product, consumed = flags(lw, s) if lw.side else (0, 0, 0)
        handed = [r.buffer for r in (s.a, s.b) if r.buffer.name in plan.workspace_operands]
        if handed:
            lw.emit(f"CrossCoreWaitFlag<2, PIPE_MTE2>({ready});")
        for buf in handed:
            l1 = f"{buf.name}_l1"
            lw.queue_alloc(l1)
            self.load_l1(l1, lw.workspace[buf.name].region(buf.dtype), buf.const_shape, s.span)
        a = f"{a}_l1" if a in plan.workspace_operands else a
        b = f"{b}_l1" if b in plan.workspace_operands else b
        (ar, ac), (br, bc) = self.shape[a], self.shape[b]
        mp, kp = (ac, ar) if s.transpose_a else (ar, ac)
        np_ = br if s.transpose_b else bc
        if (bc if s.transpose_b else br) != kp:
            raise error("gemm operand shapes disagree on K", s.span)
        m1, k1, n1 = mp // FRACTAL, kp // FRACTAL, np_ // FRACTAL
        if max(m1, n1, k1) > MAX_REPEAT:
            raise error("a gemm tile of more than 255 fractals along a side", s.span)
        m, n = s.a.buffer.const_shape[1 if s.transpose_a else 0], s.c.buffer.const_shape[1]
        ct = lw.allocs[a].ctype
        al0 = self._l0(a, "A2", ct, mp * kp, s.span)
        bl0 = self._l0(b, "B2", ct, kp * np_, s.span)
        lw.queue_alloc(al0)
        if s.transpose_a:  # [K, M] in L1: fractal (k, m) at m * K1 + k, k-major: transpose each into zZ
            a_load = (f"LoadData2DParams p; p.startIndex = 0; p.repeatTimes = {k1}; p.srcStride = 1; p.sid = 0; "
                      "p.dstGap = 0; p.ifTranspose = true; p.addrMode = 0;", f"{a}[mi * {k1 * 256}]")
        else:  # [M, K] in L1: fractal (m, k) at k * M1 + m, already m-major: one row of fractals per call
            a_load = (f"LoadData2DParams p; p.startIndex = 0; p.repeatTimes = {k1}; p.srcStride = {m1}; p.sid = 0; "
                      "p.dstGap = 0; p.ifTranspose = false; p.addrMode = 0;", f"{a}[mi * 256]")
        lw.out.append(Block(f"for (int64_t mi = 0; mi < {m1}; ++mi)", [
            Call(a_load[0]),
            Call(f"LoadData({al0}[mi * {k1 * 256}], {a_load[1]}, p);", "MTE1", (a,), (al0,))], loop=True))
        lw.queue_pass(al0)
        lw.queue_alloc(bl0)
        if s.transpose_b:  # [N, K] in L1: fractal (n, k) at k * N1 + n, each already n-major: a straight copy
            load = Call(f"LoadData2DParams p; p.startIndex = 0; p.repeatTimes = {n1}; p.srcStride = 1; p.sid = 0; "
                        "p.dstGap = 0; p.ifTranspose = false; p.addrMode = 0;")
            src = f"{b}[ki * {n1 * 256}]"
        else:  # [K, N] in L1: fractal (k, n) at n * K1 + k, k-major: transpose each
            load = Call(f"LoadData2DParams p; p.startIndex = 0; p.repeatTimes = {n1}; p.srcStride = {k1}; p.sid = 0; "
                        "p.dstGap = 0; p.ifTranspose = true; p.addrMode = 0;")
            src = f"{b}[ki * 256]"
        lw.out.append(Block(f"for (int64_t ki = 0; ki < {k1}; ++ki)", [
            load, Call(f"LoadData({bl0}[ki * {n1 * 256}], {src}, p);", "MTE1", (b,), (bl0,))], loop=True))
        lw.queue_pass(bl0)
        for buf in handed:
            lw.emit(f"{buf.name}_l1_que.FreeTensor({buf.name}_l1);", ordered=(f"{buf.name}_l1",))
        fresh = c in plan.vector_accumulators
        acc = f"{c}_l0c" if fresh else c
        if fresh:
            lw.queue_alloc(acc)
        else:
            lw.first_touch(c)
        lw.out.append(Block("", [
            Call(f"MmadParams p; p.m = {m}; p.n = {n}; p.k = {kp}; "
                 f"p.cmatrixInitVal = {'true' if fresh else c + '_init'}; p.cmatrixSource = false; p.unitFlag = 0;"),
            Call(f"Mmad({acc}, {al0}, {bl0}, p);", "M", (al0, bl0, acc), (acc,))]))
        if not fresh:
            lw.emit(f"{c}_init = false;")
        lw.emit(f"{al0}_que.FreeTensor({al0});", ordered=(al0,))
        lw.emit(f"{bl0}_que.FreeTensor({bl0});", ordered=(bl0,))
        if fresh:
            ws = lw.workspace[c]
            self.fixpipe(acc, ws.region(s.c.buffer.dtype), s.c.buffer.const_shape, s.span)
            lw.emit(f"CrossCoreSetFlag<2, PIPE_FIX>({product});")
            lw.emit(f"CrossCoreWaitFlag<2, PIPE_FIX>({consumed});")

    def fixpipe(self, c: str, dst: T.Region, tile: tuple[int, int], span, atomic: str | None = None) -> None:
        lw = self.lw
        rows_pad, _ = self.shape[c]
        out_t = ctype(dst.buffer.dtype)
        if out_t not in QUANT:
            raise error(f"Fixpipe cannot write {dst.buffer.dtype}", span)
        lw.queue_pass(c)
        offset, ld, vrows, vcols, _, _ = lw.gm_box(dst, tile, span)
        lw.out.append(Block("", [
            Call(f"int64_t rows = {vrows}, cols = {vcols};"),
            Block("if (rows > 0 && cols > 0)", [
                Call(f"FixpipeParamsV220 p; p.nSize = (uint16_t)cols; p.mSize = (uint16_t)rows; "
                     f"p.srcStride = {rows_pad}; p.dstStride = (uint32_t)({ld}); "
                     f"p.quantPre = QuantMode_t::{QUANT[out_t]}; p.reluEn = false;"),
                *([Call(f"{ATOMIC_MODE[atomic]}<{out_t}>();")] if atomic else []),
                Call(f"Fixpipe<{out_t}, float, CFG_ROW_MAJOR>({dst.buffer.name}[{offset}], {c}, p);", "FIX", (c,),
                     (dst.buffer.name,)),
                *([Call("SetAtomicNone();")] if atomic else [])])]))
        lw.emit(f"{c}_que.FreeTensor({c});", ordered=(c,))
        lw.declared.discard(c)
