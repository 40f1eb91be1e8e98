"""Readers that turn Tile IR into the module model.

Only bytecode is read: it carries what the tileirdisasm text hides (default attributes such as
the rounding mode of `exp`, operand-less terminators). Text files are refused with a hint.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..model import Module
from .bytecode import read_bytecode
from .stream import BytecodeError

__all__ = ["BytecodeError", "MAX_BYTES", "read_module", "read_bytecode"]

_TEXT_SUFFIXES = (".tileir", ".mlir", ".txt")
MAX_BYTES = 256 << 20  # far above any kernel module; a bigger input is refused, not read


def read_module(source: str | Path | bytes | bytearray) -> Module:
    """Read Tile IR bytecode from a path or from bytes."""
    if isinstance(source, (bytes, bytearray)):
        if len(source) > MAX_BYTES:
            raise BytecodeError(f"input of {len(source)} bytes is larger than {MAX_BYTES} bytes")
        return read_bytecode(bytes(source))
    path = Path(source)
    data = _read_file(path)
    if path.suffix in _TEXT_SUFFIXES and not data.startswith(b"\x7fTileIR"):
        raise BytecodeError(f"{path}: Tile IR text is not supported; pass the bytecode "
                            f"(cuTile Python: export_kernel or CUDA_TILE_DUMP_BYTECODE=<dir>; "
                            f"cutile-rs: the .bc it hands to tileiras)")
    try:
        return read_bytecode(data)
    except BytecodeError as e:
        raise BytecodeError(f"{path}: {e}", e.offset) from None


def _read_file(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES. Devices (/dev/zero), FIFOs, sockets and
    directories are refused before they are opened: reading them could block or never end."""
    mode = os.stat(path).st_mode  # OSError (missing, no permission) is the caller's to report
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise BytecodeError(f"{path}: is {kind}, not a Tile IR bytecode file")
    # O_NONBLOCK: should the path be swapped for a FIFO after the check, open() does not wait.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise BytecodeError(f"{path}: is not a regular file, not a Tile IR bytecode file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise BytecodeError(f"{path}: larger than {MAX_BYTES} bytes; not a kernel's Tile IR bytecode")
    return data
