"""Reductions and scans: `ct.sum`/`max`/`min`/`prod` (and their method forms), `ct.cumsum`."""

from __future__ import annotations

from tileport.frontends.cutile.calls.base import REDUCE_FNS, _axis, _kw, _mode_value, _opt_const, _tile, handler
from tileport.frontends.cutile.calls.shape import reshape
from tileport.frontends.cutile.values import CV
from tileport.model import types as T
from tileport.model.ir import Ref
from tileport.model.ops import OpKind
from tileport.model.types import TileT


# ---------------------------------------------------------------- reductions, shapes, mma

def reduce(lw, fn: str, args, kwargs, node) -> Ref:
    b = _kw(lw, args, kwargs, ("x", "axis", "keepdims", *REDUCE_FNS[fn]), node, fn, 1)
    x = _tile(lw, b["x"], node, f"ct.{fn}")
    axis = _opt_const(lw, b.get("axis", CV(None)), node, "axis", (int, tuple))
    keepdims = _opt_const(lw, b.get("keepdims", CV(False)), node, "keepdims", (bool,))
    modes = {k: _mode_value(lw, k, b[k], node) for k in REDUCE_FNS[fn] if k in b}
    rank = x.ty.rank
    axes = list(range(rank)) if axis is None else [axis] if isinstance(axis, int) else list(axis)
    axes = sorted({_axis(lw, a, rank, node, f"ct.{fn}") for a in axes}, reverse=True)
    out = x
    for ax in axes:
        shape = tuple(d for i, d in enumerate(out.ty.shape) if i != ax)
        out = lw.b.value(OpKind.REDUCE, (out,), TileT(out.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_{fn}",
                         fn=fn, axis=ax, rounding=modes.get("rounding_mode"), ftz=modes.get("flush_to_zero"),
                         nan=modes.get("propagate_nan"))
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.ty.shape))
        out = reshape(lw, out, kept, node)
    return out


SCAN_DTYPES = ("f32", "f64", "i32", "i64")  # scan_sum takes its identity as a literal of the element type


@handler
def ct_cumsum(lw, args, kwargs, node):
    """ct.cumsum(x, axis=0, reverse=False): cutile-rs `scan_sum` (the same scan op with an add region)."""
    b = _kw(lw, args, kwargs, ("x", "axis", "reverse", "rounding_mode", "flush_to_zero"), node, "cumsum", 1)
    x = _tile(lw, b["x"], node, "ct.cumsum")
    axis = _opt_const(lw, b.get("axis", CV(0)), node, "axis", (int,))
    reverse = _opt_const(lw, b.get("reverse", CV(False)), node, "reverse", (bool,))
    if b.get("rounding_mode") not in (None, CV(None)) or _opt_const(lw, b.get("flush_to_zero", CV(False)), node,
                                                                    "flush_to_zero", (bool,)):
        raise lw.fail(node, "ct.cumsum with rounding_mode/flush_to_zero is not supported yet", "ct.cumsum")
    if not -x.ty.rank <= axis < x.ty.rank:
        raise lw.fail(node, f"ct.cumsum: axis {axis} is out of range for rank {x.ty.rank}", "ct.cumsum")
    if axis % x.ty.rank != 0:
        raise lw.fail(node, "ct.cumsum along an axis other than 0 is not supported: cutile 0.5.0's scan_sum "
                            "always scans dim 0", "ct.cumsum", "scan axis 0 (permute the tile first)")
    lw.b.require(x.ty.dtype, lambda d: d in SCAN_DTYPES and not isinstance(x.ty.dtype, T.DVar),
                 f"ct.cumsum on {x.ty.dtype}: only one of {', '.join(SCAN_DTYPES)} per kernel is supported yet",
                 lw.loc(node))
    return lw.b.value(OpKind.SCAN_SUM, (x,), x.ty, lw.loc(node), hint=f"{x.name}_cumsum", axis=axis % x.ty.rank,
                      reverse=reverse)
