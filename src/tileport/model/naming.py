"""Identifiers of generated code, target-neutral: the emitter supplies the words no binding may take.

A generated binding must not shadow a function the generated code calls later, and source names that
are keywords of the target or not identifiers at all must be renamed consistently. The rules here are
the same for every C-like target; what differs per target is the reserved set (`Naming.reserved`).
"""

from __future__ import annotations

import re
from typing import Callable, Iterator


class Naming:
    """Safe identifiers for one target. `reserved` is called once, on first use (a target's reserved
    set may be derived from its lowering table, which need not be loaded before a name is made)."""

    def __init__(self, reserved: Callable[[], frozenset[str]]):
        self._reserved_fn = reserved
        self._reserved: frozenset[str] | None = None

    @property
    def reserved(self) -> frozenset[str]:
        if self._reserved is None:
            self._reserved = frozenset(self._reserved_fn())
        return self._reserved

    def ident(self, name: str) -> str:
        """`name` as an identifier that shadows nothing the generated code uses."""
        ident = re.sub(r"\W", "_", name)
        if not ident or ident[0].isdigit():
            ident = f"k_{ident}"
        if ident in self.reserved:
            ident = f"{ident}_"
        return ident

    def candidates(self, base: str) -> Iterator[str]:
        """`base` made safe, then `base_1`, `base_2`, ... in snake case (`cos_` + `_view` is `cos_view`)."""
        base = self.ident(re.sub(r"(?<=[^_])__+", "_", base))
        yield base
        stem = base.rstrip("_") or base
        k = 1
        while True:
            yield f"{stem}_{k}"
            k += 1

    def fresh(self, base: str, taken: set[str]) -> str:
        """A safe identifier from `base` not in `taken` (which it then joins)."""
        name = next(c for c in self.candidates(base) if c not in taken and c not in self.reserved)
        taken.add(name)
        return name
