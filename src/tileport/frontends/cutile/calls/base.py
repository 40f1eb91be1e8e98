"""The `ct` handler registry (`HANDLERS`, filled by `@handler`), cuTile Python's tables (enums, math,
operator and reduction names) and the argument checks every handler shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tileport.frontends.cutile.values import CV, DTypeVal, EnumVal, Value
from tileport.model import types as T
from tileport.model.ir import Atom, Ref, sym_names
from tileport.model.types import ArrayT, TileT

Handler = Callable[..., Any]  # (lowerer, args, kwargs, node) -> Value
HANDLERS: dict[str, Handler] = {}  # `ct.<name>` -> its handler (registered with @handler)


def handler(fn: Handler) -> Handler:
    """Register `ct_<name>` as the handler of `ct.<name>` (and of the `x.<name>(...)` method form)."""
    HANDLERS[fn.__name__.removeprefix("ct_")] = fn
    return fn


# Members of cuTile Python's enums (cuda.tile 1.7.0): anything else is refused where it is named.
ENUMS = {"PaddingMode": {"UNDETERMINED", "ZERO", "NEG_ZERO", "NAN", "POS_INF", "NEG_INF"},
         "RoundingMode": {"RN", "RZ", "RM", "RP", "RA", "FULL", "APPROX", "RZI"},
         "MemoryOrder": {"WEAK", "RELAXED", "ACQUIRE", "RELEASE", "ACQ_REL"},
         "MemoryScope": {"NONE", "BLOCK", "CLUSTER", "DEVICE", "SYS"}}
MAX_TILE_DIM = 2**30  # the largest power of two of an i32: tile dimensions are i32 const generics in Rust
UNARY_MATH = {"exp": ("rounding_mode",), "exp2": ("flush_to_zero",), "log": (), "log2": (),
              "sqrt": ("rounding_mode", "flush_to_zero"), "rsqrt": ("flush_to_zero",), "sin": (), "cos": (),
              "tan": (), "sinh": (), "cosh": (), "tanh": ("rounding_mode",), "floor": (), "ceil": ()}
BINARY_FNS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
              "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "bitwise_lshift": "<<",
              "bitwise_rshift": ">>", "minimum": "min", "maximum": "max"}
COMPARE_FNS = {"greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<=", "equal": "==",
               "not_equal": "!="}
REDUCE_FNS = {"sum": ("rounding_mode", "flush_to_zero"), "max": ("flush_to_zero", "propagate_nan"),
              "min": ("flush_to_zero", "propagate_nan"), "prod": ("rounding_mode", "flush_to_zero")}
ROUNDING = {"RN": "nearest_even", "RZ": "zero", "RM": "negative_inf", "RP": "positive_inf", "FULL": "full",
            "APPROX": "approx", "RA": "nearest_away", "RZI": "nearest_int_to_zero"}


@dataclass(frozen=True)
class CtFn:
    name: str


@dataclass(frozen=True)
class EnumNS:
    name: str


@dataclass(frozen=True)
class BoundMethod:
    name: str
    obj: Ref


@dataclass(frozen=True)
class ArrayShape:
    """`arr.shape`: materialized one dimension at a time, only where used."""

    array: Ref


def _two(lw, args, node, name):
    if len(args) != 2:
        raise lw.fail(node, f"ct.{name} takes two operands", f"ct.{name}")
    return args


def _modes(lw, kwargs: dict, node, name: str, allowed=("rounding_mode", "flush_to_zero", "propagate_nan")) -> dict:
    out = {}
    for k, v in kwargs.items():
        if k not in allowed:
            raise lw.fail(node, f"ct.{name} has no keyword `{k}`", f"ct.{name}")
        out[k] = _mode_value(lw, k, v, node)
    return out


def _mode_value(lw, key: str, v: Value, node) -> Any:
    if key == "rounding_mode":
        if isinstance(v, CV) and v.value is None:
            return None
        if not isinstance(v, EnumVal) or v.enum != "RoundingMode" or v.member not in ROUNDING:
            raise lw.fail(node, "rounding_mode must be a ct.RoundingMode member", "rounding_mode")
        return ROUNDING[v.member]
    if not isinstance(v, CV) or not isinstance(v.value, bool):
        raise lw.fail(node, f"{key} must be a constant bool", key)
    return v.value


def _kw(lw, args: list, kwargs: dict, names: tuple[str, ...], node, fn: str, required: int = 0) -> dict:
    """Bind positional + keyword arguments to `names`, as Python would."""
    if len(args) > len(names):
        raise lw.fail(node, f"ct.{fn} takes at most {len(names)} positional arguments", f"ct.{fn}")
    out = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise lw.fail(node, f"ct.{fn} has no keyword `{k}`", f"ct.{fn}")
        if k in out:
            raise lw.fail(node, f"ct.{fn} got `{k}` twice", f"ct.{fn}")
        out[k] = v
    missing = [n for n in names[:required] if n not in out]
    if missing:
        raise lw.fail(node, f"ct.{fn} is missing {', '.join(missing)}", f"ct.{fn}")
    return out


def _array(lw, v: Value, node, fn: str) -> Ref:
    if not (isinstance(v, Ref) and isinstance(v.ty, ArrayT)):
        raise lw.fail(node, f"ct.{fn} expects an array parameter", f"ct.{fn}")
    return v


def _tile(lw, v: Value, node, what: str) -> Ref:
    if not (isinstance(v, Ref) and isinstance(v.ty, TileT)):
        raise lw.fail(node, f"{what} expects a tile", what)
    return v


def _shape(lw, v: Value, node, what: str) -> tuple:
    v = (v,) if isinstance(v, CV) else v
    if not isinstance(v, tuple) or not all(isinstance(d, CV) and d.is_dim for d in v):
        raise lw.fail(node, f"{what}: tile shapes must be tuples of compile-time integers", "tile shape",
                      "use literals or ct.Constant[int] parameters")
    # Constant arithmetic (TM * TN) is allowed: the emitter gives it a derived const generic.
    shape = tuple(d.value for d in v)
    for i, d in enumerate(shape):
        for value in _dim_values(lw, d, node):
            if not (0 < value <= MAX_TILE_DIM and value & (value - 1) == 0):
                raise lw.fail(node, f"{what}: dimension #{i} of the tile shape is {value}; tile dimensions are "
                              f"powers of two from 1 to {MAX_TILE_DIM}", "tile shape")
    return shape


def _dim_values(lw, d, node) -> list[int]:
    """The values a tile dimension takes: itself, or its value in each configuration in use."""
    if isinstance(d, int):
        return [d]
    values = []
    for c in lw.b.const_values:
        if sym_names(d) <= c.keys():
            try:
                values.append(T.eval_dim(d, c))
            except (ZeroDivisionError, TypeError, ValueError):
                raise lw.fail(node, f"tile dimension {d} cannot be evaluated for {c}", "tile shape") from None
    return values


def _index(lw, v: Value, rank: int, node, fn: str) -> tuple[Atom, ...]:
    items = v if isinstance(v, tuple) else (v,)
    if len(items) != rank:
        raise lw.fail(node, f"ct.{fn}: index has {len(items)} entries, the array has rank {rank}", f"ct.{fn}")
    return tuple(lw.int_atom(_index_i32(lw, i, node), node, f"ct.{fn} index") for i in items)


def _index_i32(lw, v: Value, node) -> Value:
    """A 0-d integer tile of another width as a tile index (an i64 token id read from memory): cuTile
    converts it to i32 (`trunci`) before the view access."""
    if not (isinstance(v, Ref) and isinstance(v.ty, TileT) and v.ty.rank == 0):
        return v
    dtypes = set(lw.b.dspace.values(v.ty.dtype))
    if len(dtypes) > 1 and dtypes != {"i32"} and all(T.is_int(d) for d in dtypes):
        raise lw.fail(node, f"a tile index whose dtype differs between configurations ({', '.join(sorted(dtypes))}): "
                            "cuTile converts all but i32 to i32, a port generic over the dtype cannot", "dtype",
                      "translate one index dtype per configuration (--config)")
    if v.ty.dtype != "i32" and isinstance(v.ty.dtype, str) and T.is_int(v.ty.dtype):
        return lw.b.cast(v, "i32", lw.loc(node))
    return v


def _order(lw, v: Value | None, rank: int, node) -> tuple[int, ...] | None:
    if v is None or (isinstance(v, CV) and v.value == "C"):
        return None
    if isinstance(v, CV) and v.value == "F":
        return tuple(reversed(range(rank)))
    if isinstance(v, tuple) and all(isinstance(i, CV) and isinstance(i.value, int) for i in v):
        perm = tuple(i.value for i in v)
        if sorted(perm) != list(range(rank)):
            raise lw.fail(node, f"order {perm} is not a permutation of the array axes", "order")
        return None if perm == tuple(range(rank)) else perm
    raise lw.fail(node, "order must be 'C', 'F' or a tuple of constant axes", "order")


def _opt_const(lw, v: Value | None, node, what: str, kind=(int,)) -> Any:
    if v is None:
        return None
    if not isinstance(v, CV) or not (v.value is None or isinstance(v.value, kind)):
        raise lw.fail(node, f"{what} must be a compile-time constant", what)
    return v.value


def _memory_model(lw, bound: dict, node, fn: str) -> None:
    for key, default in (("memory_order", "WEAK"), ("memory_scope", "NONE")):
        v = bound.get(key)
        if v is not None and not (isinstance(v, EnumVal) and v.member == default):
            raise lw.fail(node, f"ct.{fn}: {key} other than {default} is not supported yet", key)


def _common_shape(lw, items, node) -> tuple:
    shape: tuple = ()
    for it in items:
        if isinstance(it, Ref) and isinstance(it.ty, TileT):
            shape = lw.b.broadcast_shape(shape, it.ty.shape, lw.loc(node))
    return shape


def _dtype(lw, v, node, what) -> T.DType:
    if not isinstance(v, DTypeVal):
        raise lw.fail(node, f"{what} must be a dtype (ct.float32, x.dtype, ...)", "dtype")
    return v.dtype


def _axis(lw, axis: Any, rank: int, node, what: str) -> int:
    """A tile axis in `[-rank, rank)`, normalized to `[0, rank)`."""
    if type(axis) is not int or not -rank <= axis < rank:
        raise lw.fail(node, f"{what}: axis {axis!r} is out of range for a tile of rank {rank}", "axis")
    return axis % rank
