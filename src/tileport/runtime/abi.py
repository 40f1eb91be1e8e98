"""The C ABI shared with the generated crate: descriptor layout, dtype codes, return codes -> exceptions.

Keep in sync with src/tileport/emit/rust/templates/support.rs (tests check both sides agree).
"""

from __future__ import annotations

import ctypes

MAX_DIMS = 6
ABI_VERSION = 1

DTYPE_CODES = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3, "i32": 4, "i64": 5, "i16": 6, "i8": 7, "u8": 8, "bool": 9,
               "f8e4m3fn": 10, "f8e5m2": 11}


class TensorDesc(ctypes.Structure):
    _fields_ = [
        ("ptr", ctypes.c_uint64),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("dtype", ctypes.c_int32),
    ]


class TileportError(RuntimeError):
    """Base class of every error raised by the tileport runtime."""


class FFIError(TileportError):
    """A launcher refused its arguments or the launch failed; `.code` is the C return code."""

    code = 0

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code


class NullTensorError(FFIError, ValueError):
    code = -1


class DTypeError(FFIError, TypeError):
    code = -2


class RankError(FFIError, ValueError):
    code = -3


class ShapeError(FFIError, ValueError):
    code = -4


class DeviceError(FFIError):
    """The CUDA device could not be used (no driver, bad ordinal, context failure)."""

    code = -5


class WrongDeviceError(DeviceError, ValueError):
    """Arrays are not in the memory of the device the kernel runs on."""


class InvalidArgumentError(FFIError, ValueError):
    code = -6


class KernelLaunchError(FFIError):
    code = -7


class InternalError(FFIError):
    """A Rust panic was caught at the C boundary (a bug in the generated code or cutile)."""

    code = -8


class LayoutError(FFIError, ValueError):
    """Strides the kernel cannot use (e.g. overlapping output elements)."""

    code = -9


class MisalignedError(LayoutError):
    """An array's base address is not aligned as the ported kernel assumes (16 bytes)."""


class AliasingError(LayoutError):
    """An output shares memory with another array argument (the port assumes no aliasing)."""


ERRORS = {cls.code: cls for cls in (NullTensorError, DTypeError, RankError, ShapeError, DeviceError,
                                    InvalidArgumentError, KernelLaunchError, InternalError, LayoutError)}


def raise_for(rc: int, message: str) -> None:
    if rc == 0:
        return
    raise ERRORS.get(rc, FFIError)(message or f"call failed with code {rc}", rc)
