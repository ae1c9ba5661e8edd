"""Syntax tree of a .tile file, as parsed, before names and types are resolved."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Span


@dataclass(eq=False)
class Node:
    span: Span


# ------------------------------------------------------------------ expressions


@dataclass(eq=False)
class Name(Node):
    id: str  # may be dotted after the T. prefix is stripped: "T.copy" -> "copy"


@dataclass(eq=False)
class Number(Node):
    value: int | float


@dataclass(eq=False)
class String(Node):
    value: str


@dataclass(eq=False)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(eq=False)
class UnaryOp(Node):
    op: str  # - + ~ not
    operand: Node


@dataclass(eq=False)
class CompareOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(eq=False)
class BoolOp(Node):
    op: str  # and | or
    values: list[Node]


@dataclass(eq=False)
class Keyword(Node):
    name: str
    value: Node


@dataclass(eq=False)
class CallExpr(Node):
    func: Node
    args: list[Node]
    kwargs: list[Keyword]


@dataclass(eq=False)
class Slice(Node):
    lower: Node | None
    upper: Node | None


@dataclass(eq=False)
class Subscript(Node):
    value: Node
    items: list[Node]  # expressions and Slices


@dataclass(eq=False)
class Attribute(Node):
    value: Node
    attr: str


@dataclass(eq=False)
class TupleExpr(Node):
    items: list[Node]


@dataclass(eq=False)
class ListExpr(Node):
    items: list[Node]


@dataclass(eq=False)
class IfExpr(Node):
    """`a if cond else b`"""
    cond: Node
    then: Node
    orelse: Node


@dataclass(eq=False)
class DictExpr(Node):
    items: list[tuple[Node, Node]]


@dataclass(eq=False)
class LambdaExpr(Node):
    """`lambda i, j: body` (only as T.Layout's index map)"""
    params: list[tuple[str, Span]]
    body: Node


# ------------------------------------------------------------------ statements


@dataclass(eq=False)
class AssignStmt(Node):
    target: Node  # Name or Subscript
    value: Node
    op: str | None = None  # "+" for +=, ...


@dataclass(eq=False)
class ExprStmt(Node):
    value: Node


@dataclass(eq=False)
class PassStmt(Node):
    pass


@dataclass(eq=False)
class BreakStmt(Node):
    pass


@dataclass(eq=False)
class ContinueStmt(Node):
    pass


@dataclass(eq=False)
class AssertStmt(Node):
    """`assert cond, "message"`: a kernel's condition on its sizes (a contract)."""

    cond: Node
    message: Node | None


@dataclass(eq=False)
class ReturnStmt(Node):
    value: Node | None


@dataclass(eq=False)
class ForStmt(Node):
    targets: list[tuple[str, Span]]
    iter: Node
    body: list[Node]


@dataclass(eq=False)
class WhileStmt(Node):
    cond: Node
    body: list[Node]


@dataclass(eq=False)
class IfStmt(Node):
    cond: Node
    body: list[Node]
    orelse: list[Node]


@dataclass(eq=False)
class WithStmt(Node):
    context: Node
    targets: list[tuple[str, Span]]
    body: list[Node]


# ------------------------------------------------------------------ top level


@dataclass(eq=False)
class TypeExpr(Node):
    dtype: str
    dims: list[Node] | None  # None for a scalar parameter
    dtype_node: Node | None = None  # TileLang's T.Tensor((M, K), dtype): the dtype argument


@dataclass(eq=False)
class KernelParam(Node):
    name: str
    type: TypeExpr
    is_output: bool


@dataclass(eq=False)
class DefParam(Node):
    name: str
    default: Node | None


@dataclass(eq=False)
class ImportDecl(Node):
    path: str


@dataclass(eq=False)
class ConstDecl(Node):
    name: str
    value: Node
    names: tuple[str, ...] = ()  # `const (a, b) = tune(...)`: every name (name is the first); () for one name


@dataclass(eq=False)
class DefDecl(Node):
    name: str
    params: list[DefParam]
    body: list[Node]


@dataclass(eq=False)
class KernelDecl(Node):
    name: str
    params: list[KernelParam]
    body: list[Node]


@dataclass(eq=False)
class File(Node):
    decls: list[Node] = field(default_factory=list)
