"""What the diff needs to know about op kinds (names are those the reader gives ops)."""

from __future__ import annotations

from typing import Iterator

from .model import Block, Op, Value
from .types import is_pointer_tile

# Ops that only restate their first operand's value (for matching they are looked through).
TRANSPARENT = frozenset({"assume", "reshape", "broadcast"})
TERMINATORS = frozenset({"yield", "continue", "break", "return"})
VIEW_OPS = frozenset({"make_tensor_view", "make_partition_view", "make_gather_scatter_view",
                      "make_strided_view"})
MMA_OPS = frozenset({"mmaf", "mmai", "mmaf_scaled"})
REDUCTIONS = frozenset({"reduce", "scan"})
LOOPS = frozenset({"for", "loop"})
CASTS = frozenset({"ftof", "ftoi", "itof", "exti", "trunci", "bitcast", "int_to_ptr", "ptr_to_int",
                   "ptr_to_ptr"})
NUMERIC_CASTS = frozenset({"ftof", "ftoi", "itof", "exti", "trunci"})
SPECIAL_MATH = frozenset({"exp", "exp2", "log", "log2", "rsqrt", "sqrt", "fma", "tanh", "sin", "cos",
                          "tan", "sinh", "cosh", "atan2", "fpowf", "fpowi", "floor", "ceil"})
COMMUTATIVE = frozenset({"addf", "mulf", "addi", "muli", "maxf", "minf", "maxi", "mini", "andi", "ori",
                         "xori", "mulhii"})
# Operand roles of memory ops that say *where* (not *what*) is accessed.
ADDRESS_ROLES = frozenset({"view", "index", "source", "destination", "pointers", "mask", "paddingValue"})
LOOP_BOUND_ROLES = frozenset({"lowerBound", "upperBound", "step"})


def is_transparent(op: Op | None) -> bool:
    """An op that restates its (single) operand: looked through by matching and comparison."""
    return op is not None and (op.name in TRANSPARENT or _identity_bitcast(op)) and len(op.operands) >= 1 \
        and len(op.results) == 1


def _identity_bitcast(op: Op) -> bool:
    """A bitcast to its operand's own type (integers are signless: i64 -> u64 in the source) changes nothing."""
    return op.name == "bitcast" and len(op.operands) == 1 and len(op.results) == 1 \
        and op.operands[0].type == op.results[0].type


def is_memory(op: Op) -> bool:
    return op.name.endswith("_tko") and op.name.startswith(("load", "store", "atomic", "multimem"))


def direction(op: Op) -> str:
    """load / store / atomic for a memory op."""
    if op.name.startswith("atomic"):
        return "atomic"
    if op.name.startswith("load") or op.name.startswith("multimem_load"):
        return "load"
    return "store"


def family(op: Op) -> str:
    """view (tile-space access through a view: TMA-capable) or ptr (gather/scatter through pointers)."""
    return "view" if "_view_" in op.name else "ptr"


def kind(op: Op) -> str:
    """The diff category family of an op."""
    name = op.name
    if is_memory(op):
        return "memory"
    if name in VIEW_OPS:
        return "view"
    if name in MMA_OPS:
        return "mma"
    if name in REDUCTIONS:
        return "reduction"
    if name in LOOPS or name == "if":
        return "control"
    if name in CASTS:
        return "cast"
    if name in SPECIAL_MATH:
        return "special"
    if is_transparent(op):
        return "plumbing"
    if name.endswith("_tko") or name in ("assert", "alloca", "global", "get_global", "preview$call"):
        return "other"
    return "arith"


def root(v: Value) -> Value:
    """`v` with transparent ops (assume, reshape, broadcast) looked through."""
    while is_transparent(v.op):
        v = v.op.operands[0]  # type: ignore[union-attr]
    return v


def is_function_arg(v: Value) -> bool:
    return isinstance(v.owner, Block) and v.owner.parent is None


def carried_index(v: Value) -> int | None:
    """For a loop-carried block argument of `for`/`loop`, its position among the loop-carried values
    (the loop's initValues, its `continue` operands and its results)."""
    owner = v.owner
    if not isinstance(owner, Block) or owner.parent is None or owner.parent.name not in LOOPS:
        return None
    i = v.index - 1 if owner.parent.name == "for" else v.index  # a `for` body starts with the counter
    return i if i >= 0 else None


def loop_init(v: Value) -> Value | None:
    """For a loop-carried block argument of `for`/`loop`, its initial value."""
    i = carried_index(v)
    if i is None:
        return None
    inits = v.owner.parent.operands_with("initValues")  # type: ignore[union-attr]
    return inits[i] if i < len(inits) else None


def loop_jumps(block: Block) -> Iterator[Op]:
    """The `continue` / `break` ops of the loop whose body is `block`: those nested in an `if`
    count, those of an inner loop do not."""
    for op in block.ops:
        if op.name in ("continue", "break"):
            yield op
        elif op.name not in LOOPS:
            for region in op.regions:
                for b in region.blocks:
                    yield from loop_jumps(b)


def base_pointer(v: Value) -> Value | None:
    """The pointer kernel parameter an address (view or pointer tile) is derived from."""
    for _ in range(64):
        if is_function_arg(v):
            return v if is_pointer_tile(v.type) else None
        op = v.op
        if op is None:
            init = loop_init(v)
            if init is None:
                return None
            v = init
        elif op.name in VIEW_OPS:
            nxt = op.operand("base") if op.name == "make_tensor_view" else \
                (op.operands[0] if op.operands else None)
            if nxt is None:
                return None
            v = nxt
        elif (is_transparent(op) or op.name in ("ptr_to_ptr", "offset")) and op.operands:
            v = op.operands[0]
        else:
            return None
    return None


def address_operand(op: Op) -> Value | None:
    """The operand of a memory op that names the accessed memory (view or pointer tile)."""
    for role in ("view", "source", "destination", "pointers"):
        v = op.operand(role)
        if v is not None:
            return v
    return None


def loop_result_source(op: Op, index: int) -> Value | None:
    """The value a `for` result comes from: operand `index` of the body's `continue`."""
    if op.name != "for" or not op.regions or not op.regions[0].blocks:
        return None
    ops = op.regions[0].blocks[0].ops
    if ops and ops[-1].name == "continue" and index < len(ops[-1].operands):
        return ops[-1].operands[index]
    return None


def region_yield(op: Op, region: int, index: int) -> Value | None:
    """Operand `index` of the `yield` ending region `region` of an `if`."""
    if region >= len(op.regions) or not op.regions[region].blocks:
        return None
    ops = op.regions[region].blocks[0].ops
    if ops and ops[-1].name == "yield" and index < len(ops[-1].operands):
        return ops[-1].operands[index]
    return None
