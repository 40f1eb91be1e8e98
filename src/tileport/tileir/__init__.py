"""Tile IR toolkit: bytecode reader, canonicalizer, structural diff and reports.

Public API (used by the rest of tileport; see docs/tileir.md):

- `read_module(path_or_bytes) -> Module`
- `to_text(module) -> str`
- `canonicalize(module, *, target="sm_90", ignore_tokens=True) -> Module`
- `diff(reference, generated, *, target="sm_90") -> DiffReport`
"""

from .canon import canonicalize
from .diff import diff
from .model import Module
from .printer import to_text
from .reader import BytecodeError, read_module
from .report import DiffReport, Finding, Location
from .rules import Owner, Severity, Status

__all__ = ["BytecodeError", "DiffReport", "Finding", "Location", "Module", "Owner", "Severity",
           "Status", "canonicalize", "diff", "read_module", "to_text"]
