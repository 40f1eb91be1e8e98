"""The kernel visitor's expressions: one `expr_<Node>` method per Python expression (calls, attributes and
operators are typed by `calls`), and the conversions call handlers use.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile.control import _Scope
from tileport.frontends.cutile.values import BINOPS, CV, Helper, SourceModule, Value, describe
from tileport.model import types as T
from tileport.model.builder import lit_dtype
from tileport.model.ir import Atom, CDim, If, Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, Sym, TileT


class ExpressionMixin:
    """`expr_<Node>` methods of `KernelLowerer`, branches as values, and scalar/literal conversions."""

    # ---- expressions
    def expr(self, node: ast.expr) -> Value:
        handler = getattr(self, f"expr_{type(node).__name__}", None)
        if handler is None:
            raise self.fail(node, f"`{type(node).__name__}` expressions are not supported in kernels",
                            type(node).__name__)
        return handler(node)

    def expr_Constant(self, node: ast.Constant) -> Value:
        if node.value is None or isinstance(node.value, (int, float, bool, str)):
            return CV(node.value)
        raise self.fail(node, f"literal {node.value!r} is not supported", "literal")

    def expr_Name(self, node: ast.Name) -> Value:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Value:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Value:
        base = self.expr(node.value)
        if isinstance(base, SourceModule):
            return self.module_attribute(base, node.attr, node)
        return self.calls.attribute(self, base, node.attr, node)

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        return self.calls.subscript(self, self.expr(node.value), node)

    def expr_Call(self, node: ast.Call) -> Value:
        callee = self.expr(node.func)
        if isinstance(callee, Helper):
            return self.inline(callee.node, node, callee.module)
        args = [self.expr(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, "star-arguments are not supported", "call")
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.fail(node, "**kwargs are not supported", "call")
        return self.calls.call(self, callee, args, kwargs, node)

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")
        if op == "@":
            return self.calls.matmul(self, self.expr(node.left), self.expr(node.right), node)
        return self.binop(op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.expr(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if isinstance(v, CV):
                return self.calls.negate(self, v, node)
            return self.calls.unary_fn(self, "negative", v, {}, node)
        if isinstance(node.op, ast.Not):
            if isinstance(v, CV):
                if isinstance(v.value, (Sym, T.DimOp)):
                    raise NeedsSpecialization(frozenset(sym_names(v.value)), "`not` on a constant", self.loc(node))
                return CV(not v.value)
            return self.calls.logical_not(self, v, node)
        if isinstance(node.op, ast.Invert):
            if isinstance(v, CV) and isinstance(v.value, (Sym, T.DimOp)):
                raise NeedsSpecialization(frozenset(sym_names(v.value)), "`~` on a constant", self.loc(node))
            return self.calls.invert(self, v, node)
        raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        first = self.expr(node.values[0])
        rest = node.values[1] if len(node.values) == 2 else ast.copy_location(
            ast.BoolOp(node.op, node.values[1:]), node.values[1])
        if isinstance(first, Ref) and (isinstance(first.ty, ScalarT) or first.ty.rank == 0):
            return self.short_circuit(first, rest, node)
        if isinstance(first, CV) and not isinstance(first.value, (Sym, T.DimOp)):
            if bool(first.value) != isinstance(node.op, ast.And):
                return first  # `False and b`, `True or b`: b is not evaluated (cuTile folds the branch)
            second = self.expr(rest)
            if isinstance(second, Ref) and (isinstance(second.ty, ScalarT) or second.ty.rank == 0):
                return self.scalar_condition(second, rest)
            vals = [first, second]
        else:
            vals = [first, *(self.expr(v) for v in node.values[1:])]
        if all(isinstance(v, CV) and not isinstance(v.value, (Sym, T.DimOp)) for v in vals):
            out = vals[0].value
            for v in vals[1:]:
                out = (out and v.value) if isinstance(node.op, ast.And) else (out or v.value)
            return CV(out)
        op = "&" if isinstance(node.op, ast.And) else "|"
        acc = vals[0]
        for v in vals[1:]:
            acc = self.binop(op, acc, v, node)
        return acc

    def short_circuit(self, first: Ref, rest: ast.expr, node: ast.BoolOp) -> Ref:
        """`a and b` / `a or b` on a runtime scalar `a`, as cuTile evaluates it: `b` only in the branch that
        needs it (`if a { b } else { a }` / `if a { a } else { b }`), each side a bool."""
        cond = self.scalar_condition(first, node.values[0])

        def other() -> Value:
            v = self.expr(rest)
            if isinstance(v, CV) and not isinstance(v.value, (Sym, T.DimOp)):
                return CV(bool(v.value))
            if not (isinstance(v, Ref) and (isinstance(v.ty, ScalarT) or v.ty.rank == 0)):
                raise self.fail(rest, f"`{'and' if isinstance(node.op, ast.And) else 'or'}` takes scalar "
                                      f"conditions, got {describe(v)}", "condition")
            return self.scalar_condition(v, rest)
        arms = [(rest, other), (node.values[0], lambda: cond)]
        return self.branch_value(cond, arms if isinstance(node.op, ast.And) else arms[::-1], node)

    def expr_Compare(self, node: ast.Compare) -> Value:
        if len(node.ops) != 1:
            raise self.fail(node, "chained comparisons are not supported", "comparison",
                            "split into two comparisons joined with `and`")
        op = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}.get(type(node.ops[0]))
        if op is None:
            raise self.fail(node, f"comparison {type(node.ops[0]).__name__} is not supported", "comparison")
        return self.calls.compare(self, op, self.expr(node.left), self.expr(node.comparators[0]), node)

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        cond = self.expr(node.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, T.DimOp)):
            return self.expr(node.body if cond.value else node.orelse)
        if isinstance(cond, self.calls.DTypeCond):
            return self.calls.choose_dtype(self, cond, self.expr(node.body), self.expr(node.orelse), node)
        if isinstance(cond, Ref) and (isinstance(cond.ty, ScalarT) or cond.ty.rank == 0):
            return self.if_value(cond, node)  # a runtime scalar condition: cuTile branches (an `if` with a result)
        return self.calls.where(self, cond, self.expr(node.body), self.expr(node.orelse), node)

    def if_value(self, cond: Ref, node: ast.IfExp) -> Ref:
        """`a if c else b` on a runtime scalar `c`: each arm evaluated in its own branch, as cuTile does
        (`%r = if %c -> (type) { yield a } else { yield b }`); the value type is the arms' common type."""
        cond = self.scalar_condition(cond, node.test)
        return self.branch_value(cond, [(node.body, lambda: self.expr(node.body)),
                                        (node.orelse, lambda: self.expr(node.orelse))], node)

    def branch_value(self, cond: Ref, arms, node: ast.AST) -> Ref:
        """An `if` with a result: each (node, thunk) arm computed in its own branch, the value of their
        common type."""
        from tileport.model.ir import Do, Op
        lowered = []
        for sub, thunk in arms:  # each arm lowered once (nested arms would otherwise double)
            scope = _Scope("if", set())
            self.scopes.append(scope)
            blk = self.b.push()
            names = self.b.scope_names[-1]
            try:
                lowered.append((sub, scope, blk, names, self.calls.materialize(self, thunk(), sub)))
            finally:
                self.b.pop()
                self.scopes.pop()
        ty = self.calls.common_value_type(self, lowered[0][4], lowered[1][4], node)
        blocks = []
        for sub, scope, blk, names, value in lowered:  # back into each arm: the value as the common type
            self.scopes.append(scope)
            self.b.resume(blk, names)
            atom = self.calls.as_type(self, value, ty, sub)
            self.b.emit(Do(Op(OpKind.YIELD, (atom,), ty, self.loc(sub))))
            self.b.pop()
            self.scopes.pop()
            blocks.append(blk)
        name = self.b.fresh("sel")
        self.b.temps.add(name)
        self.b.emit(If(cond, blocks[0], blocks[1], self.loc(node), self.outer_updates(*blocks), name, ty))
        return Ref(name, ty)

    def scalar_condition(self, cond: Ref, test: ast.AST) -> Ref:
        """A bool scalar from a scalar or 0-d tile condition (`!= 0` for numbers)."""
        if isinstance(cond.ty, TileT):
            cond = self.b.value(OpKind.SCALAR_OF, (cond,), ScalarT(cond.ty.dtype), self.loc(test), hint="cond")
        if cond.ty.dtype != "bool":
            cond = self.b.value(OpKind.COMPARE, (cond, Lit(0, ScalarT(cond.ty.dtype))), ScalarT("bool"),
                                self.loc(test), hint="cond", op="!=")
        return cond

    def binop(self, op: str | None, a: Value, b: Value, node: ast.AST) -> Value:
        if op is None:
            raise self.fail(node, "operator not supported", "operator")
        return self.calls.binary(self, op, a, b, node)

    # ---- conversions used by call handlers
    def compile_time(self, node: ast.AST, what: str) -> Any:
        v = self.expr(node) if isinstance(node, ast.AST) else node
        if not isinstance(v, CV):
            raise self.fail(node, f"{what} must be a compile-time constant", "constant")
        return v.value

    def scalar_atom(self, v: Value, node: ast.AST) -> Atom:
        """A runtime-or-constant scalar usable as a loop bound, index or scalar operand."""
        if isinstance(v, Ref) and isinstance(v.ty, ScalarT):
            return v
        if isinstance(v, Ref) and isinstance(v.ty, TileT) and v.ty.rank == 0:
            # a 0-d tile (e.g. a gathered length) is a scalar in cuTile; cutile-rs needs the scalar
            return self.b.value(OpKind.SCALAR_OF, (v,), ScalarT(v.ty.dtype), self.loc(node), hint=f"{v.name}_s")
        if isinstance(v, CV) and v.is_dim:
            self.check_literal(v.value, "i32", node)
            return CDim(v.value)
        if isinstance(v, CV) and isinstance(v.value, (float, bool)):
            self.check_literal(v.value, lit_dtype(v.value), node)
            return Lit(v.value, ScalarT(lit_dtype(v.value)))
        raise self.fail(node, f"expected a scalar, got {describe(v)}", "scalar")

    def int_atom(self, v: Value, node: ast.AST, what: str) -> Atom:
        """A scalar that must be an integer (an index, a loop bound)."""
        atom = self.scalar_atom(v, node)
        dtype = None if isinstance(atom, CDim) else atom.ty.dtype
        if dtype is not None and not all(T.is_int(d) for d in self.b.dspace.values(dtype)):
            raise self.fail(node, f"{what} must be an integer, got {describe(v)}", "index",
                            "convert it with int(...) or ct.astype")
        return atom

    def check_literal(self, value: Any, dtype: str, node: ast.AST) -> None:
        """A literal the generated Rust spells with `dtype` must be representable in it."""
        if isinstance(value, int) and not isinstance(value, bool) and dtype in _INT_RANGES:
            lo, hi = _INT_RANGES[dtype]
            if not lo <= value <= hi:
                raise self.fail(node, f"integer constant {value} does not fit in {dtype}", "literal",
                                f"constants must lie in [{lo}, {hi}]")
        if isinstance(value, float) and dtype == "f32" and math.isfinite(value) and abs(value) > _F32_MAX:
            raise self.fail(node, f"float constant {value!r} does not fit in f32", "literal")


_INT_RANGES = {f"{s}{bits}": ((-(1 << bits - 1), (1 << bits - 1) - 1) if s == "i" else (0, (1 << bits) - 1))
               for s in "iu" for bits in (8, 16, 32, 64)}
_F32_MAX = 3.4028234663852886e38
