"""SEMANTIC_EQUIV rules: different Tile IR spellings of the same computation.

Each rule rewrites one spelling into a normal form on both sides before matching and marks the ops
it produced (`Op.equiv_rule`), so the diff can report a SEMANTIC_EQUIV finding where the two sides
reached the same normal form from different spellings. The hint-key rule acts on attributes, not
ops; canonicalization applies it and records the key it used (`Hints.selected_from`).

RULES is the documented table (docs/tileir.md renders it); every rule has a test in
tests/tileir/test_equiv.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from .attrs import Dense, DictAttr, Hints, TypedInt, constant_value
from .model import Function, Op, Value, blocks, redirect
from .ops import root
from .types import PartitionViewType, ScalarType, TensorViewType, TileType


@dataclass(frozen=True)
class EquivRule:
    id: str
    normal_form: str
    equivalent: str
    condition: str
    rewrite: "Rewrite | None"  # None: applied by canonicalization


def select_hints(hints: Hints | None, target: str, defaults: dict[str, Any]) -> Hints:
    """Rule `hint_key`: the entries for `target`, else those under "default", keyed by `target`.

    Integer values lose their integer type (i32 vs i64 spellings), entries equal to `defaults`
    are dropped, keys are sorted.
    """
    table = dict(hints.by_arch) if hints is not None else {}
    key = target if target in table else "default" if "default" in table else None
    items: list[tuple[str, Any]] = []
    if key is not None:
        for k, v in table[key].items:
            value = v.value if isinstance(v, TypedInt) else v
            if defaults.get(k, object()) != value:
                items.append((k, value))
    return Hints(((target, DictAttr(tuple(sorted(items)))),), selected_from=key)


def hint_key_differs(a: Hints | None, b: Hints | None) -> bool:
    """Rule `hint_key` made two selected hints equal: the same non-empty hints, taken from
    different keys."""
    return isinstance(a, Hints) and isinstance(b, Hints) and bool(a.selected.items) and a == b \
        and a.selected_from != b.selected_from


# -- helpers --------------------------------------------------------------------------------------

# A rewrite gets an op and returns (new ops replacing it, one replacement value per result), or None.
Rewrite = Callable[[Op], "tuple[list[Op], list[Value]] | None"]


def _const_int(v: Value) -> int | None:
    """The integer value of a splat integer constant (looking through reshape/broadcast/assume)."""
    v = root(v)
    op = v.op
    if op is None or op.name != "constant" or not isinstance(v.type, TileType):
        return None
    vals = constant_value(v.type, op.attributes["value"])
    return vals[0] if len(vals) == 1 and isinstance(vals[0], int) else None


def _linear(v: Value, depth: int = 0) -> tuple[Counter, int]:
    """`v` as (multiset of non-constant terms with signs, constant offset) over addi/subi."""
    c = _const_int(v)
    if c is not None:
        return Counter(), c
    op = v.op
    if op is not None and depth < 4 and op.name in ("addi", "subi"):
        lt, lc = _linear(op.operands[0], depth + 1)
        rt, rc = _linear(op.operands[1], depth + 1)
        if op.name == "subi":
            rt = Counter({k: -n for k, n in rt.items()})
            rc = -rc
        total = Counter(lt)
        total.update(rt)
        return Counter({k: n for k, n in total.items() if n}), lc + rc
    return Counter({v: 1}), 0


def _ceil_div(a: Value, b: Value, signedness: str, result: TileType, rule: str,
              loc: str | None) -> Op:
    op = Op("divi", [a, b], ["lhs", "rhs"],
            attributes={"rounding": "positive_inf", "signedness": signedness}, equiv_rule=rule, loc=loc)
    op.add_result(result)
    return op


def _int_constant(value: int, t: TileType, loc: str | None) -> Op:
    assert isinstance(t.elem, ScalarType)
    bits = t.elem.bits
    data = (value & ((1 << bits) - 1)).to_bytes(max(1, bits // 8), "little")
    op = Op("constant", attributes={"value": Dense(None, data)}, loc=loc)
    op.add_result(t)
    return op


# -- rewrites -------------------------------------------------------------------------------------

def _rewrite_ceil_div(op: Op) -> tuple[list[Op], list[Value]] | None:
    """divi(a + b - 1, b) rounding toward zero or -inf  ->  divi(a, b) rounding<positive_inf>."""
    if op.name != "divi" or op.attributes.get("rounding") not in ("zero", "negative_inf") \
            or len(op.operands) != 2:
        return None
    x, b = op.operands
    terms, offset = _linear(x)
    bc = _const_int(b)
    if bc is not None:
        if offset != bc - 1 or len(terms) != 1 or next(iter(terms.values())) != 1:
            return None
        a = next(iter(terms))
    else:
        if offset != -1 or terms.get(b) != 1 or len(terms) != 2 or sum(terms.values()) != 2:
            return None
        a = next(t for t in terms if t is not b)
    result = op.results[0].type
    if not isinstance(result, TileType):
        return None
    new = _ceil_div(a, b, op.attributes["signedness"], result, "ceil_div", op.loc)
    return [new], new.results


_GREATER = {"less_than": False, "less_than_or_equal": False, "greater_than": True,
            "greater_than_or_equal": True}


def _rewrite_select_minmax(op: Op) -> tuple[list[Op], list[Value]] | None:
    """select(cmpi(a, b, <), a, b) -> mini(a, b); with > (or swapped arms) -> maxi, etc."""
    if op.name != "select" or len(op.operands) != 3:
        return None
    cond, t, f = op.operands
    cmp = cond.op
    if cmp is None or cmp.name != "cmpi" or len(cmp.operands) != 2 \
            or cmp.attributes.get("comparison_predicate") not in _GREATER:
        return None
    a, b = cmp.operands
    greater = _GREATER[cmp.attributes["comparison_predicate"]]
    arms, compared = (root(t), root(f)), (root(a), root(b))
    if arms == compared:
        name = "maxi" if greater else "mini"
    elif arms == compared[::-1]:
        name = "mini" if greater else "maxi"
    else:
        return None
    new = Op(name, [a, b], ["lhs", "rhs"], attributes={"signedness": cmp.attributes["signedness"]},
             equiv_rule="min_max_select", loc=op.loc)
    new.add_result(op.results[0].type)
    return [new], new.results


def _rewrite_index_space_shape(op: Op) -> tuple[list[Op], list[Value]] | None:
    """get_index_space_shape(partition of make_tensor_view) result i -> ceil-div of a tensor dim."""
    if op.name != "get_index_space_shape":
        return None
    pv = op.operands[0]
    view_op = pv.op
    if not isinstance(pv.type, PartitionViewType) or view_op is None \
            or view_op.name != "make_partition_view":
        return None
    tv = view_op.operands[0]
    tv_op = tv.op
    if tv_op is None or tv_op.name != "make_tensor_view" or not isinstance(tv.type, TensorViewType):
        return None
    dynamic = tv_op.operands_with("dynamicShape")
    if len(dynamic) != tv.type.shape.count(None) or len(op.results) != len(pv.type.tile) \
            or sorted(pv.type.dim_map) != list(range(len(tv.type.shape))):
        return None  # not well-formed IR: leave it to the comparison
    rest = iter(dynamic)
    dims: list[Value | int] = [next(rest) if d is None else d for d in tv.type.shape]
    new_ops: list[Op] = []
    values: list[Value] = []
    for i, res in enumerate(op.results):
        if not isinstance(res.type, TileType) or not isinstance(res.type.elem, ScalarType):
            return None
        dim = dims[pv.type.dim_map[i]]
        tile = _int_constant(pv.type.tile[i], res.type, op.loc)
        new_ops.append(tile)
        if isinstance(dim, int):
            shape = _int_constant(dim, res.type, op.loc)
            new_ops.append(shape)
            dim = shape.results[0]
        div = _ceil_div(dim, tile.results[0], "signed", res.type, "index_space_shape", op.loc)
        new_ops.append(div)
        values.append(div.results[0])
    return new_ops, values


RULES: tuple[EquivRule, ...] = (
    EquivRule("ceil_div", "divi a, b rounding<positive_inf>",
              "divi (a + b - 1), b  (rounding toward zero or -inf; also a + (b-1) with constant b)",
              "a >= 0, b > 0 (sizes and tile counts)", _rewrite_ceil_div),
    EquivRule("min_max_select", "mini a, b / maxi a, b",
              "select (cmpi a < b), a, b and the >, <=, >= and swapped-arm forms",
              "integer operands; the cmpi signedness becomes the min/max signedness",
              _rewrite_select_minmax),
    EquivRule("index_space_shape", "divi dim, tile rounding<positive_inf> (= ceil-div)",
              "get_index_space_shape of a partition of make_tensor_view (result i uses the tensor "
              "dim dim_map[i] and tile[i])",
              "the view comes from make_partition_view(make_tensor_view(...))",
              _rewrite_index_space_shape),
    EquivRule("hint_key", "optimization hints keyed by the target (sm_XX)",
              "the same hints under \"default\"",
              "no sm_XX entry for the target exists; sm_XX wins over default", None),
)


def rewrite(function: Function) -> int:
    """Apply every op rewrite of RULES once per op (new ops are not rewritten again).

    The replaced ops are removed; what only they used becomes dead and goes with the next DCE.
    Returns how many rewrites fired.
    """
    rewrites = [r.rewrite for r in RULES if r.rewrite is not None]
    fired = 0
    for block in list(blocks(function)):
        i = 0
        while i < len(block.ops):
            op = block.ops[i]
            result = None
            if op.equiv_rule is None:
                for rw in rewrites:
                    result = rw(op)
                    if result is not None:
                        break
            if result is None:
                i += 1
                continue
            new_ops, values = result
            for n in new_ops:
                n.parent = block
            block.ops[i:i + 1] = new_ops
            redirect(function, dict(zip(op.results, values)))
            fired += 1
            i += len(new_ops)
    return fired
