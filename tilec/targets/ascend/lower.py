"""Lower one planned Tile IR kernel to an AscendC program (program.KernelProgram).

Assumes: placement and queue planning have run (kernel.attrs["ascend"]). Guarantees: every tile op is a
sequence of AscendC calls tagged with their pipe and the buffers they read and write; the grid is flattened into
a `GetBlockIdx()`/`GetBlockNum()` loop over tiles; queue buffers are allocated, enqueued, dequeued and freed
where their statement list uses them; ragged edges go through DataCopyPad with explicit zero padding (a tile
that may be partial is zero-filled first, as the language reads zeros past a tensor's edge); gemms are Nd2Nz
DataCopy, LoadData, Mmad and Fixpipe (lower_cube). No synchronisation is inserted here (sync.py does it).
"""

from __future__ import annotations

from ...diagnostics import error
from ...ir import tile as T
from .chip import ATOMIC_MODE, CPP_TYPES, ctype, round_up
from .layout import TileLayout, layout_of
from .program import CPP_SIZES, Alloc, Block, Call, KernelProgram, Side, Stmt
from .scalar import cpp, float_literal, scalar_ctype, scalar_type

AXES = ("bx", "by", "bz")


class Lowering:
    def __init__(self, k: T.Kernel, side: str | None = None, workspace=({}, 0), half_rows: int | None = None):
        self.k = k
        self.side = side  # None: a single-unit kernel; "AIC" / "AIV": one half of a mixed kernel
        self.plan = k.attrs["ascend"]
        self.workspace, self.workspace_bytes = workspace
        self.half_rows = half_rows  # AIV side: each AIV holds this many of the block's rows (split_rows)
        self.gemm_index = {g: i for i, g in enumerate(x for x in _walk(k.body) if isinstance(x, T.Gemm))}
        self.allocs: dict[str, Alloc] = {}
        self.layouts: dict[str, TileLayout] = {}
        self.buffers: dict[str, T.Buffer] = {}
        self.setup: list[Stmt] = []
        self.out: list[Stmt] = []
        self.declared: set[str] = set()
        self.temp_free: list[str] = []
        self.temp_count = 0
        self.mask_free: list[str] = []
        self.index_tiles: dict[tuple[int, int], tuple[str, str]] = {}
        self.gathers: dict[str, str] = {}
        self.implicit = 0
        self.cube = None
        self.ub_reads: set[str] = set()  # tiles scalar code read since the last emitted statement

    # ------------------------------------------------------------ allocations

    def add_alloc(self, a: Alloc) -> Alloc:
        self.allocs[a.name] = a
        return a

    def temp(self) -> str:
        if self.temp_free:
            return self.temp_free.pop()
        name = f"tmp{len([a for a in self.allocs if a.startswith('tmp')])}"
        self.add_alloc(Alloc(name, "VECCALC", "float", self.temp_count))
        return name

    def release(self, name: str) -> None:
        if name.startswith("tmp") and name not in self.temp_free:
            self.temp_free.append(name)

    def mask(self) -> str:
        if self.mask_free:
            return self.mask_free.pop()
        name = f"mask{len([a for a in self.allocs if a.startswith('mask')])}"
        self.add_alloc(Alloc(name, "VECCALC", "uint8_t", self.temp_count // 8))
        return name

    def release_mask(self, name: str) -> None:
        self.mask_free.append(name)

    # ------------------------------------------------------------ conversions
    # The 910B's Cast has a fixed set of (destination, source) pairs (asc-devkit's dav_c220 vconv table): f32 <->
    # f16, bf16, i32, i16; f16 <-> i8, u8, i16, i32. tilec computes in f32 and converts every other tile type to
    # and from it through these pairs; integer results are truncated and wrapped to their width in f32 first, as
    # the language (and the interpreter) wraps them, so that the saturating Cast only sees in-range values.

    def to_float(self, dst: str, src: str, src_ctype: str, count: int) -> None:
        """dst (a float tile) = src, exactly (8-bit integers through f16)."""
        d, sv = _base(dst), _base(src)
        if src_ctype == "float":
            if dst != src:
                self.v(f"Adds({dst}, {src}, 0.0f, {count});", [sv], [d])
            return
        if CPP_SIZES[src_ctype] == 1:
            t = self.temp()
            self.v(f"Cast({t}.ReinterpretCast<half>(), {src}, RoundMode::CAST_NONE, {count});", [sv], [t])
            self.v(f"Cast({dst}, {t}.ReinterpretCast<half>(), RoundMode::CAST_NONE, {count});", [t], [d])
            self.release(t)
            return
        self.v(f"Cast({dst}, {src}, RoundMode::CAST_NONE, {count});", [sv], [d])

    def from_float(self, dst: str, dst_ctype: str, src: str, count: int, user: str | None = None) -> None:
        """dst (a tile of dst_ctype) = src (a float tile): f16/bf16 rounded to nearest, integers truncated and
        wrapped to their width (bool: 1 where src is not zero)."""
        d, sv = _base(dst), _base(src)
        if dst_ctype == "float":
            return self.to_float(dst, src, "float", count)
        if dst_ctype in ("half", "bfloat16_t", "int32_t"):
            self.v(f"Cast({dst}, {src}, RoundMode::CAST_RINT, {count});", [sv], [d])
            return
        t = self.temp()
        if user == "bool":
            self.v(f"Abs({t}, {src}, {count});", [sv], [t])
            self.v(f"Muls({t}, {t}, 8.50705917e+37f, {count});", [t], [t])  # 2^126: every normal non-zero -> >= 1
            self.v(f"Mins({t}, {t}, 1.0f, {count});", [t], [t])
        else:
            from ...ir import dtypes as D

            self.wrap_in_float(t, src, {"int16_t": D.I16, "int8_t": D.I8, "uint8_t": D.U8}[dst_ctype], count)
        if dst_ctype == "int16_t":
            self.v(f"Cast({dst}, {t}, RoundMode::CAST_RINT, {count});", [t], [d])
        else:
            h = self.temp()
            self.v(f"Cast({h}.ReinterpretCast<half>(), {t}, RoundMode::CAST_NONE, {count});", [t], [h])
            self.v(f"Cast({dst}, {h}.ReinterpretCast<half>(), RoundMode::CAST_TRUNC, {count});", [h], [d])
            self.release(h)
        self.release(t)

    def wrap_in_float(self, dst: str, src: str, dt, count: int) -> None:
        """dst = src (an f32 tile) truncated to an integer and wrapped to dt's width (widths of 32 bits and more are
        only truncated: f32 holds integers exactly up to 2^24)."""
        d, sv = _base(dst), _base(src)
        self.v(f"Cast({dst}, {src}, RoundMode::CAST_TRUNC, {count});", [sv], [d])
        if dt.bits >= 32:
            return
        bits = dt.bits
        f = self.temp()
        shift = float(1 << (bits - 1)) if dt.kind == "int" else 0.0
        self.v(f"Adds({f}, {dst}, {shift!r}f, {count});", [d], [f])
        self.v(f"Muls({f}, {f}, {1.0 / (1 << bits)!r}f, {count});", [f], [f])
        self.v(f"Cast({f}, {f}, RoundMode::CAST_FLOOR, {count});", [f], [f])
        self.v(f"Muls({f}, {f}, {-float(1 << bits)!r}f, {count});", [f], [f])
        self.v(f"Add({dst}, {dst}, {f}, {count});", [d, f], [d])
        self.release(f)

    def convert(self, dst: str, dst_ctype: str, src: str, src_ctype: str, count: int,
                user: str | None = None) -> None:
        """dst = src converted between any two tile types (through f32 unless one side is f32)."""
        if dst_ctype == "float" or src_ctype == dst_ctype and dst_ctype in ("half", "bfloat16_t"):
            return self.to_float(dst, src, src_ctype, count) if dst_ctype == "float" else \
                self.v(f"Adds({dst}.ReinterpretCast<int16_t>(), {src}.ReinterpretCast<int16_t>(), int16_t(0), "
                       f"{count});", [_base(src)], [_base(dst)])
        if src_ctype == "float":
            return self.from_float(dst, dst_ctype, src, count, user)
        t = self.temp()
        self.to_float(t, src, src_ctype, count)
        self.from_float(dst, dst_ctype, t, count, user)
        self.release(t)

    def emit(self, text: str, pipe: str | None = None, reads=(), writes=(), ordered=()) -> None:
        if pipe is None and self.ub_reads:  # scalar code that reads tiles (scalar.UB_READS)
            pipe, reads = "S", (*reads, *sorted(self.ub_reads))
            self.ub_reads.clear()
        self.out.append(Call(text, pipe, tuple(reads), tuple(writes), tuple(ordered)))

    def v(self, text: str, reads=(), writes=()) -> None:
        self.emit(text, "V", reads, writes)

    def per_core(self, text: str, reads=(), writes=(), rows: int | None = None) -> None:
        """A vector call made once per core, before the tile loop (index tiles, gather tables)."""
        call = Call(text, "V", tuple(reads), tuple(writes))
        self.setup.append(Block(f"for (int64_t r = 0; r < {rows}; ++r)", [call], loop=True) if rows else call)

    def brcb_scratch(self, rows: int) -> str:
        name = "brcb_rows"
        need = round_up(rows, 8) * 8
        if name not in self.allocs or self.allocs[name].count < need:
            self.add_alloc(Alloc(name, "VECCALC", "float", round_up(need, 64)))
        return name

    def index_tiles_for(self, lay: TileLayout) -> tuple[str, str]:
        """Float tiles holding each element's row and column index (1-D: its index, twice)."""
        key = (lay.rows, lay.cols or 0)
        if key not in self.index_tiles:
            n = len(self.index_tiles)
            rows_t, cols_t = f"index_rows{n}", f"index_cols{n}"
            self.add_alloc(Alloc(cols_t, "VECCALC", "float", lay.count))
            # Elements past the tile (its rounding to whole repeats) get index 0, so that every offset computed
            # from them stays a valid one.
            self.per_core(f"Duplicate({cols_t}, 0.0f, {lay.count});", (), (cols_t,))
            if lay.is_2d:
                self.add_alloc(Alloc(rows_t, "VECCALC", "float", lay.count))
                self.per_core(f"Duplicate({rows_t}, 0.0f, {lay.count});", (), (rows_t,))
                cp = lay.cols_pad
                self.per_core(f"CreateVecIndex({cols_t}[r * {cp}], 0.0f, {cp});", (), (cols_t,), lay.rows)
                self.per_core(f"Duplicate({rows_t}[r * {cp}], float(r), {cp});", (), (rows_t,), lay.rows)
            else:
                rows_t = cols_t
                self.per_core(f"CreateVecIndex({cols_t}, 0.0f, {lay.count});", (), (cols_t,))
            self.index_tiles[key] = (rows_t, cols_t)
        return self.index_tiles[key]

    def gather_table(self, lay: TileLayout, coef: dict[str, int], max_bytes: int) -> str:
        """An int32 tile of byte offsets coef["1"] + coef["i"] * row + coef["j"] * col, clamped into the source."""
        key = f"{lay}{sorted(coef.items())}{max_bytes}"
        if key in self.gathers:
            return self.gathers[key]
        name = f"gather_offsets{len(self.gathers)}"
        self.gathers[key] = name
        self.add_alloc(Alloc(name, "VECCALC", "int32_t", lay.count))
        rows_t, cols_t = self.index_tiles_for(lay)
        work = f"{name}.ReinterpretCast<float>()"
        n = lay.count
        self.per_core(f"Muls({work}, {rows_t}, {float(coef['i'])!r}f, {n});", (rows_t,), (name,))
        t = "brcb_rows_off"
        if t not in self.allocs:
            self.add_alloc(Alloc(t, "VECCALC", "float", self.temp_count))
        self.per_core(f"Muls({t}, {cols_t}, {float(coef['j'])!r}f, {n});", (cols_t,), (t,))
        self.per_core(f"Add({work}, {work}, {t}, {n});", (name, t), (name,))
        self.per_core(f"Adds({work}, {work}, {float(coef['1'])!r}f, {n});", (name,), (name,))
        self.per_core(f"Maxs({work}, {work}, 0.0f, {n});", (name,), (name,))
        self.per_core(f"Mins({work}, {work}, {float(max_bytes)!r}f, {n});", (name,), (name,))
        self.per_core(f"Cast({name}, {work}, RoundMode::CAST_RINT, {n});", (name,), (name,))
        return name

    # ------------------------------------------------------------ the kernel

    def run_side(self) -> Side:
        """Lower the kernel body for this side: every core of a single-unit kernel, or the AIC (cube work) or the
        AIVs (vector work) of a mixed one."""
        from ...ir.fold import fold
        from ...ir.visit import walk_stmts

        k = self.k
        ub_counts = [128]
        mixed = self.side is not None
        for s in _allocs(k.body):
            b = s.buffer
            self.buffers[b.name] = b
            if b.scope in ("var", "global"):
                continue  # a scalar-unit variable, or a view of a global tensor: declared where it is allocated
            shape = b.const_shape
            if shape is None or len(shape) > 2:
                raise error(f"'{b.name}': AscendC tiles are 1-D or 2-D with constant shapes", s.span)
            pos = self.plan.position[b.name]
            if b.dtype.name not in CPP_TYPES:
                raise error(f"'{b.name}' is {b.dtype}, which the AscendC back end does not place on chip", s.span)
            if pos in ("A1", "B1", "CO1") or self.side == "AIC":
                continue  # lower_cube lays these out
            lay = layout_of(shape)
            self.layouts[b.name] = lay
            ub_counts.append(lay.count)
            depth = self.plan.queues.get(b.name, 0)
            self.add_alloc(Alloc(b.name, pos, ctype(b.dtype), lay.count, depth, s.span, b.name))
        for s in walk_stmts(k.body):  # temporaries cover every Parallel loop's tile
            if isinstance(s, T.For) and s.kind == "parallel":
                ext = [fold(e) for e in s.extents]
                if all(isinstance(e, T.Const) for e in ext) and 1 <= len(ext) <= 2:
                    ub_counts.append(layout_of(tuple(int(e.value) for e in ext)).count)
        self.temp_count = max(ub_counts)
        if self.side == "AIC" or (not mixed and self.plan.kernel_type == "AIC_ONLY"):
            from .lower_cube import CubeLowering

            self.cube = CubeLowering(self)
        self.out = []
        from .scalar import UB_READS

        token = UB_READS.set((self.layouts, self.ub_reads))
        try:
            self.body(k.body)
        finally:
            UB_READS.reset(token)
        # a view of a global tensor is the same memory: synchronisation sees the tensor it views
        roots = {b.name: b.storage.name for b in self.buffers.values() if b.scope == "global" and b.view_of is not None}
        body = _rename_buffers(self.out, roots) if roots else self.out
        gets = [Call(f"LocalTensor<{a.ctype}> {name} = {a.holder}.Get<{a.ctype}>();")
                for name, a in self.allocs.items() if a.depth == 0]
        group = {None: "GetBlockIdx()", "AIC": "GetBlockIdx()", "AIV": "GetBlockIdx() / GetSubBlockNum()"}
        guard = {None: None, "AIC": "ASCEND_IS_AIC", "AIV": "ASCEND_IS_AIV"}
        views = []
        if self.half_rows:
            views.append(f"const int64_t row0 = GetSubBlockIdx() * {self.half_rows};  // this AIV's rows")
        for w in self.workspace.values():
            views.append(f"GlobalTensor<{w.ctype}> {w.name};")
            views.append(f"{w.name}.SetGlobalBuffer((__gm__ {w.ctype}*)(workspace_addr + group * "
                         f"{self.workspace_bytes} + {w.offset}));")
        return Side(guard[self.side], group[self.side], list(self.allocs.values()), gets + self.setup, body, views)

    # ------------------------------------------------------------ statements
    # ------------------------------------------------------------ statements

    def body(self, stmts: list[T.Stmt]) -> None:
        from .regions import touched

        home = [n for n, h in self.plan.queue_home.items() if stmts in h]
        last_use = {n: max((i for i, s in enumerate(stmts) if n in touched(s)), default=-1) for n in home}
        for i, s in enumerate(stmts):
            self.stmt(s)
            for n in home:
                if last_use[n] == i and self.allocs.get(n) and self.allocs[n].position in ("VECIN", "A1", "B1"):
                    self.emit(f"{n}_que.FreeTensor({n});", ordered=(n,))

    def on_this_side(self, s: T.Stmt) -> bool:
        """In a mixed kernel the AIC runs the copies into cube operands and the gemms, the AIVs the rest; both run
        the scalar control flow (loops, ifs, assignments) so that they meet at the same cross-core flags."""
        if self.side is None or isinstance(s, T.Assign | T.For | T.While | T.If | T.Gemm) and not (
                isinstance(s, T.For) and s.kind == "parallel"):
            return True
        pos = self.plan.position.get
        cube = (isinstance(s, T.Copy) and (pos(s.dst.buffer.name) in ("A1", "B1") or pos(s.src.buffer.name) == "CO1")
                or isinstance(s, T.Fill) and pos(s.dst.buffer.name) == "CO1")  # an L0C accumulator's clear, Fixpipe
        return cube == (self.side == "AIC")

    def stmt(self, s: T.Stmt) -> None:
        self.lower_stmt(s)
        if self.ub_reads:
            names = ", ".join(f"'{n}'" for n in sorted(self.ub_reads))
            raise error(f"a tile element ({names}) read in a loop bound or condition: the AscendC back end reads "
                        "tiles on the scalar unit only in assignments; assign it to a variable first", s.span)

    def lower_stmt(self, s: T.Stmt) -> None:
        if isinstance(s, T.Alloc) and s.buffer.scope == "var":
            # alloc_var: a scalar of the scalar unit (both sides of a mixed kernel run the scalar code)
            init = cpp(s.init) if s.init is not None else "0"
            self.emit(f"{scalar_ctype(s.buffer.dtype)} {s.buffer.name} = {init};")
            return
        if isinstance(s, T.Store) and s.buffer.scope == "var":
            self.emit(f"{s.buffer.name} = {cpp(s.value)};")
            return
        if isinstance(s, T.Alloc) and s.buffer.scope == "global" and s.buffer.view_of is not None:
            b = s.buffer
            ty = ctype(b.dtype)
            self.emit(f"GlobalTensor<{ty}> {b.name};")  # the view's own shape is only in tilec's index arithmetic
            self.emit(f"{b.name}.SetGlobalBuffer((__gm__ {ty}*){b.storage.name}_addr);")
            return
        if isinstance(s, T.Alloc) or not self.on_this_side(s):
            return
        if isinstance(s, T.Assign):
            ty = scalar_type(s.var)
            if s.var.name in self.declared:
                self.emit(f"{s.var.name} = {cpp(s.value)};")
            else:
                self.declared.add(s.var.name)
                self.emit(f"{ty} {s.var.name} = {cpp(s.value)};")
            return
        if isinstance(s, T.For):
            if s.kind == "parallel":
                from .vector import lower_parallel

                lower_parallel(self, s)
                return
            v = s.vars[0].name
            begin = cpp(s.begin) if s.begin is not None else "0"
            step = cpp(s.step) if s.step is not None else "1"
            head = f"for (int64_t {v}_t = 0; {v}_t < {cpp(s.extents[0])}; ++{v}_t)"
            saved, self.out = self.out, []
            self.emit(f"int64_t {v} = {begin} + {step} * {v}_t;")
            self.body(s.body)
            inner, self.out = self.out, saved
            self.out.append(Block(head, inner, loop=True))
            return
        if isinstance(s, T.While):
            saved, self.out = self.out, []
            self.body(s.body)
            inner, self.out = self.out, saved
            self.out.append(Block(f"while ({cpp(s.cond)})", inner, loop=True))
            return
        if isinstance(s, T.If):
            saved, self.out = self.out, []
            self.body(s.then_body)
            then, self.out = self.out, []
            self.body(s.else_body)
            other, self.out = self.out, saved
            self.out.append(Block(f"if ({cpp(s.cond)})", then, other or None))
            return
        if isinstance(s, T.Copy):
            return self.copy(s)
        if isinstance(s, T.Fill):
            return self.fill(s)
        if isinstance(s, T.Reduce):
            from .vector import lower_reduce

            return lower_reduce(self, s)
        if isinstance(s, T.Gemm):
            if self.side == "AIV":
                from .handover import vector_gemm

                return vector_gemm(self, s)
            return self.cube.gemm(s)
        if isinstance(s, T.UseSwizzle | T.AnnotateLayout):
            return  # GPU block-order and shared-memory hints: nothing to do on Ascend
        if isinstance(s, T.Print):
            raise error("print cannot run on the AscendC back end (tilec does not lower it to AscendC's printf); "
                        "`tilec run --device cpu` runs the kernel in the interpreter, which prints it", s.span)
        if type(s).__name__ == "CumSum":
            return self.cumsum(s)
        if isinstance(s, T.FenceGlobal):
            raise error("fence_global() hands results between the blocks of one launch through an atomic counter, "
                        "but the 910B's atomics return no previous value: hand them over between launches instead "
                        "(alloc_global scratch written by one launch, read by the next)", s.span)
        if isinstance(s, T.Store) and s.buffer.scope == "global":
            raise error(f"a single-element store to the global tensor '{s.buffer.name}' outside a Parallel loop: the "
                        "AscendC back end writes global memory with tile copies (DataCopyPad from UB); write the "
                        "value into a tile inside a Parallel loop and copy the tile out", s.span)
        raise error(f"the AscendC back end does not lower {type(s).__name__} statements yet", s.span)

    def cumsum(self, s) -> None:
        """An inclusive scan along a tile's rows (a 1-D tile: along it), in f32, in log2(columns) steps: each step
        adds the tile shifted by k elements (a `Gather` through a per-core offset table, since vector operands start
        at 32-byte boundaries and cannot be shifted by one element), zero where the shift leaves the row."""
        src, dst = s.src.buffer, s.dst.buffer
        for r in (s.src, s.dst):
            if any(not (isinstance(x, T.Const) and x.value == 0) for x in r.starts) or \
                    r.const_extents != r.buffer.const_shape or r.buffer.name not in self.layouts:
                raise error("the AscendC back end scans whole on-chip tiles (T.cumsum of a tile, not a region)", s.span)
        lay = self.layouts[src.name]
        if self.layouts[dst.name] != lay:
            raise error("T.cumsum between tiles of different shapes", s.span)
        if lay.is_2d and s.dim not in (1, -1):
            raise error("the AscendC back end scans 2-D tiles along their rows (dim=1): the scan down a column "
                        "has no AscendC lowering here; transpose the tile (or scan its transpose)", s.span)
        self.first_touch(dst.name)
        cols = lay.cols if lay.is_2d else lay.rows
        n = lay.count
        x, t = self.temp(), self.temp()
        self.to_float(x, src.name, self.allocs[src.name].ctype, n)
        _, cols_t = self.index_tiles_for(lay)
        k = 1
        while k < cols:
            step = -k * 4 if not s.reverse else k * 4
            table = self.gather_table(lay, {"1": step, "i": lay.cols_pad * 4 if lay.is_2d else 0, "j": 4},
                                      n * 4 - 4)
            self.v(f"Gather({t}, {x}, {table}.ReinterpretCast<uint32_t>(), 0, {n});", [x, table], [t])
            m = self.mask()
            cond = f"{float(k)!r}f, CMPMODE::GE" if not s.reverse else f"{float(cols - k)!r}f, CMPMODE::LT"
            self.v(f"CompareScalar({m}, {cols_t}, {cond}, {n});", [cols_t], [m])
            self.v(f"Select({t}, {m}, {t}, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});", [m, t], [t])
            self.release_mask(m)
            self.v(f"Add({x}, {x}, {t}, {n});", [x, t], [x])
            k *= 2
        self.release(t)
        self.from_float(dst.name, self.allocs[dst.name].ctype, x, n, dst.dtype.name)
        self.release(x)

    # ------------------------------------------------------------ queue helpers

    def queue_alloc(self, name: str) -> None:
        a = self.allocs[name]
        self.emit(f"LocalTensor<{a.ctype}> {name} = {name}_que.AllocTensor<{a.ctype}>();", ordered=(name,))

    def queue_pass(self, name: str) -> None:
        """EnQue then DeQue: the producer pipe's writes are ordered before the consumer pipe's reads."""
        a = self.allocs[name]
        self.emit(f"{name}_que.EnQue({name});")
        self.emit(f"{name} = {name}_que.DeQue<{a.ctype}>();", ordered=(name,))

    def first_touch(self, name: str) -> None:
        """A VECOUT queue buffer is allocated where its statement list first touches it."""
        a = self.allocs.get(name)
        if a and a.position in ("VECOUT", "CO1") and name not in self.declared:
            self.declared.add(name)
            self.queue_alloc(name)

    # ------------------------------------------------------------ copies and fills

    def fill(self, s: T.Fill) -> None:
        b = s.dst.buffer
        if self.plan.position.get(b.name) == "CO1":
            return self.cube.clear(s)
        self.first_touch(b.name)
        a = self.allocs[b.name]
        value = s.value
        if value.dtype.is_float or a.ctype == "float":
            text = float_literal(float(value.value)) if isinstance(value, T.Const) else f"float({cpp(value)})"
        else:
            text = cpp(value)
        if a.ctype == "bfloat16_t":
            if not (isinstance(value, T.Const) and float(value.value) == 0.0):
                raise error("the 910B vector unit fills bf16 tiles with zero only; fill an f32 tile and cast", s.span)
            self.v(f"Duplicate({b.name}.ReinterpretCast<int16_t>(), int16_t(0), {a.count});", writes=[b.name])
        elif CPP_SIZES[a.ctype] == 1:  # no 8-bit Duplicate: a constant byte as both halves of an int16
            if isinstance(value, T.Const):
                v = float(value.value)
                byte = int(v != 0) if b.dtype.is_bool else int(v) % 256
                pair = byte * 257 - (65536 if byte > 127 else 0)
                self.v(f"Duplicate({b.name}.ReinterpretCast<int16_t>(), int16_t({pair}), {a.count // 2});",
                       writes=[b.name])
            else:
                t = self.temp()
                self.v(f"Duplicate({t}, float({cpp(value)}), {a.count});", writes=[t])
                self.from_float(b.name, a.ctype, t, a.count, b.dtype.name)
                self.release(t)
        else:
            self.v(f"Duplicate({b.name}, {a.ctype}({text}), {a.count});", writes=[b.name])

    def copy(self, s: T.Copy) -> None:
        src, dst = s.src.buffer, s.dst.buffer
        if src.scope == "global" and dst.scope == "global":
            return self.copy_global(s)
        if src.scope == "global" and ctype(src.dtype) not in CPP_TYPES.values():
            raise error(f"'{src.name}' is {src.dtype}: the AscendC back end reads such tensors element by element "
                        "on the scalar unit (GlobalTensor::GetValue), it does not copy them into tiles", s.span)
        atomic = getattr(s, "kind", None)  # placement's AtomicCopy
        if self.plan.position.get(dst.name) in ("A1", "B1") or self.plan.position.get(src.name) == "CO1":
            return self.cube.copy(s, atomic)
        if src.scope == "global":
            return self.copy_in(s.src, dst, s.span)
        if dst.scope == "global":
            return self.copy_out(src, s.dst, s.span, atomic=atomic)
        from .vector import lower_tile_assign

        lower_tile_assign(self, s)

    def copy_global(self, s: T.Copy) -> None:
        """Global to global (mha_bwd's `T.copy(dQ[...], dQ_out[...])`, with a cast): through a UB tile of the box,
        copied in (cast to the destination's type) and out by the vector core."""
        ext = s.src.const_extents
        if ext is None or s.dst.const_extents is None:
            raise error("a copy between global tensors needs constant box extents", s.span)
        shape = tuple(e for e in ext if e != 1) or (1,)
        if len(shape) > 2 or tuple(e for e in s.dst.const_extents if e != 1) != tuple(e for e in ext if e != 1):
            raise error("the AscendC back end copies global boxes of at most 2 dimensions (other extents 1) between "
                        "tensors, the same box on both sides", s.span)
        name = f"{s.dst.buffer.name}_gm{len([a for a in self.allocs if a.startswith(s.dst.buffer.name + '_gm')])}"
        lay = layout_of(shape)
        self.layouts[name] = lay
        self.add_alloc(Alloc(name, "VECCALC", ctype(s.dst.buffer.dtype), lay.count, 0, s.span))
        self.temp_count = max(self.temp_count, lay.count)
        self.copy_in(s.src, s.dst.buffer, s.span, name=name)
        self.copy_out(s.dst.buffer, s.dst, s.span, name=name)

    def gm_box(self, region: T.Region, tile: tuple[int, int | None], span, limits: dict[int, str] | None = None):
        """(element offset, row stride, valid rows, valid cols) of a global region copied to/from a tile, as C++;
        `limits`: dimension -> a C++ count of elements a guard keeps along it (at most)."""
        buf = region.buffer
        dims = [cpp(d) for d in buf.shape]
        strides = []
        acc = "1"
        for d in reversed(dims):
            strides.insert(0, acc)
            acc = f"{acc} * {d}" if acc != "1" else d
        ext = region.const_extents
        if ext is None:
            raise error("AscendC copies need constant extents", span)
        big = [i for i, e in enumerate(ext) if e != 1]
        rows, cols = tile
        last = len(ext) - 1
        # A tile's columns are the tensor's innermost dimension; its rows (if any) one outer dimension.
        col_dim, row_dim = last, None
        outer = [i for i in big if i != last]
        ok = ext[last] == (cols if cols is not None else rows) or (not big and ext[last] == 1)
        if cols is not None and rows != 1:
            ok = ok and len(outer) == 1 and ext[outer[0]] == rows
            row_dim = outer[0] if outer else None
        else:
            ok = ok and not outer
        if not ok:
            raise error(f"copy of a {list(ext)} box of '{buf.name}' into a {list(t for t in tile if t)} tile: "
                        "the AscendC back end copies row boxes whose last dimension is the tensor's innermost",
                        span)
        offset = " + ".join(f"({cpp(st)}) * {strides[i]}" for i, st in enumerate(region.starts)) or "0"
        ncols = ext[col_dim]
        limits = limits or {}

        def bound(dim: int) -> str:  # the tensor's edge, or a guard's count if smaller
            edge = f"{dims[dim]} - {cpp(region.starts[dim])}"
            return f"tilec_min<int64_t>({edge}, {limits[dim]})" if dim in limits else edge

        if any(d not in (col_dim, row_dim) for d in limits):
            raise error("a guard limits a dimension of the store that the copy's tile does not span", span)
        valid_cols = f"tilec_clamp({bound(col_dim)}, 0, {ncols})"
        if row_dim is None:
            nrows = 1
            valid_rows = "int64_t(1)"
            row_stride = "0"
        else:
            nrows = ext[row_dim]
            valid_rows = f"tilec_clamp({bound(row_dim)}, 0, {nrows})"
            row_stride = strides[row_dim]
        return offset, row_stride, valid_rows, valid_cols, nrows, ncols

    def column_box(self, region: T.Region, lay, span, limits: dict[int, str] | None = None):
        """(element offset, element stride, valid count, n) of a box whose one non-unit extent is an outer
        dimension of the tensor (`T.copy(G[bb, s0:s0 + 64, bh], tile)`, topk's store `topk_gates[bx * 16 + i, k]`)
        copied to or from a tile of n elements (1-D, or one row); None for any other box."""
        ext = region.const_extents
        n = lay.rows if lay.cols is None else (lay.cols if lay.rows == 1 else None)
        if ext is None or n is None:
            return None
        big = [i for i, e in enumerate(ext) if e != 1]
        if len(big) != 1 or big[0] == len(ext) - 1 or ext[big[0]] != n:
            return None
        dim, buf = big[0], region.buffer
        dims = [cpp(d) for d in buf.shape]
        stride = " * ".join(dims[dim + 1:])
        offset = " + ".join(f"({cpp(st)}) * {' * '.join(dims[i + 1:]) or '1'}" for i, st in enumerate(region.starts))
        limits = limits or {}
        if any(d != dim for d in limits):
            raise error("a guard limits a dimension of the store that the copy's tile does not span", span)
        edge = f"{dims[dim]} - {cpp(region.starts[dim])}"
        if dim in limits:
            edge = f"tilec_min<int64_t>({edge}, {limits[dim]})"
        return offset, stride, f"tilec_clamp({edge}, 0, {n})", n

    def column_stage(self, name: str, n: int) -> tuple[str, int]:
        """A UB tile holding n elements of `name`'s type one per 32-byte block: DataCopyPad moves one element per
        burst, and a burst's UB side starts at a block."""
        a = self.allocs[name]
        size = CPP_SIZES[a.ctype]
        if size == 1:
            raise error(f"'{self.allocs[name].user or name}' is a tile of bytes copied to or from a column of a "
                        "tensor: the AscendC back end moves columns one element per 32-byte block and gathers them "
                        "with Gather, which takes 16- and 32-bit elements; copy into an f16 or f32 tile instead",
                        a.span)
        stage = f"{name}_col"
        if stage not in self.allocs:
            self.add_alloc(Alloc(stage, "VECCALC", a.ctype, round_up(n * 32 // size, 128)))
        return stage, size

    def copy_column_in(self, region: T.Region, name: str, box, span) -> None:
        """A column of the tensor into a tile: one element per burst into a staging tile, then a Gather of every
        32-byte block's first element (zeros where the box is ragged)."""
        offset, stride, valid, n = box
        a, lay = self.allocs[name], self.layouts[name]
        stage, size = self.column_stage(name, n)
        per = 32 // size
        if a.position == "VECIN" and a.depth:
            self.queue_alloc(name)
        g = region.buffer.name
        saved, self.out = self.out, []
        self.emit(f"int64_t rows = {valid};")
        zero = (f"Duplicate({stage}.ReinterpretCast<int16_t>(), int16_t(0), {self.allocs[stage].count});"
                if size == 2 else f"Duplicate({stage}.ReinterpretCast<float>(), 0.0f, {self.allocs[stage].count});")
        self.out.append(Block(f"if (rows < {n})", [Call(zero, "V", (), (stage,))]))
        self.out.append(Block("if (rows > 0)", [
            Call(f"DataCopyExtParams p{{(uint16_t)rows, {size}, (uint32_t)(({stride}) - 1) * {size}, 0, 0}};"),
            Call(f"DataCopyPadExtParams<{a.ctype}> pad{{true, 0, {per - 1}, {a.ctype}(0)}};"),
            Call(f"DataCopyPad({stage}, {g}[{offset}], p, pad);", "MTE2", (g,), (stage,)),
        ]))
        body, self.out = self.out, saved
        self.out.append(Block("", body))
        if a.position == "VECIN" and a.depth:  # (the queue orders nothing here: the vector unit fills the tile)
            self.queue_pass(name)
        table = self.gather_table(lay, {"1": 0, "i": 0, "j": 32}, n * 32 - size)  # element j from block j
        raw = "half" if size == 2 else "float"
        self.v(f"Gather({name}.ReinterpretCast<{raw}>(), {stage}.ReinterpretCast<{raw}>(), "
               f"{table}.ReinterpretCast<uint32_t>(), 0, {lay.count});", [stage, table], [name])

    def copy_column_out(self, region: T.Region, name: str, box, atomic: str | None) -> None:
        """A tile into a column of the tensor: Brcb spreads its elements one per 32-byte block, then one element
        per burst."""
        offset, stride, valid, n = box
        a = self.allocs[name]
        stage, size = self.column_stage(name, n)
        bits = "uint16_t" if size == 2 else "uint32_t"
        self.v(f"Brcb({stage}.ReinterpretCast<{bits}>(), {name}.ReinterpretCast<{bits}>(), {(n + 7) // 8}, "
               "BrcbRepeatParams(1, 8));", [name], [stage])
        g = region.buffer.name
        only_first = "if (GetSubBlockIdx() == 0) " if self.side == "AIV" and not self.half_rows else ""
        write = [Call(f"{only_first}DataCopyPad({g}[{offset}], {stage}, p);", "MTE3", (stage,), (g,))]
        if atomic:
            write = [Call(f"{only_first}{ATOMIC_MODE[atomic]}<{a.ctype}>();"), *write,
                     Call(f"{only_first}SetAtomicNone();")]
        self.out.append(Block("", [
            Call(f"int64_t rows = {valid};"),
            Block("if (rows > 0)", [
                Call(f"DataCopyExtParams p{{(uint16_t)rows, {size}, 0, (uint32_t)(({stride}) - 1) * {size}, 0}};"),
                *write,
            ]),
        ]))

    def staging(self, name: str, gm_ctype: str) -> str:
        """A UB tile in the global tensor's type for a copy that also converts (Cast in or out)."""
        stage = f"{name}_{gm_ctype.replace('_t', '')}"
        if stage not in self.allocs:
            self.add_alloc(Alloc(stage, "VECCALC", gm_ctype, self.allocs[name].count))
            self.layouts[stage] = self.layouts[name]
        return stage

    def copy_in(self, region: T.Region, dst: T.Buffer, span, name: str | None = None) -> None:
        name = name or dst.name
        a = self.allocs[name]
        gm_ctype = ctype(region.buffer.dtype)
        if gm_ctype != a.ctype:
            stage = self.staging(name, gm_ctype)
            self.copy_in(region, dst, span, name=stage)
            self.first_touch(name)
            self.convert(name, a.ctype, stage, gm_ctype, a.count, dst.dtype.name)
            return
        lay = self.layouts[name]
        box = self.column_box(region, lay, span)
        if box is not None:
            return self.copy_column_in(region, name, box, span)
        if a.position == "VECIN" and a.depth:
            self.queue_alloc(name)
        tile = (lay.rows, lay.cols)
        offset, row_stride, vrows, vcols, nrows, ncols = self.gm_box(region, tile, span)
        size = CPP_SIZES[a.ctype]
        g = region.buffer.name
        saved, self.out = self.out, []
        self.emit(f"int64_t rows = {vrows}, cols = {vcols};")
        zero = (f"Duplicate({name}.ReinterpretCast<int16_t>(), int16_t(0), {a.count * size // 2});"
                if a.ctype in ("bfloat16_t", "uint8_t", "int8_t") else f"Duplicate({name}, {a.ctype}(0), {a.count});")
        self.out.append(Block(f"if (rows < {nrows} || cols < {ncols})", [Call(zero, "V", (), (name,))]))
        gap = f"(uint32_t)(({row_stride}) - cols) * {size}" if row_stride != "0" else "0"
        pad_row = lay.cols_pad * size if lay.is_2d else round_up(ncols * size, 32)
        inner = [
            Call(f"uint32_t bytes = (uint32_t)cols * {size}, padded = (bytes + 31) / 32 * 32;"),
            Call(f"DataCopyExtParams p{{(uint16_t)rows, bytes, {gap}, ({pad_row} - padded) / 32, 0}};"),
            Call(f"DataCopyPadExtParams<{a.ctype}> pad{{true, 0, (uint8_t)((padded - bytes) / {size}), "
                 f"{a.ctype}(0)}};"),
            Call(f"DataCopyPad({name}, {g}[{offset}], p, pad);", "MTE2", (g,), (name,)),
        ]
        self.out.append(Block("if (rows > 0 && cols > 0)", inner))
        body, self.out = self.out, saved
        self.out.append(Block("", body))
        if a.position == "VECIN" and a.depth:
            self.queue_pass(name)

    def copy_out(self, src: T.Buffer, region: T.Region, span, name: str | None = None,
                 atomic: str | None = None, limits: dict[int, str] | None = None) -> None:
        """A tile's valid box to global memory with DataCopyPad; with `atomic` (add, max, min) in the 910B's atomic
        mode, which combines the written elements with global memory's."""
        name = name or src.name
        a = self.allocs[name]
        gm_ctype = ctype(region.buffer.dtype)
        if gm_ctype != a.ctype:
            if a.depth:
                raise error("a converting copy out of a queue buffer", span)
            stage = self.staging(name, gm_ctype)
            self.convert(stage, gm_ctype, name, a.ctype, a.count, region.buffer.dtype.name)
            return self.copy_out(src, region, span, name=stage, atomic=atomic, limits=limits)
        lay = self.layouts[name]
        self.first_touch(name)
        if a.position == "VECOUT" and a.depth:
            self.queue_pass(name)
        box = self.column_box(region, lay, span, limits)
        if box is not None:
            self.copy_column_out(region, name, box, atomic)
        else:
            self.copy_row_box(src, region, span, name, atomic, limits)
        if a.position == "VECOUT" and a.depth:
            self.emit(f"{name}_que.FreeTensor({name});", ordered=(name,))
            self.declared.discard(name)

    def copy_row_box(self, src: T.Buffer, region: T.Region, span, name: str, atomic: str | None,
                     limits: dict[int, str] | None) -> None:
        a, lay = self.allocs[name], self.layouts[name]
        offset, row_stride, vrows, vcols, nrows, ncols = self.gm_box(region, (lay.rows, lay.cols), span, limits)
        size = CPP_SIZES[a.ctype]
        g = region.buffer.name
        gap = f"(uint32_t)(({row_stride}) - cols) * {size}" if row_stride != "0" else "0"
        pad_row = lay.cols_pad * size if lay.is_2d else round_up(ncols * size, 32)
        only_first = "if (GetSubBlockIdx() == 0) " if self.side == "AIV" and not self.half_rows else ""
        write = [Call(f"{only_first}DataCopyPad({g}[{offset}], {name}, p);", "MTE3", (name,), (g,))]
        if atomic:
            write = [Call(f"{only_first}{ATOMIC_MODE[atomic]}<{a.ctype}>();"), *write,
                     Call(f"{only_first}SetAtomicNone();")]
        body = [
            Call(f"int64_t rows = {vrows}, cols = {vcols};"),
            Block("if (rows > 0 && cols > 0)", [
                Call(f"uint32_t bytes = (uint32_t)cols * {size}, padded = (bytes + 31) / 32 * 32;"),
                Call(f"DataCopyExtParams p{{(uint16_t)rows, bytes, ({pad_row} - padded) / 32, {gap}, 0}};"),
                *write,
            ]),
        ]
        self.out.append(Block("", body))


def _rename_buffers(stmts: list, names: dict[str, str]) -> list:
    """The statements with every buffer tag in `names` replaced (a view's accesses as its tensor's)."""
    import dataclasses

    def one(x):
        if isinstance(x, Block):
            return dataclasses.replace(x, body=[one(y) for y in x.body],
                                       orelse=None if x.orelse is None else [one(y) for y in x.orelse])
        return dataclasses.replace(x, reads=tuple(names.get(n, n) for n in x.reads),
                                   writes=tuple(names.get(n, n) for n in x.writes),
                                   ordered=tuple(names.get(n, n) for n in x.ordered))

    return [one(x) for x in stmts]


def _base(text: str) -> str:
    """The buffer a tensor expression (`x`, `x[r * 16]`, `x.ReinterpretCast<half>()`) names."""
    import re

    return re.match(r"[A-Za-z_][A-Za-z_0-9]*", text).group(0)


def _allocs(body: list[T.Stmt]):
    from ...ir.visit import walk_stmts

    return [s for s in walk_stmts(body) if isinstance(s, T.Alloc)]


def _walk(body):
    from ...ir.visit import walk_stmts

    return walk_stmts(body)


def lower_module(module: T.Module):
    """Every kernel's program, and the module's launch sequences (each stage is one of the kernels)."""
    from .program import LaunchSequence, Programs

    for seq in module.launches:  # (before the kernels: a counter's kernel would fail first, at its fence)
        for b in seq.scratch:
            if b.zeroed:
                raise error(f"the zeroed scratch tensor '{b.name}': the AscendC launcher does not clear scratch, and "
                            "the 910B's blocks cannot meet at a counter (its atomics return no previous value); "
                            "drop zeroed=True and write the tensor in an earlier launch", b.span)
    programs = Programs(lower_kernel(k) for k in module.kernels)
    seqs = []
    for seq in module.launches:
        host = [("uint8_t*", p.name) if isinstance(p, T.Buffer) else (scalar_type(p), p.name) for p in seq.params]
        host += [("int64_t", v.name) for v in seq.size_vars]
        scratch = []
        for b in seq.scratch:
            nbytes = " * ".join([str(b.dtype.bytes), *(f"(int64_t)({cpp(d)})" for d in b.shape)])
            scratch.append((b.name, nbytes))
        seqs.append(LaunchSequence(seq.name, host, scratch, [st.kernel for st in seq.stages]))
    programs.launches = seqs
    return programs


def lower_kernel(k: T.Kernel) -> KernelProgram:
    from .layout import kernel_row_elems, row_padding

    with row_padding(kernel_row_elems(k)):
        return _lower_kernel(k)


def _lower_kernel(k: T.Kernel) -> KernelProgram:
    plan = k.attrs["ascend"]
    mixed = plan.kernel_type == "MIX_AIC_1_2"
    if mixed:
        import copy

        from .handover import workspace_layout
        from .passes.queues import plan_queues
        from .passes.split_rows import split_rows

        workspace = workspace_layout(k)

        def aiv_copy() -> T.Kernel:
            k2 = copy.deepcopy(k)
            p2 = k2.attrs["ascend"]
            p2.queues = {}
            p2.position = {n: ("VECCALC" if p in ("VECIN", "VECOUT") else p) for n, p in p2.position.items()}
            return k2

        k_aiv = aiv_copy()
        half = split_rows(k_aiv)
        if half is None:
            k_aiv = aiv_copy()
        plan_queues(k_aiv)
        lowerings = [Lowering(k, "AIC", workspace), Lowering(k_aiv, "AIV", workspace, half)]
    else:
        lowerings = [Lowering(k)]
    sides = [lw.run_side() for lw in lowerings]
    params, globals_setup, host = [], [], []
    for p in k.params:
        if isinstance(p, T.Buffer):
            params.append(f"GM_ADDR {p.name}_addr")
            host.append(("uint8_t*", p.name))
            globals_setup.append(f"GlobalTensor<{ctype(p.dtype)}> {p.name};")
            globals_setup.append(f"{p.name}.SetGlobalBuffer((__gm__ {ctype(p.dtype)}*){p.name}_addr);")
        else:
            ty = scalar_type(p)
            params.append(f"{ty} {p.name}")
            host.append((ty, p.name))
    if mixed:
        params.append("GM_ADDR workspace_addr")
        host.append(("uint8_t*", "workspace"))
    for v in k.size_vars:
        params.append(f"int64_t {v.name}")
        host.append(("int64_t", v.name))
    grid = [cpp(g) for g in k.grid]
    return KernelProgram(k.name, plan.kernel_type, params, globals_setup, sides, grid,
                         [v.name for v in k.block_vars], host, lowerings[0].workspace_bytes, k.span)
