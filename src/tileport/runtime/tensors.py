"""Zero-copy tensor descriptors from torch tensors, `__cuda_array_interface__` and DLPack arrays.

Nothing is copied or allocated: a descriptor records the device pointer, extents and strides (in
elements) of the caller's memory. Anything the descriptor depends on (a DLPack capsule) is returned
so the caller keeps it alive for the duration of the call.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from tileport.model import types
from tileport.runtime.abi import DTYPE_CODES, MAX_DIMS, DTypeError, RankError, TensorDesc, WrongDeviceError

TORCH_DTYPES = {f"torch.{name}": dt for name, dt in types.TORCH_DTYPES.items()}  # by str(tensor.dtype)
TYPESTR = {"f4": "f32", "f2": "f16", "f8": "f64", "i4": "i32", "i8": "i64", "i2": "i16", "i1": "i8", "u1": "u8",
           "b1": "bool"}
DLPACK_CODES = {(2, 32): "f32", (2, 16): "f16", (2, 64): "f64", (4, 16): "bf16", (0, 32): "i32", (0, 64): "i64",
                (0, 16): "i16", (0, 8): "i8", (1, 8): "u8", (6, 8): "bool", (1, 1): "bool"}
DL_CUDA = 2


@dataclass
class Described:
    desc: TensorDesc
    dtype: str
    device: int | None  # CUDA ordinal, None when the source does not say
    keepalive: Any = None


def _fill(ptr: int, shape, strides, dtype: str, name: str) -> TensorDesc:
    if len(shape) > MAX_DIMS:
        raise RankError(f"tensor `{name}` has rank {len(shape)}; at most {MAX_DIMS} is supported")
    if dtype not in DTYPE_CODES:
        raise DTypeError(f"tensor `{name}` has unsupported dtype {dtype}")
    d = TensorDesc()
    d.ptr, d.ndim, d.dtype = ptr, len(shape), DTYPE_CODES[dtype]
    for i, (n, s) in enumerate(zip(shape, strides)):
        d.shape[i], d.strides[i] = int(n), int(s)
    return d


def _contiguous_strides(shape) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(int(n), 1)
    return out[::-1]


def describe(obj: Any, name: str = "tensor") -> Described:
    """A descriptor for `obj`: a torch tensor, a `__cuda_array_interface__` array or a DLPack array."""
    if type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr"):
        return _from_torch(obj, name)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, name)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name)
    raise TypeError(f"`{name}` is a {type(obj).__name__}: expected a CUDA torch tensor, an object with "
                    "__cuda_array_interface__, or a DLPack array")


def _from_torch(t, name: str) -> Described:
    if t.device.type != "cuda":
        raise WrongDeviceError(f"tensor `{name}` is on {t.device}; the kernel needs a CUDA tensor")
    dtype = TORCH_DTYPES.get(str(t.dtype))
    if dtype is None:
        raise DTypeError(f"tensor `{name}` has unsupported dtype {t.dtype}")
    return Described(_fill(t.data_ptr(), t.shape, t.stride(), dtype, name), dtype, t.device.index)


def _from_cai(obj, name: str) -> Described:
    cai = obj.__cuda_array_interface__
    typestr = cai["typestr"]
    dtype = TYPESTR.get(typestr[1:])
    if dtype is None:
        raise DTypeError(f"array `{name}` has unsupported typestr {typestr!r}")
    shape = tuple(cai["shape"])
    itemsize = int(typestr[2:])
    if cai.get("strides") is None:
        strides = _contiguous_strides(shape)
    else:
        if any(s % itemsize for s in cai["strides"]):
            raise DTypeError(f"array `{name}` has strides that are not multiples of its item size")
        strides = [s // itemsize for s in cai["strides"]]
    device = None
    if hasattr(obj, "__dlpack_device__"):
        kind, device = obj.__dlpack_device__()
        if kind != DL_CUDA:
            raise WrongDeviceError(f"array `{name}` is not in CUDA device memory")
    return Described(_fill(int(cai["data"][0]), shape, strides, dtype, name), dtype, device)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _from_dlpack(obj, name: str) -> Described:
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    # DLManagedTensor starts with its DLTensor; the capsule stays unconsumed (its owner frees it).
    t = _DLTensor.from_address(get(capsule, b"dltensor"))
    if t.device.device_type != DL_CUDA:
        raise WrongDeviceError(f"array `{name}` is not in CUDA device memory")
    dtype = DLPACK_CODES.get((t.dtype.code, t.dtype.bits))
    if dtype is None or t.dtype.lanes != 1:
        raise DTypeError(f"array `{name}` has unsupported DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits)")
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else _contiguous_strides(shape)
    ptr = (t.data or 0) + t.byte_offset
    return Described(_fill(ptr, shape, strides, dtype, name), dtype, t.device.device_id, keepalive=capsule)
