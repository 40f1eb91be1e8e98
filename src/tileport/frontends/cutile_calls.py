"""Typing rules for cuTile Python operations: `ct.<fn>(...)`, tile methods and attributes, operators.

Each `ct` function has one handler (`ct_<name>`). Handlers check their arguments as cuTile Python
does, make broadcasts and casts explicit through the Builder, and emit model operations.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile import _MATH, _PY, CV, DTypeVal, EnumVal, ModuleRef, Value
from tileport.model import types as T
from tileport.model.builder import lit_dtype, weak_result_dtype
from tileport.model.ir import Atom, CDim, Lit, Ref, sym_names
from tileport.model.types import ArrayT, ScalarT, Sym, TileT

ENUMS = {"PaddingMode", "RoundingMode", "MemoryOrder", "MemoryScope"}
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
        if attr in T.CT_DTYPES:
            return DTypeVal(T.CT_DTYPES[attr])
        if attr in ENUMS:
            return EnumNS(attr)
        return CtFn(attr)
    if isinstance(base, ModuleRef) and base.name == "math":
        if attr in _MATH and not callable(_MATH[attr]):
            return CV(_MATH[attr])
        raise lw.fail(node, f"math.{attr} is not supported in kernels", "math")
    if isinstance(base, EnumNS):
        return EnumVal(base.name, attr)
    if isinstance(base, Ref) and isinstance(base.ty, ArrayT):
        if attr == "shape":
            return ArrayShape(base)
        if attr == "dtype":
            return DTypeVal(base.ty.dtype)
        if attr == "ndim":
            return CV(base.ty.rank)
        raise lw.fail(node, f"array attribute `.{attr}` is not supported", f"array.{attr}")
    if isinstance(base, Ref) and isinstance(base.ty, (TileT, ScalarT)):
        shape = base.ty.shape if isinstance(base.ty, TileT) else ()
        if attr == "shape":
            return tuple(CV(d) for d in shape)
        if attr == "dtype":
            return DTypeVal(base.ty.dtype)
        if attr == "ndim":
            return CV(len(shape))
        if attr == "T":
            return permute(lw, base, tuple(reversed(range(len(shape)))), node)
        if attr in ("astype", "reshape", "permute", "transpose", "sum", "max", "min", "prod", "item"):
            return BoundMethod(attr, base)
    if isinstance(base, tuple) and attr in ("index", "count"):
        raise lw.fail(node, f"tuple.{attr} is not supported", "tuple")
    raise lw.fail(node, f"attribute `.{attr}` is not supported here", f".{attr}")


def subscript(lw, base: Value, node: ast.Subscript) -> Value:
    idx_node = node.slice
    if isinstance(base, ArrayShape):
        axis = lw.compile_time(idx_node, "a shape index")
        return array_dim(lw, base.array, axis, node)
    if isinstance(base, tuple):
        i = lw.compile_time(idx_node, "a tuple index")
        if isinstance(i, (Sym, T.DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(i)), "tuple indexed by a constant", lw.loc(node))
        return base[i]
    if isinstance(base, Ref) and isinstance(base.ty, TileT):
        items = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        if all(_is_full_slice(e) or (isinstance(e, ast.Constant) and e.value is None) for e in items):
            return _expand_with_none(lw, base, items, node)
        raise lw.fail(node, "tile indexing other than `[:, None]`-style dimension insertion is not supported",
                      "tile subscript", "use ct.extract or ct.reshape")
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
    return lw.b.value("array_dim", (arr,), ScalarT("i32"), lw.loc(node), hint=f"{arr.name}_dim{axis}", axis=axis)


def materialize(lw, v: Value, node) -> Value:
    """Turn lazy values (array shapes) into plain ones."""
    if isinstance(v, ArrayShape):
        return tuple(array_dim(lw, v.array, i, node) for i in range(v.array.ty.rank))
    return v


# ---------------------------------------------------------------- calls

def call(lw, callee: Value, args: list, kwargs: dict, node: ast.Call) -> Value:
    args = [materialize(lw, a, node) for a in args]
    if isinstance(callee, CtFn):
        handler = globals().get(f"ct_{callee.name}")
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
                          "see docs/translator.md for the supported operations")
        return handler(lw, args, kwargs, node)
    if isinstance(callee, BoundMethod):
        return method(lw, callee, args, kwargs, node)
    if isinstance(callee, tuple) and callee[0] == "builtin":
        return builtin(lw, callee[1], args, kwargs, node)
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
    return tuple(d.value for d in v)


def _index(lw, v: Value, rank: int, node, fn: str) -> tuple[Atom, ...]:
    items = v if isinstance(v, tuple) else (v,)
    if len(items) != rank:
        raise lw.fail(node, f"ct.{fn}: index has {len(items)} entries, the array has rank {rank}", f"ct.{fn}")
    return tuple(lw.scalar_atom(i, node) for i in items)


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


def ct_bid(lw, args, kwargs, node):
    axis = _kw(lw, args, kwargs, ("axis",), node, "bid", 1)["axis"]
    return lw.b.value("bid", (), ScalarT("i32"), lw.loc(node), hint="bid", axis=_axis_const(lw, axis, node))


def ct_num_blocks(lw, args, kwargs, node):
    axis = _kw(lw, args, kwargs, ("axis",), node, "num_blocks", 1)["axis"]
    return lw.b.value("num_blocks", (), ScalarT("i32"), lw.loc(node), hint="num_blocks",
                      axis=_axis_const(lw, axis, node))


def _axis_const(lw, v, node) -> int:
    if not (isinstance(v, CV) and v.value in (0, 1, 2)):
        raise lw.fail(node, "axis must be the constant 0, 1 or 2", "axis")
    return v.value


def ct_load(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "index", "shape", "order", "padding_mode", "check_bounds", "latency",
                               "allow_tma", "memory_order", "memory_scope"), node, "load", 3)
    arr = _array(lw, b["array"], node, "load")
    index = _index(lw, b["index"], arr.ty.rank, node, "load")
    shape = _shape(lw, b["shape"], node, "ct.load")
    if len(shape) != arr.ty.rank:
        raise lw.fail(node, f"ct.load: tile rank {len(shape)} differs from the array rank {arr.ty.rank}", "ct.load")
    pad = b.get("padding_mode")
    if pad is not None and not (isinstance(pad, EnumVal) and pad.enum == "PaddingMode"):
        raise lw.fail(node, "padding_mode must be a ct.PaddingMode member", "padding_mode")
    _memory_model(lw, b, node, "load")
    attrs = dict(shape=shape, order=_order(lw, b.get("order"), arr.ty.rank, node),
                 padding=pad.member.lower() if pad is not None else "undetermined",
                 check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                 latency=_opt_const(lw, b.get("latency"), node, "latency"),
                 allow_tma=_opt_const(lw, b.get("allow_tma"), node, "allow_tma", (bool,)))
    return lw.b.value("load", (arr, *index), TileT(arr.ty.dtype, shape), lw.loc(node),
                      hint=f"{arr.name}_tile", **attrs)


def ct_store(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "index", "tile", "order", "check_bounds", "latency", "allow_tma",
                               "memory_order", "memory_scope"), node, "store", 3)
    arr = _array(lw, b["array"], node, "store")
    index = _index(lw, b["index"], arr.ty.rank, node, "store")
    tile = b["tile"]
    if isinstance(tile, Ref) and isinstance(tile.ty, TileT):
        if tile.ty.rank != arr.ty.rank:
            raise lw.fail(node, f"ct.store: tile rank {tile.ty.rank} differs from the array rank {arr.ty.rank}",
                          "ct.store")
        _check_implicit_cast(lw, tile.ty.dtype, arr.ty.dtype, node, "stored tile")
        tile = lw.b.cast(tile, arr.ty.dtype, lw.loc(node))
    else:
        tile = lw.b.to_tile(lw.scalar_atom(tile, node), arr.ty.dtype, (1,) * arr.ty.rank, lw.loc(node))
    _memory_model(lw, b, node, "store")
    lw.b.effect("store", (arr, tile, *index), lw.loc(node),
                order=_order(lw, b.get("order"), arr.ty.rank, node),
                check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                latency=_opt_const(lw, b.get("latency"), node, "latency"),
                allow_tma=_opt_const(lw, b.get("allow_tma"), node, "allow_tma", (bool,)))
    return CV(None)


def _check_implicit_cast(lw, src, dst, node, what: str) -> None:
    def ok(s, d):
        return d if T.promote(s, d) == d else None
    lw.b.dspace.lift(ok, src, dst, what=f"{what}: cannot implicitly cast to the array's dtype", loc=lw.loc(node))


def _indices(lw, v, rank, node, fn) -> list[Ref | Atom]:
    items = list(v) if isinstance(v, tuple) else [v]
    if len(items) != rank:
        raise lw.fail(node, f"ct.{fn}: {len(items)} index tiles for an array of rank {rank}", f"ct.{fn}")
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


def ct_gather(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "indices", "mask", "padding_value", "check_bounds", "latency"),
            node, "gather", 2)
    arr = _array(lw, b["array"], node, "gather")
    idx = _indices(lw, b["indices"], arr.ty.rank, node, "gather")
    mask = b.get("mask")
    mask = None if mask is None or (isinstance(mask, CV) and mask.value is None) else mask
    shape = _common_shape(lw, idx + ([mask] if mask is not None else []), node)
    loc = lw.loc(node)
    pad = _opt_const(lw, b.get("padding_value", CV(0)), node, "padding_value", (int, float))
    # Indices stay in their own shapes: cuTile widens each to u64 before broadcasting it.
    args_ = (arr, *idx)
    if mask is not None:
        args_ += (lw.b.to_tile(mask, "bool", shape, loc),)
    return lw.b.value("gather", args_, TileT(arr.ty.dtype, shape), loc, hint=f"{arr.name}_tile",
                      padding_value=pad, has_mask=mask is not None, shape=shape,
                      check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                      latency=_opt_const(lw, b.get("latency"), node, "latency"))


def ct_scatter(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "indices", "value", "mask", "check_bounds", "latency"), node,
            "scatter", 3)
    arr = _array(lw, b["array"], node, "scatter")
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
    lw.b.effect("scatter", args_, loc, has_mask=mask is not None, shape=shape,
                check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                latency=_opt_const(lw, b.get("latency"), node, "latency"))
    return CV(None)


def ct_num_tiles(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "axis", "shape", "order"), node, "num_tiles", 3)
    arr = _array(lw, b["array"], node, "num_tiles")
    axis = _opt_const(lw, b["axis"], node, "axis")
    shape = _shape(lw, b["shape"], node, "ct.num_tiles")
    if len(shape) != arr.ty.rank or not 0 <= axis < arr.ty.rank:
        raise lw.fail(node, "ct.num_tiles: shape rank or axis does not match the array", "ct.num_tiles")
    return lw.b.value("num_tiles", (arr,), ScalarT("i32"), lw.loc(node), hint=f"{arr.name}_tiles",
                      axis=axis, shape=shape, order=_order(lw, b.get("order"), arr.ty.rank, node))


def _dtype(lw, v, node, what) -> T.DType:
    if not isinstance(v, DTypeVal):
        raise lw.fail(node, f"{what} must be a dtype (ct.float32, x.dtype, ...)", "dtype")
    return v.dtype


def ct_arange(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("size", "dtype", "start", "step"), node, "arange", 2)
    size = _shape(lw, b["size"], node, "ct.arange")
    dtype = _dtype(lw, b["dtype"], node, "ct.arange dtype")
    out = lw.b.value("arange", (), TileT(dtype, size), lw.loc(node), hint="offsets", dtype=dtype, size=size[0])
    for key, op in (("step", "*"), ("start", "+")):
        v = b.get(key)
        if v is not None and not (isinstance(v, CV) and v.value == (1 if key == "step" else 0)):
            out = binary(lw, op, out, v, node)
    return out


def ct_full(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("shape", "fill_value", "dtype"), node, "full", 3)
    return _fill(lw, b["shape"], b["fill_value"], b["dtype"], node)


def ct_zeros(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("shape", "dtype"), node, "zeros", 2)
    return _fill(lw, b["shape"], CV(0), b["dtype"], node)


def ct_ones(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("shape", "dtype"), node, "ones", 2)
    return _fill(lw, b["shape"], CV(1), b["dtype"], node)


def _fill(lw, shape_v, value, dtype_v, node) -> Ref:
    shape = _shape(lw, shape_v, node, "ct.full")
    dtype = _dtype(lw, dtype_v, node, "dtype")
    atom = lw.scalar_atom(value, node)
    if isinstance(atom, CDim) and not isinstance(atom.dim, int):
        raise lw.fail(node, "a fill value computed from constants is not supported", "ct.full")
    if isinstance(atom, Ref):
        return lw.b.to_tile(atom, dtype, shape, lw.loc(node))
    return lw.b.value("full", (_lit(lw, value, dtype, node),), TileT(dtype, shape), lw.loc(node), hint="c",
                      dtype=dtype, shape=shape)


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
    return lw.b.cast(x, dtype, lw.loc(node), rounding)


def unary_math(lw, name: str, args, kwargs, node) -> Ref:
    if len(args) != 1:
        raise lw.fail(node, f"ct.{name} takes one operand", f"ct.{name}")
    modes = _modes(lw, kwargs, node, name, UNARY_MATH[name])
    return unary_fn(lw, name, args[0], modes, node)


def unary_fn(lw, name: str, x: Value, modes: dict, node) -> Value:
    if isinstance(x, Ref) and isinstance(x.ty, ScalarT) and name == "negative":
        return lw.b.value("unary", (x,), x.ty, lw.loc(node), hint="neg", fn="negative")
    if isinstance(x, CV) and name == "negative":
        return CV(-x.value)
    x = _tile(lw, x, node, f"ct.{name}")
    if name not in ("negative", "abs", "not"):
        lw.b.require(x.ty.dtype, T.is_float, f"ct.{name} needs a floating-point tile", lw.loc(node))
    return lw.b.value("unary", (x,), x.ty, lw.loc(node), hint=name, fn=name,
                      rounding=modes.get("rounding_mode"), ftz=modes.get("flush_to_zero"))


def ct_abs(lw, args, kwargs, node):
    return unary_fn(lw, "abs", args[0], {}, node)


def ct_negative(lw, args, kwargs, node):
    return unary_fn(lw, "negative", args[0], {}, node)


def logical_not(lw, x: Value, node) -> Value:
    x = _tile(lw, x, node, "not")
    lw.b.require(x.ty.dtype, lambda d: d == "bool", "`not` needs a bool tile", lw.loc(node))
    return lw.b.value("unary", (x,), x.ty, lw.loc(node), hint="not", fn="not")


def ct_where(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("cond", "x", "y"), node, "where", 3)
    return where(lw, b["cond"], b["x"], b["y"], node)


def where(lw, cond, x, y, node) -> Ref:
    loc = lw.loc(node)
    dtype = _operand_dtype(lw, x, y, node, "ct.where")
    shape = _common_shape(lw, (cond, x, y), node)
    c = lw.b.to_tile(lw.scalar_atom(cond, node) if not isinstance(cond, Ref) else cond, "bool", shape, loc)
    xs = lw.b.to_tile(x if isinstance(x, Ref) else _lit(lw, x, dtype, node), dtype, shape, loc)
    ys = lw.b.to_tile(y if isinstance(y, Ref) else _lit(lw, y, dtype, node), dtype, shape, loc)
    return lw.b.value("select", (c, xs, ys), TileT(dtype, shape), loc, hint="sel")


def _lit(lw, v: Value, dtype, node) -> Lit:
    if not isinstance(v, CV) or not isinstance(v.value, (int, float, bool)):
        raise lw.fail(node, f"expected a number, got {v!r}", "literal")
    value = v.value
    if lw.b.is_float(dtype) and not isinstance(value, bool):
        value = float(value)
    return Lit(value, ScalarT(dtype))


def _operand_dtype(lw, a, b, node, what) -> T.DType:
    loc = lw.loc(node)
    da = a.ty.dtype if isinstance(a, Ref) else None
    db = b.ty.dtype if isinstance(b, Ref) else None
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
    loc = lw.loc(node)
    if isinstance(a, CV) and isinstance(b, CV):
        return _fold(lw, op, a, b, node)
    if isinstance(a, tuple) or isinstance(b, tuple):
        raise lw.fail(node, "arithmetic on tuples is not supported", "tuple arithmetic")
    dtype = _operand_dtype(lw, a, b, node, f"operator {op}")
    if op == "/" and not lw.b.is_float(dtype):
        dtype = "f32"
    x, y, shape = _operands(lw, a, b, dtype, node)
    ty = ScalarT(dtype) if shape is None else TileT(dtype, shape)
    return lw.b.value("binary", (x, y), ty, loc, hint=_HINTS.get(op, "v"), op=_OP_NAMES[op], rounding=rounding_mode,
                      ftz=flush_to_zero, nan=propagate_nan)


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
    x, y = (lw.b.to_tile(v if isinstance(v, Ref) else _splat_operand(lw, v, dtype, node), dtype, shape, loc)
            for v in (a, b))
    return x, y, shape


def _splat_operand(lw, v: Value, dtype, node) -> Atom:
    """A non-tile operand of tile arithmetic: a number, or a symbolic constant (`ct.Constant`
    parameter, array dimension) splat as it is, e.g. `ct.cdiv(gathered_length, BLOCK_N)`."""
    if isinstance(v, CV) and isinstance(v.value, (Sym, T.DimOp)):
        loc = lw.loc(node)
        scalar = lw.b.value("scalar", (lw.scalar_atom(v, node),), ScalarT("i32"), loc, hint="c")
        return lw.b.cast(scalar, dtype, loc)
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
        return lw.b.cast(lw.b.value("scalar", (atom,), ScalarT("i32"), lw.loc(node), hint="c"), dtype, lw.loc(node))
    return _lit(lw, v, dtype, node)


def _fold(lw, op: str, a: CV, b: CV, node) -> CV:
    if a.is_dim and b.is_dim and op in T._DIM_OPS:
        return CV(T.dim_op(op, a.value, b.value))
    if op in ("min", "max"):
        if isinstance(a.value, (Sym, T.DimOp)) or isinstance(b.value, (Sym, T.DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)), f"{op} of constants",
                                      lw.loc(node))
        return CV(min(a.value, b.value) if op == "min" else max(a.value, b.value))
    if op == "cdiv":
        return _fold(lw, "//", _fold(lw, "+", a, _fold(lw, "-", b, CV(1), node), node), b, node)
    if isinstance(a.value, (Sym, T.DimOp)) or isinstance(b.value, (Sym, T.DimOp)):
        raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)), f"`{op}` on constants",
                                  lw.loc(node))
    try:
        return CV(_PY[op](a.value, b.value))
    except (ZeroDivisionError, TypeError) as e:
        raise lw.fail(node, f"constant expression fails: {e}", "constant") from None


def compare(lw, op: str, a: Value, b: Value, node) -> Value:
    a, b = materialize(lw, a, node), materialize(lw, b, node)
    if isinstance(a, CV) and isinstance(b, CV):
        if isinstance(a.value, (Sym, T.DimOp)) or isinstance(b.value, (Sym, T.DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)),
                                      "a comparison of constants", lw.loc(node))
        import operator as pyop
        fn = {"<": pyop.lt, "<=": pyop.le, ">": pyop.gt, ">=": pyop.ge, "==": pyop.eq, "!=": pyop.ne}[op]
        return CV(fn(a.value, b.value))
    loc = lw.loc(node)
    x, y, shape = _operands(lw, a, b, _operand_dtype(lw, a, b, node, f"comparison {op}"), node)
    if shape is None:
        return lw.b.value("compare", (x, y), ScalarT("bool"), loc, hint="cond", op=op)
    return lw.b.value("compare", (x, y), TileT("bool", shape), loc, hint="mask", op=op)


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
    axes = sorted({a % rank for a in axes}, reverse=True)
    out = x
    for ax in axes:
        shape = tuple(d for i, d in enumerate(out.ty.shape) if i != ax)
        out = lw.b.value("reduce", (out,), TileT(out.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_{fn}",
                         fn=fn, axis=ax, rounding=modes.get("rounding_mode"), ftz=modes.get("flush_to_zero"),
                         nan=modes.get("propagate_nan"))
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.ty.shape))
        out = reshape(lw, out, kept, node)
    return out


def reshape(lw, x: Ref, shape: tuple, node) -> Ref:
    return lw.b.value("reshape", (x,), TileT(x.ty.dtype, tuple(shape)), lw.loc(node), hint=f"{x.name}_r",
                      shape=tuple(shape))


def permute(lw, x: Ref, axes: tuple, node) -> Ref:
    if sorted(axes) != list(range(x.ty.rank)):
        raise lw.fail(node, f"{axes} is not a permutation of the tile's axes", "permute")
    shape = tuple(x.ty.shape[a] for a in axes)
    return lw.b.value("permute", (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_t", axes=tuple(axes))


def ct_reshape(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "shape"), node, "reshape", 2)
    x = _tile(lw, b["x"], node, "ct.reshape")
    return reshape(lw, x, _shape(lw, b["shape"], node, "ct.reshape"), node)


def ct_permute(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axes"), node, "permute", 2)
    x = _tile(lw, b["x"], node, "ct.permute")
    axes = tuple(_opt_const(lw, a, node, "axes") for a in b["axes"])
    return permute(lw, x, axes, node)


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
    axes[a0 % x.ty.rank], axes[a1 % x.ty.rank] = axes[a1 % x.ty.rank], axes[a0 % x.ty.rank]
    return permute(lw, x, tuple(axes), node)


def ct_expand_dims(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axis"), node, "expand_dims", 2)
    x = _tile(lw, b["x"], node, "ct.expand_dims")
    axis = _opt_const(lw, b["axis"], node, "axis") % (x.ty.rank + 1)
    shape = list(x.ty.shape)
    shape.insert(axis, 1)
    return reshape(lw, x, tuple(shape), node)


def ct_broadcast_to(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "shape"), node, "broadcast_to", 2)
    x = _tile(lw, b["x"], node, "ct.broadcast_to")
    return lw.b.to_tile(x, x.ty.dtype, _shape(lw, b["shape"], node, "ct.broadcast_to"), lw.loc(node))


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
    return lw.b.value("extract", (x, *index), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_part",
                      shape=shape)


MMA_ACC = {"f16": ("f16", "f32"), "bf16": ("f32",), "f32": ("f32",), "tf32": ("f32",), "f64": ("f64",),
           "f8e4m3fn": ("f16", "f32"), "f8e5m2": ("f16", "f32"), "i8": ("i32",), "u8": ("i32",)}


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
    return lw.b.value("mma", (x, y, acc), acc.ty, loc, hint="acc")


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


def ct_matmul(lw, args, kwargs, node):
    x, y = _two(lw, args, node, "matmul")
    return matmul(lw, x, y, node)


# ---------------------------------------------------------------- methods and builtins

def method(lw, m: BoundMethod, args, kwargs, node) -> Value:
    if m.name == "astype":
        b = _kw(lw, args, kwargs, ("dtype", "rounding_mode"), node, "astype", 1)
        return astype(lw, m.obj, b["dtype"], b.get("rounding_mode"), node)
    if m.name == "reshape":
        shape = args[0] if len(args) == 1 else tuple(args)
        return reshape(lw, m.obj, _shape(lw, shape, node, "reshape"), node)
    if m.name in ("permute", "transpose"):
        return globals()[f"ct_{m.name}"](lw, [m.obj, *args], kwargs, node)
    if m.name in REDUCE_FNS:
        return reduce(lw, m.name, [m.obj, *args], kwargs, node)
    raise lw.fail(node, f"tile method `.{m.name}()` is not supported", f".{m.name}()")


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
    if name in ("int", "float", "bool") and len(args) == 1:
        x = args[0]
        if isinstance(x, CV) and not isinstance(x.value, (Sym, T.DimOp)):
            return CV({"int": int, "float": float, "bool": bool}[name](x.value))
        if isinstance(x, Ref) and isinstance(x.ty, ScalarT):
            return lw.b.cast(x, {"int": "i32", "float": "f32", "bool": "bool"}[name], lw.loc(node))
    if name == "abs" and len(args) == 1:
        return unary_fn(lw, "abs", args[0], {}, node)
    raise lw.fail(node, f"builtin `{name}` is not supported here", name)
