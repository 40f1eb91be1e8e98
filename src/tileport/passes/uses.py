"""Def-use information over the kernel model, respecting shadowing and block scopes."""

from __future__ import annotations

from collections import Counter

from tileport.model.ir import Atom, Block, Do, For, If, Kernel, Let, Ref, While, walk


def atoms_of(stmt) -> list[Atom]:
    if isinstance(stmt, (Let, Do)):
        return list(stmt.op.args)
    if isinstance(stmt, For):
        return [stmt.start, stmt.stop, stmt.step]
    if isinstance(stmt, If):
        return [stmt.cond]
    return []


def taken_names(kernel: Kernel) -> set[str]:
    """Names a pass must not give a new binding: every `let` of the kernel and every parameter."""
    return ({st.name for st in walk(kernel.body) if isinstance(st, Let)} | {p.name for p in kernel.params}
            | {st.result for st in walk(kernel.body) if isinstance(st, If) and st.result})


def use_counts(kernel: Kernel, unread: frozenset[int] = frozenset()) -> Counter:
    """How many times each binding (`Let` object, by id) is read (not counting the reads of the statements
    in `unread`, by id)."""
    counts: Counter = Counter()

    def walk(block: Block, env: dict[str, Let]) -> None:
        for st in block.stmts:
            for a in atoms_of(st) if id(st) not in unread else ():
                if isinstance(a, Ref) and a.name in env:
                    counts[id(env[a.name])] += 1
            if isinstance(st, Let):
                if st.update:
                    # A reassignment keeps the outer binding alive: count it as a use of that binding.
                    if st.name in env:
                        counts[id(env[st.name])] += 1
                else:
                    env[st.name] = st
            elif isinstance(st, For):
                walk(st.body, dict(env))
                for name in st.carried:  # carried values flow around the loop
                    if name in env:
                        counts[id(env[name])] += 1
            elif isinstance(st, While):
                inner = dict(env)
                walk(st.cond, inner)
                if isinstance(st.test, Ref) and st.test.name in inner:  # the test reads the condition block
                    counts[id(inner[st.test.name])] += 1
                walk(st.body, dict(env))
                for name in st.carried:
                    if name in env:
                        counts[id(env[name])] += 1
            elif isinstance(st, If):
                walk(st.then, dict(env))
                walk(st.orelse, dict(env))

    walk(kernel.body, {})
    return counts


def _updates(kernel: Kernel) -> list[tuple[Let, Let | None]]:
    """Every reassignment (an updating `Let`) with the `Let` it updates in scope, None when no `let` binds
    the name first (a parameter)."""
    out: list[tuple[Let, Let | None]] = []

    def walk(block: Block, env: dict[str, Let]) -> None:
        for st in block.stmts:
            if isinstance(st, Let):
                if st.update:
                    out.append((st, env.get(st.name)))
                else:
                    env[st.name] = st
            elif isinstance(st, For):
                walk(st.body, dict(env))
            elif isinstance(st, While):
                walk(st.cond, dict(env))
                walk(st.body, dict(env))
            elif isinstance(st, If):
                walk(st.then, dict(env))
                walk(st.orelse, dict(env))

    walk(kernel.body, {})
    return out


def bindings_needing_mut(kernel: Kernel) -> set[int]:
    """Ids of the `Let`s that later reassignments (in loops or branches) update."""
    return {id(bound) for _, bound in _updates(kernel) if bound is not None}


def updated_params(kernel: Kernel) -> list[str]:
    """Scalar parameters a reassignment in a loop or branch updates (no `let` of the name binds it first)."""
    scalars = {p.ident for p in kernel.params if not p.is_array and not p.is_const}
    return list(dict.fromkeys(st.name for st, bound in _updates(kernel) if bound is None and st.name in scalars))


def expand_statements(block: Block, expand) -> int:
    """Replace, in `block` and every nested block, each statement `expand(st)` maps to a list of
    statements (None keeps it); returns how many were replaced."""
    count = 0
    out = []
    for st in block.stmts:
        replacement = expand(st)
        if replacement is not None:
            out += replacement
            count += 1
            continue
        if isinstance(st, For):
            count += expand_statements(st.body, expand)
        elif isinstance(st, While):
            count += expand_statements(st.cond, expand) + expand_statements(st.body, expand)
        elif isinstance(st, If):
            count += expand_statements(st.then, expand) + expand_statements(st.orelse, expand)
        out.append(st)
    block.stmts[:] = out
    return count
