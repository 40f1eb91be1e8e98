"""Shape operations: permute/trans, reshape, expand_dims and `None` subscripts, broadcast_to, split, join."""

from __future__ import annotations

import ast

from tileport.frontends.triton import affine as A
from tileport.frontends.triton.calls.arith import _keep_loaded
from tileport.frontends.triton.calls.base import _bind, _shape, _tile
from tileport.model.ir import Lit, Ref
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, TileT


def expand(lw, x: Ref, items, node) -> Ref:
    """`x[:, None]`: a reshape adding unit axes (affine forms and mask bounds follow their axes)."""
    old = tuple(x.ty.shape)
    slices = sum(1 for e in items if isinstance(e, ast.Slice))
    ellipsis = any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in items)
    if slices > len(old) or (not ellipsis and slices != len(old)):
        raise lw.fail(node, f"indexing a rank-{len(old)} tile with {len(items)} entries", "subscript")
    new, mapping, j = [], {}, 0
    for e in items:
        if isinstance(e, ast.Slice):
            mapping[j] = len(new)
            new.append(old[j])
            j += 1
        elif e.value is None:
            new.append(1)
        else:
            for _ in range(len(old) - slices):
                mapping[j] = len(new)
                new.append(old[j])
                j += 1
    r, r2 = len(old), len(new)
    out = lw.b.value(OpKind.RESHAPE, (x,), TileT(x.ty.dtype, tuple(new)), lw.loc(node), hint=f"{x.name}_e",
                     shape=tuple(new))
    axes = {r - 1 - a: r2 - 1 - b for a, b in mapping.items()}
    if x.name in lw.poly:
        lw.poly[out.name] = A.remap_axes(lw.poly[x.name], axes)
    if x.name in lw.bounds:  # the mask's aranges move with the tile's axes, as the offsets' do
        lw.bounds[out.name] = [A.remap_bound(bd, axes) for bd in lw.bounds[x.name]]
    if x.name in lw.implied:
        lw.implied[out.name] = [A.remap_bound(bd, axes) for bd in lw.implied[x.name]]
    if x.name in lw.loaded:
        lw.loaded[out.name] = lw.loaded[x.name]
    return out


def permute(lw, x: Ref, axes: tuple, node) -> Ref:
    if sorted(axes) != list(range(x.ty.rank)):
        raise lw.fail(node, f"permutation {axes} does not match a rank-{x.ty.rank} tile", "permute")
    shape = tuple(x.ty.shape[a] for a in axes)
    return lw.b.value(OpKind.PERMUTE, (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_t",
                      axes=tuple(axes))


def trans(lw, args, kwargs, node):
    x = _tile(lw, args[0] if args else kwargs.get("input"), node, "tl.trans")
    dims = [lw.compile_time(d, node, "dims") for d in args[1:]] or (
        list(lw.compile_time(kwargs["dims"], node, "dims")) if "dims" in kwargs else None)
    if dims and len(dims) == 1 and isinstance(dims[0], tuple):
        dims = list(dims[0])
    axes = tuple(dims) if dims else tuple(reversed(range(x.ty.rank)))
    return permute(lw, x, axes, node)


def reshape(lw, args, kwargs, node):
    x = _tile(lw, args[0] if args else kwargs.get("input"), node, "tl.reshape")
    rest = args[1:] if len(args) > 1 else [kwargs.get("shape")]
    shape = _shape(lw, rest[0] if len(rest) == 1 else tuple(rest), node, "tl.reshape")
    out = lw.b.value(OpKind.RESHAPE, (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_r", shape=shape)
    _keep_loaded(lw, (x,), out)
    return out


def expand_dims(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "axis"), node, "expand_dims", 2)
    x = _tile(lw, b["input"], node, "tl.expand_dims")
    axis = lw.compile_time(b["axis"], node, "axis")
    if type(axis) is not int:
        raise lw.fail(node, "tl.expand_dims: axis must be an integer", "tl.expand_dims")
    rank = x.ty.rank + 1
    axis %= rank
    items = [ast.Slice() for _ in range(x.ty.rank)]
    items.insert(axis, ast.Constant(None))
    return expand(lw, x, items, node)


def broadcast_to(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "shape"), node, "broadcast_to", 2)
    x = _tile(lw, b["input"], node, "tl.broadcast_to")
    shape = _shape(lw, b["shape"], node, "tl.broadcast_to")
    return lw.b.to_tile(x, x.ty.dtype, shape, lw.loc(node))


def split(lw, args, kwargs, node):
    """tl.split(a): a tile whose last dimension is 2 -> its two halves along it (extracts, then reshapes)."""
    b = _bind(lw, args, kwargs, ("a",), node, "split", 1)
    x = _tile(lw, b["a"], node, "tl.split")
    if not x.ty.shape or x.ty.shape[-1] != 2:
        raise lw.fail(node, f"tl.split: the last dimension of {x.ty} must be 2", "tl.split")
    part, out = tuple(x.ty.shape[:-1]) + (1,), tuple(x.ty.shape[:-1])
    halves = []
    for i in (0, 1):
        index = tuple(Lit(0, ScalarT("i32")) for _ in out) + (Lit(i, ScalarT("i32")),)
        e = lw.b.value(OpKind.EXTRACT, (x, *index), TileT(x.ty.dtype, part), lw.loc(node), hint=f"{x.name}_h{i}",
                       shape=part)
        halves.append(lw.b.value(OpKind.RESHAPE, (e,), TileT(x.ty.dtype, out), lw.loc(node), hint=f"{x.name}_{i}",
                                 shape=out))
        _keep_loaded(lw, (x,), halves[-1])
    return tuple(halves)


def join(lw, args, kwargs, node):
    """tl.join(a, b): one tile with a new last dimension of 2 (a, then b), as a concatenation."""
    b = _bind(lw, args, kwargs, ("a", "b"), node, "join", 2)
    x, y = (_tile(lw, b[k], node, "tl.join") for k in ("a", "b"))
    loc = lw.loc(node)
    dtype = lw.b.promote(x.ty.dtype, y.ty.dtype, loc, "tl.join")
    shape = lw.b.broadcast_shape(x.ty.shape, y.ty.shape, loc)
    parts = [lw.b.value(OpKind.RESHAPE, (lw.b.to_tile(lw.b.cast(v, dtype, loc), dtype, shape, loc),),
                        TileT(dtype, tuple(shape) + (1,)), loc, hint=f"{v.name}_j", shape=tuple(shape) + (1,))
             for v in (x, y)]
    return lw.b.value(OpKind.CAT, tuple(parts), TileT(dtype, tuple(shape) + (2,)), loc, hint="joined",
                      axis=len(shape))
