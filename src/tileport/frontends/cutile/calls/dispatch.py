"""Entry points of the lowerer: attributes, subscripts, calls (`ct.<fn>` through `HANDLERS`, tile methods,
Python builtins).
"""

from __future__ import annotations

import ast
import math

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile.calls.arith import astype, binary, compare, unary_fn, unary_math
from tileport.frontends.cutile.calls.base import (BINARY_FNS, COMPARE_FNS, ENUMS, HANDLERS, REDUCE_FNS, UNARY_MATH,
                                                  ArrayShape, BoundMethod, CtFn, EnumNS, _kw, _modes, _two)
from tileport.frontends.cutile.calls.reduce import reduce
from tileport.frontends.cutile.calls.shape import _reshape_target, permute, reshape
from tileport.frontends.cutile.calls.views import array_dim, array_slice, materialize
from tileport.frontends.cutile.dtypes import CT_DTYPES
from tileport.frontends.cutile.values import CV, MATH, ConstFoldError, DTypeVal, EnumVal, ModuleRef, Value, fold
from tileport.model import types as T
from tileport.model.ir import Ref, sym_names
from tileport.model.types import ArrayT, ScalarT, Sym, TileT


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


# ---------------------------------------------------------------- calls

# cuTile operations cutile-rs 0.5.0 has a counterpart for but the translator does not lower yet: the hint
# names the counterpart, so the user knows a hand port is possible.
NOT_TRANSLATED = {
    "mma_scaled": "cutile 0.5.0 can express it (mmaf_scaled: f8e4m3fn/f8e5m2/f4e2m1fn operands, f8e8m0fnu scales, "
                  "sm_100), but tileport has no f8e8m0fnu or f4e2m1fn element types (scale and packed fp4 arrays, "
                  "the launcher ABI; f8e4m3fn / f8e5m2 arrays it has) yet, so it is not lowered; port it by hand "
                  "with mmaf_scaled",
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
