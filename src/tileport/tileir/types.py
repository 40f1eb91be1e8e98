"""Structured Tile IR types, rendered the way `tileirdisasm` prints them.

Types are frozen dataclasses so they compare by value and can be used in dataflow keys.
A dynamic dimension or stride is `None` (the bytecode stores INT64_MIN; the printer shows `?`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

_INT_BITS = {"i1": 1, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "tf32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8,
               "f8E8M0FNU": 8, "f4E2M1FN": 4, "f8E5M3FNU": 8}


@dataclass(frozen=True, slots=True)
class ScalarType:
    name: str

    @property
    def is_float(self) -> bool:
        return self.name in _FLOAT_BITS

    @property
    def is_int(self) -> bool:
        return self.name in _INT_BITS

    @property
    def bits(self) -> int:
        return _INT_BITS.get(self.name) or _FLOAT_BITS[self.name]

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class PointerType:
    pointee: ScalarType
    # 13.4+ pointer attribute byte (cutile-rs "pointer classification"); None when absent.
    attr: int | None = None

    def __str__(self) -> str:
        return f"ptr<{self.pointee}>"


Element = Union[ScalarType, PointerType]


@dataclass(frozen=True, slots=True)
class TokenType:
    def __str__(self) -> str:
        return "token"


@dataclass(frozen=True, slots=True)
class TileType:
    shape: tuple[int, ...]
    elem: Element

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tile<{dims}{self.elem}>"


def _dims(values: tuple[int | None, ...]) -> str:
    return ",".join("?" if v is None else str(v) for v in values)


@dataclass(frozen=True, slots=True)
class TensorViewType:
    elem: ScalarType
    shape: tuple[int | None, ...]
    strides: tuple[int | None, ...]
    ptr_attr: int | None = None

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor_view<{dims}{self.elem}, strides=[{_dims(self.strides)}]>"


def _tile_shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def _padding(padding: str | None) -> str:
    return "" if padding is None else f", padding_value = {padding}"


def _dim_map(dim_map: tuple[int, ...]) -> str:
    # The printer omits the identity map.
    if dim_map == tuple(range(len(dim_map))):
        return ""
    return ", dim_map=[" + ", ".join(str(d) for d in dim_map) + "]"


@dataclass(frozen=True, slots=True)
class PartitionViewType:
    tile: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding: str | None

    def __str__(self) -> str:
        return (f"partition_view<tile=({_tile_shape(self.tile)}){_padding(self.padding)}, "
                f"{self.tensor_view}{_dim_map(self.dim_map)}>")


@dataclass(frozen=True, slots=True)
class GatherScatterViewType:
    tile: tuple[int, ...]
    tensor_view: TensorViewType
    sparse_dim: int
    padding: str | None

    def __str__(self) -> str:
        return (f"gather_scatter_view<tile=({_tile_shape(self.tile)}){_padding(self.padding)}, "
                f"{self.tensor_view}, sparse_dim={self.sparse_dim}>")


@dataclass(frozen=True, slots=True)
class StridedViewType:
    tile: tuple[int, ...]
    traversal_strides: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding: str | None

    def __str__(self) -> str:
        return (f"strided_view<tile=({_tile_shape(self.tile)}), "
                f"traversal_strides=[{_dims(self.traversal_strides)}]{_padding(self.padding)}, "
                f"{self.tensor_view}{_dim_map(self.dim_map)}>")


@dataclass(frozen=True, slots=True)
class FunctionType:
    params: tuple["Type", ...]
    results: tuple["Type", ...]

    def __str__(self) -> str:
        return f"({', '.join(map(str, self.params))}) -> ({', '.join(map(str, self.results))})"


Type = Union[ScalarType, PointerType, TokenType, TileType, TensorViewType, PartitionViewType,
             GatherScatterViewType, StridedViewType, FunctionType]


def is_token(t: Type) -> bool:
    return isinstance(t, TokenType)


def is_pointer_tile(t: Type) -> bool:
    return isinstance(t, TileType) and isinstance(t.elem, PointerType)
