"""Arithmetic of the Triton frontend: operators, comparisons, casts (`.to`, bitcast), `tl.where`, math
functions, tile factories (`tl.arange`, `tl.full`, ...), constant folding and run-time integers.
"""

from __future__ import annotations

from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import affine as A
from tileport.frontends.triton import memory as M
from tileport.frontends.triton.calls.base import FLOAT_ONLY, _bind, _dtype, _shape, _tile, _uid
from tileport.frontends.triton.values import CV, DT, Ptr, Retry
from tileport.model import types as T
from tileport.model.builder import lit_dtype, weak_result_dtype
from tileport.model.ir import Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import DimOp, ScalarT, Sym, TileT


def arange(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("start", "end"), node, "arange", 2)
    start = lw.compile_time(b["start"], node, "tl.arange start")
    end = lw.compile_time(b["end"], node, "tl.arange end")
    if start == 0:
        size = end
    elif type(start) is int and type(end) is int:
        size = end - start
    else:
        size = T.dim_op("-", end, start)
    if isinstance(size, int) and (size <= 0 or size & (size - 1)):
        raise lw.fail(node, f"tl.arange size {size} must be a positive power of two", "tl.arange")
    out = lw.b.value(OpKind.ARANGE, (), TileT("i32", (size,)), lw.loc(node), hint="offs", dtype="i32", size=size)
    ar = ("a", next(_uid), size, 0)
    lw.poly[out.name] = A.add(A.factor(ar), A.dim_poly(start) if start != 0 else {})
    if start != 0:
        out = binary(lw, "+", out, CV(start), node)
        lw.poly[out.name] = A.add(A.factor(ar), A.dim_poly(start))
    return out


def full(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("shape", "value", "dtype"), node, "full", 3)
    return _filled(lw, _shape(lw, b["shape"], node, "tl.full"), b["value"], _dtype(lw, b["dtype"], node, "tl.full"),
                   node)


def zeros(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("shape", "dtype"), node, "zeros", 2)
    return _filled(lw, _shape(lw, b["shape"], node, "tl.zeros"), CV(0), _dtype(lw, b["dtype"], node, "tl.zeros"),
                   node)


def zeros_like(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "dtype"), node, "zeros_like", 1)
    x = _tile(lw, b["input"], node, "tl.zeros_like")
    return _filled(lw, x.ty.shape, CV(0), _dtype(lw, b.get("dtype"), node, "tl.zeros_like", x.ty.dtype), node)


def full_like(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "value", "dtype"), node, "full_like", 2)
    x = _tile(lw, b["input"], node, "tl.full_like")
    return _filled(lw, x.ty.shape, b["value"], _dtype(lw, b.get("dtype"), node, "tl.full_like", x.ty.dtype), node)


def _filled(lw, shape, value, dtype, node) -> Ref:
    if isinstance(value, CV) and isinstance(value.value, (Sym, DimOp)):
        value = materialize_int(lw, value, node)
    if dtype == "bool":  # the truth of the fill (the model has no casts to bool)
        if isinstance(value, CV):
            value = CV(bool(value.value))
        elif value.ty.dtype != "bool":
            value = compare(lw, "!=", value, CV(0), node)
    elif isinstance(value, Ref) and value.ty.dtype == "bool":
        value = to(lw, value, dtype, node)
    if isinstance(value, Ref) and isinstance(value.ty, TileT):
        if value.ty.rank:
            raise lw.fail(node, f"the fill value of a tile must be a scalar, got {value.ty}", "tl.full")
        value = lw.b.value(OpKind.SCALAR_OF, (value,), ScalarT(value.ty.dtype), lw.loc(node), hint="fill")
    return lw.b.to_tile(lw.atom(value, node, dtype), dtype, tuple(shape), lw.loc(node))


def pointer_type(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("element_ty", "address_space", "const"), node, "pointer_type", 1)
    return DT(("pointer", _dtype(lw, b["element_ty"], node, "tl.pointer_type")))


def recast(lw, ptr: Ptr, elem: str, node) -> Ptr:
    """`p.to(tl.pointer_type(dt))`: the same address read as `dt` elements (its offset counts the array's
    elements, so a re-cast of a moved pointer is refused unless the element types are the same width)."""
    if elem == ptr.dtype:
        return ptr
    if ptr.offset is not None and _BITS.get(str(ptr.dtype)) != _BITS.get(elem):
        raise lw.fail(node, "re-casting a pointer already moved from its parameter to another element width is not "
                      "supported", "tl.pointer_type", "re-cast the parameter itself, then add the offset in the new "
                      "element type")
    return Ptr(ptr.array, ptr.offset, elem)


def cdiv(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "div"), node, "cdiv", 2)
    x, y = b["x"], b["div"]
    if isinstance(x, CV) and isinstance(y, CV):
        return binary(lw, "//", binary(lw, "+", x, binary(lw, "-", y, CV(1), node), node), y, node)
    return binary(lw, "cdiv", x, y, node)


def swizzle2d(lw, args, kwargs, node):
    """tl.swizzle2d(i, j, size_i, size_j, size_g): (i, j) of a size_i x size_j grid renumbered so that
    groups of size_g rows are walked column by column (the last group has the rows left), in integer
    arithmetic on non-negative values (Triton's truncating // and % agree with flooring there)."""
    b = _bind(lw, args, kwargs, ("i", "j", "size_i", "size_j", "size_g"), node, "swizzle2d", 5)
    i, j, size_i, size_j, size_g = (b[k] for k in ("i", "j", "size_i", "size_j", "size_g"))
    ij = binary(lw, "+", binary(lw, "*", i, size_j, node), j, node)
    group = binary(lw, "*", size_g, size_j, node)
    first = binary(lw, "*", binary(lw, "//", ij, group, node), size_g, node)
    rows = binary(lw, "min", binary(lw, "-", size_i, first, node), size_g, node)
    within = binary(lw, "%", ij, group, node)
    return (binary(lw, "+", first, binary(lw, "%", within, rows, node), node),
            binary(lw, "//", within, rows, node))


def where(lw, cond, x, y, node) -> Ref:
    loc = lw.loc(node)
    if isinstance(cond, CV) and dynamic(lw, cond):
        cond = compare(lw, "!=", at_run_time(lw, cond, node), CV(0), node)
    if isinstance(cond, CV):
        if isinstance(cond.value, (Sym, DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "tl.where on a constexpr", loc)
        return x if cond.value else y
    if not isinstance(cond, Ref):
        raise lw.fail(node, "tl.where: the condition must be a boolean tile", "tl.where")
    if isinstance(x, Ptr) and isinstance(y, Ptr):
        return _where_pointer(lw, cond, x, y, node)
    dtype = _operand_dtype(lw, x, y, node, "tl.where")
    shape = tuple(cond.ty.shape) if isinstance(cond.ty, TileT) else ()
    for v in (x, y):
        if isinstance(v, Ref) and isinstance(v.ty, TileT):
            shape = lw.b.broadcast_shape(shape, v.ty.shape, loc)
    c = lw.b.to_tile(lw.b.cast(cond, "bool", loc) if cond.ty.dtype != "bool" else cond, "bool", shape, loc)
    xs, ys = (lw.b.to_tile(_operand_atom(lw, v, dtype, node), dtype, shape, loc) for v in (x, y))
    out = lw.b.value(OpKind.SELECT, (c, xs, ys), TileT(dtype, shape), loc, hint="sel")
    _keep_loaded(lw, (x, y), out)
    return out


def _where_pointer(lw, cond: Ref, x: Ptr, y: Ptr, node) -> Ptr:
    """`p + a if c else p + b` (or tl.where) of pointers into one array: the pointer at the chosen offset."""
    if (x.array.name, x.elem) != (y.array.name, y.elem):
        raise lw.fail(node, f"a choice between {lw.describe(x)} and {lw.describe(y)}: pointers into different "
                      "arrays (or element types) are not supported", "pointer", "choose the offset, not the array")
    offset = where(lw, cond, CV(0) if x.offset is None else x.offset, CV(0) if y.offset is None else y.offset, node)
    return Ptr(x.array, offset, x.elem)


def _keep_loaded(lw, sources, out: Ref) -> None:
    """`out` carries values loaded from a pointer (an index array if they end up in pointer offsets): of several,
    one whose values are floats (the pointer whose element type a retry must change)."""
    loaded = [v for v in sources if isinstance(v, Ref) and v.name in lw.loaded]
    if loaded:
        floats = [v for v in loaded if lw.b.is_float(v.ty.dtype)]
        lw.loaded[out.name] = lw.loaded[(floats or loaded)[0].name]


def tl_where(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("condition", "x", "y"), node, "where", 3)
    return where(lw, b["condition"], b["x"], b["y"], node)


def math_fn(lw, fn: str, args, kwargs, node) -> Ref:
    if len(args) + len(kwargs) != 1:
        raise lw.fail(node, f"{fn} takes one argument", fn)
    x = args[0] if args else next(iter(kwargs.values()))
    if isinstance(x, CV) and isinstance(x.value, (int, float, Sym, DimOp)) and not isinstance(x.value, bool):
        # Triton makes a constant a 0-d tensor (fp32 / int32) and computes on it as on any tensor
        x = materialize_int(lw, x, node) if isinstance(x.value, (Sym, DimOp)) else \
            lw.b.to_tile(lw.atom(x, node, None), lit_dtype(x.value), (), lw.loc(node))
    x = _tile(lw, x, node, f"tl.{fn}")
    if fn in FLOAT_ONLY and not lw.b.is_float(x.ty.dtype):
        x = lw.b.cast(x, "f32", lw.loc(node))
    rounding = "approx" if fn == "exp" and x.ty.dtype == "f32" else None  # Triton: ex2.approx.f32(x * log2e)
    return lw.b.value(OpKind.UNARY, (x,), x.ty, lw.loc(node), hint=fn, fn=fn, rounding=rounding, ftz=None)


def sigmoid(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x",), node, "sigmoid", 1)
    x = _tile(lw, b["x"], node, "tl.sigmoid")
    e = math_fn(lw, "exp", [unary(lw, "USub", x, node)], {}, node)
    return binary(lw, "/", CV(1.0), binary(lw, "+", CV(1.0), e, node), node)


def trunc(lw, args, kwargs, node) -> Ref:
    """libdevice.trunc: toward zero (the model has floor and ceil)."""
    b = _bind(lw, args, kwargs, ("x",), node, "trunc", 1)
    x = math_fn(lw, "floor", [b["x"]], {}, node)  # the float tile of the argument, floored
    ceil = math_fn(lw, "ceil", [b["x"]], {}, node)
    return where(lw, compare(lw, "<", b["x"], CV(0.0), node), ceil, x, node)


def round_away(lw, args, kwargs, node) -> Ref:
    """libdevice.round: to the nearest integer, halves away from zero: trunc(x) moved one away from zero
    where |x - trunc(x)| >= 0.5 (the difference is exact in floating point)."""
    b = _bind(lw, args, kwargs, ("x",), node, "round", 1)
    t = trunc(lw, [b["x"]], {}, node)
    x = lw.b.cast(_tile(lw, b["x"], node, "round"), t.ty.dtype, lw.loc(node))
    away = where(lw, compare(lw, "<", x, CV(0.0), node), binary(lw, "-", t, CV(1.0), node),
                 binary(lw, "+", t, CV(1.0), node), node)
    half = compare(lw, ">=", math_fn(lw, "abs", [binary(lw, "-", x, t, node)], {}, node), CV(0.5), node)
    return where(lw, half, away, t, node)


def two(name):
    def handler(lw, args, kwargs, node):
        b = _bind(lw, args, kwargs, ("x", "y", "propagate_nan"), node, name, 2)
        return binary(lw, name[:3], b["x"], b["y"], node)
    return handler


def clamp(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "min", "max", "propagate_nan"), node, "clamp", 3)
    return binary(lw, "min", binary(lw, "max", b["x"], b["min"], node), b["max"], node)


def fma(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "y", "z"), node, "fma", 3)
    return binary(lw, "+", binary(lw, "*", b["x"], b["y"], node), b["z"], node)


def fdiv(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "y", "ieee_rounding"), node, "fdiv", 2)
    ieee = "ieee_rounding" in b and lw.compile_time(b["ieee_rounding"], node, "ieee_rounding") is True
    return binary(lw, "/", b["x"], b["y"], node, ieee=ieee)


def div_rn(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "y"), node, "div_rn", 2)
    return binary(lw, "/", b["x"], b["y"], node, ieee=True)


# ---------------------------------------------------------------- operators

# `.to(dtype, fp_downcast_rounding=..)`: Triton's rounding of a float narrowing, by the model's rounding modes
DOWNCAST_ROUNDING = {None: None, "rtne": None, "rtz": "zero"}
_BITS = {"bool": 1, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "f16": 16, "bf16": 16, "i32": 32, "u32": 32, "f32": 32,
         "i64": 64, "u64": 64, "f64": 64}


def bitcast(lw, x, dtype: str, node) -> Any:
    """`.to(dtype, bitcast=True)`: the same bits as `dtype` (of the same width, in every dtype configuration)."""
    if not isinstance(x, Ref):
        raise lw.fail(node, f"bitcast of {lw.describe(x)} is not supported", ".to")

    def same_width(src, dst):
        return dst if "bool" not in (src, dst) and _BITS.get(src) == _BITS.get(dst) else None
    lw.b.dspace.lift(same_width, x.ty.dtype, dtype, what=".to(bitcast=True): the bit widths differ (or a bool)",
                     loc=lw.loc(node))
    if x.ty.dtype == dtype:
        return x
    t = _tile(lw, x, node, ".to(bitcast=True)")
    out = lw.b.value(OpKind.BITCAST, (t,), TileT(dtype, t.ty.shape), lw.loc(node), hint=f"{x.name}_bits")
    return out if isinstance(x.ty, TileT) else lw.b.value(OpKind.SCALAR_OF, (out,), ScalarT(dtype), lw.loc(node),
                                                           hint=f"{x.name}_bits")


def to(lw, x, dtype: str, node, rounding: str | None = None) -> Any:
    if isinstance(x, CV):
        return x
    if not isinstance(x, Ref):
        raise lw.fail(node, f".to() on {lw.describe(x)} is not supported", ".to")
    if dtype == "bool":
        return x if x.ty.dtype == "bool" else compare(lw, "!=", x, CV(0), node)
    if x.ty.dtype == "bool":  # the model has no bool casts: select 1 or 0
        return where(lw, x, CV(1.0 if lw.b.is_float(dtype) else 1), CV(0.0 if lw.b.is_float(dtype) else 0), node) \
            if dtype == "f32" or dtype == "i32" else to(lw, where(lw, x, CV(1), CV(0), node), dtype, node)
    narrowing = rounding and lw.b.is_float(x.ty.dtype) and lw.b.is_float(dtype) and x.ty.dtype != dtype
    out = lw.b.cast(x, dtype, lw.loc(node), rounding if narrowing else None)
    if out is not x and x.name in lw.poly and dtype in ("i32", "i64"):
        lw.poly[out.name] = lw.poly[x.name]  # integer widening keeps the value (indices are in range)
        if isinstance(out.ty, ScalarT):
            lw.factors[("v", out.name)] = out
    if x.name in lw.loaded and not lw.b.is_float(dtype):  # made a float on purpose: not an integer array's
        lw.loaded[out.name] = lw.loaded[x.name]
    return out


def dynamic(lw, *values) -> bool:
    """Constexprs among `values` with no known values, whose tests run at run time (they stay const generics)."""
    names = set().union(*(sym_names(v.value) for v in values if isinstance(v, CV)))
    return bool(names) and names <= lw.dynamic


def at_run_time(lw, v, node):
    """A symbolic constexpr value as a runtime i32 scalar (others as they are)."""
    if not (isinstance(v, CV) and isinstance(v.value, (Sym, DimOp))):
        return v
    out = materialize_int(lw, v, node)
    lw.static.add(out.name)
    return out


def _as_double(lw, v: CV, node):
    """A symbolic constexpr operand of float arithmetic as a static f64 scalar (Triton folds the expression
    in double precision); numbers stay constants."""
    if not isinstance(v.value, (Sym, DimOp)):
        return v
    out = lw.b.cast(materialize_int(lw, v, node), "f64", lw.loc(node))
    lw.static.add(out.name)
    return out


def materialize_int(lw, v: CV, node) -> Ref:
    atom = lw.atom(v, node, "i32")
    out = lw.b.value(OpKind.SCALAR, (atom,), ScalarT(atom.ty.dtype if isinstance(atom, Lit) else "i32"), lw.loc(node),
                     hint="c")
    p = lw.poly_of(v)
    if p is not None:
        lw.poly[out.name] = p
    return out


def _fold(lw, op: str, a: CV, b: CV, node) -> CV:
    x, y = a.value, b.value
    symbolic = isinstance(x, (Sym, DimOp)) or isinstance(y, (Sym, DimOp))
    dims = all(type(v) is int or isinstance(v, (Sym, DimOp)) for v in (x, y))
    if symbolic and dims and op in ("+", "-", "*", "//", "%"):
        return CV(T.dim_op(op, x, y))
    if symbolic:
        raise NeedsSpecialization(frozenset(sym_names(x) | sym_names(y)), f"`{op}` on constexprs", lw.loc(node))
    try:
        return CV(_PY[op](x, y))
    except (TypeError, ZeroDivisionError, OverflowError, ValueError) as e:
        raise lw.fail(node, f"constant expression fails: {e}", "constant") from None


_PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
       "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "&": lambda a, b: a & b,
       "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
       "min": min, "max": max, "cdiv": lambda a, b: -(-a // b)}


# A Python value of each dtype kind: what a runtime value Triton knows at compile time stands for in promotion.
_STATIC_SAMPLE = {"bool": True, "f32": 0.5}


def _as_constant(lw, v, other):
    """A runtime value that is a constant for Triton (`lw.static`) promotes as a Python number next to a value
    that is not (a Python number adopts the tile's dtype): for promotion it is a sample of its kind."""
    if isinstance(v, Ref) and v.name in lw.static and isinstance(other, Ref) and other.name not in lw.static:
        return CV(_STATIC_SAMPLE.get(v.ty.dtype, 1))
    return v


def _operand_dtype(lw, a, b, node, what):
    loc = lw.loc(node)
    a, b = _as_constant(lw, a, b), _as_constant(lw, b, a)
    da = a.ty.dtype if isinstance(a, Ref) else None
    db = b.ty.dtype if isinstance(b, Ref) else None
    if da is not None and db is not None:
        return lw.b.promote(da, db, loc, what)
    if da is None and db is None:
        vals = [v.value for v in (a, b) if isinstance(v, CV)]
        return "f32" if any(isinstance(v, float) for v in vals) else "i32"
    strong, weak = (da, b) if da is not None else (db, a)
    if not isinstance(weak, CV):
        raise lw.fail(node, f"{what}: unsupported operand {lw.describe(weak)}", "operand")
    if isinstance(weak.value, (Sym, DimOp)):
        return strong
    return weak_result_dtype(lw.b, strong, weak.value)


def _operand_atom(lw, v, dtype, node):
    if isinstance(v, CV) and isinstance(v.value, (Sym, DimOp)):
        return materialize_int(lw, v, node)
    if isinstance(v, Ref) and v.ty.dtype == "bool" and dtype != "bool":
        return to(lw, v, dtype, node)  # bool -> number: the model has no such cast, `to` selects 1 or 0
    if isinstance(v, Ref):
        return v
    return lw.atom(v, node, dtype)


def _check(lw, op, vals, node):
    for v in vals:
        if not (isinstance(v, CV) or (isinstance(v, Ref) and isinstance(v.ty, (ScalarT, TileT)))):
            raise lw.fail(node, f"operator {op} on {lw.describe(v)} is not supported", "operator")


def binary(lw, op: str, a: Any, b: Any, node, ieee: bool = False) -> Any:
    """`a op b` as Triton computes it (f32 tile `/` is div.full.f32 unless `ieee`: tl.div_rn, fdiv(.., True))."""
    if isinstance(a, Ptr) and op in ("+", "-"):
        return M.ptr_add(lw, a, b, node, negate=op == "-")
    if isinstance(b, Ptr) and op == "+":
        return M.ptr_add(lw, b, a, node)
    _check(lw, op, (a, b), node)
    if isinstance(a, CV) and isinstance(b, CV):
        symbolic = any(isinstance(v.value, (Sym, DimOp)) for v in (a, b))
        floats = any(isinstance(v.value, float) for v in (a, b))
        at_run = op in ("/", "**", "min", "max", "cdiv") or op not in ("+", "-", "*", "//", "%") and dynamic(lw, a, b)
        if not (symbolic and (at_run or floats)):
            return _fold(lw, op, a, b, node)
        if floats:  # `0.5 * (BC - 1)`: Triton's constant is a Python float (a double), rounded once where used
            a, b = (_as_double(lw, v, node) for v in (a, b))
        a = materialize_int(lw, a, node) if isinstance(a, CV) and isinstance(a.value, (Sym, DimOp)) else a
        b = materialize_int(lw, b, node) if isinstance(b, CV) and isinstance(b.value, (Sym, DimOp)) else b
    loc = lw.loc(node)
    _float_scalar_params(lw, a, b)
    dtype = _operand_dtype(lw, a, b, node, f"operator {op}")
    if op == "/" and not lw.b.is_float(dtype):
        dtype = "f32"
    if dtype == "bool" and op in BOOL_ARITHMETIC:  # i1 arithmetic wraps: a product is `and`, a sum `xor`
        return binary(lw, BOOL_ARITHMETIC[op], a, b, node)
    if op == "**" and not lw.b.is_float(dtype):
        return int_power(lw, a, b, node)
    if op in ("&", "|", "^", "<<", ">>") and not all(T.is_int(v) or v == "bool" and op not in ("<<", ">>")
                                                     for v in lw.b.dspace.values(dtype)):
        _assumed_float_holds_ints(lw, a, b)
        raise lw.fail(node, f"operator {op} on {dtype} (Triton takes integers)", "dtype")
    if op in ("%", "//") and lw.b.is_float(dtype) and any(
            isinstance(v, CV) and type(v.value) is int or isinstance(v, Ref) and T.is_int(str(v.ty.dtype))
            for v in (a, b)):
        _assumed_float_holds_ints(lw, a, b)  # an index split into parts (`pos % BLOCK`)
    tiles = [v for v in (a, b) if isinstance(v, Ref) and isinstance(v.ty, TileT)]
    x, y = _operand_atom(lw, a, dtype, node), _operand_atom(lw, b, dtype, node)
    if tiles:
        shape = lw.b.broadcast_shape(*(v.ty.shape if isinstance(v, Ref) and isinstance(v.ty, TileT) else ()
                                       for v in (a, b)), loc)
        x, y = (lw.b.to_tile(v, dtype, shape, loc) for v in (x, y))
        ty = TileT(dtype, shape)
    else:
        x, y = (lw.b.cast(v, dtype, loc) if isinstance(v, Ref) else v for v in (x, y))
        ty = ScalarT(dtype)
    name = OP_NAMES[op]
    if op == "//" and lw.b.is_float(dtype):  # Triton: floor(a / b) for floats
        if not isinstance(ty, TileT):
            _fail_scalar(lw, node, "//")
        q = lw.b.value(OpKind.BINARY, (x, y), ty, loc, hint="quot", op="div", rounding=None, ftz=None, nan=None)
        out = lw.b.value(OpKind.UNARY, (q,), ty, loc, hint="fl", fn="floor", rounding=None, ftz=None)
        _keep_loaded(lw, (a, b), out)  # a loaded count divided: still an integer array's values
        return out
    if op in ("//", "%") and not lw.b.is_float(dtype):
        note = ("integer // and % on scalars round toward -inf (Python) and // on tiles too; Triton truncates "
                "toward zero: results differ for negative operands")
        if note not in lw.notes:
            lw.notes.append(note)
    if isinstance(ty, ScalarT) and (op in ("<<", ">>") or op in ("//", "%") and dtype in ("i64", "u64", "u32")):
        # the model's scalar // and % are i32 only, and it shifts tiles only: these run on 0-d tiles
        tx, ty0 = (lw.b.value(OpKind.TILE0, (v,), TileT(dtype, ()), loc, hint="t") for v in (x, y))
        t = lw.b.value(OpKind.BINARY, (tx, ty0), TileT(dtype, ()), loc, hint="q",
                       op={"//": "floordiv", "%": "rem"}.get(op, OP_NAMES[op]), rounding=None, ftz=None, nan=None)
        return lw.b.value(OpKind.SCALAR_OF, (t,), ty, loc, hint="q")
    if op == "%" and isinstance(ty, TileT):
        if lw.b.is_float(dtype):  # Triton: a - floor(a / b) * b (the sign of b, as Python's)
            return binary(lw, "-", a, binary(lw, "*", binary(lw, "//", a, b, node), b, node), node)
        name = "rem"  # Triton's % on integers is C's remainder (remi)
    full = name == "div" and dtype == "f32" and isinstance(ty, TileT) and not ieee
    out = lw.b.value(OpKind.BINARY, (x, y), ty, loc, hint={"+": "sum", "-": "diff", "*": "prod"}.get(op, "v"),
                     op=name, rounding="full" if full else None, ftz=None, nan=None)
    _affine(lw, op, a, b, out)
    _keep_loaded(lw, (a, b), out)
    if all(isinstance(v, CV) or v.name in lw.static for v in (a, b)):
        lw.static.add(out.name)  # arithmetic on constexprs is a constant for Triton
    if op in ("&",) and dtype == "bool":
        ba, bb = (lw.bounds.get(v.name) if isinstance(v, Ref) else None for v in (a, b))
        if ba is not None and bb is not None:
            lw.bounds[out.name] = ba + bb
        elif implied := [bd for v in (a, b) for bd in _implied_bounds(lw, v)]:
            lw.implied[out.name] = implied  # a bounds check and more (`in_bounds & ~future`)
    return out


def _implied_bounds(lw, v) -> list:
    """The bounds a boolean operand of `&` implies: all of a bounds mask, the bounds part of a mixed one."""
    if not isinstance(v, Ref):
        return []
    return lw.bounds.get(v.name, lw.implied.get(v.name, []))


def int_power(lw, a, b, node) -> Any:
    """Integer `a ** b`: by a constant exponent, repeated squaring (products wrap as Triton's do); a power of
    two with an integer exponent, `1 << b` times the rest. Else a located diagnostic."""
    if isinstance(b, CV) and type(b.value) is int and 0 <= b.value <= MAX_POWER:
        out, base, e = None, a, b.value
        while e:
            if e & 1:
                out = base if out is None else binary(lw, "*", out, base, node)
            e >>= 1
            if e:
                base = binary(lw, "*", base, base, node)
        return CV(1) if out is None else out
    if isinstance(a, CV) and type(a.value) is int and a.value > 0 and a.value & (a.value - 1) == 0:
        log2 = a.value.bit_length() - 1
        return binary(lw, "<<", CV(1), b if log2 == 1 else binary(lw, "*", b, CV(log2), node), node)
    if isinstance(b, CV) and isinstance(b.value, (Sym, DimOp)):
        raise NeedsSpecialization(frozenset(sym_names(b.value)), "integer ** by a constexpr", lw.loc(node))
    raise lw.fail(node, "integer ** by a runtime exponent (other than a power of two's) has no lowering",
                  "operator", f"write the product, or a constant exponent up to {MAX_POWER}")


def _assumed_float_holds_ints(lw, *values) -> None:
    """Values loaded through a pointer whose float element type is only assumed, used as integers: the pointer
    holds integers (the kernel is lowered again with it i32)."""
    for v in values:
        if isinstance(v, Ref) and lw.loaded.get(v.name) in lw.default_float:
            raise Retry("bits", lw.loaded[v.name])


def _float_scalar_params(lw, a, b) -> None:
    """A scalar parameter assumed i32 that meets a float tile is a Python float (Triton passes it as f32)."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Ref) and x.name in lw.maybe_float and isinstance(y, Ref) and isinstance(y.ty, TileT) \
                and lw.b.is_float(y.ty.dtype):
            raise Retry("float", next(p.name for p in lw.params if p.ident == x.name))


def _fail_scalar(lw, node, op):
    raise lw.fail(node, f"float {op} on scalars has no lowering in tileport's kernel model yet", "operator")


OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow",
            "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "min": "min", "max": "max", "cdiv": "cdiv",
            "maximum": "max", "minimum": "min"}
MAX_POWER = 64  # integer ** by a constant exponent: repeated squaring up to this exponent
BOOL_ARITHMETIC = {"*": "&", "+": "^", "-": "^"}


def _affine(lw, op: str, a, b, out: Ref) -> None:
    if op not in ("+", "-", "*") or out.ty.dtype not in ("i32", "i64"):
        return
    pa, pb = lw.poly_of(a), lw.poly_of(b)
    if pa is None or pb is None:
        return
    p = A.add(pa, pb) if op == "+" else A.sub(pa, pb) if op == "-" else A.mul(pa, pb)
    if isinstance(out.ty, ScalarT) and any(A.aranges(p)):
        return
    lw.poly[out.name] = p


def compare(lw, op: str, a, b, node) -> Any:
    if isinstance(a, DT) and isinstance(b, DT) and op in ("==", "!="):
        va, vb = lw.b.dspace.values(a.dtype) if isinstance(a.dtype, str) or hasattr(a.dtype, "name") else (), \
            lw.b.dspace.values(b.dtype) if isinstance(b.dtype, str) or hasattr(b.dtype, "name") else ()
        if len(va) == 1 or len(vb) == 1:  # a concrete dtype against each configuration's
            va, vb = va * len(vb) if len(va) == 1 else va, vb * len(va) if len(vb) == 1 else vb
        answers = {(x == y) == (op == "==") for x, y in zip(va, vb)}
        if len(answers) == 1:
            return CV(answers.pop())
        raise lw.fail(node, "a dtype comparison whose answer differs between the element types in use", "dtype",
                      "translate one dtype configuration at a time")
    _check(lw, op, (a, b), node)
    if isinstance(a, CV) and isinstance(b, CV) and dynamic(lw, a, b):
        a, b = at_run_time(lw, a, node), at_run_time(lw, b, node)
    if isinstance(a, CV) and isinstance(b, CV):
        if isinstance(a.value, (Sym, DimOp)) or isinstance(b.value, (Sym, DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)),
                                      "a comparison of constexprs", lw.loc(node))
        import operator as pyop
        fn = {"<": pyop.lt, "<=": pyop.le, ">": pyop.gt, ">=": pyop.ge, "==": pyop.eq, "!=": pyop.ne}[op]
        try:
            return CV(fn(a.value, b.value))
        except TypeError:
            raise lw.fail(node, f"cannot compare {a.value!r} and {b.value!r}", "comparison") from None
    loc = lw.loc(node)
    dtype = _operand_dtype(lw, a, b, node, f"comparison {op}")
    x, y = _operand_atom(lw, a, dtype, node), _operand_atom(lw, b, dtype, node)
    tiles = [v for v in (a, b) if isinstance(v, Ref) and isinstance(v.ty, TileT)]
    if tiles:
        shape = lw.b.broadcast_shape(*(v.ty.shape if isinstance(v, Ref) and isinstance(v.ty, TileT) else ()
                                       for v in (a, b)), loc)
        x, y = (lw.b.to_tile(v, dtype, shape, loc) for v in (x, y))
        out = lw.b.value(OpKind.COMPARE, (x, y), TileT("bool", shape), loc, hint="mask", op=op)
    else:
        x, y = (lw.b.cast(v, dtype, loc) if isinstance(v, Ref) else v for v in (x, y))
        out = lw.b.value(OpKind.COMPARE, (x, y), ScalarT("bool"), loc, hint="cond", op=op)
        if all(isinstance(v, CV) or v.name in lw.static for v in (a, b)):
            lw.static.add(out.name)  # a test of constexprs: Triton folds it
        return out
    lhs, rhs = (a, b) if op == "<" else (b, a) if op == ">" else (None, None)
    if lhs is not None:
        pl, pr = lw.poly_of(lhs), lw.poly_of(rhs)
        bound = A.bound_of(pl, pr) if pl is not None and pr is not None else None
        if bound is not None:
            lw.bounds[out.name] = [bound]
    return out


def unary(lw, op: str, x, node) -> Any:
    if op == "UAdd":
        return x
    if isinstance(x, CV):
        v = x.value
        if op == "USub" and isinstance(v, (Sym, DimOp)):
            return CV(T.dim_op("-", 0, v))
        if isinstance(v, (Sym, DimOp)) and op == "Not" and dynamic(lw, x):
            return compare(lw, "==", at_run_time(lw, x, node), CV(0), node)
        if isinstance(v, (Sym, DimOp)):  # `not FLAG` has no value before FLAG's (Python's truth of a Sym lies)
            raise NeedsSpecialization(frozenset(sym_names(v)), f"operator {op} on a constexpr", lw.loc(node))
        try:
            return CV({"USub": lambda: -v, "Not": lambda: not v, "Invert": lambda: ~v}[op]())
        except TypeError:
            raise lw.fail(node, f"operator {op} on {v!r}", "operator") from None
    if not isinstance(x, Ref):
        raise lw.fail(node, f"operator {op} on {lw.describe(x)} is not supported", "operator")
    loc = lw.loc(node)
    if op == "USub":
        if isinstance(x.ty, TileT):
            out = lw.b.value(OpKind.UNARY, (x,), x.ty, loc, hint="neg", fn="negative", rounding=None, ftz=None)
        else:  # cutile-rs negates runtime scalars only as `0 - x`
            zero = Lit(0.0 if lw.b.is_float(x.ty.dtype) else 0, ScalarT(x.ty.dtype))
            out = lw.b.value(OpKind.BINARY, (zero, x), x.ty, loc, hint="neg", op="sub", rounding=None, ftz=None,
                             nan=None)
        if x.name in lw.poly:
            lw.poly[out.name] = A.scale(lw.poly[x.name], -1)
        return out
    if op in ("Not", "Invert") and x.ty.dtype == "bool":
        t = lw.b.to_tile(Lit(True, ScalarT("bool")), "bool", tuple(x.ty.shape), loc) \
            if isinstance(x.ty, TileT) else Lit(True, ScalarT("bool"))
        return lw.b.value(OpKind.BINARY, (x, t), x.ty, loc, hint="not", op="xor", rounding=None, ftz=None, nan=None)
    if op == "Not":  # Python's truth of a number
        return compare(lw, "==", x, CV(0), node)
    if op == "Invert" and isinstance(x.ty, TileT):
        ones = lw.b.to_tile(Lit(-1, ScalarT(x.ty.dtype)), x.ty.dtype, tuple(x.ty.shape), loc)
        return lw.b.value(OpKind.BINARY, (x, ones), x.ty, loc, hint="inv", op="xor", rounding=None, ftz=None, nan=None)
    if op == "Invert" and T.is_int(str(x.ty.dtype)):  # an integer scalar: on a 0-d tile (the model's bitwise ops)
        t = unary(lw, op, lw.b.value(OpKind.TILE0, (x,), TileT(x.ty.dtype, ()), loc, hint="t"), node)
        return lw.b.value(OpKind.SCALAR_OF, (t,), x.ty, loc, hint="inv")
    raise lw.fail(node, f"operator {op} on {x.ty} is not supported", "operator")
