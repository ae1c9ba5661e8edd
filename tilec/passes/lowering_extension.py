"""What a target adds to lower-to-simt, and the narrow context it talks to.

The generic lowering (lower_to_simt.Lowerer) turns tile ops into per-thread code for every SIMT target. A
target whose chip has machinery the generic lowering does not know (sm90: TMA, mbarrier pipelines, wgmma,
warp specialization) names a LoweringExtension subclass in `Target.lowering_extension` ("module:Class");
the lowering builds one per kernel and calls its hooks at fixed points. The base class adds nothing, so a
target without an extension lowers exactly as the generic code says.

An extension talks to the lowering only through the context `cx` it is given (the Lowerer), using:
  * what is being lowered: `k` (the Tile IR kernel), `target`, `rep`, `layouts` and `plans` (the decisions of
    layout-inference and pipeline-planning), `tid` (the thread index);
  * emitting code: `emit`, `block`, `declare`, `fresh`, `names`, `stmt` (lower one Tile IR statement);
  * values and buffers: `lx` (lower an expression), `subst` (Tile IR variable -> lowered value), `sbuf`,
    `buffers`, `shared` (the kernel's shared buffers), `stage_offset` (pipeline stage of a shared tile),
    `gemm_dims`;
  * barrier bookkeeping: `barrier`, `before_shared_access`, and the flags `smem_dirty`, `smem_read`,
    `generic_smem_writes` (threads wrote shared memory since the last async-proxy fence).
Extensions never call each other, and the generic lowering never reads an extension's state beyond the
hooks below.
"""

from __future__ import annotations

import importlib

from ..ir import simt as S
from ..ir import tile as T


class LoweringExtension:
    """The hooks; each default leaves the generic lowering as it is."""

    barrier_threads: int | None = None  # threads a block barrier waits for (None: the whole block)
    barrier_index: T.Expr | None = None  # that named barrier's id (None: 1), when barrier_threads is set

    def __init__(self, cx) -> None:
        self.cx = cx

    def before_stmt(self, s: T.Stmt) -> None:
        """Called before the barrier bookkeeping of every top-level statement the lowering visits."""

    def before_loop(self, loop: T.For) -> None:
        """Called before a serial or pipelined loop is entered (its barrier state must hold for every iteration)."""

    def lower_pipelined(self, s: T.For, plan) -> bool:
        """Lower a Pipelined loop whose plan's mechanism this extension owns; False: not handled."""
        return False

    def after_async_copies_landed(self, loop: T.For) -> None:
        """In a cp.async pipeline, after the wait for the current stage and before the barrier that publishes it."""

    def realign_pipeline_copies(self, loop: T.For) -> bool:
        """Whether a cp.async pipeline's copies of rows that are not 16-byte aligned move 16 bytes a thread, shifted
        out of the aligned chunks that cover them (tilec/ops/copy.py), rather than an element at a time. The code
        costs registers on the aligned path too, so a target asks for it where it measured the gain."""
        return False

    def place_next_stage_copies(self, loop: T.For, stmts: list[S.SStmt]) -> bool:
        """In a cp.async pipeline, the lowered copies of a later stage (and their commit): True when the extension
        emits them itself while the loop's body is lowered (once, at a point of every iteration); False: the
        generic lowering issues them at the iteration's start."""
        return False

    def lower_copy(self, s: T.Copy) -> bool:
        """Lower a copy in a way of this target's own; False: the generic copy."""
        return False

    def finish(self, body: list[S.SStmt]) -> tuple[list[S.SStmt], int]:
        """The kernel body as launched and the block size (the extension may add threads)."""
        return body, self.cx.k.threads

    def launch_grid(self, grid: list[T.Expr]) -> list[T.Expr]:
        return grid

    def assign_value(self, s: T.Assign) -> T.Expr | None:
        """The Tile IR value an assignment takes instead of its own (sm90 clusters recompute the rasterized block
        order over the grid of clusters); None: its own."""
        return None

    def kernel_attrs(self) -> dict[str, object]:
        """Entries for SKernel.attrs (what the launcher needs, e.g. TMA tensor maps)."""
        return {}


def extension_for(target, cx) -> LoweringExtension:
    """The target's lowering extension (Target.lowering_extension), or the base that adds nothing."""
    spec = getattr(target, "lowering_extension", None)
    if not spec:
        return LoweringExtension(cx)
    module, _, cls = spec.partition(":")
    return getattr(importlib.import_module(module), cls)(cx)
