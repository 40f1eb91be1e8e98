"""Mutations on the module model: planted defects, and changes that must not matter.

Each function takes a module read from real bytecode and returns a changed copy. Defects make one
change a port could plausibly get wrong; the neutral ones rename, reorder or duplicate.
"""

from __future__ import annotations

import dataclasses
import struct

from tileport.tileir.attrs import DivBy, Dense, DictAttr, Hints, TypedFloat
from tileport.tileir.model import Block, Function, Module, Op, Region, Value, clone_module, redirect, walk
from eval.mutate import all_values
from eval.mutate import const_op as _const
from eval.mutate import insert_before as _insert_before
from eval.mutate import new_op as _op
from eval.mutate import remove as _remove
from eval.mutate import rename_values, reorder_independent  # noqa: F401 (neutral changes)
from tileport.tileir.types import (FunctionType, PartitionViewType, PointerType, ScalarType, TileType,
                                   is_pointer_tile)

I32 = ScalarType("i32")
F32 = ScalarType("f32")
F16 = ScalarType("f16")


def _entry(m: Module) -> Function:
    return m.entries[0]


def _first(f: Function, name: str, pred=lambda op: True) -> Op:
    for op in walk(f):
        if op.name == name and pred(op):
            return op
    raise LookupError(f"no {name} op")


# -- planted defects ------------------------------------------------------------------------------

def drop_flush_to_zero(m: Module) -> Module:
    m = clone_module(m)
    _first(_entry(m), "divf", lambda op: op.attributes.get("flush_to_zero")).attributes["flush_to_zero"] = False
    return m


def change_rounding(m: Module) -> Module:
    m = clone_module(m)
    _first(_entry(m), "divf", lambda op: op.attributes.get("rounding_mode") == "approx") \
        .attributes["rounding_mode"] = "full"
    return m


def change_padding(m: Module) -> Module:
    m = clone_module(m)
    pv = _first(_entry(m), "make_partition_view", lambda op: op.results[0].type.padding == "neg_inf")
    pv.results[0].type = dataclasses.replace(pv.results[0].type, padding="zero")
    return m


def drop_pointer_div_by(m: Module) -> Module:
    m = clone_module(m)
    f = _entry(m)
    op = _first(f, "assume", lambda o: isinstance(o.attributes["predicate"], DivBy)
                and is_pointer_tile(o.operands[0].type))
    redirect(f, {op.results[0]: op.operands[0]})
    _remove(op)
    return m


def change_tile_shape(m: Module, old: int = 1024, new: int = 512) -> Module:
    m = clone_module(m)
    for v in all_values(_entry(m)):
        t = v.type
        if isinstance(t, TileType) and old in t.shape:
            v.type = TileType(tuple(new if d == old else d for d in t.shape), t.elem)
        elif isinstance(t, PartitionViewType) and old in t.tile:
            v.type = dataclasses.replace(t, tile=tuple(new if d == old else d for d in t.tile))
    return m


def remove_loop(m: Module) -> Module:
    """Run the first `for` loop's body once, without the loop."""
    m = clone_module(m)
    f = _entry(m)
    loop = _first(f, "for")
    body = loop.regions[0].blocks[0]
    mapping = {body.args[0]: loop.operands[0]}
    mapping.update(zip(body.args[1:], loop.operands_with("initValues")))
    cont = body.ops[-1]
    moved = body.ops[:-1]
    _insert_before(loop, moved)
    redirect(f, mapping)
    redirect(f, {r: mapping.get(v, v) for r, v in zip(loop.results, cont.operands)})
    _remove(loop)
    return m


def add_loop(m: Module) -> Module:
    """Wrap the last store in a one-trip `for` loop."""
    m = clone_module(m)
    f = _entry(m)
    store = [op for op in walk(f) if op.name.startswith("store")][-1]
    scalar = TileType((), I32)
    zero, one = _const(scalar, (0).to_bytes(4, "little")), _const(scalar, (1).to_bytes(4, "little"))
    loop = _op("for", [zero.results[0], one.results[0], one.results[0]],
               ["lowerBound", "upperBound", "step"], [], unsignedCmp=False)
    _insert_before(store, [zero, one, loop])
    body = Block(parent=loop)
    body.add_arg(scalar)
    _remove(store)
    store.parent = body
    cont = _op("continue", [], [], [])
    cont.parent = body
    body.ops = [store, cont]
    loop.regions = [Region([body])]
    return m


def view_load_to_gather(m: Module) -> Module:
    """Replace the first 1-D view load by a pointer gather of the same elements."""
    m = clone_module(m)
    f = _entry(m)
    load = _first(f, "load_view_tko", lambda op: len(op.results[0].type.shape) == 1)
    pview = load.operand("view").op
    tview = pview.operands[0].op
    ptr = tview.operand("base")
    (size,) = pview.results[0].type.tile
    elem = load.results[0].type.elem
    shape = tview.operand("dynamicShape")
    idx = load.operand("index")
    scalar, lane = TileType((), I32), TileType((size,), I32)
    ops: list[Op] = []

    def add(op: Op) -> Value:
        ops.append(op)
        return op.results[0]

    def splat(v: Value, t: TileType) -> Value:
        one = add(_op("reshape", [v], ["source"], [TileType((1,), t.elem)]))
        return add(_op("broadcast", [one], ["source"], [t]))

    tile = add(_const(scalar, size.to_bytes(4, "little")))
    start = add(_op("muli", [idx, tile], ["lhs", "rhs"], [scalar], overflow="none"))
    offs = add(_op("addi", [splat(start, lane), add(_op("iota", [], [], [lane]))], ["lhs", "rhs"],
                   [lane], overflow="none"))
    mask = add(_op("cmpi", [offs, splat(shape, lane)], ["lhs", "rhs"], [TileType((size,), ScalarType("i1"))],
                   comparison_predicate="less_than", signedness="signed"))
    ptr_t = TileType((size,), PointerType(elem))
    ptrs = add(_op("offset", [splat(ptr, ptr_t), offs], ["ptr", "offset"], [ptr_t]))
    pad = add(_const(TileType((size,), elem), bytes(elem.bits // 8)))
    token = load.operand("token")
    operands, roles = [ptrs, mask, pad], ["source", "mask", "paddingValue"]
    if token is not None:
        operands.append(token)
        roles.append("token")
    gather = _op("load_ptr_tko", operands, roles, [r.type for r in load.results],
                 memory_ordering_semantics="weak")
    ops.append(gather)
    _insert_before(load, ops)
    redirect(f, dict(zip(load.results, gather.results)))
    _remove(load)
    return m


def drop_entry_hint(m: Module, key: str = "occupancy") -> Module:
    m = clone_module(m)
    f = _entry(m)
    assert f.hints is not None
    f.hints = Hints(tuple((arch, DictAttr(tuple((k, v) for k, v in d.items if k != key)))
                          for arch, d in f.hints.by_arch))
    return m


def change_reduction_identity(m: Module) -> Module:
    """Make the max reduction start from 0.0 instead of -inf."""
    m = clone_module(m)
    red = _first(_entry(m), "reduce", lambda op: any(o.name == "maxf" for o in op.regions[0].blocks[0].ops))
    red.attributes["identities"] = (TypedFloat(F32, 0),)
    return m


def mma_accumulator_f16(m: Module) -> Module:
    """Accumulate the matmul in f16 (and drop the then-useless f32 -> f16 cast)."""
    m = clone_module(m)
    f = _entry(m)
    mma = _first(f, "mmaf")
    acc = mma.operands[2]
    loop = acc.owner.parent
    init = loop.operands[2 + acc.index].op
    f16 = lambda t: TileType(t.shape, F16)
    init.results[0].type = f16(init.results[0].type)
    init.attributes["value"] = Dense(None, bytes(2))
    for v in (acc, loop.results[acc.index - 1], mma.results[0]):
        v.type = f16(v.type)
    cast = _first(f, "ftof", lambda op: op.operands[0] is loop.results[acc.index - 1])
    redirect(f, {cast.results[0]: cast.operands[0]})
    _remove(cast)
    return m


def constant_to_argument(m: Module, value: float = 4096.0) -> Module:
    """Turn the f32 constant `value` into a new runtime kernel parameter."""
    m = clone_module(m)
    f = _entry(m)
    bits = struct.unpack("<I", struct.pack("<f", value))[0].to_bytes(4, "little")
    const = _first(f, "constant", lambda op: op.attributes["value"].data == bits)
    arg = f.body.add_arg(const.results[0].type)
    f.type = FunctionType(f.type.params + (arg.type,), f.type.results)
    redirect(f, {const.results[0]: arg})
    _remove(const)
    return m


DEFECTS = {
    # name: (program, mutation, expected category, expected rule)
    "missing_flush_to_zero": ("softmax", drop_flush_to_zero, "math", "flush_to_zero"),
    "rounding_changed": ("softmax", change_rounding, "math", "rounding"),
    "padding_changed": ("softmax", change_padding, "partition_view", "padding"),
    "lost_pointer_div_by": ("vec_add", drop_pointer_div_by, "assume", "ptr_div_by_lost"),
    "tile_shape_changed": ("vec_add", change_tile_shape, "tile_shape", "shape"),
    "missing_loop": ("matmul", remove_loop, "loop", "missing"),
    "extra_loop": ("vec_add", add_loop, "loop", "extra"),
    "view_load_to_gather": ("vec_add", view_load_to_gather, "memory_family", "family_changed"),
    "missing_occupancy": ("matmul", drop_entry_hint, "entry_hints", "perf_hint"),
    "reduction_identity_changed": ("softmax", change_reduction_identity, "reduction", "identity"),
    "mma_accumulator_f16": ("matmul", mma_accumulator_f16, "mma", "accumulator_type"),
    "constant_to_argument": ("rms_norm", constant_to_argument, "constant_arg", "const_to_arg"),
}


# -- changes that must not matter -----------------------------------------------------------------

def duplicate_constants(m: Module) -> Module:
    """Give every other use of each constant its own copy of the constant."""
    m = clone_module(m)
    for f in m.functions:
        users = {}
        for op in walk(f):
            for i, v in enumerate(op.operands):
                users.setdefault(v, []).append((op, i))
        for const in [op for op in walk(f) if op.name == "constant"]:
            uses = users.get(const.results[0], [])
            if len(uses) < 2:
                continue
            dup = _op("constant", [], [], [const.results[0].type], **const.attributes)
            _insert_before(const, [dup])
            for op, i in uses[1::2]:
                op.operands[i] = dup.results[0]
    return m


def fresh_tokens(m: Module) -> Module:
    """Give every memory op its own fresh token instead of the reference's token chain."""
    m = clone_module(m)
    for f in m.functions:
        for op in list(walk(f)):
            for i, (role, v) in enumerate(zip(op.operand_roles, op.operands)):
                if role == "token" and op.name.endswith("_tko"):
                    tok = _op("make_token", [], [], [v.type])
                    _insert_before(op, [tok])
                    op.operands[i] = tok.results[0]
    return m
