"""Triton memory accesses -> partition-view loads/stores, or gathers/scatters.

A pointer is an array parameter plus an integer offset. When the offset's affine form is
block-structured (`affine.block_access`) and the mask is a conjunction of bounds checks, the access
becomes what a cuTile kernel writes as `ct.load(arr, index, shape, padding_mode)` on an N-D view of
the parameter (strides from the launch); otherwise it is a gather/scatter over the whole buffer
(1-D), masked as in the source. A parameter whose accesses disagree on the view is accessed through
gathers/scatters only (`Retry("flat", ..)` restarts the kernel with that decision).
"""

from __future__ import annotations

import ast
import math
from typing import Any

from tileport.frontends.triton import affine as A
from tileport.frontends.triton.values import Retry
from tileport.frontends.triton.values import CV, BlockPtr, Descriptor, Ptr
from tileport.model.ir import Lit, Ref
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ScalarT, TileT, is_float

PADDING = {0.0: "zero", math.inf: "pos_inf", -math.inf: "neg_inf"}


def _bind(lw, args, kwargs, names, node, fn, required):
    out = dict(zip(names, args))
    if len(args) > len(names):
        raise lw.fail(node, f"tl.{fn}: too many arguments", f"tl.{fn}")
    for k, v in kwargs.items():
        if k not in names:
            raise lw.fail(node, f"tl.{fn}: unknown argument `{k}`", f"tl.{fn}")
        out[k] = v
    for k in names[:required]:
        if k not in out:
            raise lw.fail(node, f"tl.{fn}: missing argument `{k}`", f"tl.{fn}")
    return out


def _none(v) -> bool:
    return v is None or (isinstance(v, CV) and v.value is None)


def array(lw, p: Ptr | BlockPtr, rank: int) -> Ref:
    """The array parameter as an operand of rank `rank` (every access of a parameter agrees on it)."""
    return Ref(p.array.name, ArrayT(p.array.ty.dtype, rank))


# ---------------------------------------------------------------- pointer arithmetic

def ptr_add(lw, ptr: Ptr, v: Any, node: ast.AST, negate: bool = False) -> Ptr:
    if isinstance(v, (Ptr, BlockPtr)):
        raise lw.fail(node, "the sum or difference of two pointers is not supported", "pointer arithmetic")
    if isinstance(v, Ref) and not (isinstance(v.ty, (ScalarT, TileT)) and v.ty.dtype in ("i32", "i64", "i16",
                                                                                           "i8", "u8", "u32")):
        if v.name in lw.loaded:
                    raise Retry("index", lw.loaded[v.name])
        raise lw.fail(node, f"a pointer offset must be an integer, not {v.ty}", "pointer arithmetic")
    if isinstance(v, CV) and not (type(v.value) is int or lw.poly_of(v) is not None):
        raise lw.fail(node, f"a pointer offset must be an integer, not {v.value!r}", "pointer arithmetic")
    if negate:
        v = lw.calls.unary(lw, "USub", v, node)
    if ptr.offset is None:
        offset = v if isinstance(v, Ref) else lw.calls.materialize_int(lw, v, node)
    else:
        offset = lw.calls.binary(lw, "+", ptr.offset, v, node)
    return Ptr(ptr.array, offset, ptr.elem)


def advanced(lw, p0, inc, iteration: A.Poly, node: ast.AST):
    """The value inside a loop of a pointer advanced by `inc` per iteration: `p0 + iteration * inc`."""
    it = lw.poly_atom(iteration, node)
    it_ref = it if isinstance(it, Ref) else lw.b.value(OpKind.SCALAR, (it,), ScalarT("i32"), lw.loc(node), hint="it")
    lw.track_scalar(it_ref)
    if isinstance(it, Ref):
        lw.poly[it_ref.name] = iteration
    if isinstance(p0, Ptr):
        return ptr_add(lw, p0, lw.calls.binary(lw, "*", it_ref, inc, node), node)
    if not (isinstance(inc, tuple) and len(inc) == len(p0.offsets)):
        raise lw.fail(node, "tl.advance needs one offset per block dimension", "tl.advance")
    offsets = tuple(lw.calls.binary(lw, "+", o, lw.calls.binary(lw, "*", it_ref, d, node), node)
                    for o, d in zip(p0.offsets, inc))
    return BlockPtr(p0.array, p0.shape, p0.strides, offsets, p0.block, p0.order)


def advance(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("base", "offsets"), node, "advance", 2)
    bp, offs = b["base"], b["offsets"]
    if not isinstance(bp, BlockPtr) or not isinstance(offs, tuple) or len(offs) != len(bp.offsets):
        raise lw.fail(node, "tl.advance takes a block pointer and one offset per dimension", "tl.advance")
    offsets = tuple(lw.calls.binary(lw, "+", o, d, node) for o, d in zip(bp.offsets, offs))
    return BlockPtr(bp.array, bp.shape, bp.strides, offsets, bp.block, bp.order)


def make_block_ptr(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("base", "shape", "strides", "offsets", "block_shape", "order"), node,
              "make_block_ptr", 5)
    base = b["base"]
    if not isinstance(base, Ptr) or base.elem is not None:
        raise lw.fail(node, "tl.make_block_ptr: `base` must be a pointer parameter (plus an offset), not re-cast",
                      "tl.make_block_ptr")
    fields = [b[k] for k in ("shape", "strides", "offsets", "block_shape")]
    if not all(isinstance(f, tuple) for f in fields) or len({len(f) for f in fields}) != 1:
        raise lw.fail(node, "tl.make_block_ptr: shape, strides, offsets and block_shape must be tuples of one "
                      "length", "tl.make_block_ptr")
    block = tuple(lw.compile_time(d, node, "block_shape") for d in b["block_shape"])
    if base.array.name in lw.flat:
        raise lw.fail(node, f"pointer `{base.array.name}` is used both as a block pointer and through "
                      "element pointers with another layout", "tl.make_block_ptr")
    return BlockPtr(base, b["shape"], b["strides"], b["offsets"], block, ())


# ---------------------------------------------------------------- loads and stores

def load(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("pointer", "mask", "other", "boundary_check", "padding_option", "cache_modifier",
                                 "eviction_policy", "volatile"), node, "load", 1)
    ptr = b["pointer"]
    if isinstance(ptr, BlockPtr):
        return _block_ptr_load(lw, ptr, b, node)
    if not isinstance(ptr, Ptr):
        raise lw.fail(node, f"tl.load of {lw.describe(ptr)}: a pointer is expected", "tl.load")
    mask = None if _none(b.get("mask")) else b["mask"]
    other = None if _none(b.get("other")) else b["other"]
    if mask is not None and not (isinstance(mask, Ref) and mask.ty.dtype == "bool"):
        if isinstance(mask, CV) and mask.value is True:
            mask = None
        else:
            raise lw.fail(node, "tl.load: mask must be a boolean tile", "tl.load")
    dtype = ptr.dtype
    pad, select_other = _padding(lw, other, mask, node)
    acc, partial = _access(lw, ptr, mask, implied=True)
    loc = lw.loc(node)
    if acc is not None and (pad is None or partial):
        # the view pads out-of-bounds elements with zero; `other` goes where the whole mask is false
        pad, select_other = pad or "zero", select_other or (other if other is not None else CV(0))
    if acc is not None:
        order = register_view(lw, ptr.array.name, acc, transposable=True)
        index = tuple(lw.poly_atom(p, node) for p in acc.index)
        out = lw.b.value(OpKind.LOAD, (array(lw, ptr, len(acc.tile)), *index), TileT(dtype, tuple(acc.tile)), loc,
                         hint=f"{ptr.array.name}_tile", shape=tuple(acc.tile), order=order, padding=pad,
                         check_bounds=None, latency=None, allow_tma=None)
        out = _reshape(lw, out, ptr.shape, node)
    else:
        out = _gather(lw, ptr, mask, other if select_other is None and other is not None else None, node)
    if select_other is not None:
        out = lw.calls.where(lw, mask, out, select_other, node)
    lw.loaded[out.name] = ptr.array.name
    return out


def _padding(lw, other, mask, node) -> tuple[str | None, Any]:
    """(padding mode of a partition load or None, a runtime `other` to select after the load)."""
    if mask is None:
        return "undetermined", None
    if other is None:
        return "zero", None
    if isinstance(other, CV) and isinstance(other.value, (int, float)) and not isinstance(other.value, bool):
        v = float(other.value)
        if math.isnan(v):
            return "nan", None
        return PADDING.get(v), None
    return "zero", other


def _access(lw, ptr: Ptr, mask, implied: bool = False) -> tuple[A.BlockAccess | None, bool]:
    """(the block access of a pointer under a mask, whether the mask says more than its bounds). `implied`: a
    mask that is bounds and more (`in_bounds & ~future`) bounds the view by its bounds part (a load: its
    in-bounds elements may be read; the caller selects `other` where the whole mask is false)."""
    if ptr.array.name in lw.flat or ptr.elem is not None:  # a re-cast pointer: element-wise, in its own type
        return None, False
    poly = A.const(0) if ptr.offset is None else lw.poly_of(ptr.offset)
    if poly is None:
        return None, False
    bounds, partial = None, False
    if mask is not None:
        bounds = lw.bounds.get(mask.name)
        if bounds is None and implied:
            bounds, partial = lw.implied.get(mask.name), True
        if bounds is None:
            return None, False
    return A.block_access(poly, ptr.shape, lw.scalar_params, bounds), partial


def memory_order(acc: A.BlockAccess) -> list[int] | None:
    """For a tile whose unit-stride dimension is not its last (`k + k_pos[None, :] * stride_ks + dims[:, None]`,
    a transposed tile): the tile dimension of each dimension of the view in memory order (the unit-stride
    one last, as the caller's tensor has it); None when the tile already is in memory order."""
    unit = [d for d, st in enumerate(acc.strides) if st == A.const(1)]
    if len(unit) != 1 or unit[0] == len(acc.strides) - 1:
        return None
    return [d for d in range(len(acc.strides)) if d != unit[0]] + unit


def register_view(lw, name: str, acc: A.BlockAccess, transposable: bool = False) -> tuple[int, ...] | None:
    """Record the view a partition access needs (its strides and extents: the launch contract). A load
    (`transposable`) of a transposed tile gets the view in memory order and returns cuTile's `order` (the
    view dimension of each tile dimension, as `ct.load(k, .., order=(0, 1, 3, 2))` loads K transposed),
    so the unit-stride dimension stays the view's last, where a TMA load needs it; else None."""
    dims = memory_order(acc) if transposable else None
    view = dims or list(range(len(acc.strides)))
    strides = tuple(A.key(acc.strides[d]) for d in view)
    extents = [None if acc.extents[d] is None else A.key(acc.extents[d]) for d in view]
    _record_view(lw, name, strides, extents)
    return None if dims is None else tuple(dims.index(d) for d in range(len(dims)))


def _record_view(lw, name: str, strides: tuple, extents: list) -> None:
    if lw.views.setdefault(name, strides) != strides:
        raise Retry("flat", name)
    seen = lw.extents.setdefault(name, [set() for _ in strides])
    for d, e in enumerate(extents):
        if e is not None:
            seen[d].add(e)
            if len(seen[d]) > 1:
                raise Retry("flat", name)


def _reshape(lw, t: Ref, shape: tuple, node) -> Ref:
    if tuple(t.ty.shape) == tuple(shape):
        return t
    return lw.b.value(OpKind.RESHAPE, (t,), TileT(t.ty.dtype, tuple(shape)), lw.loc(node), hint=f"{t.name}_r",
                      shape=tuple(shape))


def _offsets(lw, ptr: Ptr, shape: tuple, node):
    if ptr.offset is None:
        return Lit(0, ScalarT("i32"))
    off = ptr.offset
    if isinstance(off.ty, ScalarT) or tuple(off.ty.shape) != tuple(shape):
        off = lw.b.to_tile(off, off.ty.dtype, shape, lw.loc(node))
    return off


def _common_shape(lw, ptr: Ptr, others, node) -> tuple:
    shape = ptr.shape
    for o in others:
        if isinstance(o, Ref) and isinstance(o.ty, TileT):
            shape = lw.b.broadcast_shape(shape, o.ty.shape, lw.loc(node))
    return tuple(shape)


def _go_flat(lw, ptr: Ptr) -> None:
    """An element-wise access addresses the 1-D buffer: every access of that parameter must (no N-D view)."""
    if ptr.array.name not in lw.flat:
        raise Retry("flat", ptr.array.name)


def _gather(lw, ptr: Ptr, mask, other, node) -> Ref:
    _go_flat(lw, ptr)
    loc = lw.loc(node)
    dtype = ptr.dtype
    shape = _common_shape(lw, ptr, [mask], node)
    pad = 0
    if other is not None:
        pad = lw.compile_time(other, node, "tl.load other=")
        if not isinstance(pad, (int, float)) or isinstance(pad, bool):
            raise lw.fail(node, f"tl.load: other={pad!r} is not a number", "tl.load")
        if not all(is_float(d) for d in lw.b.dspace.values(dtype)) and not float(pad).is_integer():
            raise lw.fail(node, f"tl.load: other={pad!r} does not fit an integer element type", "tl.load")
    args = (array(lw, ptr, 1), _offsets(lw, ptr, shape, node))
    if mask is not None:
        args += (lw.b.to_tile(mask, "bool", shape, loc),)
    out = lw.b.value(OpKind.GATHER, args, TileT(dtype, shape), loc, hint=f"{ptr.array.name}_tile", padding_value=pad,
                     has_mask=mask is not None, shape=shape, **_recast(ptr), latency=None)
    # a copy: the variable it is bound to may be reassigned later (a gather result is destructured)
    return lw.b.value(OpKind.COPY, (out,), out.ty, loc, hint=f"{ptr.array.name}_vals")


def store(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("pointer", "value", "mask", "boundary_check", "cache_modifier",
                                 "eviction_policy"), node, "store", 2)
    ptr = b["pointer"]
    if isinstance(ptr, BlockPtr):
        return _block_ptr_store(lw, ptr, b, node)
    if not isinstance(ptr, Ptr):
        raise lw.fail(node, f"tl.store to {lw.describe(ptr)}: a pointer is expected", "tl.store")
    mask = None if _none(b.get("mask")) else b["mask"]
    if mask is not None and not (isinstance(mask, Ref) and mask.ty.dtype == "bool"):
        if isinstance(mask, CV) and mask.value is True:
            mask = None
        else:
            raise lw.fail(node, "tl.store: mask must be a boolean tile", "tl.store")
    dtype = ptr.dtype
    value = b["value"]
    stored_ints(lw, ptr, value)
    loc = lw.loc(node)
    acc, _ = _access(lw, ptr, mask)
    if acc is not None:
        register_view(lw, ptr.array.name, acc)
        tile = _value_tile(lw, value, dtype, ptr.shape, node)
        tile = _reshape(lw, tile, tuple(acc.tile), node)
        index = tuple(lw.poly_atom(p, node) for p in acc.index)
        lw.b.effect(OpKind.STORE, (array(lw, ptr, len(acc.tile)), tile, *index), loc, order=None, check_bounds=None,
                    latency=None, allow_tma=None)
        return CV(None)
    _go_flat(lw, ptr)
    shape = _common_shape(lw, ptr, [mask, value], node)
    tile = _value_tile(lw, value, dtype, shape, node)
    args_ = (array(lw, ptr, 1), tile, _offsets(lw, ptr, shape, node))
    if mask is not None:
        args_ += (lw.b.to_tile(mask, "bool", shape, loc),)
    lw.b.effect(OpKind.SCATTER, args_, loc, has_mask=mask is not None, shape=shape, **_recast(ptr), latency=None)
    return CV(None)


def _recast(ptr: Ptr) -> dict:
    """Attributes of a gather/scatter through `ptr`: a re-cast pointer's accesses reinterpret the buffer as its
    element type (`elem`), unchecked against the array's extent (in other elements; Triton checks nothing)."""
    if ptr.elem is None:
        return {"check_bounds": None}
    return {"check_bounds": False, "elem": ptr.elem}


def stored_ints(lw, ptr: Ptr, value) -> None:
    """Integer tiles computed by the kernel and stored into a pointer assumed to hold floats (no dtype
    configured): the pointer holds integers of that width (the kernel is lowered again with it)."""
    if isinstance(value, Ref) and value.ty.dtype in ("i32", "i64") and value.name not in lw.loaded \
            and ptr.array.name in lw.default_float:
        raise Retry("index" if value.ty.dtype == "i64" else "int", ptr.array.name)


def _value_tile(lw, value, dtype, shape, node) -> Ref:
    """The stored value as a tile of the pointer's element type (Triton casts implicitly on store)."""
    loc = lw.loc(node)
    if isinstance(value, Ref) and value.ty.dtype == "bool" and dtype != "bool":
        value = lw.calls.to(lw, value, dtype, node)
    if isinstance(value, Ref) and isinstance(value.ty, TileT):
        if len(value.ty.shape) > len(shape) or lw.b.broadcast_shape(value.ty.shape, shape, loc) != tuple(shape):
            raise lw.fail(node, f"tl.store: value of shape {value.ty.shape} does not fit pointers of shape {shape}",
                          "tl.store")
        return lw.b.to_tile(lw.b.cast(value, dtype, loc), dtype, tuple(shape), loc)
    if isinstance(value, Ref):
        return lw.b.to_tile(lw.b.cast(value, dtype, loc), dtype, tuple(shape), loc)
    return lw.b.to_tile(lw.atom(value, node, dtype), dtype, tuple(shape), loc)


# ---------------------------------------------------------------- block pointers

def _block_access(lw, bp: BlockPtr, checked: tuple, node, construct: str = "tl.make_block_ptr") -> A.BlockAccess:
    """A block pointer as the equivalent affine pointer: one synthetic arange per block dimension."""
    rank = len(bp.block)
    base = bp.array
    poly = A.const(0) if base.offset is None else lw.poly_of(base.offset)
    bounds = []
    for d in range(rank):
        stride, offset, extent = (lw.poly_of(v) for v in (bp.strides[d], bp.offsets[d], bp.shape[d]))
        if stride is None or offset is None or (d in checked and extent is None):
            raise lw.fail(node, f"block pointer dimension {d}: shape, stride and offset must be integer scalars "
                          "or constants", construct)
        ar = ("a", f"bp{id(node)}_{d}", bp.block[d], rank - 1 - d)
        poly = None if poly is None else A.add(poly, A.mul(A.add(offset, A.factor(ar)), stride))
        if d in checked:
            bounds.append(A.Bound(ar, tuple(offset.items()), tuple(extent.items())))
    acc = None if poly is None else A.block_access(poly, tuple(bp.block), lw.scalar_params, bounds)
    if acc is None:
        what = "block pointer" if construct == "tl.make_block_ptr" else "tensor descriptor access"
        raise lw.fail(node, f"this {what} is not a partition of an array view (offsets must be multiples "
                      "of the block shape; strides must be scalar parameters or 1)", construct,
                      "align the offsets to the block shape")
    return acc


def _checked(lw, v, rank: int, node) -> tuple:
    if _none(v):
        return ()
    items = v if isinstance(v, tuple) else (v,)
    dims = tuple(lw.compile_time(i, node, "boundary_check") for i in items)
    if not all(type(d) is int and 0 <= d < rank for d in dims):
        raise lw.fail(node, f"boundary_check {dims} names dimensions outside 0..{rank - 1}", "boundary_check")
    return dims


def _block_ptr_load(lw, bp: BlockPtr, b, node):
    checked = _checked(lw, b.get("boundary_check"), len(bp.block), node)
    option = "" if _none(b.get("padding_option")) else lw.compile_time(b["padding_option"], node, "padding_option")
    if option not in ("", "zero", "nan"):
        raise lw.fail(node, f"padding_option={option!r} is not supported", "tl.load", "use 'zero' or 'nan'")
    pad = "nan" if option == "nan" else ("zero" if checked else "undetermined")
    return _block_load(lw, bp, checked, pad, node, "tl.make_block_ptr")


def _block_load(lw, bp: BlockPtr, checked: tuple, pad: str, node, construct: str):
    acc = _block_access(lw, bp, checked, node, construct)
    order = register_view(lw, bp.array.array.name, acc, transposable=True)
    index = tuple(lw.poly_atom(p, node) for p in acc.index)
    dtype = bp.array.array.ty.dtype
    out = lw.b.value(OpKind.LOAD, (array(lw, bp.array, len(acc.tile)), *index), TileT(dtype, tuple(acc.tile)),
                     lw.loc(node), hint=f"{bp.array.array.name}_tile", shape=tuple(acc.tile), order=order,
                     padding=pad, check_bounds=None, latency=None, allow_tma=_descriptor_tma(construct))
    return _reshape(lw, out, tuple(bp.block), node)


def _block_ptr_store(lw, bp: BlockPtr, b, node):
    if not _none(b.get("mask")):
        raise lw.fail(node, "tl.store to a block pointer takes boundary_check, not mask", "tl.store")
    _block_store(lw, bp, _checked(lw, b.get("boundary_check"), len(bp.block), node), b["value"], node,
                 "tl.make_block_ptr")
    return CV(None)


def _block_store(lw, bp: BlockPtr, checked: tuple, value, node, construct: str) -> None:
    acc = _block_access(lw, bp, checked, node, construct)
    register_view(lw, bp.array.array.name, acc)
    dtype = bp.array.array.ty.dtype
    tile = _reshape(lw, _value_tile(lw, value, dtype, tuple(bp.block), node), tuple(acc.tile), node)
    index = tuple(lw.poly_atom(p, node) for p in acc.index)
    lw.b.effect(OpKind.STORE, (array(lw, bp.array, len(acc.tile)), tile, *index), lw.loc(node), order=None,
                check_bounds=None, latency=None, allow_tma=_descriptor_tma(construct))


def _descriptor_tma(construct: str) -> bool | None:
    """Tensor-descriptor accesses take TMA, as Triton's do; the rest is decided per kernel (memory_paths.py)."""
    return True if construct.startswith("tensor_descriptor.") else None


# ---------------------------------------------------------------- tensor descriptors
# A descriptor is a block pointer whose offsets come with each access, every dimension bounds-checked
# (out-of-bounds elements read as the padding and are not written), as Triton's TMA descriptors do.

def make_tensor_descriptor(lw, args, kwargs, node):
    fn = "tl.make_tensor_descriptor"
    b = _bind(lw, args, kwargs, ("base", "shape", "strides", "block_shape", "padding_option"), node,
              "make_tensor_descriptor", 4)
    base = b["base"]
    if not isinstance(base, Ptr):
        raise lw.fail(node, f"{fn}: `base` must be a pointer parameter (plus an offset)", fn)
    fields = [b[k] for k in ("shape", "strides", "block_shape")]
    if not all(isinstance(f, tuple) for f in fields) or len({len(f) for f in fields}) != 1 or not fields[0]:
        raise lw.fail(node, f"{fn}: shape, strides and block_shape must be non-empty lists of one length", fn)
    last = b["strides"][-1]
    if not (isinstance(last, CV) and last.value == 1):
        raise lw.fail(node, f"{fn}: the last stride must be the constant 1 (got {lw.describe(last)})", fn,
                      "descriptors describe arrays whose last dimension is contiguous")
    block = tuple(lw.compile_time(d, node, "block_shape") for d in b["block_shape"])
    padding = "zero" if _none(b.get("padding_option")) else lw.compile_time(b["padding_option"], node,
                                                                           "padding_option")
    if padding not in ("zero", "nan"):
        raise lw.fail(node, f"{fn}: padding_option={padding!r} is not supported", fn, "use 'zero' or 'nan'")
    if base.array.name in lw.flat:
        raise lw.fail(node, f"pointer `{base.array.name}` is used both as a tensor descriptor and through "
                      "element pointers with another layout", fn)
    return Descriptor(base, b["shape"], b["strides"], block, padding)


def _descriptor_block(lw, desc, offsets, node, fn: str) -> BlockPtr:
    if not isinstance(desc, Descriptor):
        raise lw.fail(node, f"{fn}: {lw.describe(desc)} is not a tensor descriptor made by "
                      "tl.make_tensor_descriptor", fn)
    if isinstance(offsets, list):
        offsets = tuple(offsets)
    if not isinstance(offsets, tuple) or len(offsets) != len(desc.block):
        raise lw.fail(node, f"{fn}: one offset per block dimension ({len(desc.block)}) is expected", fn)
    return BlockPtr(desc.array, desc.shape, desc.strides, offsets, desc.block, ())


def descriptor_load(lw, desc, args, kwargs, node):
    fn = "tensor_descriptor.load"
    b = _bind(lw, args, kwargs, ("offsets",), node, "load", 1)
    bp = _descriptor_block(lw, desc, b["offsets"], node, fn)
    return _block_load(lw, bp, tuple(range(len(bp.block))), desc.padding, node, fn)


def descriptor_store(lw, desc, args, kwargs, node):
    fn = "tensor_descriptor.store"
    b = _bind(lw, args, kwargs, ("offsets", "value"), node, "store", 2)
    bp = _descriptor_block(lw, desc, b["offsets"], node, fn)
    _block_store(lw, bp, tuple(range(len(bp.block))), b["value"], node, fn)
    return CV(None)


def load_tensor_descriptor(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("desc", "offsets"), node, "load_tensor_descriptor", 2)
    return descriptor_load(lw, b["desc"], (b["offsets"],), {}, node)


def store_tensor_descriptor(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("desc", "offsets", "value"), node, "store_tensor_descriptor", 3)
    return descriptor_store(lw, b["desc"], (b["offsets"], b["value"]), {}, node)
