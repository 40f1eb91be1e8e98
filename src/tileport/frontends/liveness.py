"""Which Python variables a loop or branch really carries out (liveness on the source AST).

A name assigned inside a loop body is loop-carried only if the body reads it before writing it, or
if it is read after the loop; otherwise it is a fresh local of each iteration, and may change type
(cuTile Python decides the same way). The same holds for names assigned inside an `if` branch.
"""

from __future__ import annotations

import ast
from typing import Sequence


def reads(node: ast.AST, name: str) -> bool:
    return name in _loads(node)


def _loads(node: ast.AST) -> frozenset[str]:
    """The names `node` reads, kept on the node: lowering asks about the same statements again and again
    (every specialization, every retry), and a walk each time made it quadratic in the kernel's size."""
    found = node.__dict__.get("_tileport_loads")
    if found is None:
        found = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        node._tileport_loads = found
    return found


def _targets(st: ast.stmt) -> set[str]:
    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _effect(st: ast.stmt, name: str) -> tuple[bool, bool]:
    """(reads `name` before any definite write, definitely writes `name`)."""
    if isinstance(st, (ast.Assign, ast.AnnAssign)):
        return (st.value is not None and reads(st.value, name)), name in _targets(st)
    if isinstance(st, ast.AugAssign):
        target = isinstance(st.target, ast.Name) and st.target.id == name
        return target or reads(st.value, name), target
    if isinstance(st, (ast.For, ast.While)):
        head = st.iter if isinstance(st, ast.For) else st.test
        return reads(head, name) or exposed_read(st.body, name), False
    if isinstance(st, ast.If):
        r = reads(st.test, name) or exposed_read(st.body, name) or exposed_read(st.orelse, name)
        return r, _definitely_writes(st.body, name) and _definitely_writes(st.orelse, name)
    return reads(st, name), False


def _definitely_writes(stmts: Sequence[ast.stmt], name: str) -> bool:
    return any(_effect(st, name)[1] for st in stmts)


def exposed_read(stmts: Sequence[ast.stmt], name: str) -> bool:
    """Does running `stmts` read `name` before it is (definitely) assigned?"""
    for st in stmts:
        r, w = _effect(st, name)
        if r:
            return True
        if w:
            return False
    return False


def assigned(stmts: Sequence[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for st in stmts:
        out |= _assigned_in(st)
    return out


def _assigned_in(st: ast.stmt) -> frozenset[str]:
    """The names a statement assigns anywhere inside it, kept on the node (see `_loads`)."""
    found = st.__dict__.get("_tileport_assigned")
    if found is None:
        found = frozenset().union(*(_targets(n) for n in ast.walk(st)
                                    if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))))
        st._tileport_assigned = found
    return found


class Frames:
    """The statement lists being lowered, innermost last, to answer 'is this name read later?'."""

    def __init__(self):
        self.stack: list[list] = []  # [stmts, index, owner node]

    def live_after(self, name: str) -> bool:
        for stmts, index, owner in reversed(self.stack):
            rest = stmts[index + 1:]
            if exposed_read(rest, name):
                return True
            if _definitely_writes(rest, name):
                return False
            if isinstance(owner, (ast.For, ast.While)) and exposed_read(owner.body, name):
                return True  # read again by the enclosing loop's next iteration
            if isinstance(owner, ast.While) and reads(owner.test, name):
                return True  # read by the enclosing while loop's next test
            if isinstance(owner, ast.FunctionDef):
                return _returned(owner, stmts, name)
        return False


def _returned(fn: ast.FunctionDef, stmts: Sequence[ast.stmt], name: str) -> bool:
    """Does `fn`'s final `return` read `name`? An inlined helper lowers its body without that statement
    (its value becomes the call's), so the frame's statements do not show it."""
    ret = fn.body[-1] if fn.body and isinstance(fn.body[-1], ast.Return) else None
    return ret is not None and ret.value is not None and ret not in stmts and reads(ret.value, name)
