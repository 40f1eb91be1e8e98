"""Mutation suite: plants single defects into the ports' Tile IR and checks the differ flags them.

For every corpus kernel (one capture each), the reference (cuTile Python) and the port (cutile-rs,
compiled inside the generated cdylib) are captured on the CPU. Each *semantic* mutation changes
the port's parsed module in one way a port could plausibly get wrong (wrong padding, exp2 for exp,
another reduction axis or combiner, a lost flush_to_zero, TMA off, a stronger memory ordering, a
dropped store, wrong loop bounds, an fma split in two, swapped operands, a wrong constant, a wrong
index, arithmetic in a narrower type, a wrong extract index); each *benign* one rewrites it without
changing what it computes (renamed values, reordered independent ops, commuted operands of a
commutative op, a duplicated pure op, every view index written as (1 + i) - 1). The diff of reference vs mutated port must flag every
semantic mutation (a new CRITICAL or WARN finding compared with the unmutated port) and no benign
one.

A mutation is (kernel, class, description, mutated module). The second checker is the NumPy Tile
IR interpreter (`tileir.interp`): it runs the reference and the mutated port on the capture's small
random problems and compares the outputs; its verdict (DIFFER / AGREE / ERROR, with the reason) is
the `second_checker` column. A semantic mutation neither checker catches is reported and fails the
run, as does a benign rewrite either checker flags.

    python3 -m eval.mutate --out bench/results/<date>-mutations.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool
from tileport.tileir import ops as K
from tileport.tileir.attrs import Dense, DictAttr, Hints, constant_value
from tileport.tileir.canon import is_effectful
from tileport.tileir.diff import diff, prepare
from tileport.tileir.model import Block, Function, Module, Op, Value, blocks, clone_module, redirect, walk
from tileport.tileir.printer import to_text
from tileport.tileir.types import PartitionViewType, ScalarType, TileType, is_token

I32 = ScalarType("i32")
F16 = ScalarType("f16")
F32 = ScalarType("f32")
SCALAR_I32 = TileType((), I32)
SITES_PER_CLASS = 2  # mutations per (kernel, class) at most


# -- model editing helpers ------------------------------------------------------------------------

def entry(m: Module) -> Function:
    return m.entries[0]


def new_op(name: str, operands: list[Value], roles: list[str], results: list, **attrs) -> Op:
    op = Op(name, list(operands), list(roles), attributes=dict(attrs))
    for t in results:
        op.add_result(t)
    return op


def const_op(t: TileType, data: bytes) -> Op:
    return new_op("constant", [], [], [t], value=Dense(None, data))


def insert_before(anchor: Op, new: list[Op]) -> None:
    block = anchor.parent
    assert block is not None
    i = block.ops.index(anchor)
    for n in new:
        n.parent = block
    block.ops[i:i] = new


def remove(op: Op) -> None:
    assert op.parent is not None
    op.parent.ops.remove(op)


def all_values(f: Function) -> Iterator[Value]:
    for b in blocks(f):
        yield from b.args
        for op in b.ops:
            yield from op.results


def users(f: Function) -> dict[Value, list[tuple[Op, int]]]:
    out: dict[Value, list[tuple[Op, int]]] = {}
    for op in walk(f):
        for i, v in enumerate(op.operands):
            out.setdefault(v, []).append((op, i))
    return out


def _ancestors(op: Op) -> list[tuple[Block, int]]:
    """(block, position) of `op` and of every op enclosing it, innermost first."""
    out = []
    while op is not None and op.parent is not None:
        block = op.parent
        out.append((block, block.ops.index(op)))
        op = block.parent  # type: ignore[assignment]
    return out


def dominates(v: Value, op: Op) -> bool:
    """`v` is visible at `op` (a parameter, a block argument of an enclosing block, or the result
    of an earlier op of an enclosing block)."""
    if K.is_function_arg(v):
        return True
    for block, pos in _ancestors(op):
        if isinstance(v.owner, Block) and v.owner is block:
            return True
        d = v.op
        if d is not None and d.parent is block and block.ops.index(d) < pos:
            return True
    return False


def _float_format(elem: ScalarType) -> str | None:
    return {"f32": "<f", "f16": "<e", "f64": "<d"}.get(elem.name)


def scaled_constant(op: Op) -> bytes | None:
    """The data of a float constant with every element changed (x -> 2x, 0 -> 1)."""
    t = op.results[0].type
    if not (isinstance(t, TileType) and isinstance(t.elem, ScalarType) and t.elem.is_float):
        return None
    data = op.attributes["value"].data
    if t.elem.name == "bf16":
        vals = [struct.unpack("<f", b"\0\0" + data[i:i + 2])[0] for i in range(0, len(data), 2)]
        new = [2 * x if x else 1.0 for x in vals]
        return b"".join(struct.pack("<f", x)[2:] for x in new)
    fmt = _float_format(t.elem)
    if fmt is None:
        return None
    size = struct.calcsize(fmt)
    vals = [struct.unpack(fmt, data[i:i + size])[0] for i in range(0, len(data), size)]
    if any(x != x or x in (float("inf"), float("-inf")) for x in vals):
        return None
    return b"".join(struct.pack(fmt, 2 * x if x else 1.0) for x in vals)


# -- mutation records ------------------------------------------------------------------------------

@dataclass
class Mutation:
    kernel: str            # the capture label
    cls: str               # mutation class (CLASSES / BENIGN)
    description: str
    module: Module         # the mutated generated module
    semantic: bool = True  # False: a benign rewrite that must PASS


@dataclass
class Outcome:
    kernel: str
    cls: str
    description: str
    semantic: bool
    differ: str                         # CRITICAL | WARN | PASS: the most severe new finding
    finding: str = ""                   # the first new finding (category/rule: message)
    second_checker: str | None = None   # the interpreter: DIFFER | AGREE | ERROR
    second_checker_detail: str = ""     # its reason (the first differing output, the error)

    @property
    def ok(self) -> bool:
        return (self.differ != "PASS") if self.semantic else (self.differ == "PASS")

    @property
    def caught(self) -> bool:
        """A semantic mutation flagged by the differ or shown to change outputs by the interpreter."""
        return self.semantic and (self.differ != "PASS" or self.second_checker == "DIFFER")


# A mutator takes the generated module and returns (description, mutated copy) per site.
Mutator = Callable[[Module], list[tuple[str, Module]]]


def per_site(pick: Callable[[Op], bool], change: Callable[[Function, Op], str | None],
             limit: int = SITES_PER_CLASS) -> Mutator:
    """A mutator applying `change` to each op `pick` selects (at most `limit`), one copy each."""
    def run(module: Module) -> list[tuple[str, Module]]:
        n = sum(1 for op in walk(entry(module)) if pick(op))
        out = []
        for k in range(n):
            m = clone_module(module)
            f = entry(m)
            op = [o for o in walk(f) if pick(o)][k]
            desc = change(f, op)
            if desc:
                out.append((desc, m))
            if len(out) >= limit:
                break
        return out
    return run


# -- semantic mutations ----------------------------------------------------------------------------

def _padded_view(op: Op) -> bool:
    t = op.results[0].type if op.results else None
    return op.name == "make_partition_view" and isinstance(t, PartitionViewType) and t.padding is not None


def _change_padding(f: Function, op: Op) -> str:
    t = op.results[0].type
    new = "zero" if t.padding != "zero" else "neg_inf"
    op.results[0].type = PartitionViewType(t.tile, t.tensor_view, t.dim_map, new)
    return f"partition view padding {t.padding} -> {new}"


def _exp_swap(f: Function, op: Op) -> str:
    old = op.name
    op.name = "exp2" if old == "exp" else "exp"
    return f"{old} -> {op.name}"


def _reduce_2d(op: Op) -> bool:
    return op.name == "reduce" and isinstance(op.operands[0].type, TileType) and len(op.operands[0].type.shape) >= 2


def _reduce_axis(f: Function, op: Op) -> str:
    rank = len(op.operands[0].type.shape)
    old = op.attributes["dim"]
    new = (old + 1) % rank
    op.attributes["dim"] = new
    return f"reduce along axis {new} instead of {old}"


_COMBINER_SWAP = {"addf": "maxf", "maxf": "addf", "minf": "maxf", "addi": "maxi", "maxi": "addi"}


def _combiner(op: Op) -> Op | None:
    if op.name != "reduce" or not op.regions:
        return None
    return next((o for b in op.regions[0].blocks for o in b.ops if o.name in _COMBINER_SWAP), None)


def _reduce_combiner(f: Function, op: Op) -> str:
    inner = _combiner(op)
    assert inner is not None
    old = inner.name
    inner.name = _COMBINER_SWAP[old]
    if old in ("addf", "maxf") and inner.name in ("addf", "maxf"):
        # maxf takes propagate_nan, addf rounding / flush_to_zero: keep the attributes the op has.
        inner.attributes = {"propagate_nan": False} if inner.name == "maxf" else \
            {"rounding_mode": "nearest_even", "flush_to_zero": False}
    return f"reduce combiner {old} -> {inner.name}"


def _lose_ftz(f: Function, op: Op) -> str:
    op.attributes["flush_to_zero"] = False
    return f"{op.name}: flush_to_zero dropped"


def _view_memory(op: Op) -> bool:
    return K.is_memory(op) and K.family(op) == "view"


def _tma_off(f: Function, op: Op) -> str:
    op.attributes["optimization_hints"] = Hints((("sm_90", DictAttr((("allow_tma", False),))),))
    return f"{op.name}: allow_tma = false"


def _stronger_ordering(f: Function, op: Op) -> str:
    new = "acquire" if K.direction(op) == "load" else "release"
    op.attributes["memory_ordering_semantics"] = new
    op.attributes["memory_scope"] = "device"
    return f"{op.name}: memory ordering weak -> {new} (device scope)"


def _is_store(op: Op) -> bool:
    return K.is_memory(op) and K.direction(op) == "store"


def _drop_store(f: Function, op: Op) -> str:
    token_in = op.operand("token")
    mapping = {}
    for r in op.results:
        if is_token(r.type):
            if token_in is None:
                fresh = new_op("make_token", [], [], [r.type])
                insert_before(op, [fresh])
                token_in = fresh.results[0]
            mapping[r] = token_in
    redirect(f, mapping)
    remove(op)
    return f"{op.name} removed"


def _int_binary(name: str, a: Value, b: Value) -> Op:
    return new_op(name, [a, b], ["lhs", "rhs"], [a.type], overflow="none")


def _one_like(v: Value) -> Op:
    t = v.type
    assert isinstance(t, TileType)
    return const_op(TileType((), t.elem), (1).to_bytes(t.elem.bits // 8, "little"))


def _loop_bound(f: Function, op: Op) -> str:
    ub = op.operand("upperBound")
    one = _one_like(ub)
    sub = _int_binary("subi", ub, one.results[0])
    insert_before(op, [one, sub])
    op.operands[op.operand_roles.index("upperBound")] = sub.results[0]
    return "for: upper bound - 1"


def _loop_start(f: Function, op: Op) -> str:
    lb = op.operand("lowerBound")
    one = _one_like(lb)
    add = _int_binary("addi", lb, one.results[0])
    insert_before(op, [one, add])
    op.operands[op.operand_roles.index("lowerBound")] = add.results[0]
    return "for: lower bound + 1"


def _split_fma(f: Function, op: Op) -> str:
    a, b, c = op.operands[:3]
    attrs = {k: v for k, v in op.attributes.items()}
    mul = new_op("mulf", [a, b], ["lhs", "rhs"], [op.results[0].type], **attrs)
    add = new_op("addf", [mul.results[0], c], ["lhs", "rhs"], [op.results[0].type], **attrs)
    insert_before(op, [mul, add])
    redirect(f, {op.results[0]: add.results[0]})
    remove(op)
    return "fma split into mulf + addf"


_NON_COMMUTATIVE = frozenset({"subf", "divf", "subi", "divi", "remi", "atan2", "fpowf"})


def _swap_operands(f: Function, op: Op) -> str:
    op.operands[0], op.operands[1] = op.operands[1], op.operands[0]
    return f"{op.name}: operands swapped"


def _select_arms(f: Function, op: Op) -> str:
    i, j = op.operand_roles.index("val_if_true"), op.operand_roles.index("val_if_false")
    op.operands[i], op.operands[j] = op.operands[j], op.operands[i]
    return "select: arms swapped"


_WRONG_OP = {"maxf": "minf", "minf": "maxf", "addf": "subf", "subf": "addf"}


def _wrong_op(f: Function, op: Op) -> str:
    old = op.name
    op.name = _WRONG_OP[old]
    return f"{old} -> {op.name}"


def _cast_rounding(f: Function, op: Op) -> str:
    old = op.attributes["rounding_mode"]
    op.attributes["rounding_mode"] = "zero" if old != "zero" else "nearest_even"
    return f"ftof rounding {old} -> {op.attributes['rounding_mode']}"


def _float_constant(op: Op) -> bool:
    return op.name == "constant" and scaled_constant(op) is not None


def _wrong_constant(f: Function, op: Op) -> str:
    before = constant_value(op.results[0].type, op.attributes["value"])
    op.attributes["value"] = Dense(None, scaled_constant(op))  # type: ignore[arg-type]
    return f"float constant {before[0] if len(before) == 1 else '(tile)'} changed (x2, 0 -> 1)"


# Index mutations: the five index cases of the issue, plus gather/scatter offsets.

def _index_plus_one(f: Function, op: Op) -> str:
    i = op.operand_roles.index("index")
    idx = op.operands[i]
    one = _one_like(idx)
    add = _int_binary("addi", idx, one.results[0])
    insert_before(op, [one, add])
    op.operands[i] = add.results[0]
    return f"{op.name}: index 0 + 1"


def _iv_index(op: Op) -> bool:
    return _view_memory(op) and any(_is_iv(K.root(v)) for v in op.operands_with("index"))


def _is_iv(v: Value) -> bool:
    return isinstance(v.owner, Block) and v.owner.parent is not None and v.owner.parent.name == "for" \
        and v.index == 0


def _bid_for_iv(f: Function, op: Op) -> str:
    bid_op = next((o for o in walk(f) if o.name == "get_tile_block_id"), None)
    if bid_op is None:
        bid_op = new_op("get_tile_block_id", [], [], [SCALAR_I32] * 3)
        f.body.ops.insert(0, bid_op)
        bid_op.parent = f.body
    pos = [k for k, (r, v) in enumerate(zip(op.operand_roles, op.operands)) if r == "index" and _is_iv(K.root(v))][0]
    bid = bid_op.results[0]
    if not dominates(bid, op):
        return ""
    op.operands[pos] = bid
    return f"{op.name}: block id instead of the loop variable"


def _multi_index(op: Op) -> bool:
    idx = op.operands_with("index")
    return _view_memory(op) and len(idx) >= 2 and len({K.root(v) for v in idx}) >= 2


def _other_tile_index(f: Function, op: Op) -> str:
    """Use an index another memory op uses for another dimension ([bn, k] instead of [bm, k])."""
    mine = op.operands_with("index")
    positions = [k for k, r in enumerate(op.operand_roles) if r == "index"]
    for other in walk(f):
        if other is op or not _view_memory(other):
            continue
        for j, cand in enumerate(other.operands_with("index")):
            for i, (pos, cur) in enumerate(zip(positions, mine)):
                if i != j and K.root(cand) not in {K.root(v) for v in mine} and dominates(cand, op) \
                        and cand.type == cur.type:
                    op.operands[pos] = cand
                    return f"{op.name}: index {i} takes the value another access uses as index {j}"
    return ""


def _transpose(f: Function, op: Op) -> str:
    positions = [k for k, r in enumerate(op.operand_roles) if r == "index"]
    i, j = next((a, b) for a in positions for b in positions
                if a < b and K.root(op.operands[a]) is not K.root(op.operands[b]))
    op.operands[i], op.operands[j] = op.operands[j], op.operands[i]
    return f"{op.name}: two index operands swapped (transposed access)"


def _address_subi(op: Op) -> bool:
    return op.name == "subi" and len(op.operands) == 2 and op.operands[0] is not op.operands[1]


def _offset_plus_one(f: Function, op: Op) -> str:
    off = op.operand("offset")
    t = off.type
    one = const_op(t, (1).to_bytes(t.elem.bits // 8, "little"))
    add = _int_binary("addi", off, one.results[0])
    insert_before(op, [one, add])
    op.operands[op.operand_roles.index("offset")] = add.results[0]
    return "gather/scatter offsets + 1"


_F32_ARITH = frozenset({"mulf", "addf", "subf", "divf"})


def _in_combiner(op: Op) -> bool:
    return op.parent is not None and op.parent.parent is not None and op.parent.parent.name in K.REDUCTIONS


def _f32_arith(op: Op) -> bool:
    """A float op computing in f32 (not in a reduction's combiner, whose types its operands fix)."""
    t = op.results[0].type if op.results else None
    return op.name in _F32_ARITH and isinstance(t, TileType) and t.elem == F32 and not _in_combiner(op) \
        and all(isinstance(v.type, TileType) and v.type.elem == F32 for v in op.operands)


def _lower_precision(f: Function, op: Op) -> str:
    """Compute the op in f16 and upcast the result (the reference computes in f32)."""
    down = []
    for i, v in enumerate(op.operands):
        c = new_op("ftof", [v], ["from"], [TileType(v.type.shape, F16)], rounding_mode="nearest_even")
        down.append(c)
        op.operands[i] = c.results[0]
    insert_before(op, down)
    old = op.results[0]
    narrow = Value(TileType(old.type.shape, F16), op, 0, old.name)
    op.results[0] = narrow
    up = new_op("ftof", [narrow], ["from"], [old.type], rounding_mode="nearest_even")
    block = op.parent
    assert block is not None
    block.ops.insert(block.ops.index(op) + 1, up)
    up.parent = block
    redirect(f, {old: up.results[0]})
    return f"{op.name} computed in f16, then converted to f32"


def _extract(op: Op) -> bool:
    return op.name == "extract" and bool(op.operands_with("indices"))


def _wrong_extract_index(f: Function, op: Op) -> str:
    """Make the extract take the slice another extract of the same source takes, or shift it."""
    src = op.operands[0]
    mine = op.operands_with("indices")
    positions = [k for k, r in enumerate(op.operand_roles) if r == "indices"]
    for other in walk(f):
        if other is not op and other.name == "extract" and other.operands[0] is src:
            theirs = other.operands_with("indices")
            if [K.root(v) for v in theirs] != [K.root(v) for v in mine] and all(dominates(v, op) for v in theirs):
                for pos, v in zip(positions, theirs):
                    op.operands[pos] = v
                return "extract takes the slice another extract takes"
    one = _one_like(mine[0])
    insert_before(op, [one])
    op.operands[positions[0]] = one.results[0]
    return "extract index 0 -> 1"


def _has_attr(name: str, value) -> Callable[[Op], bool]:
    return lambda op: op.attributes.get(name) == value


# class -> mutator
CLASSES: dict[str, Mutator] = {
    "wrong_padding": per_site(_padded_view, _change_padding),
    "exp_vs_exp2": per_site(lambda op: op.name in ("exp", "exp2"), _exp_swap),
    "reduction_axis": per_site(_reduce_2d, _reduce_axis),
    "reduction_combiner": per_site(lambda op: _combiner(op) is not None, _reduce_combiner),
    "lost_ftz": per_site(_has_attr("flush_to_zero", True), _lose_ftz),
    "tma_off": per_site(_view_memory, _tma_off),
    "stronger_ordering": per_site(lambda op: K.is_memory(op)
                                  and op.attributes.get("memory_ordering_semantics") == "weak",
                                  _stronger_ordering),
    "dropped_store": per_site(_is_store, _drop_store),
    "loop_bounds": per_site(lambda op: op.name == "for", _loop_bound),
    "loop_start": per_site(lambda op: op.name == "for", _loop_start),
    "split_fma": per_site(lambda op: op.name == "fma", _split_fma),
    "swapped_operands": per_site(lambda op: op.name in _NON_COMMUTATIVE and op.operands[0] is not op.operands[1]
                                 and op.name.endswith("f"), _swap_operands),
    "swapped_select_arms": per_site(lambda op: op.name == "select" and op.operands[1] is not op.operands[2],
                                    _select_arms),
    "wrong_op": per_site(lambda op: op.name in _WRONG_OP and not _in_combiner(op), _wrong_op),
    "cast_rounding": per_site(lambda op: op.name == "ftof" and "rounding_mode" in op.attributes, _cast_rounding),
    "wrong_constant": per_site(_float_constant, _wrong_constant),
    "index_plus_one": per_site(lambda op: _view_memory(op) and bool(op.operands_with("index")), _index_plus_one),
    "index_bid_for_loop_var": per_site(_iv_index, _bid_for_iv),
    "index_other_tile": per_site(_multi_index, _other_tile_index),
    "index_transposed": per_site(lambda op: _multi_index(op), _transpose),
    "index_swizzle_swap": per_site(_address_subi, _swap_operands),
    "index_gather_offset": per_site(lambda op: op.name == "offset", _offset_plus_one),
    "lower_precision": per_site(_f32_arith, _lower_precision),
    "wrong_extract_index": per_site(_extract, _wrong_extract_index),
}


# -- benign rewrites --------------------------------------------------------------------------------

def rename_values(m: Module, seed: int = 0) -> Module:
    m = clone_module(m)
    rng = random.Random(seed)
    for f in m.functions:
        for v in all_values(f):
            v.name = f"%x{rng.randrange(10**9)}"
    return m


def _used_inside(op: Op) -> set[Value]:
    out = set(op.operands)
    for region in op.regions:
        for b in region.blocks:
            for inner in b.ops:
                out |= _used_inside(inner)
    return out


def reorder_independent(m: Module, seed: int = 0) -> Module:
    """Shuffle every block into another valid order: data dependencies kept, and the ops with
    effects (memory, control flow) kept in their order."""
    m = clone_module(m)
    rng = random.Random(seed)
    for f in m.functions:
        for block in list(blocks(f)):
            ops = block.ops
            if len(ops) < 3:
                continue
            body, term = ops[:-1], ops[-1]
            defined_by = {r: op for op in body for r in op.results}
            deps = {op: {defined_by[v] for v in _used_inside(op) if v in defined_by} for op in body}
            last_effect = None
            for op in body:
                if is_effectful(op):
                    if last_effect is not None:
                        deps[op].add(last_effect)
                    last_effect = op
            done: list[Op] = []
            placed: set[Op] = set()
            while len(done) < len(body):
                ready = [op for op in body if op not in placed and deps[op] <= placed]
                pick = rng.choice(ready)
                done.append(pick)
                placed.add(pick)
            block.ops = done + [term]
    return m


def commute_operands(m: Module) -> Module:
    """Swap the operands of every binary commutative op."""
    m = clone_module(m)
    for op in walk(entry(m)):
        if op.name in K.COMMUTATIVE and len(op.operands) == 2:
            op.operands.reverse()
    return m


def duplicate_pure_ops(m: Module) -> Module:
    """Give every other use of each pure arithmetic result its own copy of the op."""
    m = clone_module(m)
    f = entry(m)
    uses = users(f)
    for op in [o for o in walk(f) if K.kind(o) in ("arith", "special") and not o.regions
               and len(o.results) == 1 and not is_effectful(o)]:
        later = uses.get(op.results[0], [])[1::2]
        if not later:
            continue
        dup = new_op(op.name, op.operands, op.operand_roles, [op.results[0].type], **op.attributes)
        insert_before(op, [dup])
        for user, i in later:
            user.operands[i] = dup.results[0]
    return m


def respell_indices(m: Module) -> Module:
    """Write every view access index i as (1 + i) - 1: the same element, another expression."""
    m = clone_module(m)
    for op in [o for o in walk(entry(m)) if _view_memory(o)]:
        for k, role in enumerate(op.operand_roles):
            if role == "index":
                idx = op.operands[k]
                one = _one_like(idx)
                plus = _int_binary("addi", one.results[0], idx)
                minus = _int_binary("subi", plus.results[0], one.results[0])
                insert_before(op, [one, plus, minus])
                op.operands[k] = minus.results[0]
    return m


BENIGN: dict[str, Callable[[Module], Module]] = {
    "rename_values": rename_values,
    "reorder_independent": reorder_independent,
    "commute_operands": commute_operands,
    "duplicate_pure_ops": duplicate_pure_ops,
    "respell_indices": respell_indices,
}


def normal_text(module: Module) -> str:
    """The program the differ matches (canonical, SEMANTIC_EQUIV rewrites applied), as text."""
    return to_text(prepare(module, "sm_90"))


def mutations(kernel: str, generated: Module, classes: list[str] | None = None,
              skipped: list[str] | None = None) -> list[Mutation]:
    """Every semantic mutation of `classes` (default: all) and every benign rewrite of a port.

    A semantic mutation that leaves the normalized program unchanged (it edited a dead view, or
    put a value where an equal one was) changes nothing: it is left out (its description goes to
    `skipped`)."""
    out = []
    original = normal_text(generated)
    for cls in classes or list(CLASSES):
        for desc, m in CLASSES[cls](generated):
            if normal_text(m) == original:
                if skipped is not None:
                    skipped.append(f"{kernel} {cls}: {desc}")
                continue
            out.append(Mutation(kernel, cls, desc, m))
    for cls, rewrite in BENIGN.items():
        out.append(Mutation(kernel, cls, cls.replace("_", " "), rewrite(generated), semantic=False))
    return out


# -- running the differ on them ------------------------------------------------------------------

@dataclass
class CorpusCase:
    """One corpus capture, both sides, with the parameter roles verify passes the diff."""
    label: str
    kernel: str
    reference: Module
    generated: Module
    reference_roles: dict
    generated_roles: dict
    capture: object = None           # the corpus Capture (the interpreter builds its problems from it)
    kernel_file: Path | None = None  # the kernel's source file

    def diff(self, generated: Module):
        return diff(self.reference, generated, reference_arg_roles=self.reference_roles,
                    generated_arg_roles=self.generated_roles)

    def interpret(self, generated: Module) -> tuple[str, str]:
        """(verdict, reason) of the interpreter on reference vs `generated`; never raises: an
        interpreter failure is an ERROR with its message."""
        from eval.interp import outputs_differ
        # the roles of the port's leading launcher-filled strides give the interpreter their values
        try:
            report = outputs_differ(self.reference, generated, self.capture, self.kernel_file,
                                    port_extra_args=self.generated_roles)
        except Exception as e:  # noqa: BLE001 - an interpreter defect is recorded, not fatal
            return "ERROR", f"interpreter raised {type(e).__name__}: {e}"
        if report is None:
            return "ERROR", "the interpreter has no problem for this capture"
        return report.verdict, report.summary()


def _issues(report) -> list[tuple[str, str, str, str]]:
    """The CRITICAL and WARN findings, in the report's order (severity, then cause)."""
    return [(str(f.severity), f.category, f.rule, f.message) for f in report.sorted_findings()
            if str(f.severity) in ("CRITICAL", "WARN") and str(f.status) != "MATCH"]


def interpreter_baseline(case: CorpusCase) -> tuple[str, str]:
    """The interpreter on the unmutated port: it must AGREE for its verdicts on mutations to mean
    anything."""
    return case.interpret(case.generated)


def evaluate(case: CorpusCase, muts: list[Mutation], interpreter: bool = True) -> list[Outcome]:
    """The differ's verdict per mutation: the most severe finding the unmutated port does not have
    (and the first such finding in the report's order); with `interpreter`, the interpreter's
    verdict on reference vs mutated port (an ERROR when the unmutated port does not AGREE)."""
    base = Counter(_issues(case.diff(case.generated)))
    baseline = interpreter_baseline(case) if interpreter else None
    out = []
    for mut in muts:
        seen: Counter = Counter()
        new = []
        for issue in _issues(case.diff(mut.module)):
            seen[issue] += 1
            if seen[issue] > base[issue]:
                new.append(issue)
        level = new[0][0] if new else "PASS"
        outcome = Outcome(mut.kernel, mut.cls, mut.description, mut.semantic, level,
                          f"{new[0][1]}/{new[0][2]}: {new[0][3]}" if new else "")
        if baseline is not None:
            if baseline[0] != "AGREE":
                outcome.second_checker = "ERROR"
                outcome.second_checker_detail = f"unmutated port does not AGREE: {baseline[1]}"
            else:
                outcome.second_checker, outcome.second_checker_detail = case.interpret(mut.module)
        out.append(outcome)
    return out


def corpus_cases(library, kernels: list[str] | None = None, dtype: str = "float16") -> list[CorpusCase]:
    """One capture per corpus kernel (the `dtype` one where there is one), both sides captured."""
    from tileport.capture import (generated_arg_roles, generated_bytecode, reference_arg_roles,
                                  reference_bytecode)
    from tileport.corpus import captures_by_kernel
    from tileport.ops.specs import all_specs
    from tileport.tileir.reader import read_module
    cases = []
    for kernel, (path, caps) in sorted(captures_by_kernel(all_specs()).items()):
        if kernels is not None and kernel not in kernels:
            continue
        cap = next((c for c in caps if dtype in c.label), caps[0])
        ref = read_module(reference_bytecode(path, cap))
        gen = read_module(generated_bytecode(library, cap)[1])
        cases.append(CorpusCase(cap.label, kernel, ref, gen, reference_arg_roles(library, cap, ref),
                                generated_arg_roles(library, cap, gen), cap, path))
    return cases


def _row(o: Outcome) -> str:
    return f"{o.kernel} {o.cls}: {o.description}"


def summarize(outcomes: list[Outcome], baseline_critical: dict[str, int]) -> dict:
    semantic = [o for o in outcomes if o.semantic]
    benign = [o for o in outcomes if not o.semantic]
    flagged = [o for o in semantic if o.differ != "PASS"]
    interp = [o for o in outcomes if o.second_checker is not None]
    return {
        "mutations": len(semantic),
        "benign": len(benign),
        "classes": sorted({o.cls for o in semantic}),
        "kernels": sorted({o.kernel for o in outcomes}),
        "flagged_critical": sum(o.differ == "CRITICAL" for o in semantic),
        "flagged_warn": sum(o.differ == "WARN" for o in semantic),
        "missed": len(semantic) - len(flagged),
        "flagged_fraction": round(len(flagged) / len(semantic), 4) if semantic else None,
        "benign_false_alarms": sum(o.differ != "PASS" for o in benign),
        # the second checker (the interpreter); None where it was not run
        "interpreter_ran": len(interp),
        "caught_by_interpreter": sum(o.second_checker == "DIFFER" for o in semantic) if interp else None,
        "interpreter_agree": sum(o.second_checker == "AGREE" for o in semantic) if interp else None,
        "interpreter_errors": [f"{_row(o)}: {o.second_checker_detail}" for o in outcomes
                               if o.second_checker == "ERROR"],
        "caught_by_either": sum(o.caught for o in semantic) if interp else None,
        "caught_by_neither": [_row(o) for o in semantic if not o.caught] if interp else None,
        "benign_interpreter_false_alarms": [f"{_row(o)}: {o.second_checker_detail}" for o in benign
                                            if o.second_checker == "DIFFER"],
        "corpus_ports_with_critical": {k: n for k, n in baseline_critical.items() if n},
        "per_class": {cls: {"mutations": sum(o.cls == cls for o in semantic),
                            "flagged": sum(o.cls == cls and o.differ != "PASS" for o in semantic),
                            "interpreter_differ": sum(o.cls == cls and o.second_checker == "DIFFER"
                                                      for o in semantic)}
                      for cls in sorted({o.cls for o in semantic})},
    }


def run(library, kernels: list[str] | None = None) -> dict:
    outcomes: list[Outcome] = []
    baseline_critical = {}
    baseline_interp = {}
    skipped: list[str] = []
    for case in corpus_cases(library, kernels):
        baseline_critical[case.label] = case.diff(case.generated).counts()["CRITICAL"]
        verdict, reason = interpreter_baseline(case)
        baseline_interp[case.label] = verdict if verdict == "AGREE" else f"{verdict}: {reason}"
        outcomes += evaluate(case, mutations(case.label, case.generated, skipped=skipped))
    summary = summarize(outcomes, baseline_critical)
    summary["interpreter_on_unmutated_ports"] = baseline_interp
    summary["skipped_no_change"] = skipped
    return {"summary": summary, "outcomes": [o.__dict__ for o in outcomes]}


def _commit() -> str:
    try:
        return run_tool(["git", "rev-parse", "--short", "HEAD"], 60, cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, ToolTimeout):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m eval.mutate", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON result file to write")
    parser.add_argument("--crate", type=Path, default=None, help="generated crate (default: the repo's rust/)")
    parser.add_argument("--kernel", action="append", help="only these corpus kernels (repeatable)")
    args = parser.parse_args(argv)
    from tileport.runtime.library import REPO_CRATE, load
    library = load(args.crate or REPO_CRATE, profile=os.environ.get("TILEPORT_PROFILE", "dev"))
    result = run(library, args.kernel)
    result["summary"]["commit"] = _commit()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(args.out)
    s = result["summary"]
    print(report(s, result["outcomes"]))
    return 0 if passed(s) else 1


def report(s: dict, outcomes: list[dict]) -> str:
    """The figures, then every mutation that needs a look, one line each."""
    lines = [
        f"{s['mutations']} semantic mutations over {len(s['kernels'])} kernels, {len(s['classes'])} classes",
        f"  flagged by the differ: {s['mutations'] - s['missed']} ({s['flagged_critical']} CRITICAL, "
        f"{s['flagged_warn']} WARN; {s['flagged_fraction']:.1%}), {s['missed']} missed",
        f"  caught by the interpreter (outputs DIFFER): {s['caught_by_interpreter']}, AGREE "
        f"{s['interpreter_agree']}, ERROR {len(s['interpreter_errors'])} (of {s['interpreter_ran']} runs)",
        f"  caught by either: {s['caught_by_either']}; caught by neither: {len(s['caught_by_neither'])}",
        f"  benign rewrites: {s['benign']}; false alarms of the differ {s['benign_false_alarms']}, "
        f"of the interpreter {len(s['benign_interpreter_false_alarms'])}",
    ]
    lines += [f"  NOT AGREE ON UNMUTATED PORT {k}: {v}"
              for k, v in s.get("interpreter_on_unmutated_ports", {}).items() if v != "AGREE"]
    lines += [f"  CAUGHT BY NEITHER {row}" for row in s["caught_by_neither"]]
    for o in outcomes:
        if o["semantic"] and o["differ"] == "PASS":
            lines.append(f"  MISSED BY DIFFER {o['kernel']} {o['cls']}: {o['description']} "
                         f"(interpreter {o['second_checker']})")
        if not o["semantic"] and o["differ"] != "PASS":
            lines.append(f"  FALSE ALARM (differ) {o['kernel']} {o['cls']}: {o['finding']}")
    lines += [f"  FALSE ALARM (interpreter) {row}" for row in s["benign_interpreter_false_alarms"]]
    lines += [f"  INTERPRETER ERROR {row}" for row in s["interpreter_errors"]]
    return "\n".join(lines)


def passed(s: dict) -> bool:
    """>= 98 % flagged by the differ, every mutation caught by one of the checkers, no false alarm."""
    return (s["missed"] <= 0.02 * s["mutations"] and s["benign_false_alarms"] == 0
            and not s["caught_by_neither"] and not s["benign_interpreter_false_alarms"])


if __name__ == "__main__":
    sys.exit(main())
