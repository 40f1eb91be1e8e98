"""Translation diagnostics: what could not be translated, where, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A place in a source file (1-based line and column): where a construct is, where a diagnostic points."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass
class Diagnostic(Exception):
    """An unsupported or malformed construct. Stops translation of the kernel it occurs in."""

    message: str
    loc: Loc | None
    construct: str = ""
    hint: str = ""
    kernel: str = ""

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc else ""
        what = f" [{self.construct}]" if self.construct else ""
        hint = f"\n  hint: {self.hint}" if self.hint else ""
        kernel = f" (kernel `{self.kernel}`)" if self.kernel else ""
        return f"{where}error{what}: {self.message}{kernel}{hint}"

    def to_dict(self) -> dict:
        return {
            "message": self.message,
            "construct": self.construct,
            "hint": self.hint,
            "kernel": self.kernel,
            "file": self.loc.file if self.loc else None,
            "line": self.loc.line if self.loc else None,
            "col": self.loc.col if self.loc else None,
        }


@dataclass
class NeedsSpecialization(Exception):
    """A kernel cannot stay generic in these constants; it must be emitted once per value."""

    constants: frozenset[str]
    reason: str
    loc: Loc | None = None
