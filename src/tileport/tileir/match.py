"""Matching ops of two canonical functions by dataflow, not by position.

Every value gets two *keys*, built bottom-up from the ops that compute it and interned as ints:

- the strict key covers everything the comparators look at (op names, attributes, result types,
  constant values, which parameter a leaf is), so equal strict keys mean equal computations;
- the loose key keeps only the dataflow shape: op names and operand structure. Constants and
  runtime scalars are all one "leaf", a memory access is (direction, accessed tensor) whatever
  its family (view or pointer) and addressing, and loop-carried values are seen through their
  loop (a `for` result is the value its body continues with; an iteration argument is its
  initial value). So one local defect does not change the keys of everything downstream.

Ops are then paired in passes, each over the ops still unpaired: equal strict keys, equal loose
keys, then, for op kinds whose presence matters (memory ops, views, MMA, reductions, loops, casts,
special math), the same kind and accessed tensor, and memory ops of the same direction. Within a
group, ops pair in program order. What is left pairs by name as *weak pairs*, which are not
compared but locate a structural difference at its frontier. Transparent ops (assume, reshape,
broadcast), constants and terminators are never paired: they are looked through or compared as
leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ops as K
from .attrs import TypedFloat, TypedInt, constant_value, float_from_bits
from .model import Block, Function, Op, Value, walk_block
from .printer import op_line
from .report import Location
from .types import TensorViewType, is_pointer_tile

LEAF = ("leaf",)


def scalar_key(x: Any) -> Any:
    """A type-independent identity of one constant element (f32 0.0 == f16 0.0; -0.0 != 0.0)."""
    if isinstance(x, TypedFloat):
        value = float_from_bits(x.type, x.bits)
        if value is None:
            return ("bits", x.type.name, x.bits)
        return ("f", repr(value))
    if isinstance(x, TypedInt):
        return ("i", x.value)
    return ("i", x) if isinstance(x, int) else ("raw", x)


def const_key(op: Op) -> tuple:
    t = op.results[0].type
    return tuple(scalar_key(x) for x in constant_value(t, op.attributes["value"]))


@dataclass
class FunctionIndex:
    """Per-function facts the matcher and comparators share."""
    function: Function
    order: dict[Op, int] = field(default_factory=dict)          # pre-order position
    candidates: list[Op] = field(default_factory=list)          # ops that take part in pairing
    pointer_ordinal: dict[Value, int] = field(default_factory=dict)
    arg_role: dict[Value, tuple] = field(default_factory=dict)
    loop_of: dict[Op, Op | None] = field(default_factory=dict)  # innermost enclosing for/loop
    tensor_of: dict[Op, int | None] = field(default_factory=dict)  # memory op -> pointer ordinal
    users: dict[Value, list[tuple[Op, int]]] = field(default_factory=dict)
    address_only: set[Op] = field(default_factory=set)

    @classmethod
    def build(cls, function: Function, declared_roles: dict[int, tuple] | None = None) -> "FunctionIndex":
        """`declared_roles` names parameters the producer declares (index -> role, negative indices
        count from the end), e.g. a stride the launcher passes as an explicit scalar argument."""
        fx = cls(function)
        fx._roles()
        for index, role in (declared_roles or {}).items():
            if role[0] in ("shape", "stride"):  # a partition's parameters are positional scalars to the diff
                fx.arg_role[function.args[index]] = role
        fx._number_scalars()  # after the declared roles: a declared shape or stride is no positional scalar
        fx._walk(function.body, None, False)
        for op in fx.order:
            for i, v in enumerate(op.operands):
                fx.users.setdefault(v, []).append((op, i))
            if K.is_memory(op):
                addr = K.address_operand(op)
                base = K.base_pointer(addr) if addr is not None else None
                fx.tensor_of[op] = fx.pointer_ordinal.get(base) if base is not None else None
        fx._address_only()
        return fx

    def _roles(self) -> None:
        """Name each parameter by what it is, so programs with different calling conventions
        compare: pointers by ordinal (tensor #k); scalars that a make_tensor_view uses as the
        dynamic shape or stride of dimension d of tensor #k as ("shape"|"stride", k, d); other
        scalars by position among the remaining scalars after the pointer they follow."""
        for a in self.function.args:
            if is_pointer_tile(a.type):
                self.pointer_ordinal[a] = len(self.pointer_ordinal)
                self.arg_role[a] = ("ptr", self.pointer_ordinal[a])
        for op in walk_block(self.function.body):
            if op.name != "make_tensor_view" or not isinstance(op.results[0].type, TensorViewType):
                continue
            base_operand = op.operand("base")
            base = K.base_pointer(base_operand) if base_operand is not None else None
            if base not in self.pointer_ordinal:
                continue
            tv = op.results[0].type
            for kind, dims, values in (("shape", tv.shape, op.operands_with("dynamicShape")),
                                       ("stride", tv.strides, op.operands_with("dynamicStrides"))):
                dynamic_dims = [d for d, extent in enumerate(dims) if extent is None]
                for d, v in zip(dynamic_dims, values):
                    v = K.root(v)
                    if K.is_function_arg(v):
                        self.arg_role.setdefault(v, (kind, self.pointer_ordinal[base], d))

    def _number_scalars(self) -> None:
        ptr, j = None, 0
        for a in self.function.args:
            if a in self.pointer_ordinal:
                ptr, j = self.pointer_ordinal[a], 0
            elif a not in self.arg_role:
                self.arg_role[a] = ("scalar", ptr, j)
                j += 1

    def _walk(self, block: Block, loop: Op | None, in_combiner: bool) -> None:
        for op in block.ops:
            self.order[op] = len(self.order)
            self.loop_of[op] = loop
            # Ops of reduce/scan bodies are compared as the combiner of their reduction.
            if not in_combiner and not K.is_transparent(op) and op.name != "constant" \
                    and op.name not in K.TERMINATORS:
                self.candidates.append(op)
            inner_loop = op if op.name in K.LOOPS else loop
            for region in op.regions:
                for b in region.blocks:
                    self._walk(b, inner_loop, in_combiner or op.name in K.REDUCTIONS)

    def _address_only(self) -> None:
        """Ops whose results only feed addresses, view construction, loop bounds or conditions."""
        def address_use(user: Op, pos: int) -> bool:
            role = user.operand_roles[pos]
            if K.is_memory(user):
                return role in K.ADDRESS_ROLES
            if user.name in K.VIEW_OPS:
                return True
            if user.name in K.LOOPS:
                return role in K.LOOP_BOUND_ROLES
            if user.name == "if":
                return True
            return user in self.address_only

        for op in sorted(self.order, key=self.order.__getitem__, reverse=True):
            uses = [u for r in op.results for u in self.users.get(r, [])]
            # Unused results (the y/z of get_tile_block_id) do not count against it.
            if uses and all(address_use(u, p) for u, p in uses):
                self.address_only.add(op)

    def location(self, op: Op) -> Location:
        return Location(self.function.name, op_line(op), op.loc)


def describe_role(role: tuple) -> str:
    """Readable text of a parameter role (see FunctionIndex._roles)."""
    if role[0] == "ptr":
        return f"(tensor #{role[1]})"
    if role[0] in ("shape", "stride"):
        return f"({role[0]} {role[2]} of tensor #{role[1]})"
    where = "before the first tensor" if role[1] is None else f"after tensor #{role[1]}"
    return f"(scalar #{role[2]} {where})"


class Keys:
    """Strict or loose keys of the values and ops of one function (interned in a shared table)."""

    def __init__(self, fx: FunctionIndex, strict: bool, intern: dict[tuple, int]):
        self.fx = fx
        self.strict = strict
        self.intern = intern
        self.memo: dict[Value, int] = {}
        self.op_memo: dict[Op, int] = {}

    def warm(self, block: Block) -> None:
        """Key every value in an order where operands come first, so `value()` never recurses
        deeply (long chains of ops would otherwise exceed Python's recursion limit)."""
        for op in block.ops:
            for region in op.regions:
                for b in region.blocks:
                    for a in b.args:
                        self.value(a)
                    self.warm(b)
            for r in op.results:
                self.value(r)
            self.op(op)

    def _id(self, t: tuple) -> int:
        i = self.intern.get(t)
        if i is None:
            i = self.intern[t] = len(self.intern)
        return i

    def value(self, v: Value) -> int:
        k = self.memo.get(v)
        if k is None:
            alias = self.alias(v)
            k = self.value(alias) if alias is not None else self._id(self._value(v))
            self.memo[v] = k
        return k

    def alias(self, v: Value) -> Value | None:
        """The value `v` is keyed as: the operand of a transparent op and, for loose keys, the
        operand of a numeric cast and what a loop-carried value stands for (a `for` result: the
        continued value; an iteration argument: its initial value)."""
        op = v.op
        if K.is_transparent(op):
            return op.operands[0]  # type: ignore[union-attr]
        if self.strict:
            return None
        if op is not None and op.name in K.NUMERIC_CASTS:
            # Casts are compared as ops of their own; as dataflow they pass their value on, so an
            # extra or missing conversion does not change the keys of everything downstream.
            return op.operands[0]
        if op is not None and op.name == "for":
            return K.loop_result_source(op, v.index)
        if op is None and not K.is_function_arg(v):
            return K.loop_init(v)
        return None

    def _value(self, v: Value) -> tuple:
        fx = self.fx
        if K.is_function_arg(v):
            if v in fx.pointer_ordinal:
                return ("ptr", fx.pointer_ordinal[v])
            return ("arg", fx.arg_role[v]) if self.strict else LEAF
        op = v.op
        if op is None:
            return self._block_arg(v)
        if op.name == "constant":
            return ("const", const_key(op)) if self.strict else LEAF
        if op.name == "for":
            src = K.loop_result_source(op, v.index)
            return ("for_res", self.op(op), v.index, self.value(src) if src is not None else -1)
        if op.name == "if":
            then, other = K.region_yield(op, 0, v.index), K.region_yield(op, 1, v.index)
            return ("if_res", self.op(op), v.index,
                    self.value(then) if then is not None else -1,
                    self.value(other) if other is not None else -1)
        return ("res", self.op(op), v.index)

    def _block_arg(self, v: Value) -> tuple:
        assert isinstance(v.owner, Block) and v.owner.parent is not None
        parent = v.owner.parent
        init = K.loop_init(v)
        if init is not None:  # strict only: loose keys alias it to the initial value
            return ("iter", v.index, self.value(init))
        if parent.name == "for" and v.index == 0:
            if self.strict:
                return ("iv",) + tuple(self.value(parent.operands[i]) for i in range(3))
            return ("iv",)
        return ("barg", parent.name if parent.name in K.REDUCTIONS else "region", v.index)

    def op(self, op: Op) -> int:
        k = self.op_memo.get(op)
        if k is None:
            k = self._id(self._op(op))
            self.op_memo[op] = k
        return k

    def _op(self, op: Op) -> tuple:
        if K.is_memory(op) and not self.strict:
            return (K.direction(op), self.fx.tensor_of.get(op))
        operands = [self.value(v) for v in op.operands]
        if op.name in K.COMMUTATIVE:
            operands.sort()
        if not self.strict:
            return (op.name, tuple(operands))
        attrs = tuple(sorted(op.attributes.items()))
        extra: tuple = ()
        if op.name in K.REDUCTIONS:
            extra = (combiner_signature(op),)
        return (op.name, attrs, tuple(r.type for r in op.results), tuple(operands)) + extra


def combiner_signature(op: Op) -> tuple:
    """A reduce/scan body as the expressions it yields, built from the block arguments (so the
    order of independent ops in the body and value names do not matter)."""
    if not op.regions or not op.regions[0].blocks or not op.regions[0].blocks[0].ops:
        return ()
    block = op.regions[0].blocks[0]
    memo: dict[Value, Any] = {a: ("arg", i) for i, a in enumerate(block.args)}

    def sig(v: Value) -> Any:
        s = memo.get(v)
        if s is None:
            d = v.op
            if d is None or d.parent is not block:
                s = ("outer", const_key(d) if d is not None and d.name == "constant" else None)
            else:
                parts = [sig(x) for x in d.operands]
                if d.name in K.COMMUTATIVE:
                    parts.sort(key=repr)
                s = (d.name, tuple(sorted(d.attributes.items())), tuple(parts), v.index)
            memo[v] = s
        return s

    term = block.ops[-1]
    return tuple(sig(v) for v in term.operands) if term.name == "yield" else ()


def combiner_ops(op: Op) -> str:
    """The op names of a reduce/scan body, sorted (for messages)."""
    names = [o.name for r in op.regions for b in r.blocks for o in b.ops if o.name != "yield"]
    return ", ".join(sorted(names))


def _pass3_key(fx: FunctionIndex, op: Op) -> tuple | None:
    k = K.kind(op)
    if k == "memory":
        return ("memory", K.direction(op), fx.tensor_of.get(op))
    if k == "view":
        base = K.base_pointer(op.results[0])
        return (op.name, fx.pointer_ordinal.get(base)) if base is not None else None
    if k in ("mma", "reduction", "control", "cast", "special"):
        return (k if k == "mma" else op.name,)
    return None


@dataclass
class Matching:
    ref: FunctionIndex
    gen: FunctionIndex
    ref_loose: Keys
    gen_loose: Keys
    ref_strict: Keys
    gen_strict: Keys
    pairs: list[tuple[Op, Op]]
    partner: dict[Op, Op]          # both directions, weak pairs included
    strict_equal: set[Op]          # ref ops paired in the strict pass
    ref_only: list[Op]             # not in `pairs` (weak pairs included)
    gen_only: list[Op]
    # Leftover ops of the same name paired in order. They are not compared; they only locate a
    # structural difference at its frontier instead of at every op downstream of it.
    weak_pairs: list[tuple[Op, Op]]
    # Leftover pure ops whose loose key equals that of an op the other side already paired: one
    # side computes one value where the other computes two that differ only in a leaf (two
    # extracts made identical, so merged by CSE). Compared like pairs, so the leaf difference
    # (a wrong extract index, a wrong constant) is reported.
    merged: list[tuple[Op, Op]] = field(default_factory=list)


def match(ref: FunctionIndex, gen: FunctionIndex) -> Matching:
    strict_table: dict[tuple, int] = {}
    loose_table: dict[tuple, int] = {}
    rs, gs = Keys(ref, True, strict_table), Keys(gen, True, strict_table)
    rl, gl = Keys(ref, False, loose_table), Keys(gen, False, loose_table)
    for keys in (rs, gs, rl, gl):
        keys.warm(keys.fx.function.body)
    pairs: list[tuple[Op, Op]] = []
    left_r, left_g = list(ref.candidates), list(gen.candidates)

    def run(key_r, key_g) -> None:
        nonlocal left_r, left_g
        groups: dict[Any, tuple[list[Op], list[Op]]] = {}
        for op in left_r:
            k = key_r(op)
            if k is not None:
                groups.setdefault(k, ([], []))[0].append(op)
        for op in left_g:
            k = key_g(op)
            if k is not None and k in groups:
                groups[k][1].append(op)
        paired: set[Op] = set()
        for rops, gops in groups.values():
            for r, g in zip(rops, gops):
                pairs.append((r, g))
                paired.add(r)
                paired.add(g)
        left_r = [op for op in left_r if op not in paired]
        left_g = [op for op in left_g if op not in paired]

    run(rs.op, gs.op)
    strict_equal = {r for r, _ in pairs}
    run(rl.op, gl.op)
    run(lambda op: _pass3_key(ref, op), lambda op: _pass3_key(gen, op))
    # Last, memory ops of the same direction whatever tensor they access.
    run(lambda op: ("memory", K.direction(op)) if K.is_memory(op) else None,
        lambda op: ("memory", K.direction(op)) if K.is_memory(op) else None)
    merged = _merged_pairs(left_r, left_g, pairs, rl, gl)
    in_merged = {op for pair in merged for op in pair}
    left_r = [op for op in left_r if op not in in_merged]
    left_g = [op for op in left_g if op not in in_merged]
    ref_only, gen_only = left_r, left_g
    strong = len(pairs)
    run(lambda op: op.name, lambda op: op.name)
    weak = pairs[strong:]
    del pairs[strong:]
    partner: dict[Op, Op] = {}
    for r, g in pairs + weak:
        partner[r] = g
        partner[g] = r
    pairs.sort(key=lambda p: ref.order[p[0]])
    return Matching(ref, gen, rl, gl, rs, gs, pairs, partner, strict_equal, ref_only, gen_only, weak, merged)


def _merged_pairs(left_r: list[Op], left_g: list[Op], pairs: list[tuple[Op, Op]], rl: Keys,
                  gl: Keys) -> list[tuple[Op, Op]]:
    """Unpaired pure ops (arithmetic, special math, casts, extracts) matched to an already paired
    op of the other side with the same loose key (see Matching.merged)."""
    def eligible(op: Op) -> bool:
        return K.kind(op) in ("arith", "special", "cast") and not op.regions

    paired_r = {rl.op(r): r for r, _ in pairs if eligible(r)}
    paired_g = {gl.op(g): g for _, g in pairs if eligible(g)}
    out = [(r, paired_g[rl.op(r)]) for r in left_r if eligible(r) and rl.op(r) in paired_g]
    out += [(paired_r[gl.op(g)], g) for g in left_g if eligible(g) and gl.op(g) in paired_r]
    return out


def producer(keys: Keys, v: Value) -> Op | None:
    """The op whose result `v` stands for under loose keys (None for leaves and loop indices)."""
    for _ in range(256):
        alias = keys.alias(v)
        if alias is None:
            return v.op
        v = alias
    return None

