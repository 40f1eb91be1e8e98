"""The kernel model: a structured, fully typed program shared by every frontend and emitter.

A kernel body is a list of statements over named variables. Every operation's operands are atoms
(variable references, literals or compile-time dimensions) so nesting lives only in control flow;
every operation carries its result type and its source location. Broadcasts and implicit casts are
explicit operations, as they are in Tile IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from tileport.diagnostics import Loc
from tileport.model import ops
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ConstT, Dim, DimOp, DType, DVar, ScalarT, Sym, TileT, Type


# ---------------------------------------------------------------- atoms

@dataclass(frozen=True)
class Ref:
    name: str
    ty: Type


@dataclass(frozen=True)
class Lit:
    """A literal scalar; `ty` is the scalar type it was given where it is used."""

    value: Union[int, float, bool]
    ty: ScalarT


@dataclass(frozen=True)
class CDim:
    """A compile-time integer (literal or expression over constant parameters), used as a scalar."""

    dim: Dim

    @property
    def ty(self) -> Type:
        return ScalarT("i32")


Atom = Union[Ref, Lit, CDim]


# ---------------------------------------------------------------- operations and statements

@dataclass(frozen=True)
class Op:
    """One operation. `kind` names it; `tileport.model.ops` declares every kind (checked on construction). A
    plain string naming a kind is taken for its `OpKind`."""

    kind: OpKind
    args: tuple[Atom, ...]
    ty: Type | None
    loc: Loc
    attrs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ops.kind(self))
        ops.check(self)

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default


@dataclass
class Let:
    """Bind (or, when `update` is set, reassign an outer variable) `name` to the result of `op`."""

    name: str
    op: Op
    update: bool = False


@dataclass
class Do:
    """An operation run for its effect (stores, scatters)."""

    op: Op


@dataclass
class For:
    index: str
    start: Atom
    stop: Atom
    step: Atom
    body: "Block"
    loc: Loc
    carried: tuple[str, ...] = ()  # outer variables the body reassigns


@dataclass
class While:
    """`while test: body`. `cond` computes `test` at the start of every iteration (the loop exits when
    it is false); `test` None loops until a `break` (`while True`)."""

    cond: "Block"
    test: Atom | None
    body: "Block"
    loc: Loc
    carried: tuple[str, ...] = ()  # outer variables the condition or body reassigns

    @property
    def blocks(self) -> tuple["Block", "Block"]:
        return (self.cond, self.body)


@dataclass
class If:
    cond: Atom
    then: "Block"
    orelse: "Block"
    loc: Loc
    assigned: tuple[str, ...] = ()  # outer variables either branch reassigns
    # `x = a if c else b`: the If is an expression bound to `result` (each branch ends with a `yield` Do)
    result: str | None = None
    result_ty: Any = None


@dataclass
class Return:
    loc: Loc


@dataclass
class Break:
    loc: Loc


@dataclass
class Continue:
    loc: Loc


Stmt = Union[Let, Do, For, While, If, Return, Break, Continue]


@dataclass
class Block:
    stmts: list[Stmt] = field(default_factory=list)


# ---------------------------------------------------------------- kernels

@dataclass(frozen=True)
class Param:
    name: str  # as in the source (the C ABI and Python API use it)
    ty: Union[ArrayT, ScalarT, ConstT]
    const_type: str | None = None  # "int" | "bool" | "float" for ct.Constant parameters
    ident_name: str = ""  # the identifier in generated code, when `name` is not a safe one

    @property
    def ident(self) -> str:
        """The parameter's identifier in generated code."""
        return self.ident_name or self.name

    rust = ident  # former name, kept until every frontend says `ident`

    @property
    def is_array(self) -> bool:
        return isinstance(self.ty, ArrayT)

    @property
    def is_const(self) -> bool:
        return self.const_type is not None


@dataclass
class Kernel:
    name: str
    params: list[Param]
    body: Block
    loc: Loc
    hints: dict[str, int] = field(default_factory=dict)  # occupancy, num_ctas (entry hints)
    dtype_vars: dict[DVar, tuple[str, ...]] = field(default_factory=dict)  # generic -> dtypes in use
    doc: str = ""
    module_name: str = ""  # the source file's module (file stem)
    base_name: str = ""  # the source kernel's name (differs from `name` for specialized entries)
    pinned: dict[str, Any] = field(default_factory=dict)  # constants fixed by literal specialization
    signature: tuple[str, ...] = ()  # every source parameter, in order (pinned constants included)
    notes: list[str] = field(default_factory=list)  # assumptions the translator made (reported, not fatal)
    # array parameter -> the N-D view a pointer-based source (Triton) addresses it through: {"strides": [...],
    # "extents": [... | None]}, expressions over the kernel's scalar and constant parameters
    views: dict[str, dict] = field(default_factory=dict)
    # the arrays' length-1 axes get the static length 1 at launch, as cuTile Python's launcher specializes them
    launch_unit_axes: bool = False

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def param_by_ident(self, ident: str) -> Param:
        """The parameter bound to identifier `ident` (source names that are target keywords are renamed)."""
        return next(p for p in self.params if p.ident == ident)

    param_by_rust = param_by_ident  # former name, kept until every frontend says `param_by_ident`

    @property
    def const_params(self) -> list[Param]:
        return [p for p in self.params if p.is_const]

    @property
    def array_params(self) -> list[Param]:
        return [p for p in self.params if p.is_array]


@dataclass
class KernelModule:
    """Every kernel of one source file."""

    source: str  # path as given
    name: str  # module name (file stem)
    kernels: list[Kernel]


def sym_names(d: Any) -> set[str]:
    """Constant parameters a dimension refers to (none for literals and non-dimension values)."""
    if isinstance(d, Sym):
        return {d.name}
    if isinstance(d, DimOp):
        return sym_names(d.lhs) | sym_names(d.rhs)
    return set()


def walk(block: Block):
    """Every statement of a block, depth first."""
    for s in block.stmts:
        yield s
        if isinstance(s, For):
            yield from walk(s.body)
        elif isinstance(s, While):
            yield from walk(s.cond)
            yield from walk(s.body)
        elif isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)


__all__ = [
    "Loc", "Ref", "Lit", "CDim", "Atom", "Op", "OpKind", "Let", "Do", "For", "While", "If", "Return", "Break",
    "Continue", "Stmt", "Block", "Param", "Kernel", "KernelModule", "sym_names", "walk",
    "ArrayT", "ConstT", "ScalarT", "TileT", "DType", "DVar",
]
