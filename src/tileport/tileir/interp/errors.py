"""Typed, located errors of the interpreter: an op it cannot run is an error, never a silent skip."""

from __future__ import annotations

from ..model import Op


class InterpError(RuntimeError):
    """Execution failed at an op. `where` is the op's debug location ("file:line:col") or, without
    debug info, its name and position in the function."""

    def __init__(self, message: str, op: Op | None = None, where: str | None = None):
        self.op_name = op.name if op is not None else None
        self.where = where or (op.loc if op is not None and op.loc else None)
        self.detail = message
        prefix = ": ".join(p for p in (self.where, self.op_name) if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class UnsupportedOp(InterpError):
    """The op (or one of its attribute values or operand types) is outside the supported subset."""


class MemoryFault(InterpError):
    """An unmasked access outside every argument array, or a misaligned one."""


class ArgumentError(InterpError):
    """The kernel arguments do not fit the entry's parameters."""
