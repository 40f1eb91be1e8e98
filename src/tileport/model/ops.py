"""The operation catalogue of the kernel model: every `Op.kind`, declared once.

`OpKind` (an enum whose values are the kind names) is derived from the catalogue, so code names a kind
as `OpKind.LOAD` and a misspelled one fails where it is written. Each kind states its operands (how
many, of which type classes), its result (type class and the typing rule that relates it to the
operands) and the attributes it may carry, with the values a moded attribute may take; `ATTRS` gives
each attribute's type (a name means one thing in every kind). `Op` checks itself against its
declaration when it is built, so a frontend or pass that builds a malformed operation fails there,
naming the kind, not later in an emitter.
Emitters declare how they lower each kind (`tileport.emit.rust.lowering`); a test keeps both in step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from tileport.model.types import ArrayT, DimOp, DVar, PtrT, ScalarT, Sym, TileT, TokenT

# ---- attribute domains: every value a frontend or pass may give (an emitter may lower fewer and refuse the rest)
ROUNDING_MODES = (None, "nearest_even", "zero", "negative_inf", "positive_inf", "approx", "full", "nearest_away",
                  "nearest_int_to_zero")
FLAGS = (None, False, True)  # ftz, nan propagation, TMA permission
PADDING_MODES = ("undetermined", "zero", "neg_zero", "nan", "pos_inf", "neg_inf")
BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "rem", "cdiv", "pow", "max", "min", "and", "or", "xor",
              "shl", "shr")
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
UNARY_FNS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh", "floor",
             "ceil", "abs", "negative", "not")
REDUCE_FNS = ("sum", "max", "min", "prod")
ATOMIC_MODES = ("add", "max", "min", "and", "or", "xor", "xchg")
MEMORY_ORDERS = ("relaxed", "acquire", "release", "acq_rel")
MEMORY_SCOPES = ("block", "device", "sys")

# ---- operand and result type classes
TILE, SCALAR, ARRAY, PTR, TOKEN = TileT, ScalarT, ArrayT, PtrT, TokenT
VALUE = (TileT, ScalarT)  # a tile or a runtime scalar
NONE = type(None)


class ModelError(TypeError):
    """An operation that breaks its declaration: a translator bug, reported as an internal error."""


@dataclass(frozen=True)
class Attr:
    """An attribute's type: its value is an instance of one of `types` (and a tuple's items, of one of
    `items`) or, for a moded attribute, one of `values`."""

    types: tuple[type, ...] = ()
    items: tuple[type, ...] = ()
    values: tuple = ()

    def problem(self, value: Any) -> str | None:
        if self.values:
            return None if value in self.values else f"is not one of {self.values}"
        if not isinstance(value, self.types):
            return f"is {type(value).__name__}, expected {_names(self.types)}"
        if isinstance(value, tuple) and not all(isinstance(v, self.items) for v in value):
            return f"holds {_names({type(v) for v in value} - set(self.items))}, expected {_names(self.items)}"
        return None


def _names(classes) -> str:
    return "/".join(sorted(c.__name__ for c in classes))


DIMS = (int, Sym, DimOp)  # a length: static, or over constant parameters
NAME = (str,)  # a variable or parameter of the kernel
# Every attribute a kind may declare, by name; `OpDecl.values` narrows a moded one (`op`, `fn`, ...) per kind.
ATTRS: dict[str, Attr] = {
    "axis": Attr((int,)), "axes": Attr((tuple,), (int,)), "shape": Attr((tuple,), DIMS), "size": Attr(DIMS),
    "order": Attr((tuple, NONE), (int,)), "strides": Attr((tuple,), (int,)), "dtype": Attr((str, DVar)),
    "op": Attr((str,)), "fn": Attr((str,)), "mode": Attr((str,)), "memory_order": Attr((str,)),
    "memory_scope": Attr((str,)), "rounding": Attr(values=ROUNDING_MODES), "ftz": Attr(values=FLAGS),
    "nan": Attr(values=FLAGS), "allow_tma": Attr(values=FLAGS), "padding": Attr(values=PADDING_MODES),
    "reverse": Attr((bool,)), "check_bounds": Attr((bool, NONE)), "has_mask": Attr((bool,)),
    "padding_value": Attr((int, float)), "latency": Attr((int, NONE)), "token": Attr((*NAME, NONE)),
    "result_token": Attr((*NAME, NONE)), "array": Attr(NAME), "view_of": Attr(NAME), "divisor": Attr((int,)),
    "steps": Attr((tuple,), (tuple,)), "at_launch": Attr((bool,)), "elem": Attr((str, DVar)),
    "divisors": Attr((tuple,), (int,)),
}


@dataclass(frozen=True)
class OpDecl:
    """One kind. `operands`: the type classes of each operand, the last entry repeating up to
    `max_args`; `result`: the classes the result type may have (NONE: an effect, built as `Do`);
    `rule`: operands/result relation (one of RULES); `attrs`: the keys it may carry (each typed in
    ATTRS), `required` those it must."""

    kind: str
    operands: tuple[tuple[type, ...] | type, ...]
    result: tuple[type, ...] | type
    min_args: int = -1  # default: len(operands)
    max_args: int = -1  # default: len(operands)
    rule: str = "any"
    attrs: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    values: tuple[tuple[str, tuple], ...] = ()  # attribute -> the values it may take in this kind

    @property
    def arity(self) -> tuple[int, int]:
        n = len(self.operands)
        return (n if self.min_args < 0 else self.min_args, n if self.max_args < 0 else self.max_args)


def _dtype(t: Any) -> Any:
    return getattr(t, "dtype", None)


def _shape(t: Any) -> Any:
    return getattr(t, "shape", None)


# Typing rules: (args, result, op) -> a problem, or None.
RULES: dict[str, Callable[[tuple, Any, Any], str | None]] = {
    "any": lambda args, ty, op: None,
    # every operand and the result have one element type
    "same_dtype": lambda args, ty, op: (None if all(_dtype(a.ty) == _dtype(ty) for a in args)
                                        else "operands and result differ in element type"),
    # the result's element type is the first operand's (the others index or count)
    "like_first": lambda args, ty, op: (None if _dtype(args[0].ty) == _dtype(ty)
                                        else "result element type differs from the first operand's"),
    # bool result, operands of one element type
    "compare": lambda args, ty, op: (None if _dtype(ty) == "bool" and _dtype(args[0].ty) == _dtype(args[1].ty)
                                     else "compares operands of one element type to a bool result"),
    # bool condition, then both values and the result of one element type
    "select": lambda args, ty, op: (None if _dtype(args[0].ty) == "bool" and _dtype(args[1].ty) == _dtype(ty)
                                    == _dtype(args[2].ty) else "selects between values of the result's type"),
    # the result's element type is the `dtype` attribute
    "to_dtype": lambda args, ty, op: (None if _dtype(ty) == op.attr("dtype")
                                      else "result element type differs from its dtype attribute"),
    # the shape changes, the element type does not
    "reshape": lambda args, ty, op: (None if _dtype(args[0].ty) == _dtype(ty) and type(args[0].ty) is type(ty)
                                     else "keeps the operand's element and value type"),
    # the accumulator is the result
    "mma": lambda args, ty, op: (None if args[2].ty == ty and _dtype(args[0].ty) == _dtype(args[1].ty)
                                 else "accumulates into a tile of the result type from two operands of one type"),
    # the operand's type passes through
    "identity": lambda args, ty, op: None if args[0].ty == ty else "result type differs from its operand's",
    # a view of the array (second operand) at the pointer (first operand): same element type and rank
    "view": lambda args, ty, op: (None if args[0].ty.dtype == args[1].ty.dtype == ty.dtype and args[1].ty.rank == ty.rank
                                  == len(op.attr("strides")) and len(args) == 2 + ty.rank + op.attr("strides").count(-1)
                                  else "views its array's elements at its rank, with an extent per dimension and "
                                       "a value per dynamic stride"),
}

MEMORY = frozenset({"token", "result_token", "latency"})
_ATOMIC_VALUES = (("mode", ATOMIC_MODES), ("memory_order", MEMORY_ORDERS), ("memory_scope", MEMORY_SCOPES))

_DECLS = [
    # ---- grid and array facts
    OpDecl("bid", (), SCALAR, attrs=frozenset({"axis"}), required=frozenset({"axis"})),
    OpDecl("num_blocks", (), SCALAR, attrs=frozenset({"axis"}), required=frozenset({"axis"})),
    OpDecl("array_dim", (ARRAY,), SCALAR, attrs=frozenset({"axis"}), required=frozenset({"axis"})),
    OpDecl("array_stride", (ARRAY,), SCALAR, attrs=frozenset({"axis"}), required=frozenset({"axis"})),
    OpDecl("num_tiles", (ARRAY,), SCALAR, attrs=frozenset({"axis", "shape", "order"}),
           required=frozenset({"axis", "shape"})),
    # ---- values
    OpDecl("scalar", (SCALAR,), SCALAR),
    OpDecl("copy", ((TileT, ScalarT, TokenT, PtrT),), (TileT, ScalarT, TokenT, PtrT), rule="identity"),
    OpDecl("arange", (), TILE, attrs=frozenset({"size", "dtype"}), required=frozenset({"size"})),
    OpDecl("full", (SCALAR,), TILE, rule="to_dtype", attrs=frozenset({"dtype", "shape"}),
           required=frozenset({"dtype", "shape"})),
    OpDecl("splat", (SCALAR,), TILE, rule="same_dtype", attrs=frozenset({"shape"}), required=frozenset({"shape"})),
    OpDecl("tile0", (SCALAR,), TILE, rule="same_dtype"),
    OpDecl("scalar_of", (TILE,), SCALAR, rule="same_dtype"),
    OpDecl("astype", (VALUE,), VALUE, rule="to_dtype", attrs=frozenset({"dtype", "rounding"}),
           required=frozenset({"dtype"})),
    OpDecl("bitcast", (TILE,), TILE, attrs=frozenset({"dtype"})),
    OpDecl("pack", (TILE,), TILE),  # a 1-D tile's raw bytes as a 1-D u8 tile
    OpDecl("unpack", (TILE,), TILE),  # a 1-D u8 tile's bytes as a 1-D tile of another dtype
    # ---- arithmetic
    OpDecl("binary", (VALUE, VALUE), VALUE, rule="same_dtype", attrs=frozenset({"op", "rounding", "ftz", "nan"}),
           required=frozenset({"op"}), values=(("op", BINARY_OPS),)),
    OpDecl("fma", (TILE, TILE, TILE), TILE, rule="same_dtype", attrs=frozenset({"rounding", "ftz"})),
    OpDecl("fpowi", (TILE, TILE), TILE),
    OpDecl("compare", (VALUE, VALUE), VALUE, rule="compare", attrs=frozenset({"op"}), required=frozenset({"op"}),
           values=(("op", COMPARISONS),)),
    OpDecl("select", (TILE, TILE, TILE), TILE, rule="select"),
    OpDecl("unary", (VALUE,), VALUE, rule="same_dtype", attrs=frozenset({"fn", "rounding", "ftz"}),
           required=frozenset({"fn"}), values=(("fn", UNARY_FNS),)),
    OpDecl("reduce", (TILE,), TILE, rule="same_dtype", attrs=frozenset({"fn", "axis", "rounding", "ftz", "nan"}),
           required=frozenset({"fn", "axis"}), values=(("fn", REDUCE_FNS),)),
    OpDecl("scan_sum", (TILE,), TILE, rule="same_dtype", attrs=frozenset({"axis", "reverse"}),
           required=frozenset({"axis"})),
    OpDecl("mma", (TILE, TILE, TILE), TILE, rule="mma"),
    # ---- shapes
    OpDecl("reshape", ((TileT, PtrT),), (TileT, PtrT), rule="reshape", attrs=frozenset({"shape"}),
           required=frozenset({"shape"})),
    OpDecl("broadcast", ((TileT, PtrT),), (TileT, PtrT), rule="reshape", attrs=frozenset({"shape"}),
           required=frozenset({"shape"})),
    OpDecl("permute", (TILE,), TILE, rule="reshape", attrs=frozenset({"axes"}), required=frozenset({"axes"})),
    OpDecl("cat", (TILE, TILE), TILE, rule="same_dtype", attrs=frozenset({"axis"}), required=frozenset({"axis"})),
    OpDecl("extract", (TILE, SCALAR), TILE, min_args=1, max_args=7, rule="like_first", attrs=frozenset({"shape"})),
    # ---- memory through views (the token pass adds token/result_token)
    # `array`: the parameter a load/store through an `Array.slice` view accesses (its memory-token chain)
    OpDecl("load", (ARRAY, SCALAR), TILE, min_args=1, max_args=7,
           attrs=MEMORY | {"shape", "padding", "order", "allow_tma", "check_bounds", "array"},
           required=frozenset({"shape"})),
    OpDecl("store", (ARRAY, TILE, SCALAR), NONE, min_args=2, max_args=8,
           attrs=MEMORY | {"order", "allow_tma", "check_bounds", "array"}),
    # ---- memory through pointers: gather/scatter, then what the pointer pass lowers them to
    # `elem`: the element type the access reads or writes when it is not the array's (a re-cast pointer)
    OpDecl("gather", (ARRAY, VALUE), TILE, min_args=2, max_args=9,
           attrs=MEMORY | {"shape", "has_mask", "padding_value", "check_bounds", "elem"}),
    OpDecl("scatter", (ARRAY, VALUE), NONE, min_args=3, max_args=10,
           attrs=MEMORY | {"shape", "has_mask", "check_bounds", "elem"}),
    OpDecl("ptr_base", (ARRAY,), PTR),
    OpDecl("ptr_offset", (PTR, TILE), PTR),
    OpDecl("ptr_cast", (PTR,), PTR),  # the same addresses, pointing to another element type
    # `Array.slice`: the element offset `start * stride` as a 0-d u64 tile (a multiply even of two constants, then a
    # sign extension, as cuTile Python computes it); then a tensor view at a pointer (the array's base, offset) with an extent per dimension, then
    # one value per dynamic (-1) entry of `strides`; the array gives the element type, rank and memory token
    OpDecl("view_offset", (SCALAR, SCALAR), TILE),
    OpDecl("make_view", (PTR, ARRAY, SCALAR), ARRAY, min_args=3, max_args=2 + 2 * 6, rule="view",
           attrs=frozenset({"strides", "divisors"}), required=frozenset({"strides"})),
    OpDecl("assume_div_by", (PTR,), PTR, rule="identity",
           attrs=frozenset({"divisor", "steps", "view_of", "at_launch"}),
           required=frozenset({"divisor"})),
    OpDecl("load_ptr", (PTR, TILE, TILE), TILE, min_args=2, attrs=MEMORY | {"array", "has_mask"}),
    OpDecl("store_ptr", (PTR, TILE, TILE), (TokenT, NONE), min_args=2, attrs=MEMORY | {"array", "has_mask"}),
    # ---- atomics: on an array (indices as gather's), then on a pointer tile (the pointer pass)
    OpDecl("atomic_rmw", (ARRAY, TILE, VALUE), TILE, min_args=3, max_args=9, rule="like_first",
           attrs=MEMORY | {"mode", "memory_order", "memory_scope", "shape", "check_bounds", "has_mask"},
           required=frozenset({"mode", "memory_order", "memory_scope"}), values=_ATOMIC_VALUES),
    OpDecl("atomic_cas", (ARRAY, TILE, TILE, VALUE), TILE, min_args=4, max_args=10, rule="like_first",
           attrs=MEMORY | {"memory_order", "memory_scope", "shape", "check_bounds", "has_mask"},
           required=frozenset({"memory_order", "memory_scope"}), values=_ATOMIC_VALUES),
    OpDecl("atomic_rmw_ptr", (PTR, TILE, TILE), TILE, min_args=2,
           attrs=MEMORY | {"array", "has_mask", "mode", "memory_order", "memory_scope"},
           required=frozenset({"array", "mode", "memory_order", "memory_scope"}), values=_ATOMIC_VALUES),
    OpDecl("atomic_cas_ptr", (PTR, TILE, TILE, TILE), TILE, min_args=3,
           attrs=MEMORY | {"array", "has_mask", "memory_order", "memory_scope"},
           required=frozenset({"array", "memory_order", "memory_scope"}), values=_ATOMIC_VALUES),
    # ---- memory tokens (the token pass)
    OpDecl("entry_token", (ARRAY,), TOKEN),
    OpDecl("join_tokens", (TOKEN,), TOKEN, min_args=2, max_args=1 << 16),
    # ---- control: the value of an if-expression's branch
    OpDecl("yield", (VALUE,), VALUE, rule="identity"),
]


def _check_declarations(decls: list[OpDecl]) -> None:
    """Every attribute a kind names is typed in ATTRS, and one it requires it carries (checked on import)."""
    for d in decls:
        if bad := (d.attrs | {k for k, _ in d.values}) - ATTRS.keys() | (d.required - d.attrs):
            raise ModelError(f"op catalogue: `{d.kind}` names attribute(s) {', '.join(sorted(bad))} that ATTRS does "
                             "not type or that it does not carry")


_check_declarations(_DECLS)

# Every kind, as an enum derived from the declarations: `OpKind.LOAD == "load"`, and a string is a kind's name.
OpKind = enum.StrEnum("OpKind", [(d.kind.upper(), d.kind) for d in _DECLS], module=__name__)
CATALOGUE: dict[OpKind, OpDecl] = {OpKind(d.kind): d for d in _DECLS}


def _classes(spec) -> tuple[type, ...]:
    return spec if isinstance(spec, tuple) else (spec,)


def kind(op: Any) -> OpKind:
    """The kind `op` names (an OpKind, or its name as a string); ModelError when no kind has that name."""
    try:
        return OpKind(op.kind)
    except ValueError:
        raise ModelError(f"kernel model: operation `{op.kind}` at {op.loc} is not a declared operation "
                         "kind") from None


def problem(op: Any) -> str | None:
    """What is wrong with `op` against its declaration, or None (duck-typed: an `ir.Op`)."""
    decl = CATALOGUE[op.kind]
    lo, hi = decl.arity
    if not lo <= len(op.args) <= hi:
        return f"takes {lo}..{hi} operands, got {len(op.args)}" if lo != hi else \
            f"takes {lo} operand(s), got {len(op.args)}"
    for i, a in enumerate(op.args):
        spec = decl.operands[min(i, len(decl.operands) - 1)]
        if not isinstance(a.ty, _classes(spec)):
            return f"operand {i} is {type(a.ty).__name__}, expected {'/'.join(c.__name__ for c in _classes(spec))}"
    if not isinstance(op.ty, _classes(decl.result)):
        return (f"result is {type(op.ty).__name__}, expected "
                f"{'/'.join(c.__name__ for c in _classes(decl.result))}")
    keys = {k for k, _ in op.attrs}
    if unknown := keys - decl.attrs:
        return f"has undeclared attribute(s) {', '.join(sorted(unknown))}"
    if missing := decl.required - keys:
        return f"lacks attribute(s) {', '.join(sorted(missing))}"
    if len(keys) != len(op.attrs):
        return "repeats an attribute"
    domains = dict(decl.values)
    for k, v in op.attrs:
        if (why := ATTRS[k].problem(v)) is not None:
            return f"attribute {k}={v!r} {why}"
        if k in domains and v not in domains[k]:
            return f"attribute {k}={v!r} is not one of {domains[k]}"
    if decl.operands and op.args and (why := RULES[decl.rule](op.args, op.ty, op)):
        return why
    return None


def check(op: Any) -> None:
    """Raise ModelError, naming the kind, when `op` breaks its declaration."""
    if (why := problem(op)) is not None:
        raise ModelError(f"kernel model: operation `{op.kind}` at {op.loc} {why}")
