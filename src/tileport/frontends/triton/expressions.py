"""The Triton kernel visitor's expressions: one `expr_<Node>` method per Python expression (`tl.*` calls,
attributes and operators are typed by `calls`), and atoms with their affine forms (`affine.py`).
"""

from __future__ import annotations

import ast
import math
from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import affine as A
from tileport.frontends.triton.values import (CV, DT, BlockPtr, Descriptor, Helper, Method, Module, Ptr, Retry,
                                              SourceModule)
from tileport.model.ir import Atom, CDim, Lit, Loc, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import DimOp, ScalarT, Sym, TileT

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow",
            "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "min": "min", "max": "max", "cdiv": "cdiv"}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class ExpressionMixin:
    """`expr_<Node>` methods of `TritonLowerer`, atoms and polynomial forms of integer values."""

    # ---- expressions
    def expr(self, node: ast.expr) -> Any:
        handler = getattr(self, f"expr_{type(node).__name__}", None)
        if handler is None:
            raise self.fail(node, f"`{type(node).__name__}` expressions are not supported in Triton kernels",
                            type(node).__name__)
        return handler(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (int, float, bool, str)) or node.value is None:
            return CV(node.value)
        raise self.fail(node, f"constant {node.value!r} is not supported", "constant")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if isinstance(base, SourceModule):
            return self.module_attribute(base, node.attr, node)
        return self.calls.attribute(self, base, node.attr, node)

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        return self.calls.subscript(self, self.expr(node.value), node)

    def expr_Call(self, node: ast.Call) -> Any:
        f = self.expr(node.func)
        if isinstance(f, Helper):
            return self.inline(f.node, node, f.module)
        if isinstance(f, Method) and isinstance(f.obj, Module) and f.name in self.calls.NO_OP:
            return CV(None)  # asserts and prints: their arguments are not computed either
        if isinstance(f, Method) and isinstance(f.obj, Module) and f.name in self.calls.UNSUPPORTED:
            return self.calls.tl_call(self, f.name, [], {}, node, f.obj.name)  # its diagnostic, before the args'
        args = [self.expr(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.fail(node, "*args / **kwargs in calls are not supported", "call")
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        return self.calls.call(self, f, args, kwargs, node)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")
        return self.calls.binary(self, op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        return self.calls.unary(self, type(node.op).__name__, self.expr(node.operand), node)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and`/`or` as a truth: a known operand that decides it (`False and ..`) is the answer, one that does not
        drops out; the others are tested (`!= 0`) and combined with `&` / `|`."""
        is_and = isinstance(node.op, ast.And)
        values = [(self.expr(v), v) for v in node.values]  # every operand, as Triton does (no short circuit)
        out = None
        for x, v in values:
            if isinstance(x, CV) and not isinstance(x.value, (Sym, DimOp)):
                if bool(x.value) != is_and:
                    return CV(not is_and)
                continue
            if isinstance(x, Ref) and x.ty.dtype != "bool":
                x = self.calls.compare(self, "!=", x, CV(0), v)
            out = x if out is None else self.calls.binary(self, "&" if is_and else "|", out, x, node)
        return CV(is_and) if out is None else out

    def expr_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.fail(node, "chained comparisons are not supported", "comparison", "split with &")
        op = CMPOPS.get(type(node.ops[0]))
        if op is None:
            if isinstance(node.ops[0], (ast.Is, ast.IsNot)):
                a, b = self.expr(node.left), self.expr(node.comparators[0])
                if isinstance(a, CV) and isinstance(b, CV):
                    return CV((a.value is b.value) == isinstance(node.ops[0], ast.Is))
                if isinstance(b, CV) and b.value is None and isinstance(a, (Ref, Ptr)):
                    return CV(not isinstance(node.ops[0], ast.Is))  # a given argument is not None
            raise self.fail(node, f"comparison {type(node.ops[0]).__name__} is not supported", "comparison")
        return self.calls.compare(self, op, self.expr(node.left), self.expr(node.comparators[0]), node)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, DimOp)):
            return self.expr(node.body if cond.value else node.orelse)
        if isinstance(cond, CV) and not self.calls.dynamic(self, cond):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "a conditional expression on a constexpr",
                                      self.loc(node))
        return self.calls.where(self, cond, self.expr(node.body), self.expr(node.orelse), node)

    def expr_JoinedStr(self, node: ast.JoinedStr) -> Any:
        return CV("")  # messages of static/device asserts

    # ---- atoms and affine forms
    def track_scalar(self, ref: Ref) -> None:
        if isinstance(ref.ty, ScalarT) and ref.ty.dtype in ("i32", "i64"):
            self.factors[("v", ref.name)] = ref
            self.poly[ref.name] = A.factor(("v", ref.name))

    def poly_of(self, v: Any) -> A.Poly | None:
        if isinstance(v, CV):
            if isinstance(v.value, bool) or not isinstance(v.value, (int, Sym, DimOp)):
                return None
            return A.dim_poly(v.value)
        if isinstance(v, Ref):
            if v.name not in self.poly and _int_scalar(v):
                self.factors[("v", v.name)] = v  # an opaque integer (pid % n, a loaded index): one factor
                self.poly[v.name] = A.factor(("v", v.name))
            return self.poly.get(v.name)
        return None

    def atom_poly(self, a: Atom) -> A.Poly | None:
        if isinstance(a, CDim):
            return A.dim_poly(a.dim)
        if isinstance(a, Lit):
            return A.const(a.value) if type(a.value) is int else None
        return self.poly.get(a.name)

    def poly_atom(self, p: A.Poly, node: ast.AST) -> Atom:
        """An i32 scalar computing `p` (a tile index)."""
        loc = self.loc(node)
        total: Atom | None = None
        for m, c in sorted(p.items(), key=repr):
            term: Atom | None = None if c == 1 and m else Lit(c, ScalarT("i32"))
            for f in m:
                if f[0] == "v":
                    x: Atom = self.factors[f]
                    if isinstance(x.ty, TileT):
                        x = self.b.value(OpKind.SCALAR_OF, (x,), ScalarT(x.ty.dtype), loc, hint="idx")
                    x = self.b.cast(x, "i32", loc)
                elif f[0] == "c":
                    x = CDim(Sym(f[1]))
                elif f[0] == "d":
                    x = CDim(f[1])
                else:
                    raise self.fail(node, "internal: an arange in a tile index", "internal")
                term = x if term is None else self.scalar_op("mul", term, x, loc)
            total = term if total is None else self.scalar_op("add", total, term, loc)
        return total if total is not None else Lit(0, ScalarT("i32"))

    def scalar_value(self, atom: Atom, ty: ScalarT, loc: Loc, hint: str) -> Ref:
        """A scalar variable holding `atom`; an infinite or NaN literal goes through a 0-d constant tile
        (cutile-rs takes `f32::INFINITY` only as an operand of a tile constant)."""
        if isinstance(atom, Lit) and isinstance(atom.value, float) and not math.isfinite(atom.value):
            t = self.b.to_tile(Lit(atom.value, ty), ty.dtype, (), loc)
            return self.b.value(OpKind.SCALAR_OF, (t,), ty, loc, hint=hint)
        return self.b.value(OpKind.SCALAR, (atom,), ty, loc, hint=hint)

    def scalar_op(self, op: str, a: Atom, b: Atom, loc: Loc) -> Ref:
        if isinstance(a, CDim) and isinstance(b, CDim):
            a = self.b.value(OpKind.SCALAR, (a,), ScalarT("i32"), loc, hint="c")
        return self.b.value(OpKind.BINARY, (a, b), ScalarT("i32"), loc, hint="idx", op=op, rounding=None, ftz=None,
                            nan=None)

    def atom(self, v: Any, node: ast.AST, dtype) -> Atom:
        """A scalar operand: a Ref, a literal of `dtype` (or its own type), or a constexpr dimension."""
        if isinstance(v, Ref):
            return v
        if isinstance(v, CV):
            x = v.value
            if isinstance(x, (Sym, DimOp)):
                return CDim(x)
            if isinstance(x, bool):
                return Lit(x, ScalarT("bool"))
            if isinstance(x, int):
                if not -2**63 <= x < 2**64:
                    raise self.fail(node, f"integer constant {x} is out of range", "literal")
                if dtype is not None and self.b.is_float(dtype):
                    return Lit(float(x), ScalarT(dtype))
                return Lit(x, ScalarT(dtype if dtype is not None else ("i32" if -2**31 <= x < 2**31 else "i64")))
            if isinstance(x, float):
                return Lit(x, ScalarT(dtype if dtype is not None and self.b.is_float(dtype) else "f32"))
        raise self.fail(node, f"expected a number, got {describe(v)}", "operand")

    def int_atom(self, v: Any, node: ast.AST) -> Atom:
        if isinstance(v, Ref) and v.name in self.loaded and self.b.is_float(v.ty.dtype):
            raise Retry("index", self.loaded[v.name])  # a loaded count or offset: an integer array
        if isinstance(v, Ref) and isinstance(v.ty, ScalarT) and v.ty.dtype in ("i32", "i64", "i16", "i8"):
            return v if v.ty.dtype == "i32" else self.b.cast(v, "i32", self.loc(node))
        if isinstance(v, Ref) and isinstance(v.ty, TileT) and v.ty.rank == 0:
            s = self.b.value(OpKind.SCALAR_OF, (v,), ScalarT(v.ty.dtype), self.loc(node), hint="n")
            return self.int_atom(s, node)
        if isinstance(v, CV) and (type(v.value) is int or isinstance(v.value, (Sym, DimOp))):
            return self.atom(v, node, "i32")
        raise self.fail(node, f"expected an integer, got {describe(v)}", "integer")

    def compile_time(self, v: Any, node: ast.AST, what: str) -> Any:
        if not isinstance(v, CV):
            raise self.fail(node, f"{what} must be a compile-time constant (tl.constexpr)", "constexpr")
        return v.value


def _int_scalar(v: Ref) -> bool:
    return (isinstance(v.ty, ScalarT) or (isinstance(v.ty, TileT) and v.ty.rank == 0)) and \
        v.ty.dtype in ("i32", "i64", "i16", "i8")


def describe(v: Any) -> str:
    if isinstance(v, Ref):
        return str(v.ty)
    if isinstance(v, CV):
        return f"constant {v.value!r}"
    if isinstance(v, Ptr):
        return f"a pointer into `{v.array.name}`"
    if isinstance(v, BlockPtr):
        return f"a block pointer into `{v.array.array.name}`"
    if isinstance(v, Descriptor):
        return f"a tensor descriptor of `{v.array.array.name}`"
    if isinstance(v, DT):
        return f"dtype {v.dtype}"
    if isinstance(v, tuple):
        return "a tuple"
    return type(v).__name__
