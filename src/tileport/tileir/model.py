"""The Tile IR module model: functions, blocks, ops and SSA values.

Values are objects: an operand *is* the Value it uses, so dataflow is followed by reference and
SSA names never matter. `Value.name` is only for printing (set by canonicalization).
Ops, values and blocks compare by identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Union

from .attrs import Hints
from .types import FunctionType, Type


@dataclass(eq=False, slots=True)
class Value:
    type: Type
    owner: Union["Op", "Block", None] = None  # the defining op, or the block for block arguments
    index: int = 0                            # result index, or block argument index
    name: str | None = None

    @property
    def op(self) -> "Op | None":
        return self.owner if isinstance(self.owner, Op) else None


@dataclass(eq=False, slots=True)
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)
    parent: "Op | None" = None  # the op owning the region of this block; None for a function body

    def add_arg(self, t: Type) -> Value:
        v = Value(t, self, len(self.args))
        self.args.append(v)
        return v


@dataclass(eq=False, slots=True)
class Region:
    blocks: list[Block] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class Op:
    name: str
    operands: list[Value] = field(default_factory=list)
    # One role per operand: the operand's name in the op definition ("lhs", "view", "index", ...).
    operand_roles: list[str] = field(default_factory=list)
    results: list[Value] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    regions: list[Region] = field(default_factory=list)
    loc: str | None = None          # "file:line:col" from debug info
    parent: Block | None = None
    equiv_rule: str | None = None   # set when a SEMANTIC_EQUIV rewrite produced this op

    def add_result(self, t: Type) -> Value:
        v = Value(t, self, len(self.results))
        self.results.append(v)
        return v

    @property
    def hints(self) -> Hints | None:
        h = self.attributes.get("optimization_hints")
        return h if isinstance(h, Hints) else None

    def operand(self, role: str) -> Value | None:
        """The first operand with this role, if any."""
        for r, v in zip(self.operand_roles, self.operands):
            if r == role:
                return v
        return None

    def operands_with(self, role: str) -> list[Value]:
        return [v for r, v in zip(self.operand_roles, self.operands) if r == role]


@dataclass(eq=False, slots=True)
class Function:
    name: str
    type: FunctionType
    body: Block
    is_entry: bool = True
    hints: Hints | None = None
    private: bool = False
    loc: str | None = None
    # memory op -> memory ops its token orders it after (recorded before tokens are stripped)
    memory_order: dict[Op, list[Op]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def args(self) -> list[Value]:
        return self.body.args


@dataclass(eq=False, slots=True)
class Global:
    name: str
    type: Type
    data: bytes
    alignment: int
    constant: bool = False
    visibility: str = "public"


@dataclass(eq=False, slots=True)
class Module:
    version: str                              # "13.4"
    functions: list[Function] = field(default_factory=list)
    globals: list[Global] = field(default_factory=list)
    producer: str | None = None
    preview: bool = False                     # header preview bit

    @property
    def entries(self) -> list[Function]:
        return [f for f in self.functions if f.is_entry]


def walk_block(block: Block) -> Iterator[Op]:
    """Every op of a block and of its nested regions, in pre-order (bytecode order)."""
    for op in block.ops:
        yield op
        for region in op.regions:
            for b in region.blocks:
                yield from walk_block(b)


def walk(function: Function) -> Iterator[Op]:
    return walk_block(function.body)


def blocks(function: Function) -> Iterator[Block]:
    """Every block of a function (its body and all nested region blocks)."""
    stack = [function.body]
    while stack:
        b = stack.pop()
        yield b
        for op in b.ops:
            for region in op.regions:
                stack.extend(region.blocks)


def redirect(function: Function, mapping: dict[Value, Value]) -> None:
    """Make every user of a key of `mapping` use the mapped value instead."""
    if mapping:
        for op in walk(function):
            op.operands = [mapping.get(v, v) for v in op.operands]


def clone_module(module: Module) -> Module:
    """A deep copy of the op structure (types and attribute values are immutable and shared)."""
    out = Module(module.version, globals=list(module.globals), producer=module.producer,
                 preview=module.preview)
    for f in module.functions:
        vmap: dict[Value, Value] = {}
        body = _clone_block(f.body, vmap, None)
        out.functions.append(Function(f.name, f.type, body, f.is_entry, f.hints, f.private, f.loc))
    return out


def _clone_block(block: Block, vmap: dict[Value, Value], parent: Op | None) -> Block:
    nb = Block(parent=parent)
    for a in block.args:
        vmap[a] = nb.add_arg(a.type)
        vmap[a].name = a.name
    for op in block.ops:
        nop = Op(op.name, [vmap[v] for v in op.operands], list(op.operand_roles),
                 attributes=dict(op.attributes), loc=op.loc, parent=nb, equiv_rule=op.equiv_rule)
        for r in op.results:
            vmap[r] = nop.add_result(r.type)
            vmap[r].name = r.name
        nop.regions = [Region([_clone_block(b, vmap, nop) for b in reg.blocks]) for reg in op.regions]
        nb.ops.append(nop)
    return nb
