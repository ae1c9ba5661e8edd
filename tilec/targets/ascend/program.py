"""The AscendC program a kernel lowers to: on-chip allocations, and a tree of API calls, each tagged with the
pipe that executes it and the buffers it reads and writes (what sync insertion needs), printed by codegen."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...diagnostics import Span
from .chip import POSITION_MEMORY, round_up

CPP_SIZES = {"half": 2, "bfloat16_t": 2, "float": 4, "int32_t": 4, "uint32_t": 4, "uint8_t": 1, "int16_t": 2,
             "int8_t": 1}


@dataclass
class Alloc:
    """One on-chip buffer: a TBuf (depth 0) or a TQue of `depth` buffers, `count` elements of `ctype` each."""

    name: str
    position: str  # VECIN VECOUT VECCALC A1 B1 A2 B2 CO1
    ctype: str
    count: int
    depth: int = 0
    span: Span | None = None
    user: str | None = None  # the .tile buffer it holds (None: a temporary of the lowering)

    @property
    def memory(self) -> str:
        return POSITION_MEMORY[self.position]

    @property
    def buffer_bytes(self) -> int:
        return round_up(self.count * CPP_SIZES[self.ctype], 32)

    @property
    def bytes(self) -> int:
        return self.buffer_bytes * max(1, self.depth)

    @property
    def holder(self) -> str:
        return f"{self.name}_{'que' if self.depth else 'buf'}"


@dataclass
class Call:
    """One statement of the kernel: an API call on `pipe` (None: scalar code, or a queue operation whose events
    order the buffers in `ordered`)."""

    text: str
    pipe: str | None = None  # S V M MTE1 MTE2 MTE3 FIX
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    ordered: tuple[str, ...] = ()  # buffers a queue event (DeQue, AllocTensor) orders for their next user


@dataclass
class Block:
    """`head { body }` (a for loop or an if); `orelse` prints as `} else {`."""

    head: str
    body: list = field(default_factory=list)
    orelse: list | None = None
    loop: bool = False


Stmt = Call | Block


@dataclass
class Side:
    """The code one kind of core runs: all of a single-unit kernel, or the AIC / the AIV half of a mixed one."""

    guard: str | None  # None | "ASCEND_IS_AIC" | "ASCEND_IS_AIV"
    group: str  # C++: this core's group (block) index
    allocs: list[Alloc]
    setup: list[Stmt]  # once per core, before the loop over tiles
    body: list[Stmt]  # one tile (block) of the grid
    globals_setup: list[str] = field(default_factory=list)  # GM workspace views


@dataclass
class KernelProgram:
    name: str
    kernel_type: str  # AIV_ONLY AIC_ONLY MIX_AIC_1_2
    params: list[str]  # C++ parameter declarations
    globals_setup: list[str]  # GlobalTensor declarations
    sides: list[Side]
    grid: list[str]  # C++ expressions of the 3 grid extents
    block_vars: list[str]
    host_params: list[tuple[str, str]]  # (C++ type, name) of the launch function
    workspace_bytes: int = 0  # GM workspace per block (mixed kernels)
    span: Span | None = None

    @property
    def allocs(self) -> list[Alloc]:
        return [a for s in self.sides for a in s.allocs]


@dataclass
class LaunchSequence:
    """A kernel function of several launches (`with Kernel(...)` blocks, alloc_global scratch between them), for
    the launcher header: its signature, its scratch tensors' byte sizes (C expressions of the sizes) and its stage
    kernels in order (their parameters are named as the function's parameters and scratch tensors)."""

    name: str
    host_params: list[tuple[str, str]]  # tensors (uint8_t*), scalars, sizes
    scratch: list[tuple[str, str]]  # (name, C expression of its bytes)
    stages: list[str]


class Programs(list):
    """The kernel programs of a module, with its launch sequences."""

    launches: list[LaunchSequence] = []
