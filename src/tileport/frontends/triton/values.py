"""Frontend-side values of the Triton frontend (what a Python expression evaluates to).

Runtime values are kernel-model `Ref`s; everything else lives only while the kernel is lowered:
compile-time constants, dtypes, modules, pointers (a pointer parameter plus an integer offset) and
block pointers (`tl.make_block_ptr`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from tileport.model.ir import Ref


@dataclass(frozen=True)
class CV:
    """A compile-time value: int/float/bool/None/str, or a symbolic Dim (a constexpr parameter)."""

    value: Any


@dataclass(frozen=True)
class DT:
    """A dtype (`tl.float32`); `pointer` when it is a pointer dtype's element (`x.dtype.element_ty`);
    `of`: the array parameter whose element type it is (`x_ptr.dtype.element_ty`)."""

    dtype: Any
    of: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Module:
    name: str  # "tl" | "triton" | "libdevice"


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True)
class Helper:
    node: ast.FunctionDef
    module: Any = field(default=None, compare=False)  # the TritonModule it is defined in


@dataclass(frozen=True, eq=False)
class SourceModule:
    """A module of the kernel's package, bound to a name (`from ..runtime import tl_extra as ext`)."""

    module: Any  # its TritonModule


@dataclass(frozen=True)
class Ptr:
    """`param + offset`: `offset` is an integer scalar or tile (None: the parameter itself)."""

    array: Ref  # the array parameter (rank decided per parameter: see `Access`)
    offset: Ref | None
    elem: Any = None  # re-cast (`p.to(tl.pointer_type(tl.uint8))`): the element type read, offsets count its elements

    @property
    def dtype(self) -> Any:
        return self.elem if self.elem is not None else self.array.ty.dtype

    @property
    def shape(self) -> tuple:
        return tuple(self.offset.ty.shape) if self.offset is not None and hasattr(self.offset.ty, "shape") else ()


@dataclass(frozen=True)
class BlockPtr:
    """`tl.make_block_ptr(base, shape, strides, offsets, block_shape, order)`."""

    array: Ref
    shape: tuple  # of Values
    strides: tuple
    offsets: tuple
    block: tuple  # Dims
    order: tuple


@dataclass(frozen=True)
class Descriptor:
    """`tl.make_tensor_descriptor(base, shape, strides, block_shape, padding_option)`: a block pointer
    without offsets (each `.load(offsets)` / `.store(offsets, v)` supplies them, bounds always checked)."""

    array: Ptr
    shape: tuple  # of Values
    strides: tuple
    block: tuple  # Dims
    padding: str  # "zero" or "nan"


@dataclass(frozen=True)
class Method:
    """`x.to`, `x.dtype`, ... bound to its object."""

    obj: Any
    name: str


@dataclass(frozen=True)
class Gone:
    """A pointer advanced or reassigned in a loop, read after the loop (its value after it is not modelled)."""

    name: str


@dataclass(frozen=True)
class Chosen:
    """A pointer each branch of a runtime `if` (at `line`) sets into a different array: no one array after it."""

    name: str
    line: int


class Retry(Exception):
    """Lowering must restart with a changed decision about one parameter (see `translate.lower_kernel`)."""

    def __init__(self, what: str, param: str):
        super().__init__(f"{what} {param}")
        self.what, self.param = what, param
