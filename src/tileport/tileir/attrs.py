"""Attribute values of Tile IR ops.

Plain Python values are used where they suffice: `int`, `bool`, `str` (enums, by their lower-case
member name, e.g. "approx", "weak", "signed"), tuples (arrays, dense int/bool arrays) and types.
The classes below cover what carries more structure. All are immutable and compare by value, so an
op's attributes can be part of its dataflow key.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from .types import ScalarType, TileType, Type

# Keys of load/store hints whose value, when equal to this default, means the same as no entry.
LOAD_STORE_HINT_DEFAULTS = {"allow_tma": True}


def _bf16(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


_FLOAT_FORMATS = {"f16": ("<e", 2), "f32": ("<f", 4), "tf32": ("<f", 4), "f64": ("<d", 8)}


def float_from_bits(elem: ScalarType, bits: int) -> float | None:
    """The value of an IEEE-like float given by its bits; None for 8/4-bit formats (kept as bits)."""
    if elem.name == "bf16":
        return _bf16(bits)
    fmt = _FLOAT_FORMATS.get(elem.name)
    if fmt is None:
        return None
    return struct.unpack(fmt[0], bits.to_bytes(fmt[1], "little"))[0]


def _render_float(elem: ScalarType, bits: int) -> str:
    value = float_from_bits(elem, bits)
    if value is None or math.isinf(value) or math.isnan(value):
        # Like the printer: non-finite (and unsized) values are shown by their bits.
        return f"0x{bits:0{max(1, elem.bits // 4)}X}"
    return f"{value:.6e}"


@dataclass(frozen=True, slots=True)
class TypedInt:
    """A tagged integer attribute (e.g. a reduction identity `0 : i32`)."""
    type: ScalarType
    value: int

    def __str__(self) -> str:
        return f"{self.value} : {self.type}"


@dataclass(frozen=True, slots=True)
class TypedFloat:
    """A tagged float attribute, kept as its bit pattern so equality is exact (−0.0, NaN)."""
    type: ScalarType
    bits: int

    @property
    def value(self) -> float | None:
        return float_from_bits(self.type, self.bits)

    def __str__(self) -> str:
        return f"{_render_float(self.type, self.bits)} : {self.type}"


@dataclass(frozen=True, slots=True)
class DivBy:
    divisor: int
    every: int | None = None
    along: int | None = None

    def __str__(self) -> str:
        extra = "".join(f", {k} {v}" for k, v in (("every", self.every), ("along", self.along))
                        if v is not None)
        return f"div_by<{self.divisor}{extra}>"


@dataclass(frozen=True, slots=True)
class Bounded:
    lb: int | None
    ub: int | None

    def __str__(self) -> str:
        def b(v: int | None) -> str:
            return "?" if v is None else str(v)
        return f"bounded<{b(self.lb)}, {b(self.ub)}>"


@dataclass(frozen=True, slots=True)
class SameElements:
    values: tuple[int, ...]

    def __str__(self) -> str:
        return f"same_elements<{list(self.values)}>"


@dataclass(frozen=True, slots=True)
class DictAttr:
    items: tuple[tuple[str, Any], ...]

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.items).get(key, default)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k} = {render(v)}" for k, v in self.items) + "}"


@dataclass(frozen=True, slots=True)
class Hints:
    """`optimization_hints`: per architecture key ("default", "sm_90", ...) a dictionary.

    `selected_from` is set by canonicalization: the key the entries were taken from. It is
    provenance only and takes no part in equality.
    """
    by_arch: tuple[tuple[str, DictAttr], ...]
    selected_from: str | None = None

    @property
    def selected(self) -> DictAttr:
        """The hints that apply: after canonicalization, the only entry (keyed by the target)."""
        return self.by_arch[0][1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hints) and self.by_arch == other.by_arch

    def __hash__(self) -> int:
        return hash(self.by_arch)

    def __str__(self) -> str:
        return "<" + ", ".join(f"{arch} = {d}" for arch, d in self.by_arch) + ">"


@dataclass(frozen=True, slots=True)
class Dense:
    """A dense constant: its type (as written in the attribute) and raw little-endian data."""
    type: Type | None
    data: bytes


@dataclass(frozen=True, slots=True)
class PreviewArg:
    """A public-preview constant argument (tags 0xD0..0xEF), kept as tag and decoded payload."""
    tag: int
    value: Any


def _elem_size(elem: ScalarType) -> int | None:
    if elem.name == "i1":
        return 1  # booleans take a byte each
    return None if elem.bits < 8 else elem.bits // 8


def dense_values(elem: ScalarType, data: bytes) -> tuple[Any, ...] | None:
    """Decode constant data of element type `elem`: ints, or floats as TypedFloat (exact bits).

    None when the element is packed below a byte (i4, f4) — callers then compare raw bytes.
    """
    size = _elem_size(elem)
    if size is None or len(data) % size:
        return None
    out: list[Any] = []
    for i in range(0, len(data), size):
        raw = int.from_bytes(data[i:i + size], "little", signed=elem.is_int and elem.bits > 1)
        out.append(TypedFloat(elem, raw & ((1 << (8 * size)) - 1)) if elem.is_float else raw)
    return tuple(out)


def constant_value(result_type: Type, attr: Dense) -> tuple[Any, ...]:
    """A shape-independent identity of a constant: its distinct element values, or its raw bytes.

    A splat constant of any shape reduces to a 1-tuple, so `tile<128x128xf32> 0.0` and a broadcast
    scalar `0.0` compare equal (cutile-rs and cuTile Python materialize constants differently).
    """
    elem = result_type.elem if isinstance(result_type, TileType) else None
    if isinstance(elem, ScalarType):
        values = dense_values(elem, attr.data)
        if values is not None:
            if len(set(values)) == 1:
                return (values[0],)
            return values
    return (attr.data,)


def render(value: Any) -> str:
    """Canonical text of an attribute value (used by the printer and in findings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, Dense):
        return f"dense<0x{value.data.hex()}>"
    return str(value)


def render_constant(result_type: Type, attr: Dense) -> str:
    """`<f32: 0.000000e+00>`-style text of a constant's value."""
    elem = result_type.elem if isinstance(result_type, TileType) else None
    if isinstance(elem, ScalarType):
        values = dense_values(elem, attr.data)
        if values is not None:
            shown = [_render_float(elem, v.bits) if isinstance(v, TypedFloat) else
                     ("true" if v else "false") if elem.name == "i1" else str(v) for v in values]
            body = shown[0] if len(set(shown)) == 1 else "[" + ", ".join(shown) + "]"
            return f"<{elem}: {body}>"
    return f"<0x{attr.data.hex()}>"
