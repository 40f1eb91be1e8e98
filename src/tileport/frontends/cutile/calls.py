"""Typing rules for cuTile Python operations: `ct.<fn>(...)`, tile methods and attributes, operators.

Each `ct` function has one handler (`ct_<name>`, registered in `HANDLERS` by `@handler`). Handlers
check their arguments as cuTile Python does, make broadcasts and casts explicit through the Builder,
and emit model operations. They use the lowerer (`lw`) through its public methods only.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Callable

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile.dtypes import CT_DTYPES, promote
from tileport.frontends.cutile.values import (CV, MATH, ConstFoldError, DTypeVal, EnumVal, ModuleRef, Value,
                                              describe, fold)
from tileport.model import types as T
from tileport.model.builder import lit_dtype, weak_result_dtype
from tileport.model.ir import Atom, CDim, Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ScalarT, Sym, TileT

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


# ---------------------------------------------------------------- attributes and subscripts

def attribute(lw, base: Value, attr: str, node: ast.AST) -> Value:
    if isinstance(base, ModuleRef) and base.name == "ct":
        if attr in CT_DTYPES:
            if CT_DTYPES[attr] not in T.ELEMENT_DTYPES:
                raise lw.fail(node, f"ct.{attr} is not supported by the translator yet", "dtype",
                              "use a float16/bfloat16/float32 tile here")
            return DTypeVal(CT_DTYPES[attr])
        if attr in ENUMS:
            return EnumNS(attr)
        return CtFn(attr)
    if isinstance(base, ModuleRef) and base.name == "math":
        if attr in MATH and not callable(MATH[attr]):
            return CV(MATH[attr])
        raise lw.fail(node, f"math.{attr} is not supported in kernels", "math")
    if isinstance(base, ModuleRef) and base.name in ("numpy", "torch"):
        return _dtype_module_attr(lw, base.name, attr, node)
    if isinstance(base, EnumNS):
        if attr not in ENUMS[base.name]:
            raise lw.fail(node, f"ct.{base.name} has no member `{attr}`", f"ct.{base.name}",
                          f"one of {', '.join(sorted(ENUMS[base.name]))}")
        return EnumVal(base.name, attr)
    if isinstance(base, Ref) and isinstance(base.ty, ArrayT):
        if attr == "shape":
            return ArrayShape(base)
        if attr == "dtype":
            return DTypeVal(base.ty.dtype)
        if attr == "ndim":
            return CV(base.ty.rank)
        if attr == "slice":
            return BoundMethod(attr, base)
        raise lw.fail(node, f"array attribute `.{attr}` is not supported", f"array.{attr}")
    if isinstance(base, Ref) and isinstance(base.ty, (TileT, ScalarT)):
        shape = base.ty.shape if isinstance(base.ty, TileT) else ()
        if attr == "shape":
            return tuple(CV(d) for d in shape)
        if attr == "dtype":
            return DTypeVal(base.ty.dtype)
        if attr == "ndim":
            return CV(len(shape))
        if attr == "T" and isinstance(base.ty, TileT):
            return permute(lw, base, tuple(reversed(range(len(shape)))), node)
        if attr in ("astype", "reshape", "permute", "transpose", "sum", "max", "min", "prod", "item") and \
                isinstance(base.ty, TileT):
            return BoundMethod(attr, base)
    if isinstance(base, tuple) and attr in ("index", "count"):
        raise lw.fail(node, f"tuple.{attr} is not supported", "tuple")
    raise lw.fail(node, f"attribute `.{attr}` is not supported here", f".{attr}")


_DTYPE_SPELLINGS = {"torch": {"bool": "bool_", "float": "float32", "half": "float16", "double": "float64",
                             "int": "int32", "long": "int64", "short": "int16"},
                   "numpy": {"half": "float16", "single": "float32", "double": "float64"}}
_NUMERIC_CONSTANTS = {"inf": math.inf, "nan": math.nan, "pi": math.pi, "e": math.e}


def _dtype_module_attr(lw, module: str, attr: str, node: ast.AST) -> Value:
    """`np.int32`, `torch.float16`, `np.inf`: the cuTile dtype or number they stand for in a kernel."""
    name = _DTYPE_SPELLINGS[module].get(attr, attr)
    if name in CT_DTYPES and name != "tfloat32":
        return DTypeVal(CT_DTYPES[name])
    if attr in _NUMERIC_CONSTANTS:
        return CV(_NUMERIC_CONSTANTS[attr])
    short = "np" if module == "numpy" else module
    raise lw.fail(node, f"{short}.{attr} is not supported in kernels", short,
                  "only dtype names and inf/nan/pi/e of numpy and torch have a kernel meaning")


_LIST_PARAM_HINT = "pass the arrays as separate parameters, or as one array with an offsets array"


def subscript(lw, base: Value, node: ast.Subscript) -> Value:
    idx_node = node.slice
    if isinstance(base, ArrayShape):
        axis = lw.compile_time(idx_node, "a shape index")
        return array_dim(lw, base.array, axis, node)
    if isinstance(base, tuple):
        i = lw.compile_time(idx_node, "a tuple index")
        if isinstance(i, (Sym, T.DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(i)), "tuple indexed by a constant", lw.loc(node))
        if not isinstance(i, int) or isinstance(i, bool) or not -len(base) <= i < len(base):
            raise lw.fail(node, f"index {i!r} out of range for a tuple of {len(base)}", "tuple index")
        return base[i]
    if isinstance(base, Ref) and isinstance(base.ty, TileT):
        items = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        if all(_is_full_slice(e) or (isinstance(e, ast.Constant) and e.value is None) for e in items):
            return _expand_with_none(lw, base, items, node)
        raise lw.fail(node, "tile indexing other than `[:, None]`-style dimension insertion is not supported",
                      "tile subscript", "use ct.extract or ct.reshape")
    if isinstance(base, Ref) and isinstance(base.ty, ScalarT):
        raise lw.fail(node, "subscript of a scalar: a tuple or list of arrays as a kernel parameter is not "
                            "supported (a cutile-rs entry takes one tensor per parameter)", "tuple/list parameter",
                      _LIST_PARAM_HINT)
    raise lw.fail(node, "subscript not supported here", "subscript")


def _is_full_slice(e: ast.AST) -> bool:
    return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None


def _expand_with_none(lw, x: Ref, items, node) -> Ref:
    shape, src = [], list(x.ty.shape)
    for e in items:
        if _is_full_slice(e):
            if not src:
                raise lw.fail(node, "too many `:` for the tile's rank", "tile subscript")
            shape.append(src.pop(0))
        else:
            shape.append(1)
    shape += src
    return reshape(lw, x, tuple(shape), node)


def array_dim(lw, arr: Ref, axis: Any, node) -> Ref:
    if not isinstance(axis, int) or not -arr.ty.rank <= axis < arr.ty.rank:
        raise lw.fail(node, f"shape index {axis} out of range for rank {arr.ty.rank}", "array.shape")
    axis %= arr.ty.rank
    view = _definition(lw, arr.name)
    if view is not None and view.kind == OpKind.MAKE_VIEW:  # an `Array.slice` view's extent, as cuTile reads it
        return _split_view_operands(view)[0][axis]
    return lw.b.value(OpKind.ARRAY_DIM, (arr,), ScalarT("i32"), lw.loc(node), hint=f"{arr.name}_dim{axis}", axis=axis)


def materialize(lw, v: Value, node) -> Value:
    """Turn lazy values (array shapes) into plain ones."""
    if isinstance(v, ArrayShape):
        return tuple(array_dim(lw, v.array, i, node) for i in range(v.array.ty.rank))
    return v


# ---------------------------------------------------------------- calls

# cuTile operations cutile-rs 0.5.0 has a counterpart for but the translator does not lower yet: the hint
# names the counterpart, so the user knows a hand port is possible.
NOT_TRANSLATED = {
    "mma_scaled": "cutile 0.5.0 can express it (mmaf_scaled: f8e4m3fn/f8e5m2/f4e2m1fn operands, f8e8m0fnu scales, "
                  "sm_100), but tileport has no 8-bit or 4-bit float element types (array dtypes, the launcher "
                  "ABI) yet, so it is not lowered; port it by hand with mmaf_scaled",
}

def call(lw, callee: Value, args: list, kwargs: dict, node: ast.Call) -> Value:
    args = [materialize(lw, a, node) for a in args]
    if isinstance(callee, CtFn):
        handler = HANDLERS.get(callee.name)
        if callee.name in UNARY_MATH:
            return unary_math(lw, callee.name, args, kwargs, node)
        if callee.name in BINARY_FNS:
            x, y = _two(lw, args, node, callee.name)
            return binary(lw, BINARY_FNS[callee.name], x, y, node, **_modes(lw, kwargs, node, callee.name))
        if callee.name in COMPARE_FNS:
            x, y = _two(lw, args, node, callee.name)
            return compare(lw, COMPARE_FNS[callee.name], x, y, node)
        if callee.name in REDUCE_FNS:
            return reduce(lw, callee.name, args, kwargs, node)
        if handler is None:
            raise lw.fail(node, f"`ct.{callee.name}` is not supported by the translator", f"ct.{callee.name}",
                          NOT_TRANSLATED.get(callee.name, "see docs/translator.md for the supported operations"))
        return handler(lw, args, kwargs, node)
    if isinstance(callee, BoundMethod):
        return method(lw, callee, args, kwargs, node)
    if isinstance(callee, tuple) and callee[:1] == ("builtin",):  # a builtin, not a tuple value
        return builtin(lw, callee[1], args, kwargs, node)
    if isinstance(callee, DTypeVal) and len(args) == 1 and not kwargs:  # `ct.float32(0.0)`: a value of that type
        return astype(lw, args[0], callee, None, node)
    raise lw.fail(node, "this call is not supported in kernels", "call")


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


@handler
def ct_bid(lw, args, kwargs, node):
    axis = _kw(lw, args, kwargs, ("axis",), node, "bid", 1)["axis"]
    return lw.b.value(OpKind.BID, (), ScalarT("i32"), lw.loc(node), hint="bid", axis=_axis_const(lw, axis, node))


@handler
def ct_num_blocks(lw, args, kwargs, node):
    axis = _kw(lw, args, kwargs, ("axis",), node, "num_blocks", 1)["axis"]
    return lw.b.value(OpKind.NUM_BLOCKS, (), ScalarT("i32"), lw.loc(node), hint="num_blocks",
                      axis=_axis_const(lw, axis, node))


def _axis_const(lw, v, node) -> int:
    if not (isinstance(v, CV) and type(v.value) is int and v.value in (0, 1, 2)):
        raise lw.fail(node, "axis must be the constant 0, 1 or 2", "axis")
    return v.value


@handler
def ct_load(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "index", "shape", "order", "padding_mode", "check_bounds", "latency",
                               "allow_tma", "memory_order", "memory_scope"), node, "load", 3)
    arr = _array(lw, b["array"], node, "load")
    index = _index(lw, b["index"], arr.ty.rank, node, "load")
    shape = _shape(lw, b["shape"], node, "ct.load")
    scalar = len(shape) == 0 and arr.ty.rank > 0  # a 0-d load: a (1, ..) tile reshaped to (), as cuTile does
    shape = (1,) * arr.ty.rank if scalar else shape
    if len(shape) != arr.ty.rank:
        raise lw.fail(node, f"ct.load: tile rank {len(shape)} differs from the array rank {arr.ty.rank}", "ct.load",
                      _RANK_HINT.format(rank=arr.ty.rank))
    pad = b.get("padding_mode")
    pad = None if isinstance(pad, CV) and pad.value is None else pad
    if pad is not None and not (isinstance(pad, EnumVal) and pad.enum == "PaddingMode"):
        raise lw.fail(node, "padding_mode must be a ct.PaddingMode member", "padding_mode")
    _memory_model(lw, b, node, "load")
    attrs = dict(shape=shape, order=_order(lw, b.get("order"), arr.ty.rank, node),
                 padding=pad.member.lower() if pad is not None else "undetermined",
                 check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                 latency=_opt_const(lw, b.get("latency"), node, "latency"),
                 allow_tma=_opt_const(lw, b.get("allow_tma"), node, "allow_tma", (bool,)))
    tile = lw.b.value(OpKind.LOAD, (arr, *index), TileT(arr.ty.dtype, shape), lw.loc(node),
                      hint=f"{arr.name}_tile", **attrs, **_accessed_array(lw, arr))
    if scalar:
        return lw.b.value(OpKind.RESHAPE, (tile,), TileT(arr.ty.dtype, ()), lw.loc(node), hint=f"{arr.name}_0d",
                          shape=())
    return tile


# cuTile Python (1.7) accepts only a tile of the array's rank, or a 0-d one, for load and store.
_RANK_HINT = ("cuTile Python refuses this too: give the tile all {rank} dimensions (1 for the ones "
              "indexed by a single element) and reshape the result")


@handler
def ct_store(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "index", "tile", "order", "check_bounds", "latency", "allow_tma",
                               "memory_order", "memory_scope"), node, "store", 3)
    arr = _array(lw, b["array"], node, "store")
    index = _index(lw, b["index"], arr.ty.rank, node, "store")
    tile = b["tile"]
    if isinstance(tile, Ref) and isinstance(tile.ty, TileT) and tile.ty.rank == 0 < arr.ty.rank:
        full = (1,) * arr.ty.rank  # a 0-d store: reshaped to (1, ..), as cuTile does
        tile = lw.b.value(OpKind.RESHAPE, (tile,), TileT(tile.ty.dtype, full), lw.loc(node), hint=f"{arr.name}_1",
                          shape=full)
    if isinstance(tile, Ref) and isinstance(tile.ty, TileT):
        if tile.ty.rank != arr.ty.rank:
            raise lw.fail(node, f"ct.store: tile rank {tile.ty.rank} differs from the array rank {arr.ty.rank}",
                          "ct.store", _RANK_HINT.format(rank=arr.ty.rank))
        _check_implicit_cast(lw, tile.ty.dtype, arr.ty.dtype, node, "stored tile")
        tile = lw.b.cast(tile, arr.ty.dtype, lw.loc(node))
    else:
        tile = lw.b.to_tile(lw.scalar_atom(tile, node), arr.ty.dtype, (1,) * arr.ty.rank, lw.loc(node))
    _memory_model(lw, b, node, "store")
    lw.b.effect(OpKind.STORE, (arr, tile, *index), lw.loc(node), **_accessed_array(lw, arr),
                order=_order(lw, b.get("order"), arr.ty.rank, node),
                check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                latency=_opt_const(lw, b.get("latency"), node, "latency"),
                allow_tma=_opt_const(lw, b.get("allow_tma"), node, "allow_tma", (bool,)))
    return CV(None)


def _check_implicit_cast(lw, src, dst, node, what: str) -> None:
    def ok(s, d):
        return d if promote(s, d) == d else None
    lw.b.dspace.lift(ok, src, dst, what=f"{what}: cannot implicitly cast to the array's dtype", loc=lw.loc(node))


def _indices(lw, v, rank, node, fn) -> list[Ref | Atom]:
    items = list(v) if isinstance(v, tuple) else [v]
    if len(items) != rank:
        raise lw.fail(node, f"ct.{fn}: {len(items)} index tiles for an array of rank {rank}", f"ct.{fn}")
    if rank == 0:  # a 0-d tensor (a scalar loss gradient): no launcher or capture path takes rank 0 yet
        raise lw.fail(node, f"ct.{fn} of a 0-d array is not supported yet", f"ct.{fn}",
                      "pass the value as a 1-element array and gather index 0, or as a scalar parameter")
    out = []
    for it in items:
        if isinstance(it, Ref) and isinstance(it.ty, TileT):
            lw.b.require(it.ty.dtype, T.is_int, f"ct.{fn} indices must be integer tiles", lw.loc(node))
            out.append(it)
        else:
            out.append(lw.scalar_atom(it, node))
    return out


def _common_shape(lw, items, node) -> tuple:
    shape: tuple = ()
    for it in items:
        if isinstance(it, Ref) and isinstance(it.ty, TileT):
            shape = lw.b.broadcast_shape(shape, it.ty.shape, lw.loc(node))
    return shape


@handler
def ct_gather(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "indices", "mask", "padding_value", "check_bounds", "latency"),
            node, "gather", 2)
    arr = _array(lw, b["array"], node, "gather")
    _not_a_view(lw, arr, node, "gather")
    idx = _indices(lw, b["indices"], arr.ty.rank, node, "gather")
    mask = b.get("mask")
    mask = None if mask is None or (isinstance(mask, CV) and mask.value is None) else mask
    shape = _common_shape(lw, idx + ([mask] if mask is not None else []), node)
    loc = lw.loc(node)
    pad = _opt_const(lw, b.get("padding_value", CV(0)), node, "padding_value", (int, float))
    for dt in lw.b.dspace.values(arr.ty.dtype):
        if not T.is_float(dt) and not float(pad).is_integer():
            raise lw.fail(node, f"ct.gather: padding_value {pad!r} is not representable in {dt}", "padding_value")
        if not T.is_float(dt):
            lw.check_literal(int(pad), dt, node)
    # Indices stay in their own shapes: cuTile widens each to u64 before broadcasting it.
    args_ = (arr, *idx)
    if mask is not None:
        args_ += (lw.b.to_tile(mask, "bool", shape, loc),)
    return lw.b.value(OpKind.GATHER, args_, TileT(arr.ty.dtype, shape), loc, hint=f"{arr.name}_tile",
                      padding_value=pad, has_mask=mask is not None, shape=shape,
                      check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                      latency=_opt_const(lw, b.get("latency"), node, "latency"))


@handler
def ct_scatter(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "indices", "value", "mask", "check_bounds", "latency"), node,
            "scatter", 3)
    arr = _array(lw, b["array"], node, "scatter")
    _not_a_view(lw, arr, node, "scatter")
    idx = _indices(lw, b["indices"], arr.ty.rank, node, "scatter")
    mask = b.get("mask")
    mask = None if mask is None or (isinstance(mask, CV) and mask.value is None) else mask
    value = b["value"]
    items = idx + [value] + ([mask] if mask is not None else [])
    shape = _common_shape(lw, items, node)
    loc = lw.loc(node)
    if isinstance(value, Ref) and isinstance(value.ty, TileT):
        _check_implicit_cast(lw, value.ty.dtype, arr.ty.dtype, node, "scattered value")
        value = lw.b.to_tile(value, arr.ty.dtype, shape, loc)
    else:
        value = lw.b.to_tile(lw.scalar_atom(value, node), arr.ty.dtype, shape, loc)
    args_ = (arr, value, *idx)
    if mask is not None:
        args_ += (lw.b.to_tile(mask, "bool", shape, loc),)
    lw.b.effect(OpKind.SCATTER, args_, loc, has_mask=mask is not None, shape=shape,
                check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                latency=_opt_const(lw, b.get("latency"), node, "latency"))
    return CV(None)


# ---- atomics: the pointer path of gather/scatter, then one read-modify-write (or compare-and-swap) per element
ATOMIC_RMW = ("add", "max", "min", "and", "or", "xor", "xchg")
_ATOMIC_BITWISE = ("and", "or", "xor")  # the update must have the array's dtype exactly (no implicit cast)
_ATOMIC_DTYPES = {"add": ("i32", "i64", "u32", "u64", "f32", "f64", "f16", "bf16"),
                  "xchg": ("i32", "i64", "u32", "u64", "f32", "f64"), "cas": ("i32", "i64", "u32", "u64", "f32", "f64")}
_ATOMIC_INT_DTYPES = ("i32", "i64", "u32", "u64")
_ORDERS = {"RELAXED": "relaxed", "ACQUIRE": "acquire", "RELEASE": "release", "ACQ_REL": "acq_rel"}
_SCOPES = {"BLOCK": "block", "DEVICE": "device", "SYS": "sys"}


def _atomic_enum(lw, v, enum: str, table: dict, default: str, node, fn: str) -> str:
    if v is None:
        return default
    if not (isinstance(v, EnumVal) and v.enum == enum and v.member in table):
        raise lw.fail(node, f"ct.{fn}: {enum.lower()} must be one of ct.{enum}."
                            f"{', '.join(sorted(table))}", f"ct.{fn}")
    return table[v.member]


def _atomic_value(lw, v, dtype, shape, node, fn: str, what: str, exact: bool) -> Ref:
    loc = lw.loc(node)
    if isinstance(v, Ref) and isinstance(v.ty, TileT):
        if exact and v.ty.dtype != dtype:
            raise lw.fail(node, f"ct.{fn}: the {what} must have the array's dtype (no implicit cast)", f"ct.{fn}")
        if not exact:
            _check_implicit_cast(lw, v.ty.dtype, dtype, node, f"ct.{fn} {what}")
        return lw.b.to_tile(v, dtype, shape, loc)
    return lw.b.to_tile(lw.scalar_atom(v, node), dtype, shape, loc)


def _atomic(lw, fn: str, mode: str, args, kwargs, node):
    values = ("expected", "desired") if mode == "cas" else ("update",)
    b = _kw(lw, args, kwargs, ("array", "indices", *values, "check_bounds", "memory_order", "memory_scope"), node,
            fn, 2 + len(values))
    arr = _array(lw, b["array"], node, fn)
    _not_a_view(lw, arr, node, fn)
    lw.b.require(arr.ty.dtype, lambda d: d in _ATOMIC_DTYPES.get(mode, _ATOMIC_INT_DTYPES),
                 f"ct.{fn}: unsupported array dtype", lw.loc(node))
    idx = _indices(lw, b["indices"], arr.ty.rank, node, fn)
    shape = _common_shape(lw, idx, node)  # the update is broadcast to the indices' shape, as cuTile does
    operands = tuple(_atomic_value(lw, b[k], arr.ty.dtype, shape, node, fn, k, mode in _ATOMIC_BITWISE)
                     for k in values)
    order = _atomic_enum(lw, b.get("memory_order"), "MemoryOrder", _ORDERS, "acq_rel", node, fn)
    scope = _atomic_enum(lw, b.get("memory_scope"), "MemoryScope", _SCOPES, "device", node, fn)
    attrs = dict(memory_order=order, memory_scope=scope, shape=shape,
                 check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)))
    if mode != "cas":
        attrs["mode"] = mode
    return lw.b.value(OpKind.ATOMIC_CAS if mode == "cas" else OpKind.ATOMIC_RMW, (arr, *operands, *idx),
                      TileT(arr.ty.dtype, shape), lw.loc(node), hint=f"{arr.name}_old", **attrs)


@handler
def ct_atomic_cas(lw, args, kwargs, node):
    return _atomic(lw, "atomic_cas", "cas", args, kwargs, node)


def _atomic_rmw_handler(mode: str) -> Handler:
    def handle(lw, args, kwargs, node):
        return _atomic(lw, f"atomic_{mode}", mode, args, kwargs, node)
    handle.__name__ = f"ct_atomic_{mode}"
    return handle


for _mode in ATOMIC_RMW:
    handler(_atomic_rmw_handler(_mode))


@handler
def ct_num_tiles(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "axis", "shape", "order"), node, "num_tiles", 3)
    arr = _array(lw, b["array"], node, "num_tiles")
    axis = _opt_const(lw, b["axis"], node, "axis")
    shape = _shape(lw, b["shape"], node, "ct.num_tiles")
    if len(shape) != arr.ty.rank or not 0 <= axis < arr.ty.rank:
        raise lw.fail(node, "ct.num_tiles: shape rank or axis does not match the array", "ct.num_tiles")
    return lw.b.value(OpKind.NUM_TILES, (arr,), ScalarT("i32"), lw.loc(node), hint=f"{arr.name}_tiles",
                      axis=axis, shape=shape, order=_order(lw, b.get("order"), arr.ty.rank, node))


def _dtype(lw, v, node, what) -> T.DType:
    if not isinstance(v, DTypeVal):
        raise lw.fail(node, f"{what} must be a dtype (ct.float32, x.dtype, ...)", "dtype")
    return v.dtype


@handler
def ct_arange(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("size", "dtype", "start", "step"), node, "arange", 2)
    size = _shape(lw, b["size"], node, "ct.arange")
    dtype = _dtype(lw, b["dtype"], node, "ct.arange dtype")
    out = lw.b.value(OpKind.ARANGE, (), TileT(dtype, size), lw.loc(node), hint="offsets", dtype=dtype, size=size[0])
    for key, op in (("step", "*"), ("start", "+")):
        v = b.get(key)
        if v is not None and not (isinstance(v, CV) and v.value == (1 if key == "step" else 0)):
            out = binary(lw, op, out, v, node)
    return out


@handler
def ct_full(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("shape", "fill_value", "dtype"), node, "full", 3)
    return _fill(lw, b["shape"], b["fill_value"], b["dtype"], node)


@handler
def ct_zeros(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("shape", "dtype"), node, "zeros", 2)
    return _fill(lw, b["shape"], CV(0), b["dtype"], node)


@handler
def ct_ones(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("shape", "dtype"), node, "ones", 2)
    return _fill(lw, b["shape"], CV(1), b["dtype"], node)


def _fill(lw, shape_v, value, dtype_v, node) -> Ref:
    shape = _shape(lw, shape_v, node, "ct.full")
    dtype = _dtype(lw, dtype_v, node, "dtype")
    if isinstance(value, CV) and isinstance(value.value, (Sym, T.DimOp)) \
            and not sym_names(value.value) <= lw.cfg.generic:  # cuTile folds it: a literal per value
        raise NeedsSpecialization(frozenset(sym_names(value.value)), "a fill value computed from constants",
                                  lw.loc(node))
    atom = lw.scalar_atom(value, node)
    if isinstance(atom, CDim) and not isinstance(atom.dim, int):  # no values known: computed from the generics
        atom = lw.b.value(OpKind.SCALAR, (atom,), ScalarT("i32"), lw.loc(node), hint="fill")
    if isinstance(atom, Ref):
        return lw.b.to_tile(atom, dtype, shape, lw.loc(node))
    return lw.b.value(OpKind.FULL, (_lit(lw, value, dtype, node),), TileT(dtype, shape), lw.loc(node), hint="c",
                      dtype=dtype, shape=shape)


@handler
def ct_astype(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "dtype", "rounding_mode"), node, "astype", 2)
    return astype(lw, b["x"], b["dtype"], b.get("rounding_mode"), node)


def astype(lw, x, dtype_v, rounding_v, node) -> Ref:
    dtype = _dtype(lw, dtype_v, node, "ct.astype dtype")
    rounding = _mode_value(lw, "rounding_mode", rounding_v, node) if rounding_v is not None else None
    if isinstance(x, CV):
        x = lw.b.to_tile(lw.scalar_atom(x, node), dtype, (), lw.loc(node))
    if not isinstance(x, Ref):
        raise lw.fail(node, "ct.astype expects a tile or scalar", "ct.astype")
    if dtype == "bool" and isinstance(x.ty, TileT) and x.ty.dtype != "bool" \
            and all(T.is_int(d) for d in lw.b.dspace.values(x.ty.dtype)):
        return compare(lw, "!=", x, CV(0), node)  # an integer to bool: cuTile compares with zero
    return lw.b.cast(x, dtype, lw.loc(node), rounding)


def unary_math(lw, name: str, args, kwargs, node) -> Ref:
    if len(args) != 1:
        raise lw.fail(node, f"ct.{name} takes one operand", f"ct.{name}")
    modes = _modes(lw, kwargs, node, name, UNARY_MATH[name])
    return unary_fn(lw, name, args[0], modes, node)


def unary_fn(lw, name: str, x: Value, modes: dict, node) -> Value:
    if isinstance(x, Ref) and isinstance(x.ty, ScalarT) and name == "negative":
        return lw.b.value(OpKind.UNARY, (x,), x.ty, lw.loc(node), hint="neg", fn="negative")
    if isinstance(x, CV) and name == "negative":
        return negate(lw, x, node)
    x = _tile(lw, x, node, f"ct.{name}")
    if name not in ("negative", "abs", "not"):
        lw.b.require(x.ty.dtype, T.is_float, f"ct.{name} needs a floating-point tile", lw.loc(node))
    return lw.b.value(OpKind.UNARY, (x,), x.ty, lw.loc(node), hint=name, fn=name,
                      rounding=modes.get("rounding_mode"), ftz=modes.get("flush_to_zero"))


@handler
def ct_abs(lw, args, kwargs, node):
    return unary_fn(lw, "abs", _kw(lw, args, kwargs, ("x",), node, "abs", 1)["x"], {}, node)


@handler
def ct_negative(lw, args, kwargs, node):
    return unary_fn(lw, "negative", _kw(lw, args, kwargs, ("x",), node, "negative", 1)["x"], {}, node)


def logical_not(lw, x: Value, node) -> Value:
    x = _tile(lw, x, node, "not")
    lw.b.require(x.ty.dtype, lambda d: d == "bool", "`not` needs a bool tile", lw.loc(node))
    return lw.b.value(OpKind.UNARY, (x,), x.ty, lw.loc(node), hint="not", fn="not")


def invert(lw, x: Value, node) -> Value:
    """`~x`, as cuTile Python lowers it: xor with all ones of the dtype (-1 when signed); `not` for bool."""
    if isinstance(x, CV):
        if isinstance(x.value, bool) or not isinstance(x.value, int):
            raise lw.fail(node, f"`~` needs an integer, got {x.value!r}", "operator")
        return CV(~x.value)
    dtypes = set(lw.b.dspace.values(x.ty.dtype))
    if dtypes == {"bool"}:
        return logical_not(lw, x, node)
    lw.b.require(x.ty.dtype, T.is_int, "`~` needs an integer or bool operand", lw.loc(node))
    ones = {-1 if d.startswith("i") else (1 << _INT_BITS[d]) - 1 for d in dtypes}
    if len(ones) != 1:
        raise lw.fail(node, "`~` on an element type that is signed in some configurations and unsigned in "
                            "others", "operator", "translate one dtype per configuration (--config)")
    return lw.binop("^", x, CV(ones.pop()), node)


_INT_BITS = {"u8": 8, "u16": 16, "u32": 32, "u64": 64}


@handler
def ct_where(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("cond", "x", "y"), node, "where", 3)
    return where(lw, b["cond"], b["x"], b["y"], node)


def where(lw, cond, x, y, node) -> Ref:
    loc = lw.loc(node)
    if not (isinstance(cond, CV) and isinstance(cond.value, bool)):
        if not (isinstance(cond, Ref) and isinstance(cond.ty, (ScalarT, TileT))):
            raise lw.fail(node, f"a condition must be a bool scalar or tile, got {describe(cond)}", "condition")
        lw.b.require(cond.ty.dtype, lambda d: d == "bool", "the condition must be bool, as in cuTile Python", loc)
    for arm in (x, y):
        if not (isinstance(arm, CV) or (isinstance(arm, Ref) and isinstance(arm.ty, (ScalarT, TileT)))):
            raise lw.fail(node, f"a selected value must be a tile or a scalar, got {describe(arm)}", "condition")
    dtype = _operand_dtype(lw, x, y, node, "ct.where")
    shape = _common_shape(lw, (cond, x, y), node)
    c = lw.b.to_tile(lw.scalar_atom(cond, node) if not isinstance(cond, Ref) else cond, "bool", shape, loc)
    xs = lw.b.to_tile(x if isinstance(x, Ref) else _const_operand(lw, x, dtype, node), dtype, shape, loc)
    ys = lw.b.to_tile(y if isinstance(y, Ref) else _const_operand(lw, y, dtype, node), dtype, shape, loc)
    return lw.b.value(OpKind.SELECT, (c, xs, ys), TileT(dtype, shape), loc, hint="sel")


def common_value_type(lw, a: Value, b: Value, node):
    """The type of `a if c else b`: the promoted dtype; a tile of the arms' common shape, else a scalar."""
    dtype = _operand_dtype(lw, a, b, node, "conditional expression")
    shapes = [v.ty.shape for v in (a, b) if isinstance(v, Ref) and isinstance(v.ty, TileT)]
    if not shapes:
        return ScalarT(dtype)
    if len(shapes) == 2 and tuple(shapes[0]) != tuple(shapes[1]):
        raise lw.fail(node, f"the arms of a conditional expression have different shapes ({shapes[0]} vs "
                            f"{shapes[1]})", "conditional expression", "broadcast one arm explicitly")
    return TileT(dtype, tuple(shapes[0]))


def as_type(lw, v: Value, ty, node) -> Atom:
    """`v` as a value of `ty` (scalar or tile): casts, splats and broadcasts made explicit."""
    loc = lw.loc(node)
    if isinstance(ty, ScalarT):
        return _scalar_operand(lw, v, ty.dtype, node)
    return lw.b.to_tile(v if isinstance(v, Ref) else _const_operand(lw, v, ty.dtype, node), ty.dtype, ty.shape, loc)


def _lit(lw, v: Value, dtype, node) -> Lit:
    if not isinstance(v, CV) or not isinstance(v.value, (int, float, bool)):
        raise lw.fail(node, f"expected a number, got {v!r}", "literal")
    value = v.value
    if isinstance(value, int) and not -2**63 <= value < 2**64:  # as cuTile Python: no integer type holds it
        raise lw.fail(node, f"integer constant {value} is out of range of any supported integer type", "literal")
    if lw.b.is_float(dtype) and not isinstance(value, bool):
        value = float(value)
    for dt in lw.b.dspace.values(dtype):
        lw.check_literal(value, dt, node)
    return Lit(value, ScalarT(dtype))


def _operand_dtype(lw, a, b, node, what) -> T.DType:
    loc = lw.loc(node)
    da = a.ty.dtype if isinstance(a, Ref) else None
    db = b.ty.dtype if isinstance(b, Ref) else None
    weak_a, weak_b = (isinstance(v, Ref) and v.name in lw.weak_scalars for v in (a, b))
    if da is not None and db is not None and weak_a != weak_b:  # a constant passed at run time: as its literal
        strong, weak = (db, da) if weak_a else (da, db)
        return weak_result_dtype(lw.b, strong, {"bool": True, "i32": 1}.get(weak, 0.5))
    if da is not None and db is not None:
        return lw.b.promote(da, db, loc, what)
    if da is None and db is None:
        return lit_dtype(a.value if isinstance(a, CV) else 0)
    strong, weak = (da, b) if da is not None else (db, a)
    if isinstance(weak, CV) and isinstance(weak.value, (Sym, T.DimOp)):
        return strong
    if not isinstance(weak, CV):
        raise lw.fail(node, f"{what}: unsupported operand", what)
    return weak_result_dtype(lw.b, strong, weak.value)


# ---------------------------------------------------------------- arithmetic

def binary(lw, op: str, a: Value, b: Value, node, rounding_mode=None, flush_to_zero=None,
           propagate_nan=None) -> Value:
    a, b = materialize(lw, a, node), materialize(lw, b, node)
    _check_operands(lw, op, (a, b), node)
    loc = lw.loc(node)
    if isinstance(a, CV) and isinstance(b, CV):
        return _fold(lw, op, a, b, node)
    if isinstance(a, tuple) or isinstance(b, tuple):
        raise lw.fail(node, "arithmetic on tuples is not supported", "tuple arithmetic")
    if op == "**" and (power := _integer_power(lw, a, b, node)) is not None:
        return power
    dtype = _operand_dtype(lw, a, b, node, f"operator {op}")
    if op == "**" and all(T.is_int(d) for d in lw.b.dspace.values(dtype)):
        raise lw.fail(node, f"`**` of integer values computed at run time ({dtype}): cuTile Python has no integer "
                            "power either (\"Missing binary arithmetic implementation for pow, int\")", "operator",
                      "multiply (`n * n`), or compute the power of constants (they fold)")
    if op == "/" and not lw.b.is_float(dtype):
        dtype = "f32"
    x, y, shape = _operands(lw, a, b, dtype, node)
    ty = ScalarT(dtype) if shape is None else TileT(dtype, shape)
    return lw.b.value(OpKind.BINARY, (x, y), ty, loc, hint=_HINTS.get(op, "v"), op=_OP_NAMES[op],
                      rounding=rounding_mode, ftz=flush_to_zero, nan=propagate_nan)


# cuTile's `x ** n` with a float tile x and an integer n: fpowi, n as the smallest of i8/i16/i32 that holds it.
FPOWI_EXPONENT = {"i8": "i8", "i16": "i16", "i32": "i32", "u8": "i16", "u16": "i32"}
FPOWI_BASE = ("f16", "bf16", "f32", "f64")


def _integer_power(lw, a, b, node) -> Ref | None:
    """`t ** 2`, `t ** n`: fpowi with the exponent broadcast as an integer tile, as cuTile Python emits it
    (Tile IR 13.4); None when it is a float power."""
    if not (isinstance(a, Ref) and isinstance(a.ty, TileT)):
        return None
    if not all(d in FPOWI_BASE for d in lw.b.dspace.values(a.ty.dtype)):
        return None
    if isinstance(b, CV) and b.is_dim:
        exp_dtype, atom = "i32", _const_operand(lw, b, "i32", node)
    elif isinstance(b, Ref) and all(d in FPOWI_EXPONENT for d in lw.b.dspace.values(b.ty.dtype)):
        exp_dtype = lw.b.dspace.generic(tuple(FPOWI_EXPONENT[d] for d in lw.b.dspace.values(b.ty.dtype)))
        atom = b
    else:
        return None
    loc = lw.loc(node)
    shape = lw.b.broadcast_shape(a.ty.shape, _shape_of(b), loc)
    base = lw.b.to_tile(a, a.ty.dtype, shape, loc)
    exponent = lw.b.to_tile(atom, exp_dtype, shape, loc)
    return lw.b.value(OpKind.FPOWI, (base, exponent), TileT(a.ty.dtype, shape), loc, hint="pw")


_OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow",
             "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "min": "min", "max": "max",
             "cdiv": "cdiv"}
_HINTS = {"+": "sum", "-": "diff", "*": "prod", "/": "quot", "//": "quot", "%": "rem", "min": "lo", "max": "hi",
          "cdiv": "n"}


def _shape_of(v) -> tuple:
    return v.ty.shape if isinstance(v, Ref) and isinstance(v.ty, TileT) else ()


def _operands(lw, a: Value, b: Value, dtype: T.DType, node) -> tuple[Atom, Atom, T.Shape | None]:
    """Both operands in `dtype`: scalars (shape None), or tiles broadcast to their common shape."""
    if not any(isinstance(v, Ref) and isinstance(v.ty, TileT) for v in (a, b)):
        return _scalar_operand(lw, a, dtype, node), _scalar_operand(lw, b, dtype, node), None
    loc = lw.loc(node)
    shape = lw.b.broadcast_shape(_shape_of(a), _shape_of(b), loc)
    x, y = (lw.b.to_tile(v if isinstance(v, Ref) else _const_operand(lw, v, dtype, node), dtype, shape, loc)
            for v in (a, b))
    return x, y, shape


def _const_operand(lw, v, dtype, node) -> Atom:
    """A number against a tile: a literal; a `ct.Constant` (tile // N, offs < S): its value as a scalar."""
    if isinstance(v, CV) and isinstance(v.value, (Sym, T.DimOp)):
        atom = _scalar_operand(lw, v, dtype, node)
        if isinstance(atom, CDim):  # a runtime i32 value, broadcast like any scalar
            atom = lw.b.value(OpKind.SCALAR, (atom,), ScalarT("i32"), lw.loc(node), hint="c")
        return atom
    return _lit(lw, v, dtype, node)


def _scalar_operand(lw, v, dtype, node) -> Atom:
    if isinstance(v, Ref):
        if isinstance(v.ty, TileT):
            raise lw.fail(node, "unexpected tile operand", "scalar")
        return lw.b.cast(v, dtype, lw.loc(node))
    atom = lw.scalar_atom(v, node)
    if isinstance(atom, CDim) and dtype == "i32":
        return atom
    if isinstance(atom, CDim) and not isinstance(atom.dim, int):
        return lw.b.cast(lw.b.value(OpKind.SCALAR, (atom,), ScalarT("i32"), lw.loc(node), hint="c"), dtype,
                         lw.loc(node))
    return _lit(lw, v, dtype, node)


def _fold(lw, op: str, a: CV, b: CV, node) -> CV:
    symbolic = isinstance(a.value, (Sym, T.DimOp)) or isinstance(b.value, (Sym, T.DimOp))
    if symbolic and op in ("//", "%") and b.value == 0:
        raise lw.fail(node, "constant expression divides by zero", "constant")
    if symbolic and a.is_dim and b.is_dim and op in T._DIM_OPS:
        return CV(T.dim_op(op, a.value, b.value))
    if op in ("min", "max"):
        if symbolic:
            raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)), f"{op} of constants",
                                      lw.loc(node))
        if not all(isinstance(v.value, (int, float)) for v in (a, b)):
            raise lw.fail(node, f"{op}() of non-numeric constants", "constant")
        return CV(min(a.value, b.value) if op == "min" else max(a.value, b.value))
    if op == "cdiv":
        return _fold(lw, "//", _fold(lw, "+", a, _fold(lw, "-", b, CV(1), node), node), b, node)
    if isinstance(a.value, (Sym, T.DimOp)) or isinstance(b.value, (Sym, T.DimOp)):
        raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)), f"`{op}` on constants",
                                  lw.loc(node))
    try:
        return CV(fold(op, a.value, b.value))
    except ConstFoldError as e:
        raise lw.fail(node, f"constant expression fails: {e}", "constant", e.hint) from None


def negate(lw, x: CV, node) -> CV:
    if x.is_dim and not isinstance(x.value, int):
        return CV(T.dim_op("-", 0, x.value))
    return _fold(lw, "*", CV(-1), x, node)


def _check_operands(lw, op: str, operands, node) -> None:
    """Operators take numbers, scalars and tiles (tuples are refused by the caller)."""
    for v in operands:
        if not (isinstance(v, (CV, tuple)) or (isinstance(v, Ref) and isinstance(v.ty, (ScalarT, TileT)))):
            raise lw.fail(node, f"operator {op} on {describe(v)} is not supported", "operator",
                          "load a tile from an array first")


@dataclass(frozen=True)
class DTypeCond:
    """A comparison of element dtypes whose answer differs between configurations (one bool each)."""

    values: tuple[bool, ...]


def compare_dtypes(lw, op: str, a: DTypeVal, b: DTypeVal, node) -> Value:
    """`x.dtype == ct.float32`: a constant, or (generic dtypes) one answer per configuration."""
    if op not in ("==", "!="):
        raise lw.fail(node, f"dtypes compare with == and != only, not {op}", "comparison")
    va, vb = lw.b.dspace.values(a.dtype), lw.b.dspace.values(b.dtype)
    n = max(len(va), len(vb))
    va, vb = (va * n if len(va) == 1 else va), (vb * n if len(vb) == 1 else vb)
    answers = tuple((x == y) == (op == "==") for x, y in zip(va, vb))
    return CV(answers[0]) if len(set(answers)) == 1 else DTypeCond(answers)


def choose_dtype(lw, cond: DTypeCond, yes: Value, no: Value, node) -> DTypeVal:
    """`ct.tfloat32 if x.dtype == ct.float32 else x.dtype`: a dtype per configuration, as a generic."""
    if not (isinstance(yes, DTypeVal) and isinstance(no, DTypeVal)):
        raise lw.fail(node, "a condition on element dtypes can only choose between dtypes here", "dtype",
                      "compute both values and select with ct.where, or give one dtype per configuration")
    vy, vn = lw.b.dspace.values(yes.dtype), lw.b.dspace.values(no.dtype)
    n = len(cond.values)
    vy, vn = (vy * n if len(vy) == 1 else vy), (vn * n if len(vn) == 1 else vn)
    return DTypeVal(lw.b.dspace.generic(tuple(y if c else m for c, y, m in zip(cond.values, vy, vn))))


def compare(lw, op: str, a: Value, b: Value, node) -> Value:
    a, b = materialize(lw, a, node), materialize(lw, b, node)
    if isinstance(a, DTypeVal) and isinstance(b, DTypeVal):
        return compare_dtypes(lw, op, a, b, node)
    _check_operands(lw, op, (a, b), node)
    if isinstance(a, tuple) or isinstance(b, tuple):
        raise lw.fail(node, "comparison of tuples is not supported", "comparison")
    syms = (sym_names(a.value) if isinstance(a, CV) else set()) | (sym_names(b.value) if isinstance(b, CV) else set())
    if isinstance(a, CV) and isinstance(b, CV) and not (syms and syms <= lw.cfg.generic):
        if isinstance(a.value, (Sym, T.DimOp)) or isinstance(b.value, (Sym, T.DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)),
                                      "a comparison of constants", lw.loc(node))
        import operator as pyop
        fn = {"<": pyop.lt, "<=": pyop.le, ">": pyop.gt, ">=": pyop.ge, "==": pyop.eq, "!=": pyop.ne}[op]
        try:
            return CV(fn(a.value, b.value))
        except TypeError:
            raise lw.fail(node, f"cannot compare constants {a.value!r} and {b.value!r}", "comparison") from None
    loc = lw.loc(node)
    if isinstance(a, CV) and isinstance(b, CV):  # const generics compared as such (KernelConfig.generic)
        x, y = lw.int_atom(a, node, "a compared constant"), lw.int_atom(b, node, "a compared constant")
        return lw.b.value(OpKind.COMPARE, (x, y), ScalarT("bool"), loc, hint="cond", op=op)
    x, y, shape = _operands(lw, a, b, _operand_dtype(lw, a, b, node, f"comparison {op}"), node)
    if shape is None:
        return lw.b.value(OpKind.COMPARE, (x, y), ScalarT("bool"), loc, hint="cond", op=op)
    return lw.b.value(OpKind.COMPARE, (x, y), TileT("bool", shape), loc, hint="mask", op=op)


@handler
def ct_cdiv(lw, args, kwargs, node):
    x, y = _two(lw, args, node, "cdiv")
    return binary(lw, "cdiv", x, y, node)


# ---------------------------------------------------------------- reductions, shapes, mma

def reduce(lw, fn: str, args, kwargs, node) -> Ref:
    b = _kw(lw, args, kwargs, ("x", "axis", "keepdims", *REDUCE_FNS[fn]), node, fn, 1)
    x = _tile(lw, b["x"], node, f"ct.{fn}")
    axis = _opt_const(lw, b.get("axis", CV(None)), node, "axis", (int, tuple))
    keepdims = _opt_const(lw, b.get("keepdims", CV(False)), node, "keepdims", (bool,))
    modes = {k: _mode_value(lw, k, b[k], node) for k in REDUCE_FNS[fn] if k in b}
    rank = x.ty.rank
    axes = list(range(rank)) if axis is None else [axis] if isinstance(axis, int) else list(axis)
    axes = sorted({_axis(lw, a, rank, node, f"ct.{fn}") for a in axes}, reverse=True)
    out = x
    for ax in axes:
        shape = tuple(d for i, d in enumerate(out.ty.shape) if i != ax)
        out = lw.b.value(OpKind.REDUCE, (out,), TileT(out.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_{fn}",
                         fn=fn, axis=ax, rounding=modes.get("rounding_mode"), ftz=modes.get("flush_to_zero"),
                         nan=modes.get("propagate_nan"))
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.ty.shape))
        out = reshape(lw, out, kept, node)
    return out


def reshape(lw, x: Ref, shape: tuple, node) -> Ref:
    return lw.b.value(OpKind.RESHAPE, (x,), TileT(x.ty.dtype, tuple(shape)), lw.loc(node), hint=f"{x.name}_r",
                      shape=tuple(shape))


def permute(lw, x: Ref, axes: tuple, node) -> Ref:
    if sorted(axes) != list(range(x.ty.rank)):
        raise lw.fail(node, f"{axes} is not a permutation of the tile's axes", "permute")
    shape = tuple(x.ty.shape[a] for a in axes)
    return lw.b.value(OpKind.PERMUTE, (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_t",
                      axes=tuple(axes))


@handler
def ct_reshape(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "shape"), node, "reshape", 2)
    x = _tile(lw, b["x"], node, "ct.reshape")
    return reshape(lw, x, _reshape_target(lw, x, b["shape"], node), node)


def _reshape_target(lw, x: Ref, shape_v: Value, node) -> tuple:
    """A reshape's new shape: a tile shape with as many elements as `x` (in every configuration)."""
    shape = _shape(lw, shape_v, node, "ct.reshape")
    old, new = 1, 1
    for d in x.ty.shape:
        old = T.dim_op("*", old, d)
    for d in shape:
        new = T.dim_op("*", new, d)
    for c in lw.b.const_values if sym_names(old) | sym_names(new) else [{}]:
        if (sym_names(old) | sym_names(new)) <= c.keys() and T.eval_dim(old, c) != T.eval_dim(new, c):
            raise lw.fail(node, f"cannot reshape {T.shape_str(x.ty.shape)} to {T.shape_str(shape)}: the number "
                          "of elements differs", "ct.reshape")
    return shape


@handler
def ct_permute(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axes"), node, "permute", 2)
    x = _tile(lw, b["x"], node, "ct.permute")
    axes = tuple(_opt_const(lw, a, node, "axes") for a in b["axes"])
    return permute(lw, x, axes, node)


@handler
def ct_transpose(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axis0", "axis1"), node, "transpose", 1)
    x = _tile(lw, b["x"], node, "ct.transpose")
    a0 = _opt_const(lw, b.get("axis0"), node, "axis0")
    a1 = _opt_const(lw, b.get("axis1"), node, "axis1")
    axes = list(range(x.ty.rank))
    if a0 is None and a1 is None:
        if x.ty.rank != 2:
            raise lw.fail(node, "ct.transpose without axes needs a 2-D tile", "ct.transpose")
        a0, a1 = 0, 1
    a0, a1 = (_axis(lw, a, x.ty.rank, node, "ct.transpose") for a in (a0, a1))
    axes[a0], axes[a1] = axes[a1], axes[a0]
    return permute(lw, x, tuple(axes), node)


def _axis(lw, axis: Any, rank: int, node, what: str) -> int:
    """A tile axis in `[-rank, rank)`, normalized to `[0, rank)`."""
    if type(axis) is not int or not -rank <= axis < rank:
        raise lw.fail(node, f"{what}: axis {axis!r} is out of range for a tile of rank {rank}", "axis")
    return axis % rank


@handler
def ct_expand_dims(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axis"), node, "expand_dims", 2)
    x = _tile(lw, b["x"], node, "ct.expand_dims")
    axis = _axis(lw, _opt_const(lw, b["axis"], node, "axis"), x.ty.rank + 1, node, "ct.expand_dims")
    shape = list(x.ty.shape)
    shape.insert(axis, 1)
    return reshape(lw, x, tuple(shape), node)


@handler
def ct_broadcast_to(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "shape"), node, "broadcast_to", 2)
    x = _tile(lw, b["x"], node, "ct.broadcast_to")
    return lw.b.to_tile(x, x.ty.dtype, _shape(lw, b["shape"], node, "ct.broadcast_to"), lw.loc(node))


@handler
def ct_extract(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "index", "shape"), node, "extract", 3)
    x = _tile(lw, b["x"], node, "ct.extract")
    shape = _shape(lw, b["shape"], node, "ct.extract")
    index = _index(lw, b["index"], x.ty.rank, node, "extract")
    if len(shape) != x.ty.rank:
        raise lw.fail(node, "ct.extract: the subtile shape must have the tile's rank", "ct.extract")
    for full, sub in zip(x.ty.shape, shape):
        if isinstance(full, int) and isinstance(sub, int) and full % sub:
            raise lw.fail(node, f"ct.extract: {sub} does not divide {full}", "ct.extract")
    return lw.b.value(OpKind.EXTRACT, (x, *index), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_part",
                      shape=shape)


_BITS = {"bool": 1, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "f16": 16, "bf16": 16, "i32": 32, "u32": 32,
         "f32": 32, "tf32": 32, "i64": 64, "u64": 64, "f64": 64, "f8e4m3fn": 8, "f8e5m2": 8}


@handler
def ct_bitcast(lw, args, kwargs, node):
    """ct.bitcast(x, dtype): the same bits as another dtype of the same width (no-op for the same dtype)."""
    b = _kw(lw, args, kwargs, ("x", "dtype"), node, "bitcast", 2)
    x = _tile(lw, b["x"], node, "ct.bitcast")
    if not isinstance(b["dtype"], DTypeVal):
        raise lw.fail(node, "ct.bitcast needs a dtype", "ct.bitcast")
    dst = b["dtype"].dtype

    def same_width(src, d):
        return d if "bool" not in (src, d) and _BITS.get(src) == _BITS.get(d) else None
    lw.b.dspace.lift(same_width, x.ty.dtype, dst, what="ct.bitcast: the bit widths differ (or a bool)",
                     loc=lw.loc(node))
    if x.ty.dtype == dst:
        return x
    return lw.b.value(OpKind.BITCAST, (x,), TileT(dst, x.ty.shape), lw.loc(node), hint=f"{x.name}_bits")


@handler
def ct_pack_to_bytes(lw, args, kwargs, node):
    """ct.pack_to_bytes(x): the raw bytes of the flattened tile as a 1-D u8 tile (cuTile: reshape to 1-D, then
    a bitcast for 8-bit elements, else Tile IR `pack`)."""
    x = _tile(lw, _kw(lw, args, kwargs, ("x",), node, "pack_to_bytes", 1)["x"], node, "ct.pack_to_bytes")
    widths = {_BITS.get(v) for v in lw.b.dspace.values(x.ty.dtype)}
    if "bool" in lw.b.dspace.values(x.ty.dtype) or None in widths:
        raise lw.fail(node, "ct.pack_to_bytes takes a numeric tile (not bool)", "ct.pack_to_bytes")
    if len(widths) != 1:
        raise lw.fail(node, "ct.pack_to_bytes of a tile whose element width differs between configurations",
                      "ct.pack_to_bytes", "translate one dtype per configuration (--config)")
    (bits,) = widths
    count = x.ty.shape[0] if x.ty.shape else 1
    for d in x.ty.shape[1:]:
        count = T.dim_op("*", count, d)
    if x.ty.shape != (count,):
        x = reshape(lw, x, (count,), node)
    if bits == 8:
        return lw.b.value(OpKind.BITCAST, (x,), TileT("u8", (count,)), lw.loc(node), hint=f"{x.name}_bytes")
    if bits % 8:
        raise lw.fail(node, f"ct.pack_to_bytes of {bits}-bit elements is not supported", "ct.pack_to_bytes")
    size = T.dim_op("*", count, bits // 8)
    return lw.b.value(OpKind.PACK, (x,), TileT("u8", (size,)), lw.loc(node), hint=f"{x.name}_bytes")


@handler
def ct_unpack_from_bytes(lw, args, kwargs, node):
    """ct.unpack_from_bytes(x, dtype): a 1-D u8 tile's bytes as a 1-D tile of `dtype` (cuTile: a bitcast for
    8-bit dtypes, else Tile IR `unpack`)."""
    b = _kw(lw, args, kwargs, ("x", "dtype"), node, "unpack_from_bytes", 2)
    x = _tile(lw, b["x"], node, "ct.unpack_from_bytes")
    if x.ty.rank != 1 or x.ty.dtype != "u8":
        raise lw.fail(node, "ct.unpack_from_bytes takes a 1-D uint8 tile", "ct.unpack_from_bytes")
    if not isinstance(b["dtype"], DTypeVal) or b["dtype"].dtype not in _BITS or b["dtype"].dtype == "bool":
        raise lw.fail(node, "ct.unpack_from_bytes needs a numeric dtype (not bool)", "ct.unpack_from_bytes")
    dtype = b["dtype"].dtype
    bits = _BITS[dtype]
    if bits == 8:
        return lw.b.value(OpKind.BITCAST, (x,), TileT(dtype, x.ty.shape), lw.loc(node), hint=f"{x.name}_{dtype}")
    (n,) = x.ty.shape
    for value in _dim_values(lw, n, node):
        if value * 8 % bits:
            raise lw.fail(node, f"ct.unpack_from_bytes: {value} bytes are not a whole number of {dtype}",
                          "ct.unpack_from_bytes")
    size = T.dim_op("//", n, bits // 8)
    return lw.b.value(OpKind.UNPACK, (x,), TileT(dtype, (size,)), lw.loc(node), hint=f"{x.name}_{dtype}")


SCAN_DTYPES = ("f32", "f64", "i32", "i64")  # scan_sum takes its identity as a literal of the element type


@handler
def ct_cumsum(lw, args, kwargs, node):
    """ct.cumsum(x, axis=0, reverse=False): cutile-rs `scan_sum` (the same scan op with an add region)."""
    b = _kw(lw, args, kwargs, ("x", "axis", "reverse", "rounding_mode", "flush_to_zero"), node, "cumsum", 1)
    x = _tile(lw, b["x"], node, "ct.cumsum")
    axis = _opt_const(lw, b.get("axis", CV(0)), node, "axis", (int,))
    reverse = _opt_const(lw, b.get("reverse", CV(False)), node, "reverse", (bool,))
    if b.get("rounding_mode") not in (None, CV(None)) or _opt_const(lw, b.get("flush_to_zero", CV(False)), node,
                                                                    "flush_to_zero", (bool,)):
        raise lw.fail(node, "ct.cumsum with rounding_mode/flush_to_zero is not supported yet", "ct.cumsum")
    if not -x.ty.rank <= axis < x.ty.rank:
        raise lw.fail(node, f"ct.cumsum: axis {axis} is out of range for rank {x.ty.rank}", "ct.cumsum")
    if axis % x.ty.rank != 0:
        raise lw.fail(node, "ct.cumsum along an axis other than 0 is not supported: cutile 0.5.0's scan_sum "
                            "always scans dim 0", "ct.cumsum", "scan axis 0 (permute the tile first)")
    lw.b.require(x.ty.dtype, lambda d: d in SCAN_DTYPES and not isinstance(x.ty.dtype, T.DVar),
                 f"ct.cumsum on {x.ty.dtype}: only one of {', '.join(SCAN_DTYPES)} per kernel is supported yet",
                 lw.loc(node))
    return lw.b.value(OpKind.SCAN_SUM, (x,), x.ty, lw.loc(node), hint=f"{x.name}_cumsum", axis=axis % x.ty.rank,
                      reverse=reverse)


@handler
def ct_cat(lw, args, kwargs, node):
    """ct.cat((a, b), axis): as cuTile, two tiles of one dtype and rank, equal off the axis."""
    b = _kw(lw, args, kwargs, ("tiles", "axis"), node, "cat", 2)
    tiles = b["tiles"]
    if not isinstance(tiles, tuple) or not 1 <= len(tiles) <= 2:
        raise lw.fail(node, "ct.cat takes a tuple of one or two tiles", "ct.cat")
    tiles = tuple(_tile(lw, t, node, "ct.cat") for t in tiles)
    if len(tiles) == 1:
        return tiles[0]
    x, y = tiles
    rank = x.ty.rank
    axis = b["axis"].value if isinstance(b["axis"], CV) else None
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise lw.fail(node, f"ct.cat: the axis must be a constant in [{-rank}, {rank})", "ct.cat")
    axis %= rank
    if y.ty.rank != rank or not lw.b.dspace.values(x.ty.dtype) == lw.b.dspace.values(y.ty.dtype):
        raise lw.fail(node, f"ct.cat: tiles must have the same rank and dtype ({x.ty} vs {y.ty})", "ct.cat")
    for i, (dx, dy) in enumerate(zip(x.ty.shape, y.ty.shape)):
        if i != axis:
            lw.b.check_dims_equal(dx, dy, lw.loc(node), "ct.cat")
    shape = list(x.ty.shape)
    shape[axis] = T.dim_op("+", x.ty.shape[axis], y.ty.shape[axis])
    return lw.b.value(OpKind.CAT, (x, y), TileT(x.ty.dtype, tuple(shape)), lw.loc(node), hint="cat", axis=axis)


MMA_ACC = T.MMA_ACCUMULATORS


@handler
def ct_mma(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "y", "acc", "use_fast_acc"), node, "mma", 3)
    x, y, acc = (_tile(lw, b[k], node, "ct.mma") for k in ("x", "y", "acc"))
    if _opt_const(lw, b.get("use_fast_acc", CV(False)), node, "use_fast_acc", (bool,)):
        raise lw.fail(node, "use_fast_acc is not supported yet", "ct.mma")
    return _mma(lw, x, y, acc, node)


def _mma(lw, x: Ref, y: Ref, acc: Ref, node) -> Ref:
    loc = lw.loc(node)
    if x.ty.rank not in (2, 3) or y.ty.rank != x.ty.rank or acc.ty.rank != x.ty.rank:
        raise lw.fail(node, "ct.mma needs 2-D (or batched 3-D) tiles of equal rank", "ct.mma")
    m, k = x.ty.shape[-2:]
    k2, n = y.ty.shape[-2:]
    lw.b.check_dims_equal(k, k2, loc, "ct.mma contraction dimension")
    lw.b.check_dims_equal(acc.ty.shape[-2], m, loc, "ct.mma accumulator rows")
    lw.b.check_dims_equal(acc.ty.shape[-1], n, loc, "ct.mma accumulator columns")

    def acc_ok(xd, yd, ad):
        return ad if xd == yd and ad in MMA_ACC.get(xd, ()) else None
    lw.b.dspace.lift(acc_ok, x.ty.dtype, y.ty.dtype, acc.ty.dtype,
                     what="ct.mma operand/accumulator dtypes", loc=loc)
    return lw.b.value(OpKind.MMA, (x, y, acc), acc.ty, loc, hint="acc")


def matmul(lw, x, y, node) -> Ref:
    x = _tile(lw, x, node, "matmul")
    y = _tile(lw, y, node, "matmul")
    loc = lw.loc(node)
    dtype = lw.b.promote(x.ty.dtype, y.ty.dtype, loc, "matmul")
    acc_dt = lw.b.dspace.lift(lambda d: MMA_ACC.get(d, (None,))[0], dtype, what="matmul accumulator", loc=loc)
    shape = x.ty.shape[:-1] + y.ty.shape[-1:]
    acc = lw.b.to_tile(Lit(0.0, ScalarT(acc_dt)), acc_dt, shape, loc)
    out = _mma(lw, lw.b.cast(x, dtype, loc), lw.b.cast(y, dtype, loc), acc, node)
    return lw.b.cast(out, dtype, loc)


@handler
def ct_matmul(lw, args, kwargs, node):
    x, y = _two(lw, args, node, "matmul")
    return matmul(lw, x, y, node)


# ---------------------------------------------------------------- methods and builtins

def method(lw, m: BoundMethod, args, kwargs, node) -> Value:
    if m.name == "slice":
        return array_slice(lw, m.obj, args, kwargs, node)
    if m.name == "astype":
        b = _kw(lw, args, kwargs, ("dtype", "rounding_mode"), node, "astype", 1)
        return astype(lw, m.obj, b["dtype"], b.get("rounding_mode"), node)
    if m.name == "reshape":
        shape = args[0] if len(args) == 1 else tuple(args)
        return reshape(lw, m.obj, _reshape_target(lw, m.obj, shape, node), node)
    if m.name in ("permute", "transpose"):
        return HANDLERS[m.name](lw, [m.obj, *args], kwargs, node)
    if m.name in REDUCE_FNS:
        return reduce(lw, m.name, [m.obj, *args], kwargs, node)
    if m.name == "item":  # cuTile: reshape to () (a scalar tile)
        _kw(lw, args, kwargs, (), node, "item", 0)
        return m.obj if m.obj.ty.rank == 0 else reshape(lw, m.obj, (), node)
    raise lw.fail(node, f"tile method `.{m.name}()` is not supported", f".{m.name}()")


# ---------------------------------------------------------------- Array.slice

BASE_ALIGNMENT = 16  # bytes: a parameter's base address, as captured (base_addr_divisible_by=16) and launched
# Bytes per element where cuTile Python derives a view's alignment from its offset (whole-byte dtypes).
ELEMENT_BYTES = {"f64": 8, "i64": 8, "u64": 8, "f32": 4, "tf32": 4, "i32": 4, "u32": 4, "f16": 2, "bf16": 2,
                 "i16": 2, "u16": 2, "i8": 1, "u8": 1}
MAX_ASSUMED_DIV = 1024  # cuTile Python assumes at most this divisibility


def array_slice(lw, arr: Ref, args, kwargs, node) -> Ref:
    """`arr.slice(axis, start, stop)`, as cuTile Python builds it: the base pointer offset by
    `start * stride[axis]` (widened to 64 bits), with the alignment its dataflow analysis derives, and a
    tensor view of extent `stop - start` along `axis`, the array's other extents and its strides."""
    b = _kw(lw, args, kwargs, ("axis", "start", "stop"), node, "Array.slice", 3)
    rank, loc = arr.ty.rank, lw.loc(node)
    axis = b["axis"].value if isinstance(b["axis"], CV) else None
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise lw.fail(node, "Array.slice: axis must be a constant integer", "array.slice")
    if not -rank <= axis < rank:
        raise lw.fail(node, f"Array.slice: axis {axis} out of range for rank {rank}", "array.slice")
    axis %= rank
    start, stop = (_slice_bound(lw, b[k], node, k) for k in ("start", "stop"))
    if isinstance(start, CDim) and isinstance(stop, CDim) and isinstance(start.dim, int) \
            and isinstance(stop.dim, int) and stop.dim < start.dim:
        raise lw.fail(node, "Array.slice: stop must be greater than or equal to start", "array.slice")
    last = axis == rank - 1  # the last stride is the constant 1 of the capture signature
    parent = _definition(lw, arr.name)
    if parent is not None and parent.kind == OpKind.MAKE_VIEW:
        # a view of a view: from its pointer (before its alignment assumption, which cuTile Python makes only
        # for a pointer that becomes a view), its extents and strides; the view itself need not exist
        array, ptr, (dims, strides) = parent.args[1], parent.args[0], _split_view_operands(parent)
        aligned = _definition(lw, ptr.name)
        base_div, steps = 1, None  # no assumption: the parent view was not known aligned
        if aligned is not None and aligned.kind == OpKind.ASSUME_DIV_BY:
            ptr, base_div, steps = aligned.args[0], aligned.attr("divisor"), aligned.attr("steps")
        stride = CDim(1) if last else strides[axis]
    else:
        array, ptr, base_div, steps = arr, None, BASE_ALIGNMENT, ()
        dims = [array_dim(lw, arr, d, node) for d in range(rank)]
        strides = [array_stride(lw, arr, d, loc) for d in range(rank - 1)]
        stride = CDim(1) if last else strides[axis]
    offset = lw.b.value(OpKind.VIEW_OFFSET, (start, stride), TileT("u64", ()), loc, hint=f"{arr.name}_off")
    if ptr is None:
        ptr = lw.b.value(OpKind.PTR_BASE, (arr,), T.PtrT(arr.ty.dtype, ()), loc, hint=f"{arr.name}_base")
    ptr = lw.b.value(OpKind.PTR_OFFSET, (ptr, offset), ptr.ty, loc, hint=f"{arr.name}_at")
    start_div = _div_by(lw, start, node)
    divisor = _view_alignment(lw, arr.ty.dtype, base_div, start_div)  # a stride divides by 1
    if divisor > 1:
        steps = None if steps is None else (*steps, (axis, start_div, last))
        ptr = lw.b.value(OpKind.ASSUME_DIV_BY, (ptr,), ptr.ty, loc, hint=f"{arr.name}_aligned", divisor=divisor,
                         **_launch_alignment(lw, arr.ty.dtype, array.name, steps))
    extent = lw.b.value(OpKind.BINARY, (stop, start), ScalarT("i32"), loc, hint=f"{arr.name}_n", op="sub",
                        rounding=None, ftz=None, nan=None)
    dims = [extent if d == axis else dim for d, dim in enumerate(dims)]
    return lw.b.value(OpKind.MAKE_VIEW, (ptr, array, *dims, *strides), arr.ty, loc, hint=f"{arr.name}_slice",
                      strides=(-1,) * (rank - 1) + (1,))


def _accessed_array(lw, arr: Ref) -> dict:
    """A load/store through an `Array.slice` view names the parameter it accesses: cuTile Python orders the
    memory operations of an array and of its views as one (their pointers share its alias set)."""
    op = _definition(lw, arr.name)
    return {"array": op.args[1].name} if op is not None and op.kind == OpKind.MAKE_VIEW else {}


def _not_a_view(lw, arr: Ref, node, fn: str) -> None:
    op = _definition(lw, arr.name)
    if op is not None and op.kind == OpKind.MAKE_VIEW:
        raise lw.fail(node, f"ct.{fn} on an `Array.slice` view is not supported by the translator yet", f"ct.{fn}",
                      "index the array itself, adding the slice's start to the indices")


def _split_view_operands(view) -> tuple[list, list]:
    """The extents and the dynamic strides of a `make_view`."""
    rank = view.ty.rank
    return list(view.args[2:2 + rank]), list(view.args[2 + rank:])


def _slice_bound(lw, v: Value, node, what: str) -> Atom:
    atom = lw.int_atom(v, node, f"Array.slice: {what}")
    if isinstance(atom, CDim) and isinstance(atom.dim, int) and atom.dim < 0:
        raise lw.fail(node, f"Array.slice: {what} must be non-negative", "array.slice")
    if not isinstance(atom, CDim) and atom.ty.dtype != "i32":
        raise lw.fail(node, f"Array.slice: {what} of type {atom.ty.dtype} is not supported yet", "array.slice",
                      "convert it to a 32-bit integer")
    return atom


def array_stride(lw, arr: Ref, axis: int, loc) -> Ref:
    return lw.b.value(OpKind.ARRAY_STRIDE, (arr,), ScalarT("i32"), loc, hint=f"{arr.name}_stride{axis}", axis=axis)


def _definition(lw, name: str):
    """The operation of the binding of `name` in scope: the last `let` of it in the open blocks (None when
    there is none, or when a reassignment makes it depend on control flow)."""
    found = [st for blk in lw.b.blocks for st in blk.stmts if getattr(st, "name", None) == name]
    return found[-1].op if found and not any(st.update for st in found) else None


def _div_by(lw, atom: Atom, node) -> int:
    """What cuTile Python's dataflow analysis knows an integer scalar divisible by: a constant by its
    magnitude, a sum or difference by the gcd, a product by the product, a negation or an integer cast as
    its operand; anything else (parameters, block ids, loop indices) by 1."""
    if isinstance(atom, CDim):
        if not isinstance(atom.dim, int):  # the alignment of the view depends on the constant's value
            raise NeedsSpecialization(frozenset(sym_names(atom.dim)), "the alignment of an `Array.slice`",
                                      lw.loc(node))
        return abs(atom.dim)
    if isinstance(atom, Lit):
        return abs(atom.value) if isinstance(atom.value, int) and not isinstance(atom.value, bool) else 1
    op = _definition(lw, atom.name)
    if op is None or not all(T.is_int(d) for d in lw.b.dspace.values(op.ty.dtype)):
        return 1
    if op.kind == OpKind.BINARY and op.attr("op") in ("add", "sub"):
        return math.gcd(_div_by(lw, op.args[0], node), _div_by(lw, op.args[1], node))
    if op.kind == OpKind.BINARY and op.attr("op") == "mul":
        return _div_by(lw, op.args[0], node) * _div_by(lw, op.args[1], node)
    if (op.kind == OpKind.UNARY and op.attr("fn") in ("negative", "abs")) or op.kind in (
            OpKind.COPY, OpKind.SCALAR, OpKind.TILE0, OpKind.SCALAR_OF):
        return _div_by(lw, op.args[0], node)
    return 1


def view_alignment(steps, element_bytes: int, strides_aligned: bool) -> int:
    """cuTile Python's alignment of a view's pointer, the base 16-byte aligned, after the `Array.slice` steps
    (axis, start divisibility, last axis?): the gcd of 16 and of every offset in bytes. The capture signature
    knows no stride divisible (a non-last axis' offset divides by start x element bytes); cuTile's launcher
    specializes a stride it finds 16-byte divisible (`stride_divisible_by`), and that axis' offset is then
    a multiple of 16 bytes (`strides_aligned`: every non-last stride is)."""
    return math.gcd(BASE_ALIGNMENT, *(0 if strides_aligned and not last else start_div * element_bytes
                                      for _axis, start_div, last in steps))


def _launch_alignment(lw, dtype, array: str, steps) -> dict:
    """The attributes of a view's alignment assumption: its slicing `steps` (a view of it continues them), and
    `at_launch` when the launch's strides can make it more aligned than captured: the port then takes the
    alignment as its launcher computes it (an entry const generic), as cuTile Python compiles one kernel per
    stride divisibility; a fixed, smaller assumption would hide what the JIT knows of the strides."""
    if steps is None:
        return {}
    sizes = [ELEMENT_BYTES[d] for d in lw.b.dspace.values(dtype) if d in ELEMENT_BYTES]
    at_launch = any(view_alignment(steps, n, False) != view_alignment(steps, n, True) for n in sizes)
    return {"steps": steps, "view_of": array, **({"at_launch": True} if at_launch else {})}


def _view_alignment(lw, dtype, base_div: int, offset_div: int) -> int:
    """The divisibility cuTile Python assumes for a view's pointer: the gcd of its base's and of the offset
    in bytes, as a power of two. A generic element type whose dtypes give different alignments takes the
    smallest (the kernel is then split per dtype: see the lowerer's `_fma_groups`)."""
    per_dtype = [math.gcd(base_div, offset_div * ELEMENT_BYTES[d]) if d in ELEMENT_BYTES else 1
                 for d in lw.b.dspace.values(dtype)]
    divisor = min(per_dtype)
    return min(divisor & -divisor, MAX_ASSUMED_DIV)


def builtin(lw, name: str, args, kwargs, node) -> Value:
    if kwargs:
        raise lw.fail(node, f"{name}() keywords are not supported", name)
    if name in ("min", "max"):
        if len(args) < 2:
            raise lw.fail(node, f"{name}() needs two or more arguments", name)
        out = args[0]
        for a in args[1:]:
            out = binary(lw, name, out, a, node)
        return out
    if name == "len" and len(args) == 1 and isinstance(args[0], tuple):
        return CV(len(args[0]))
    if name == "len" and len(args) == 1 and isinstance(args[0], Ref):
        raise lw.fail(node, "len() of a runtime value: a tuple or list of arrays as a kernel parameter is not "
                            "supported (a cutile-rs entry takes one tensor per parameter)", "tuple/list parameter",
                      _LIST_PARAM_HINT)
    if name in ("int", "float", "bool") and len(args) == 1:
        x = args[0]
        if isinstance(x, CV) and isinstance(x.value, (int, float, str)):  # float("inf")
            try:
                return CV(fold("+", 0, {"int": int, "float": float, "bool": bool}[name](x.value)))
            except (OverflowError, ValueError, ConstFoldError) as e:
                raise lw.fail(node, f"{name}({x.value!r}) fails: {e}", "constant") from None
        if isinstance(x, Ref) and isinstance(x.ty, ScalarT):
            return lw.b.cast(x, {"int": "i32", "float": "f32", "bool": "bool"}[name], lw.loc(node))
    if name == "abs" and len(args) == 1:
        return unary_fn(lw, "abs", args[0], {}, node)
    raise lw.fail(node, f"builtin `{name}` is not supported here", name)
