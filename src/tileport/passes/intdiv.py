"""Python integer `//` and `%` on scalars, spelled as cuTile Python lowers them.

`a // b` is `divi rounding<negative_inf>` and `a % b` is `remi` plus a sign fix-up, on 0-d tiles.
Expanding them into model operations (instead of opaque helper calls) lets loop-invariant parts,
such as the sign test of a loop-invariant divisor, be hoisted as cuTile hoists them.
"""

from __future__ import annotations

from tileport.model.ir import Kernel, Let, Lit, Op, Ref
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, TileT
from tileport.passes.uses import expand_statements, taken_names

I32_0D = TileT("i32", ())
BOOL_0D = TileT("bool", ())


def expand_int_division(kernel: Kernel, naming: Naming) -> int:
    taken = taken_names(kernel)

    def expand(st):
        if (isinstance(st, Let) and st.op.kind == OpKind.BINARY and st.op.attr("op") in ("floordiv", "mod")
                and isinstance(st.op.ty, ScalarT) and st.op.ty.dtype == "i32"):
            return _expand(st, lambda base: naming.fresh(base, taken))
        return None

    return expand_statements(kernel.body, expand)


def _expand(st: Let, fresh) -> list[Let]:
    op, loc = st.op, st.op.loc
    out: list[Let] = []

    def let(hint: str, kind: OpKind, args: tuple, ty, **attrs) -> Ref:
        name = fresh(hint)
        out.append(Let(name, Op(kind, args, ty, loc, tuple(sorted(attrs.items())))))
        return Ref(name, ty)

    def tile(atom, hint: str) -> Ref:
        return let(f"{hint}_t", OpKind.TILE0, (atom,), I32_0D)

    def binary(name: str, a, b, ty=I32_0D) -> Ref:
        return let(f"{st.name}_{name}", OpKind.BINARY, (a, b), ty, op=name, rounding=None, ftz=None, nan=None)

    a, b = (tile(x, f"{st.name}_{side}") for x, side in zip(op.args, ("lhs", "rhs")))
    if op.attr("op") == "floordiv":
        result = binary("floordiv", a, b)
    else:
        zero = let(f"{st.name}_zero", OpKind.FULL, (Lit(0, ScalarT("i32")),), I32_0D, dtype="i32", shape=())
        rem = binary("rem", a, b)
        rem_neg = let(f"{st.name}_rem_neg", OpKind.COMPARE, (rem, zero), BOOL_0D, op="<")
        div_neg = let(f"{st.name}_div_neg", OpKind.COMPARE, (b, zero), BOOL_0D, op="<")
        differ = binary("xor", rem_neg, div_neg, BOOL_0D)
        nonzero = let(f"{st.name}_nonzero", OpKind.COMPARE, (rem, zero), BOOL_0D, op="!=")
        fix = binary("and", differ, nonzero, BOOL_0D)
        adjusted = binary("add", rem, b)
        result = let(f"{st.name}_sel", OpKind.SELECT, (fix, adjusted, rem), I32_0D)
    out.append(Let(st.name, Op(OpKind.SCALAR_OF, (result,), op.ty, loc), st.update))
    return out

