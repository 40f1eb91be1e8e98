"""Arrays and their views: `arr.shape` dimensions, `Array.slice` and the alignment cuTile Python assumes
for a view's pointer.
"""

from __future__ import annotations

import math
from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile.calls.base import ArrayShape, _kw
from tileport.frontends.cutile.values import CV, Value
from tileport.model import types as T
from tileport.model.ir import Atom, CDim, Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, TileT


def array_dim(lw, arr: Ref, axis: Any, node) -> Ref:
    if not isinstance(axis, int) or not -arr.ty.rank <= axis < arr.ty.rank:
        raise lw.fail(node, f"shape index {axis} out of range for rank {arr.ty.rank}", "array.shape")
    axis %= arr.ty.rank
    view = _definition(lw, arr.name)
    if view is not None and view.kind == OpKind.MAKE_VIEW:  # an `Array.slice` view's extent, as cuTile reads it
        return _split_view_operands(view)[0][axis]
    return lw.b.value(OpKind.ARRAY_DIM, (arr,), ScalarT("i32"), lw.loc(node), hint=f"{arr.name}_dim{axis}", axis=axis)


def materialize(lw, v: Value, node) -> Value:
    """Turn lazy values (array shapes) into plain ones."""
    if isinstance(v, ArrayShape):
        return tuple(array_dim(lw, v.array, i, node) for i in range(v.array.ty.rank))
    return v


# ---------------------------------------------------------------- Array.slice

BASE_ALIGNMENT = 16  # bytes: a parameter's base address, as captured (base_addr_divisible_by=16) and launched
# Bytes per element where cuTile Python derives a view's alignment from its offset (whole-byte dtypes).
ELEMENT_BYTES = {"f64": 8, "i64": 8, "u64": 8, "f32": 4, "tf32": 4, "i32": 4, "u32": 4, "f16": 2, "bf16": 2,
                 "i16": 2, "u16": 2, "i8": 1, "u8": 1}
MAX_ASSUMED_DIV = 1024  # cuTile Python assumes at most this divisibility


def array_slice(lw, arr: Ref, args, kwargs, node) -> Ref:
    """`arr.slice(axis, start, stop)`, as cuTile Python builds it: the base pointer offset by
    `start * stride[axis]` (widened to 64 bits), with the alignment its dataflow analysis derives, and a
    tensor view of extent `stop - start` along `axis`, the array's other extents and its strides."""
    b = _kw(lw, args, kwargs, ("axis", "start", "stop"), node, "Array.slice", 3)
    rank, loc = arr.ty.rank, lw.loc(node)
    axis = b["axis"].value if isinstance(b["axis"], CV) else None
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise lw.fail(node, "Array.slice: axis must be a constant integer", "array.slice")
    if not -rank <= axis < rank:
        raise lw.fail(node, f"Array.slice: axis {axis} out of range for rank {rank}", "array.slice")
    axis %= rank
    start, stop = (_slice_bound(lw, b[k], node, k) for k in ("start", "stop"))
    if isinstance(start, CDim) and isinstance(stop, CDim) and isinstance(start.dim, int) \
            and isinstance(stop.dim, int) and stop.dim < start.dim:
        raise lw.fail(node, "Array.slice: stop must be greater than or equal to start", "array.slice")
    last = axis == rank - 1  # the last stride is the constant 1 of the capture signature
    parent = _definition(lw, arr.name)
    if parent is not None and parent.kind == OpKind.MAKE_VIEW:
        # a view of a view: from its pointer (before its alignment assumption, which cuTile Python makes only
        # for a pointer that becomes a view), its extents and strides; the view itself need not exist
        array, ptr, (dims, strides) = parent.args[1], parent.args[0], _split_view_operands(parent)
        aligned = _definition(lw, ptr.name)
        base_div, steps = 1, None  # no assumption: the parent view was not known aligned
        if aligned is not None and aligned.kind == OpKind.ASSUME_DIV_BY:
            ptr, base_div, steps = aligned.args[0], aligned.attr("divisor"), aligned.attr("steps")
        stride = CDim(1) if last else strides[axis]
    else:
        array, ptr, base_div, steps = arr, None, BASE_ALIGNMENT, ()
        dims = [array_dim(lw, arr, d, node) for d in range(rank)]
        strides = [array_stride(lw, arr, d, loc) for d in range(rank - 1)]
        stride = CDim(1) if last else strides[axis]
    offset = lw.b.value(OpKind.VIEW_OFFSET, (start, stride), TileT("u64", ()), loc, hint=f"{arr.name}_off")
    if ptr is None:
        ptr = lw.b.value(OpKind.PTR_BASE, (arr,), T.PtrT(arr.ty.dtype, ()), loc, hint=f"{arr.name}_base")
    ptr = lw.b.value(OpKind.PTR_OFFSET, (ptr, offset), ptr.ty, loc, hint=f"{arr.name}_at")
    start_div = _div_by(lw, start, node)
    divisor = _view_alignment(lw, arr.ty.dtype, base_div, start_div)  # a stride divides by 1
    if divisor > 1:
        steps = None if steps is None else (*steps, (axis, start_div, last))
        ptr = lw.b.value(OpKind.ASSUME_DIV_BY, (ptr,), ptr.ty, loc, hint=f"{arr.name}_aligned", divisor=divisor,
                         **_launch_alignment(lw, arr.ty.dtype, array.name, steps))
    extent = lw.b.value(OpKind.BINARY, (stop, start), ScalarT("i32"), loc, hint=f"{arr.name}_n", op="sub",
                        rounding=None, ftz=None, nan=None)
    dims = [extent if d == axis else dim for d, dim in enumerate(dims)]
    divisors = _extent_divisors(lw, parent, axis, extent, rank, node, constant=isinstance(start, CDim)
                                and isinstance(stop, CDim))
    return lw.b.value(OpKind.MAKE_VIEW, (ptr, array, *dims, *strides), arr.ty, loc, hint=f"{arr.name}_slice",
                      strides=(-1,) * (rank - 1) + (1,), **({"divisors": divisors} if any(d > 1 for d in divisors)
                                                           else {}))


def _extent_divisors(lw, parent, axis: int, extent: Ref, rank: int, node, constant: bool) -> tuple[int, ...]:
    """What cuTile Python assumes each extent of a slice divisible by (`assume div_by` after its non-negative
    bound): the sliced axis' `stop - start` by the gcd of theirs (a constant difference: nothing), the other
    axes as the parent view had them."""
    inherited = parent.attr("divisors") if parent is not None and parent.kind == OpKind.MAKE_VIEW else None
    out = list(inherited or (1,) * rank)
    out[axis] = 1 if constant else min(_div_by(lw, extent, node), MAX_ASSUMED_DIV)
    return tuple(out)


def _accessed_array(lw, arr: Ref) -> dict:
    """A load/store through an `Array.slice` view names the parameter it accesses: cuTile Python orders the
    memory operations of an array and of its views as one (their pointers share its alias set)."""
    op = _definition(lw, arr.name)
    return {"array": op.args[1].name} if op is not None and op.kind == OpKind.MAKE_VIEW else {}


def _not_a_view(lw, arr: Ref, node, fn: str) -> None:
    op = _definition(lw, arr.name)
    if op is not None and op.kind == OpKind.MAKE_VIEW:
        raise lw.fail(node, f"ct.{fn} on an `Array.slice` view is not supported by the translator yet", f"ct.{fn}",
                      "index the array itself, adding the slice's start to the indices")


def _split_view_operands(view) -> tuple[list, list]:
    """The extents and the dynamic strides of a `make_view`."""
    rank = view.ty.rank
    return list(view.args[2:2 + rank]), list(view.args[2 + rank:])


def _slice_bound(lw, v: Value, node, what: str) -> Atom:
    atom = lw.int_atom(v, node, f"Array.slice: {what}")
    if isinstance(atom, CDim) and isinstance(atom.dim, int) and atom.dim < 0:
        raise lw.fail(node, f"Array.slice: {what} must be non-negative", "array.slice")
    if not isinstance(atom, CDim) and atom.ty.dtype != "i32":
        raise lw.fail(node, f"Array.slice: {what} of type {atom.ty.dtype} is not supported yet", "array.slice",
                      "convert it to a 32-bit integer")
    return atom


def array_stride(lw, arr: Ref, axis: int, loc) -> Ref:
    return lw.b.value(OpKind.ARRAY_STRIDE, (arr,), ScalarT("i32"), loc, hint=f"{arr.name}_stride{axis}", axis=axis)


def _definition(lw, name: str):
    """The operation of the binding of `name` in scope: the last `let` of it in the open blocks (None when
    there is none, or when a reassignment makes it depend on control flow)."""
    found = [st for blk in lw.b.blocks for st in blk.stmts if getattr(st, "name", None) == name]
    return found[-1].op if found and not any(st.update for st in found) else None


def _div_by(lw, atom: Atom, node) -> int:
    """What cuTile Python's dataflow analysis knows an integer scalar divisible by: a constant by its
    magnitude (also as a tile of it: an operand of a tile product), a sum or difference by the gcd, a product by
    the product, a negation or an integer cast as its operand; anything else (parameters, block ids, loop
    indices, reductions) by 1."""
    if isinstance(atom, CDim):
        if not isinstance(atom.dim, int):  # the alignment of the view depends on the constant's value
            raise NeedsSpecialization(frozenset(sym_names(atom.dim)), "the alignment of an `Array.slice`",
                                      lw.loc(node))
        return abs(atom.dim)
    if isinstance(atom, Lit):
        return abs(atom.value) if isinstance(atom.value, int) and not isinstance(atom.value, bool) else 1
    op = _definition(lw, atom.name)
    if op is None or not all(T.is_int(d) for d in lw.b.dspace.values(op.ty.dtype)):
        return 1
    if op.kind == OpKind.BINARY and op.attr("op") in ("add", "sub"):
        return math.gcd(_div_by(lw, op.args[0], node), _div_by(lw, op.args[1], node))
    if op.kind == OpKind.BINARY and op.attr("op") == "mul":
        return _div_by(lw, op.args[0], node) * _div_by(lw, op.args[1], node)
    if (op.kind == OpKind.UNARY and op.attr("fn") in ("negative", "abs")) or op.kind in (
            OpKind.COPY, OpKind.SCALAR, OpKind.TILE0, OpKind.SCALAR_OF, OpKind.FULL, OpKind.SPLAT):
        return _div_by(lw, op.args[0], node)
    return 1


def view_alignment(steps, element_bytes: int, strides_aligned: bool) -> int:
    """cuTile Python's alignment of a view's pointer, the base 16-byte aligned, after the `Array.slice` steps
    (axis, start divisibility, last axis?): the gcd of 16 and of every offset in bytes. The capture signature
    knows no stride divisible (a non-last axis' offset divides by start x element bytes); cuTile's launcher
    specializes a stride it finds 16-byte divisible (`stride_divisible_by`), and that axis' offset is then
    a multiple of 16 bytes (`strides_aligned`: every non-last stride is)."""
    return math.gcd(BASE_ALIGNMENT, *(0 if strides_aligned and not last else start_div * element_bytes
                                      for _axis, start_div, last in steps))


def _launch_alignment(lw, dtype, array: str, steps) -> dict:
    """The attributes of a view's alignment assumption: its slicing `steps` (a view of it continues them), and
    `at_launch` when the launch's strides can make it more aligned than captured: the port then takes the
    alignment as its launcher computes it (an entry const generic), as cuTile Python compiles one kernel per
    stride divisibility; a fixed, smaller assumption would hide what the JIT knows of the strides."""
    if steps is None:
        return {}
    sizes = [ELEMENT_BYTES[d] for d in lw.b.dspace.values(dtype) if d in ELEMENT_BYTES]
    at_launch = any(view_alignment(steps, n, False) != view_alignment(steps, n, True) for n in sizes)
    return {"steps": steps, "view_of": array, **({"at_launch": True} if at_launch else {})}


def _view_alignment(lw, dtype, base_div: int, offset_div: int) -> int:
    """The divisibility cuTile Python assumes for a view's pointer: the gcd of its base's and of the offset
    in bytes, as a power of two. A generic element type whose dtypes give different alignments takes the
    smallest (the kernel is then split per dtype: see the lowerer's `_fma_groups`)."""
    per_dtype = [math.gcd(base_div, offset_div * ELEMENT_BYTES[d]) if d in ELEMENT_BYTES else 1
                 for d in lw.b.dspace.values(dtype)]
    divisor = min(per_dtype)
    return min(divisor & -divisor, MAX_ASSUMED_DIV)
