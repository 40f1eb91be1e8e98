"""Zero-copy tensor descriptors from torch tensors, `__cuda_array_interface__` and DLPack arrays,
and the layout checks a launch needs before any descriptor reaches the C ABI.

Nothing is copied or allocated: a descriptor records the device pointer, extents and strides (in
elements) of the caller's memory. Anything the descriptor depends on (a DLPack capsule) is returned
so the caller keeps it alive for the duration of the call.

The launchers check null descriptors, ranks, dtypes, extents and overlapping output elements
themselves (support.rs). What they cannot see is checked here (`check_arrays`), against what the
port was captured and verified with (capture_ref: 16-byte aligned bases, non-negative strides, no
aliasing): a misaligned base, a negative stride, an output that shares memory with another array,
and a non-unit stride where the kernel's own address arithmetic assumes one. A torch tensor must
also lie inside its storage. Each is a typed exception before the launch, never a device fault.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from tileport import dtypes
from tileport.runtime.abi import (DTYPE_CODES, MAX_DIMS, AliasingError, DTypeError, LayoutError, MisalignedError,
                                  RankError, TensorDesc, WrongDeviceError)

TORCH_DTYPES = {f"torch.{name}": dt for name, dt in dtypes.TORCH_DTYPES.items()}  # by str(tensor.dtype)
TYPESTR = {"f4": "f32", "f2": "f16", "f8": "f64", "i4": "i32", "i8": "i64", "i2": "i16", "i1": "i8", "u1": "u8",
           "b1": "bool"}
DLPACK_CODES = {(2, 32): "f32", (2, 16): "f16", (2, 64): "f64", (4, 16): "bf16", (0, 32): "i32", (0, 64): "i64",
                (0, 16): "i16", (0, 8): "i8", (1, 8): "u8", (6, 8): "bool", (1, 1): "bool"}
DL_CUDA = 2
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "i16": 2, "i8": 1, "u8": 1, "bool": 1,
            "f8e4m3fn": 1, "f8e5m2": 1}
# Base alignment the ports are captured and verified with (capture_ref: base_addr_divisible_by=16;
# cutile-rs: base_ptr_div 16), and the one every CUDA allocator gives.
ALIGNMENT = 16


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
    _check_in_storage(t, dtype, name)
    return Described(_fill(t.data_ptr(), t.shape, t.stride(), dtype, name), dtype, t.device.index)


def _check_in_storage(t, dtype: str, name: str) -> None:
    """Every element a torch tensor addresses lies inside its storage (as_strided can say otherwise)."""
    if t.numel() == 0:
        return
    lo, hi = _span(t.shape, t.stride())
    first, last = t.storage_offset() + lo, t.storage_offset() + hi
    if first < 0 or (last + 1) * ITEMSIZE[dtype] > t.untyped_storage().nbytes():
        raise LayoutError(f"tensor `{name}` addresses elements {first}..{last} outside its storage of "
                          f"{t.untyped_storage().nbytes() // ITEMSIZE[dtype]} elements")


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


# ---------------------------------------------------------------- checks before a launch


def _span(shape, strides) -> tuple[int, int]:
    """(lowest, highest) element offset addressed, relative to the base (shape all positive)."""
    lo = hi = 0
    for n, st in zip(shape, strides):
        reach = (int(n) - 1) * int(st)
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return lo, hi


def unit_stride_dims(spec: dict, bound: dict[str, Any]) -> dict[str, set[int]]:
    """Array -> dimensions whose stride must be 1: a kernel that computes addresses itself gets the
    strides of some dimensions as arguments (the manifest's `stride_args`) and assumes unit stride
    in the others. Only variants whose pinned constants match the call count."""
    out: dict[str, set[int]] = {}
    ranks = {p["name"]: p.get("rank", 0) for p in spec["params"] if p["kind"] == "array"}
    for variant in spec.get("variants", []):
        if any(bound.get(k) != v for k, v in variant.get("pinned", {}).items()):
            continue
        passed: dict[str, set[int]] = {}
        for array, dim in variant.get("stride_args", []):
            passed.setdefault(array, set()).add(int(dim))
        for array, dims in passed.items():
            out.setdefault(array, set()).update(set(range(ranks.get(array, 0))) - dims)
    return out


_WRITTEN: dict[int, tuple[dict, frozenset[str], bool]] = {}  # id(spec) -> (spec, written arrays, has stride args)


def _rules(spec: dict) -> tuple[frozenset[str], bool]:
    """(written arrays, whether any variant passes strides) of a manifest entry, computed once."""
    hit = _WRITTEN.get(id(spec))
    if hit is None or hit[0] is not spec:
        written = frozenset(p["name"] for p in spec["params"] if p["kind"] == "array" and p.get("written"))
        strided = any(v.get("stride_args") for v in spec.get("variants", []))
        hit = _WRITTEN[id(spec)] = (spec, written, strided)
    return hit[1], hit[2]


def check_arrays(spec: dict, bound: dict[str, Any], arrays: dict[str, Described]) -> None:
    """Refuse layouts the ported kernel was not verified for (see the module docstring). Null
    descriptors, ranks, dtypes and extents are left to the launcher, which reports them."""
    kernel = spec["kernel"]
    written, strided = _rules(spec)
    unit = unit_stride_dims(spec, bound) if strided else {}
    ranges: dict[str, tuple[int, int]] = {}
    for name, d in arrays.items():
        desc = d.desc
        ptr, n = desc.ptr, desc.ndim
        if ptr == 0:
            continue
        if ptr % ALIGNMENT:
            raise MisalignedError(f"{kernel}: tensor `{name}` starts at {ptr:#x}, which is not a multiple "
                                  f"of {ALIGNMENT} bytes (the port is verified for {ALIGNMENT}-byte aligned "
                                  f"arrays); pass an aligned copy (e.g. `.clone()`)")
        shape, strides = desc.shape[:n], desc.strides[:n]
        if any(st < 0 for st in strides):
            raise LayoutError(f"{kernel}: tensor `{name}` has a negative stride {strides}; the port is "
                              f"verified for non-negative strides")
        for dim in sorted(unit.get(name, ())):
            if dim < n and shape[dim] > 1 and strides[dim] != 1:
                raise LayoutError(f"{kernel}: tensor `{name}` has stride {strides[dim]} in dimension {dim}; "
                                  f"the kernel addresses it as contiguous (stride 1): pass a contiguous tensor")
        if all(e > 0 for e in shape):
            _, hi = _span(shape, strides)
            ranges[name] = (ptr, ptr + (hi + 1) * ITEMSIZE[d.dtype])
    _check_aliasing(kernel, written, ranges)


def _check_aliasing(kernel: str, written: frozenset[str], ranges: dict[str, tuple[int, int]]) -> None:
    """No output may share bytes with another array ([start, end) byte ranges; strides are >= 0)."""
    for out in sorted(written & ranges.keys()):
        start, end = ranges[out]
        for other, (s, e) in ranges.items():
            if other != out and s < end and start < e:
                what = "output" if other in written else "input"
                raise AliasingError(f"{kernel}: output `{out}` shares memory with {what} `{other}`; the port "
                                    f"assumes its arrays do not alias (no in-place use): pass a separate "
                                    f"output tensor")
