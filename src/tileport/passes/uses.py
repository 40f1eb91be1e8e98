"""Def-use information over the kernel model, respecting shadowing and block scopes."""

from __future__ import annotations

from collections import Counter

from tileport.model.ir import Atom, Block, Do, For, If, Kernel, Let, Ref


def atoms_of(stmt) -> list[Atom]:
    if isinstance(stmt, (Let, Do)):
        return list(stmt.op.args)
    if isinstance(stmt, For):
        return [stmt.start, stmt.stop, stmt.step]
    if isinstance(stmt, If):
        return [stmt.cond]
    return []


def use_counts(kernel: Kernel) -> Counter:
    """How many times each binding (`Let` object, by id) is read."""
    counts: Counter = Counter()

    def walk(block: Block, env: dict[str, Let]) -> None:
        for st in block.stmts:
            for a in atoms_of(st):
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
            elif isinstance(st, If):
                walk(st.then, dict(env))
                walk(st.orelse, dict(env))

    walk(kernel.body, {})
    return counts


def bindings_needing_mut(kernel: Kernel) -> set[int]:
    """Ids of the `Let`s that later reassignments (in loops or branches) update."""
    out: set[int] = set()

    def walk(block: Block, env: dict[str, Let]) -> None:
        for st in block.stmts:
            if isinstance(st, Let):
                if st.update:
                    if st.name in env:
                        out.add(id(env[st.name]))
                else:
                    env[st.name] = st
            elif isinstance(st, For):
                walk(st.body, dict(env))
            elif isinstance(st, If):
                walk(st.then, dict(env))
                walk(st.orelse, dict(env))

    walk(kernel.body, {})
    return out
