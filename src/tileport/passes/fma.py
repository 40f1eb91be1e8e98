"""Fuse a single-use float multiply into the add/sub that consumes it, as cuTile Python does.

cuTile Python's rewrite turns `a*b + c` (and `c + a*b`) into `fma(a, b, c)`, `c - a*b` into
`fma(-a, b, c)` and `a*b - c` into `fma(a, b, -c)` when the product has exactly one use and both
operations share rounding mode and flush-to-zero. cutile-rs does not, so the translator must, or the
ports differ in fma counts (a CRITICAL IR-diff finding).
"""

from __future__ import annotations

from tileport.model.ir import Block, For, If, Kernel, Let, Op, Ref, While
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import TileT, concrete_dtypes
from tileport.passes.uses import taken_names, use_counts

FLOATS = ("f16", "bf16", "f32", "f64")


def _is_float(kernel: Kernel, dt) -> bool:
    return all(v in FLOATS for v in concrete_dtypes(dt, kernel.dtype_vars))


def fuse_fma(kernel: Kernel, naming: Naming) -> int:
    """Rewrite in place; returns the number of fused pairs."""
    counts = use_counts(kernel)
    taken = taken_names(kernel)
    fused = 0

    def fusable_mul(block_defs: dict[str, Let], atom, add: Op) -> Let | None:
        if not isinstance(atom, Ref) or atom.name not in block_defs:
            return None
        m = block_defs[atom.name]
        op = m.op
        if op.kind != OpKind.BINARY or op.attr("op") != "mul" or (not m.update and counts[id(m)] != 1):
            return None
        if (op.attr("rounding"), bool(op.attr("ftz"))) != (add.attr("rounding"), bool(add.attr("ftz"))):
            return None
        return m

    def is_float_mul(m: Let | None) -> bool:
        return m is not None and m.op.kind == OpKind.BINARY and m.op.attr("op") == "mul" \
            and _is_float(kernel, m.op.ty.dtype)

    def visit(block: Block, reaching: dict[str, Let]) -> None:
        """`reaching`: the binding each name reads here (outer ones included), as cuTile's SSA sees it."""
        nonlocal fused
        defs: dict[str, Let] = {}
        # `x = a * b; x = x + c` (a reassigned variable): the product is read by the add alone and
        # dies there, like a single-use SSA value in cuTile. Kept until anything else touches x, a or b.
        updated_mul: dict[str, Let] = {}
        out = []
        for st in block.stmts:
            if isinstance(st, Let):
                op = st.op
                if (op.kind == OpKind.BINARY and op.attr("op") in ("add", "sub") and isinstance(op.ty, TileT)
                        and _is_float(kernel, op.ty.dtype)):
                    chained = _chained_product(st, updated_mul)
                    lhs = op.args[0]
                    lhs_is_mul = isinstance(lhs, Ref) and is_float_mul(reaching.get(lhs.name))
                    replaced = _try_fuse(op, st, {**defs, **chained}, out, fusable_mul,
                                          lambda base: naming.fresh(base, taken), lhs_is_mul)
                    if replaced:
                        fused += 1
                        st = replaced
                _forget_touched(updated_mul, st)
                reaching[st.name] = st
                if not st.update:
                    defs[st.name] = st
                else:
                    defs.pop(st.name, None)
                    if st.op.kind == OpKind.BINARY and st.op.attr("op") == "mul":
                        updated_mul[st.name] = st
            else:
                updated_mul.clear()  # loops, branches and effects: keep the chain to straight-line code
                if isinstance(st, For):
                    visit(st.body, _without(reaching, (*st.carried, st.index)))
                    reaching = _without(reaching, st.carried)  # now the loop's results
                elif isinstance(st, While):
                    visit(st.cond, _without(reaching, st.carried))
                    visit(st.body, _without(reaching, st.carried))
                    reaching = _without(reaching, st.carried)
                elif isinstance(st, If):
                    visit(st.then, dict(reaching))
                    visit(st.orelse, dict(reaching))
                    reaching = _without(reaching, (*st.assigned, st.result))  # now the if's results
            out.append(st)
        block.stmts[:] = out

    visit(kernel.body, {})
    return fused


def _without(env: dict[str, Let], names) -> dict[str, Let]:
    return {k: v for k, v in env.items() if k not in names}


def _chained_product(add: Let, updated_mul: dict[str, Let]) -> dict[str, Let]:
    """The reassigning product `add` may consume: it must overwrite that variable and read it once."""
    name = add.name
    reads = sum(isinstance(a, Ref) and a.name == name for a in add.op.args)
    return {name: updated_mul[name]} if add.update and name in updated_mul and reads == 1 else {}


def _forget_touched(updated_mul: dict[str, Let], st: Let) -> None:
    """Drop pending products whose value or operands `st` reads or rewrites (after it was considered)."""
    read = {a.name for a in st.op.args if isinstance(a, Ref)}
    for name, m in list(updated_mul.items()):
        operands = {a.name for a in m.op.args if isinstance(a, Ref)}
        if m is not st and (name in read or name == st.name or st.name in operands):
            del updated_mul[name]


def _try_fuse(op: Op, st: Let, defs, out: list, fusable_mul, fresh, lhs_is_mul: bool) -> Let | None:
    """cuTile tries the lhs product first and, when the lhs is a float product at all, only it: a product
    with other uses on the lhs blocks fusing the rhs one (`wdy - xhat * c` with `wdy` reused stays apart)."""
    lhs, rhs = op.args
    modes = (("rounding", op.attr("rounding")), ("ftz", op.attr("ftz")))
    sides = (("lhs", lhs, rhs),) if lhs_is_mul else (("lhs", lhs, rhs), ("rhs", rhs, lhs))
    for side, mul_atom, other in sides:
        m = fusable_mul(defs, mul_atom, op)
        if m is None:
            continue
        a, b = m.op.args
        c = other
        if op.attr("op") == "sub":
            if side == "lhs":  # a*b - c -> fma(a, b, -c)
                c = _negate(c, op, out, fresh)
            else:  # c - a*b -> fma(-a, b, c)
                a = _negate(a, op, out, fresh)
        out.remove(m)
        return Let(st.name, Op(OpKind.FMA, (a, b, c), op.ty, op.loc, modes), st.update)
    return None


def _negate(atom: Ref, op: Op, out: list, fresh) -> Ref:
    name = fresh(f"{atom.name}_neg")
    out.append(Let(name, Op(OpKind.UNARY, (atom,), atom.ty, op.loc, (("fn", "negative"),))))
    return Ref(name, atom.ty)
