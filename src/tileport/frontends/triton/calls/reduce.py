"""Reductions and scans: `tl.sum`/`max`/`min`/..., `tl.argmax`/`argmin`, `tl.cumsum`."""

from __future__ import annotations

from tileport.frontends.triton import memory as M
from tileport.frontends.triton.calls.arith import compare, materialize_int, where
from tileport.frontends.triton.calls.base import REDUCE, REDUCTION_DTYPES, _bind, _dtype, _tile
from tileport.frontends.triton.values import CV
from tileport.model.ir import Ref
from tileport.model.ops import OpKind
from tileport.model.types import TileT


def reduction(fn):
    def handler(lw, args, kwargs, node):
        b = _bind(lw, args, kwargs, ("input", "axis", "keep_dims", "dtype", "return_indices",
                                     "return_indices_tie_break_left"), node, fn, 1)
        if not M._none(b.get("return_indices")) and lw.compile_time(b["return_indices"], node, "return_indices"):
            raise lw.fail(node, f"tl.{fn}(return_indices=True) is not supported", f"tl.{fn}",
                          "use tl.argmax/argmin separately")
        x = _tile(lw, b["input"], node, f"tl.{fn}")
        if fn == "sum" and not M._none(b.get("dtype")):
            x = lw.b.cast(x, _dtype(lw, b["dtype"], node, "tl.sum"), lw.loc(node))
        else:
            x = _reduction_input(lw, REDUCE[fn], x, node)
        return _reduce(lw, REDUCE[fn], x, b.get("axis"), b.get("keep_dims"), node)
    return handler


def _reduction_input(lw, fn: str, x: Ref, node) -> Ref:
    """`x` in the element type Triton reduces it in (REDUCTION_DTYPES), per dtype configuration."""
    values = lw.b.dspace.values(x.ty.dtype)
    widened = tuple(REDUCTION_DTYPES[fn].get(v, v) for v in values)
    if widened == values:
        return x
    return lw.b.cast(x, lw.b.dspace.generic(widened), lw.loc(node))


def _reduce(lw, fn: str, x: Ref, axis_v, keep_v, node) -> Ref:
    axis = None if M._none(axis_v) else lw.compile_time(axis_v, node, "axis")
    keep = False if M._none(keep_v) else lw.compile_time(keep_v, node, "keep_dims")
    rank = x.ty.rank
    axes = list(range(rank)) if axis is None else [axis]
    if not all(type(a) is int and -rank <= a < rank for a in axes):
        raise lw.fail(node, f"axis {axis!r} is out of range for a rank-{rank} tile", "axis")
    out = x
    for ax in sorted((a % rank for a in axes), reverse=True):
        shape = tuple(d for i, d in enumerate(out.ty.shape) if i != ax)
        out = lw.b.value(OpKind.REDUCE, (out,), TileT(out.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_{fn}", fn=fn,
                         axis=ax, rounding=None, ftz=None, nan=None)
    if keep:
        shape = tuple(1 if (axis is None or i == axis % rank) else d for i, d in enumerate(x.ty.shape))
        out = lw.b.value(OpKind.RESHAPE, (out,), TileT(out.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_k",
                         shape=shape)
    return out


def arg_reduction(fn):
    """argmax/argmin: the smallest index where the tile reaches its max/min (Triton's tie-break)."""
    def handler(lw, args, kwargs, node):
        b = _bind(lw, args, kwargs, ("input", "axis", "tie_break_left", "keep_dims"), node, fn, 2)
        x = _tile(lw, b["input"], node, f"tl.{fn}")
        axis = lw.compile_time(b["axis"], node, "axis")
        if type(axis) is not int or not -x.ty.rank <= axis < x.ty.rank:
            raise lw.fail(node, f"tl.{fn}: axis must be a constant axis of the tile", f"tl.{fn}")
        axis %= x.ty.rank
        best = _reduce(lw, "max" if fn == "argmax" else "min", x, CV(axis), CV(True), node)
        hit = compare(lw, "==", x, best, node)
        n = x.ty.shape[axis]
        idx = lw.b.value(OpKind.ARANGE, (), TileT("i32", (n,)), lw.loc(node), hint="idx", dtype="i32", size=n)
        shape = tuple(1 if i != axis else d for i, d in enumerate(x.ty.shape))
        if len(shape) > 1:
            idx = lw.b.value(OpKind.RESHAPE, (idx,), TileT("i32", shape), lw.loc(node), hint="idx_r", shape=shape)
        big = materialize_int(lw, CV(n), node) if not isinstance(n, int) else CV(n)
        cand = where(lw, hit, idx, big, node)
        return _reduce(lw, "min", cand, CV(axis), b.get("keep_dims"), node)
    return handler


def cumsum(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "axis", "reverse", "dtype"), node, "cumsum", 1)
    x = _tile(lw, b["input"], node, "tl.cumsum")
    axis = 0 if M._none(b.get("axis")) else lw.compile_time(b["axis"], node, "axis")
    reverse = False if M._none(b.get("reverse")) else lw.compile_time(b["reverse"], node, "reverse")
    if type(axis) is not int or not -x.ty.rank <= axis < x.ty.rank:
        raise lw.fail(node, "tl.cumsum: axis out of range", "tl.cumsum")
    if not M._none(b.get("dtype")):  # Triton: the input cast to `dtype` first
        x = lw.b.cast(x, _dtype(lw, b["dtype"], node, "tl.cumsum"), lw.loc(node))
    else:
        x = _reduction_input(lw, "cumsum", x, node)
    if not isinstance(x.ty.dtype, str):  # the scan's identity is a literal of the element type: a dtype
        # question, so an unconfigured kernel gets one entry per element dtype instead of one generic
        raise lw.fail(node, f"tl.cumsum of a tile whose element type is generic ({x.ty.dtype})", "dtype",
                      "give the pointer's element dtype in the configuration, or cast the tile with .to()")
    return lw.b.value(OpKind.SCAN_SUM, (x,), x.ty, lw.loc(node), hint=f"{x.name}_cumsum", axis=axis % x.ty.rank,
                      reverse=bool(reverse))
