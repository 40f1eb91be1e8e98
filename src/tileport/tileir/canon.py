"""Canonicalization: remove what differs between frontends without changing the program.

Steps, in order (docs/tileir.md has the rationale):
1. token plumbing out (when `ignore_tokens`): token operands, results and block arguments, and the
   `make_token` / `join_tokens` ops; memory ops stay.
2. hint keys: the hints that apply to the target (`sm_XX`, else `default`) become the only entry,
   keyed by the target; integer values lose their integer type; `allow_tma = true` (the default)
   and empty dictionaries are dropped.
3. assume chains: all `assume` ops on the same value in a block become one chain with the distinct
   predicates in a fixed order, at the first one's place; every user uses the chain's end.
4. CSE of side-effect-free ops without regions (merges duplicated constants, repeated
   `get_tile_block_id`, identical views), scoped by dominance.
5. DCE of side-effect-free ops (dead constants and what only they used).
6. SSA renaming by definition order (`%argN` for parameters, then `%0`, `%1`, ... in pre-order).

Debug locations are kept (findings point at source lines with them) but nothing compares them.
"""

from __future__ import annotations

from typing import Any

from . import equiv
from .attrs import Bounded, DivBy, Hints, LOAD_STORE_HINT_DEFAULTS
from .model import Block, Function, Module, Op, Value, blocks, clone_module, redirect, walk
from .ops import LOOPS, carried_index, is_memory, is_transparent, loop_init, loop_jumps, region_yield
from .types import is_token

# Ops with effects beyond their results: never merged or removed. Everything ending in `_tko`
# (memory, atomics, print, fences) is effectful too.
_EFFECTFUL = frozenset({"assert", "for", "loop", "if", "yield", "continue", "break", "return",
                        "global", "alloca", "preview$call"})
# Side-effect free but each one is a distinct object: removable when dead, never merged.
_NO_CSE = frozenset({"make_token"})


def is_effectful(op: Op) -> bool:
    return op.name in _EFFECTFUL or op.name.endswith("_tko")


def record_memory_order(function: Function) -> None:
    """Before tokens are stripped: note, per memory op, the memory ops its token makes it wait for
    (through join_tokens, loop-carried and branch-yielded tokens), in `function.memory_order`."""
    order = {}
    for op in walk(function):
        if is_memory(op):
            token = op.operand("token")
            order[op] = _token_sources(token) if token is not None else []
    function.memory_order = order


def _token_sources(value) -> list:
    found, seen, stack = [], set(), [value]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        owner = v.owner
        if isinstance(owner, Block):  # a loop-carried token: its initial value and every continued one
            k = carried_index(v)
            if k is None:
                continue
            init = loop_init(v)
            if init is not None:
                stack.append(init)
            stack += _continued(owner.parent, k)
        elif owner is None:
            continue
        elif is_memory(owner):
            found.append(owner)
        elif owner.name == "join_tokens":
            stack += owner.operands
        elif owner.name in LOOPS:
            stack += _continued(owner, v.index)
        elif owner.name == "if":
            yielded = (region_yield(owner, i, v.index) for i in range(len(owner.regions)))
            stack += [y for y in yielded if y is not None]
    return found


def _continued(loop: Op, k: int) -> list:
    """Operand `k` of every `continue` / `break` of `loop`, also those nested in an `if`."""
    return [op.operands[k] for r in loop.regions for b in r.blocks for op in loop_jumps(b)
            if k < len(op.operands)]


def strip_tokens(function: Function) -> None:
    record_memory_order(function)
    for block in blocks(function):
        block.args = [a for a in block.args if not is_token(a.type)]
        for i, a in enumerate(block.args):
            a.index = i
        kept = []
        for op in block.ops:
            pairs = [(r, v) for r, v in zip(op.operand_roles, op.operands) if not is_token(v.type)]
            op.operand_roles = [r for r, _ in pairs]
            op.operands = [v for _, v in pairs]
            op.results = [r for r in op.results if not is_token(r.type)]
            for i, r in enumerate(op.results):
                r.index = i
            if op.name not in ("make_token", "join_tokens"):
                kept.append(op)
        block.ops = kept


def _normalize_hint_attrs(function: Function, target: str) -> None:
    if function.is_entry:
        function.hints = equiv.select_hints(function.hints, target, {})
    for block in blocks(function):
        for op in block.ops:
            if "optimization_hints" in op.attributes:
                h = op.attributes["optimization_hints"]
                chosen = equiv.select_hints(h if isinstance(h, Hints) else None, target,
                                            LOAD_STORE_HINT_DEFAULTS)
                if chosen.selected.items:
                    op.attributes["optimization_hints"] = chosen
                else:
                    del op.attributes["optimization_hints"]


def _predicate_order(p: Any) -> tuple[int, str]:
    return (0 if isinstance(p, DivBy) else 1 if isinstance(p, Bounded) else 2, str(p))


def assume_root(v: Value) -> Value:
    while is_transparent(v.op) and v.op.name == "assume":  # type: ignore[union-attr]
        v = v.op.operands[0]  # type: ignore[union-attr]
    return v


def _normalize_assumes(function: Function) -> None:
    replacement: dict[Value, Value] = {}
    for block in list(blocks(function)):
        groups: dict[Value, list[Op]] = {}
        for op in block.ops:
            if op.name == "assume" and is_transparent(op):
                groups.setdefault(assume_root(op.operands[0]), []).append(op)
        if not groups:
            continue
        chains: dict[Op, list[Op]] = {}
        for root, ops in groups.items():
            preds = sorted({op.attributes["predicate"] for op in ops}, key=_predicate_order)
            chain, prev = [], root
            for p in preds:
                new = Op("assume", [prev], ["value"], attributes={"predicate": p}, parent=block,
                         loc=ops[0].loc)
                prev = new.add_result(root.type)
                chain.append(new)
            chains[ops[0]] = chain
            for op in ops:
                replacement[op.results[0]] = prev
        out: list[Op] = []
        for op in block.ops:
            if op in chains:
                out.extend(chains[op])
            elif not (op.name == "assume" and is_transparent(op)):
                out.append(op)
        block.ops = out
    redirect(function, replacement)


def cse(function: Function) -> None:
    mapping: dict[Value, Value] = {}

    def visit(block: Block, outer: dict[tuple, Op]) -> None:
        table = dict(outer)
        kept = []
        for op in block.ops:
            op.operands = [mapping.get(v, v) for v in op.operands]
            if not op.regions and not is_effectful(op) and op.name not in _NO_CSE:
                key = (op.name, tuple(sorted(op.attributes.items())),
                       tuple(r.type for r in op.results), tuple(id(v) for v in op.operands))
                prev = table.get(key)
                if prev is not None:
                    for r, pr in zip(op.results, prev.results):
                        mapping[r] = pr
                    continue
                table[key] = op
            kept.append(op)
            for region in op.regions:
                for b in region.blocks:
                    visit(b, table)
        block.ops = kept

    visit(function.body, {})


def dce(function: Function) -> None:
    while True:
        used = {id(v) for b in blocks(function) for op in b.ops for v in op.operands}
        removed = False
        for block in blocks(function):
            kept = []
            for op in reversed(block.ops):
                if not is_effectful(op) and not any(id(r) in used for r in op.results):
                    removed = True
                    continue
                kept.append(op)
            block.ops = kept[::-1]
        if not removed:
            return


def rename(function: Function) -> None:
    for i, a in enumerate(function.args):
        a.name = f"%arg{i}"
    n = 0

    def visit(block: Block) -> None:
        nonlocal n
        for op in block.ops:
            for r in op.results:
                r.name = f"%{n}"
                n += 1
            for region in op.regions:
                for b in region.blocks:
                    for a in b.args:
                        a.name = f"%{n}"
                        n += 1
                    visit(b)

    visit(function.body)


def simplify(function: Function) -> None:
    """CSE, DCE and renaming: run after any rewrite of a canonical function."""
    cse(function)
    dce(function)
    rename(function)


def canonicalize(module: Module, *, target: str = "sm_90", ignore_tokens: bool = True) -> Module:
    """A canonical copy of `module` (the input is not changed)."""
    out = clone_module(module)
    for f in out.functions:
        if ignore_tokens:
            strip_tokens(f)
        _normalize_hint_attrs(f, target)
        _normalize_assumes(f)
        simplify(f)
    return out
