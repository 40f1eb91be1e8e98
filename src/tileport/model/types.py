"""Types of the kernel model: element dtypes, symbolic dimensions, tiles, scalars and arrays.

Element dtypes of array parameters are usually not fixed by a kernel's source: cuTile Python
specializes them at launch. The model keeps them as `DVar`s (one per dtype-polymorphic parameter
group) whose concrete values come from the configurations in use. Tile dimensions are `Dim`s:
integers or expressions over `ct.Constant[int]` parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

# Element dtype names of the model (short, target-neutral: f32, bf16, i64, ...).
FLOATS = ("f16", "bf16", "f32", "f64", "tf32")
INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
# What tiles and scalars of the model compute with; the float8 types are element types of arrays and of the
# tiles loaded from, stored to, cast and multiplied (MMA) with them only (no scalar holds them).
ELEMENT_DTYPES = ("bool", *INTS, *FLOATS)
DTYPES = (*ELEMENT_DTYPES, "f8e4m3fn", "f8e5m2")


# The accumulator element types of Tile IR's mma by operand element type (cutile 0.5.0 `mmaf` / `mmai`), first the
# default one.
MMA_ACCUMULATORS = {"f16": ("f16", "f32"), "bf16": ("f32",), "f32": ("f32",), "tf32": ("f32",), "f64": ("f64",),
                    "f8e4m3fn": ("f16", "f32"), "f8e5m2": ("f16", "f32"), "i8": ("i32",), "u8": ("i32",)}


def is_float(dt: str) -> bool:
    return dt in FLOATS or dt.startswith("f8")


def is_int(dt: str) -> bool:
    return dt in INTS


@dataclass(frozen=True)
class DVar:
    """A dtype-polymorphic element type (a generic type parameter of the emitted kernel)."""

    name: str

    def __str__(self) -> str:
        return self.name


DType = Union[str, DVar]


def concrete_dtypes(dt: DType, vectors: Mapping[DVar, tuple[str, ...]]) -> tuple[str, ...]:
    """The dtypes `dt` stands for in the configurations in use (`vectors`: generic -> its dtypes)."""
    return tuple(vectors.get(dt, ())) if isinstance(dt, DVar) else (dt,)


# ---------------------------------------------------------------- symbolic dimensions

@dataclass(frozen=True)
class Sym:
    """A `ct.Constant[int]` parameter used as a compile-time value."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DimOp:
    """Compile-time arithmetic over constants, e.g. `TILE // 2`."""

    op: str  # + - * // %
    lhs: "Dim"
    rhs: "Dim"

    def __str__(self) -> str:
        return f"({self.lhs} {self.op} {self.rhs})"


Dim = Union[int, Sym, DimOp]

_DIM_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}


def dim_op(op: str, a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return _DIM_OPS[op](a, b)
    return DimOp(op, a, b)


def eval_dim(d: Dim, consts: dict[str, int]) -> int:
    if isinstance(d, int):
        return d
    if isinstance(d, Sym):
        return int(consts[d.name])
    return _DIM_OPS[d.op](eval_dim(d.lhs, consts), eval_dim(d.rhs, consts))


Shape = tuple[Dim, ...]


def shape_str(shape: Shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


# ---------------------------------------------------------------- value types

@dataclass(frozen=True)
class TileT:
    dtype: DType
    shape: Shape

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"Tile[{self.dtype}, {shape_str(self.shape)}]"


@dataclass(frozen=True)
class ScalarT:
    """A runtime scalar (a kernel scalar parameter, a block id, a loop index...)."""

    dtype: DType

    def __str__(self) -> str:
        return f"Scalar[{self.dtype}]"


@dataclass(frozen=True)
class ArrayT:
    dtype: DType
    rank: int

    def __str__(self) -> str:
        return f"Array[{self.dtype}, rank {self.rank}]"


@dataclass(frozen=True)
class ConstT:
    """A compile-time Python value: int (possibly symbolic), float, bool, str or a dtype."""

    kind: str  # "int" | "float" | "bool" | "str" | "dtype" | "enum" | "none" | "tuple"

    def __str__(self) -> str:
        return f"Const[{self.kind}]"


@dataclass(frozen=True)
class PtrT:
    """A tile of pointers to elements of `dtype` (the pointer path of gather/scatter)."""

    dtype: DType
    shape: Shape

    def __str__(self) -> str:
        return f"PtrTile[{self.dtype}, {shape_str(self.shape)}]"


@dataclass(frozen=True)
class TokenT:
    """A memory-ordering token."""

    def __str__(self) -> str:
        return "Token"


Type = Union[TileT, ScalarT, ArrayT, ConstT, PtrT, TokenT]


def __getattr__(name: str):
    # Former home of the torch dtype names, kept for frontends written against it (they live in tileport.dtypes).
    if name == "TORCH_DTYPES":
        from tileport.dtypes import TORCH_DTYPES
        return TORCH_DTYPES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
