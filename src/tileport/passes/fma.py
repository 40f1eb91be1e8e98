"""Fuse a single-use float multiply into the add/sub that consumes it, as cuTile Python does.

cuTile Python's rewrite turns `a*b + c` (and `c + a*b`) into `fma(a, b, c)`, `c - a*b` into
`fma(-a, b, c)` and `a*b - c` into `fma(a, b, -c)` when the product has exactly one use and both
operations share rounding mode and flush-to-zero. cutile-rs does not, so the translator must, or the
ports differ in fma counts (a CRITICAL IR-diff finding).
"""

from __future__ import annotations

from tileport.model.ir import Block, For, If, Kernel, Let, Op, Ref, While
from tileport.model.naming import Naming
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
        if m.update or op.kind != "binary" or op.attr("op") != "mul" or counts[id(m)] != 1:
            return None
        if (op.attr("rounding"), bool(op.attr("ftz"))) != (add.attr("rounding"), bool(add.attr("ftz"))):
            return None
        return m

    def visit(block: Block) -> None:
        nonlocal fused
        defs: dict[str, Let] = {}
        out = []
        for st in block.stmts:
            if isinstance(st, Let):
                op = st.op
                if (op.kind == "binary" and op.attr("op") in ("add", "sub") and isinstance(op.ty, TileT)
                        and _is_float(kernel, op.ty.dtype)):
                    replaced = _try_fuse(op, st, defs, out, fusable_mul, lambda base: naming.fresh(base, taken))
                    if replaced:
                        fused += 1
                        st = replaced
                if not st.update:
                    defs[st.name] = st
                else:
                    defs.pop(st.name, None)
            elif isinstance(st, For):
                visit(st.body)
            elif isinstance(st, While):
                visit(st.cond)
                visit(st.body)
            elif isinstance(st, If):
                visit(st.then)
                visit(st.orelse)
            out.append(st)
        block.stmts[:] = out

    visit(kernel.body)
    return fused


def _try_fuse(op: Op, st: Let, defs, out: list, fusable_mul, fresh) -> Let | None:
    lhs, rhs = op.args
    modes = (("rounding", op.attr("rounding")), ("ftz", op.attr("ftz")))
    for side, mul_atom, other in (("lhs", lhs, rhs), ("rhs", rhs, lhs)):
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
        return Let(st.name, Op("fma", (a, b, c), op.ty, op.loc, modes), st.update)
    return None


def _negate(atom: Ref, op: Op, out: list, fresh) -> Ref:
    name = fresh(f"{atom.name}_neg")
    out.append(Let(name, Op("unary", (atom,), atom.ty, op.loc, (("fn", "negative"),))))
    return Ref(name, atom.ty)
