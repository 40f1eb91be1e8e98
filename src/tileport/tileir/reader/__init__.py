"""Readers that turn Tile IR into the module model.

Only bytecode is read: it carries what the tileirdisasm text hides (default attributes such as
the rounding mode of `exp`, operand-less terminators). Text files are refused with a hint.
"""

from __future__ import annotations

from pathlib import Path

from ..model import Module
from .bytecode import read_bytecode
from .stream import BytecodeError

__all__ = ["BytecodeError", "read_module", "read_bytecode"]

_TEXT_SUFFIXES = (".tileir", ".mlir", ".txt")


def read_module(source: str | Path | bytes | bytearray) -> Module:
    """Read Tile IR bytecode from a path or from bytes."""
    if isinstance(source, (bytes, bytearray)):
        return read_bytecode(bytes(source))
    path = Path(source)
    data = path.read_bytes()
    if path.suffix in _TEXT_SUFFIXES and not data.startswith(b"\x7fTileIR"):
        raise BytecodeError(f"{path}: Tile IR text is not supported; pass the bytecode "
                            f"(cuTile Python: export_kernel or CUDA_TILE_DUMP_BYTECODE=<dir>; "
                            f"cutile-rs: the .bc it hands to tileiras)")
    return read_bytecode(data)
