"""Python integer `//` and `%`, spelled as cuTile Python lowers them.

On scalars, `a // b` is `divi rounding<negative_inf>` and `a % b` is `remi` plus a sign fix-up, on 0-d
tiles; on integer tiles of any shape `%` is the same `remi` and fix-up (a tile's `//` is one operation).
Expanding them into model operations (instead of opaque helper calls) lets loop-invariant parts,
such as the sign test of a loop-invariant divisor, be hoisted as cuTile hoists them.
"""

from __future__ import annotations

from tileport.model.ir import Kernel, Let, Lit, Op, Ref
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, TileT, is_int
from tileport.passes.uses import expand_statements, taken_names

I32_0D = TileT("i32", ())


def expand_int_division(kernel: Kernel, naming: Naming) -> int:
    taken = taken_names(kernel)

    def expand(st):
        if not (isinstance(st, Let) and st.op.kind == OpKind.BINARY):
            return None
        fresh = lambda base: naming.fresh(base, taken)  # noqa: E731
        if st.op.attr("op") in ("floordiv", "mod") and isinstance(st.op.ty, ScalarT) and st.op.ty.dtype == "i32":
            return _expand_scalar(st, fresh)
        if st.op.attr("op") == "mod" and isinstance(st.op.ty, TileT) and is_int(st.op.ty.dtype):
            return _expand_tile_mod(st, fresh)
        return None

    return expand_statements(kernel.body, expand)


class _Lets:
    """The statements an expansion of `st` makes, in order, under fresh names."""

    def __init__(self, st: Let, fresh):
        self.st, self.fresh, self.out = st, fresh, []

    def let(self, hint: str, kind: OpKind, args: tuple, ty, **attrs) -> Ref:
        name = self.fresh(hint)
        self.out.append(Let(name, Op(kind, args, ty, self.st.op.loc, tuple(sorted(attrs.items())))))
        return Ref(name, ty)

    def binary(self, name: str, a, b, ty) -> Ref:
        return self.let(f"{self.st.name}_{name}", OpKind.BINARY, (a, b), ty, op=name, rounding=None, ftz=None,
                        nan=None)

    def python_mod(self, a: Ref, b: Ref, ty: TileT) -> Ref:
        """`remi`, then the divisor added where the remainder is non-zero and its sign differs from it."""
        bools = TileT("bool", ty.shape)
        zero = self.let(f"{self.st.name}_zero", OpKind.FULL, (Lit(0, ScalarT(ty.dtype)),), ty, dtype=ty.dtype,
                        shape=ty.shape)
        rem = self.binary("rem", a, b, ty)
        rem_neg = self.let(f"{self.st.name}_rem_neg", OpKind.COMPARE, (rem, zero), bools, op="<")
        div_neg = self.let(f"{self.st.name}_div_neg", OpKind.COMPARE, (b, zero), bools, op="<")
        differ = self.binary("xor", rem_neg, div_neg, bools)
        nonzero = self.let(f"{self.st.name}_nonzero", OpKind.COMPARE, (rem, zero), bools, op="!=")
        fix = self.binary("and", differ, nonzero, bools)
        adjusted = self.binary("add", rem, b, ty)
        return self.let(f"{self.st.name}_sel", OpKind.SELECT, (fix, adjusted, rem), ty)


def _expand_scalar(st: Let, fresh) -> list[Let]:
    op, lets = st.op, _Lets(st, fresh)
    a, b = (lets.let(f"{st.name}_{side}_t", OpKind.TILE0, (x,), I32_0D) for x, side in zip(op.args, ("lhs", "rhs")))
    if op.attr("op") == "floordiv":
        result = lets.binary("floordiv", a, b, I32_0D)
    else:
        result = lets.python_mod(a, b, I32_0D)
    return lets.out + [Let(st.name, Op(OpKind.SCALAR_OF, (result,), op.ty, op.loc), st.update)]


def _expand_tile_mod(st: Let, fresh) -> list[Let]:
    lets = _Lets(st, fresh)
    lets.python_mod(*st.op.args, st.op.ty)
    *body, result = lets.out  # the select binds the statement's own name
    return body + [Let(st.name, result.op, st.update)]

