"""Arithmetic: operators, comparisons, casts, math functions, `ct.where` and tile factories
(`ct.arange`, `ct.full`, ...), with cuTile Python's promotion and constant folding.
"""

from __future__ import annotations

from dataclasses import dataclass

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile.calls.base import (UNARY_MATH, _common_shape, _dtype, _kw, _mode_value, _modes, _shape,
                                                  _tile, _two, handler)
from tileport.frontends.cutile.calls.views import materialize
from tileport.frontends.cutile.values import CV, ConstFoldError, DTypeVal, Value, describe, fold
from tileport.model import types as T
from tileport.model.builder import lit_dtype, weak_result_dtype
from tileport.model.ir import Atom, CDim, Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, Sym, TileT


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
    if isinstance(value, CV) and isinstance(value.value, (int, float, bool)):  # checked against `dtype`, not i32
        return lw.b.value(OpKind.FULL, (_lit(lw, value, dtype, node),), TileT(dtype, shape), lw.loc(node), hint="c",
                          dtype=dtype, shape=shape)
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
