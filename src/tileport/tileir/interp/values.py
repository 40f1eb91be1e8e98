"""Runtime values of the interpreter and the memory they live in.

- A tile is a NumPy array of the tile's shape (a 0-d array for `tile<i32>`), stored in the NumPy
  dtype of `STORAGE`: f16 as float16; bf16, tf32 and the float8 types as float32 holding only values of that format
  (every result is rounded to it, nearest-even); i1 as bool; signed integer dtypes for every
  integer type (ops that are unsigned reinterpret the bits); pointers as int64 byte addresses.
- A token is `TOKEN` (memory ordering is sequential here, so tokens carry nothing).
- Views are small frozen records of addresses, shapes and strides in elements.
- `Memory` holds the argument arrays at distinct base addresses 2^36 bytes apart; an address is
  resolved to (array, element index) on every access, so an unmasked access outside every array
  is a `MemoryFault`, not a silent read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..types import PointerType, ScalarType
from .errors import MemoryFault, UnsupportedOp

STORAGE = {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
           "f16": np.float16, "bf16": np.float32, "tf32": np.float32, "f32": np.float32,
           "f64": np.float64, "f8E4M3FN": np.float32, "f8E5M2": np.float32}
UNSIGNED = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16,
            np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}
# Bytes per element in memory (bf16 occupies 2 bytes although it is computed as float32 here).
ELEM_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "tf32": 4,
              "f32": 4, "f64": 8, "f8E4M3FN": 1, "f8E5M2": 1}
PADDING = {"zero": 0.0, "neg_zero": -0.0, "nan": np.nan, "pos_inf": np.inf, "neg_inf": -np.inf}

TOKEN = "token"


def storage(elem) -> np.dtype:
    """The NumPy dtype a tile of element type `elem` is held in."""
    if isinstance(elem, PointerType):
        return np.dtype(np.int64)
    dt = STORAGE.get(getattr(elem, "name", ""))
    if dt is None:
        raise UnsupportedOp(f"element type {elem} is outside the supported subset")
    return np.dtype(dt)


def elem_bytes(elem) -> int:
    if isinstance(elem, PointerType):
        return 8
    size = ELEM_BYTES.get(elem.name)
    if size is None:
        raise UnsupportedOp(f"element type {elem} is outside the supported subset")
    return size


def _round_mantissa(x: np.ndarray, dropped_bits: int) -> np.ndarray:
    """float32 values rounded to nearest-even after dropping low mantissa bits (NaN kept)."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    half = (1 << (dropped_bits - 1)) - 1
    rounded = (bits + half + ((bits >> dropped_bits) & 1)) & ~np.uint64((1 << dropped_bits) - 1)
    out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def round_bf16(x: np.ndarray) -> np.ndarray:
    return _round_mantissa(x, 16)


def round_tf32(x: np.ndarray) -> np.ndarray:
    return _round_mantissa(x, 13)


def _round_small_float(x: np.ndarray, mantissa: int, min_exp: int, largest: float, overflow: float) -> np.ndarray:
    """float32 values rounded to nearest-even in a float format of `mantissa` bits and smallest normal
    exponent `min_exp` (subnormals below it); past `largest` (after rounding) they become `overflow`."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        exp = np.maximum(np.floor(np.log2(np.abs(np.where(x == 0, 1.0, x)))), min_exp)
        quantum = np.exp2(exp - mantissa)
        out = np.round(x / quantum) * quantum
    out = np.where(np.abs(out) > largest, np.copysign(overflow, x), out)
    return np.where(np.isfinite(x), out, x if overflow == np.inf else np.nan).astype(np.float32)


def round_f8e4m3fn(x: np.ndarray) -> np.ndarray:
    """float8_e4m3fn: 3 mantissa bits, normals from 2^-6, at most 448, no infinity (NaN past it)."""
    return _round_small_float(x, 3, -6, 448.0, np.nan)


def round_f8e5m2(x: np.ndarray) -> np.ndarray:
    """float8_e5m2: 2 mantissa bits, normals from 2^-14, at most 57344, infinities."""
    return _round_small_float(x, 2, -14, 57344.0, np.inf)


_ROUNDERS = {"bf16": round_bf16, "tf32": round_tf32, "f8E4M3FN": round_f8e4m3fn, "f8E5M2": round_f8e5m2}


def to_elem(x, elem) -> np.ndarray:
    """`x` converted to element type `elem` (floats rounded to nearest-even, ints wrapped)."""
    dt = storage(elem)
    arr = np.asarray(x)
    if dt.kind == "f" and arr.dtype.kind == "f" and arr.dtype.itemsize > 4 and dt.itemsize < 4:
        arr = arr.astype(np.float32)  # f64 -> f16 through f32 like a chain of two conversions
    with np.errstate(all="ignore"):
        out = arr.astype(dt)
    rounder = _ROUNDERS.get(getattr(elem, "name", ""))
    return rounder(out) if rounder is not None else out


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """flush_to_zero: subnormal f32 values become zeros of the same sign."""
    if x.dtype != np.float32:
        return x
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def padding_value(name: str | None, elem: ScalarType) -> float:
    """What a padded lane reads. No padding mode: zero (what the hardware's bulk copies fill)."""
    if name is None:
        return 0
    if name not in PADDING:
        raise UnsupportedOp(f"padding value {name}")
    if not elem.is_float and name != "zero":
        raise UnsupportedOp(f"padding value {name} for integer element type {elem}")
    return PADDING[name]


@dataclass(frozen=True)
class TensorView:
    base: int                      # byte address of element (0, ..., 0)
    elem: ScalarType
    shape: tuple[int, ...]
    strides: tuple[int, ...]       # in elements


@dataclass(frozen=True)
class PartitionView:
    tensor: TensorView
    tile: tuple[int, ...]
    dim_map: tuple[int, ...]       # tile dimension i walks tensor dimension dim_map[i]
    padding: str | None


@dataclass
class Buffer:
    name: str
    base: int
    elem: ScalarType
    data: np.ndarray               # flat, in the element's storage dtype

    @property
    def end(self) -> int:
        return self.base + self.data.size * elem_bytes(self.elem)


# Array k starts at (k + 1) * ARRAY_SPACING: an index that runs off an array by less than that
# lands in no array (a MemoryFault), never silently in the next one.
ARRAY_SPACING = 1 << 36


@dataclass
class Memory:
    """The arrays a kernel can reach, each at its own base address."""
    buffers: list[Buffer] = field(default_factory=list)

    def add(self, name: str, elem: ScalarType, flat: np.ndarray) -> Buffer:
        base = (len(self.buffers) + 1) * ARRAY_SPACING
        buf = Buffer(name, base, elem, to_elem(np.asarray(flat).reshape(-1), elem))
        if buf.end - buf.base >= ARRAY_SPACING:
            raise MemoryFault(f"array `{name}` is too large for the interpreter")
        self.buffers.append(buf)
        return buf

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def _resolve(self, addresses: np.ndarray, elem: ScalarType):
        """(buffer index per lane, element index per lane) for byte addresses of `elem` values."""
        size = elem_bytes(elem)
        bases = np.array([b.base for b in self.buffers], dtype=np.int64)
        ends = np.array([b.end for b in self.buffers], dtype=np.int64)
        which = np.searchsorted(bases, addresses, side="right") - 1
        inside = (which >= 0) & (addresses < ends[np.clip(which, 0, None)])
        if not np.all(inside):
            bad = int(np.asarray(addresses)[~inside].flat[0])
            raise MemoryFault(f"unmasked access at address 0x{bad:x}, outside every argument array "
                              f"({np.count_nonzero(~inside)} lanes)")
        offsets = addresses - bases[which]
        if np.any(offsets % size):
            raise MemoryFault(f"address not aligned to its {elem} element")
        for i in np.unique(which):
            if self.buffers[i].elem != elem:
                raise MemoryFault(f"array `{self.buffers[i].name}` holds {self.buffers[i].elem}, "
                                  f"accessed as {elem}")
        return which, offsets // size

    def load(self, addresses: np.ndarray, mask: np.ndarray, elem: ScalarType, fill) -> np.ndarray:
        out = np.full(addresses.shape, fill, dtype=storage(elem))
        if np.any(mask):
            which, index = self._resolve(addresses[mask], elem)
            values = np.empty(index.shape, dtype=out.dtype)
            for i in np.unique(which):
                sel = which == i
                values[sel] = self.buffers[i].data[index[sel]]
            out[mask] = values
        return out

    def store(self, addresses: np.ndarray, values: np.ndarray, mask: np.ndarray,
              elem: ScalarType) -> None:
        if not np.any(mask):
            return
        values = np.broadcast_to(values, addresses.shape)
        which, index = self._resolve(addresses[mask], elem)
        stored = values[mask]
        for i in np.unique(which):
            sel = which == i
            self.buffers[i].data[index[sel]] = stored[sel]  # lanes in order: the last one wins
