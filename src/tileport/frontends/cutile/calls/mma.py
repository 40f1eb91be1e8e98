"""Matrix multiply-accumulate: `ct.mma`, `ct.matmul` and the `@` operator."""

from __future__ import annotations

from tileport.frontends.cutile.calls.base import _kw, _opt_const, _tile, _two, handler
from tileport.frontends.cutile.values import CV
from tileport.model import types as T
from tileport.model.ir import Lit, Ref
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT

MMA_ACC = T.MMA_ACCUMULATORS


@handler
def ct_mma(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "y", "acc", "use_fast_acc"), node, "mma", 3)
    x, y, acc = (_tile(lw, b[k], node, "ct.mma") for k in ("x", "y", "acc"))
    if _opt_const(lw, b.get("use_fast_acc", CV(False)), node, "use_fast_acc", (bool,)):
        raise lw.fail(node, "use_fast_acc is not supported yet", "ct.mma")
    return _mma(lw, x, y, acc, node)


def _mma(lw, x: Ref, y: Ref, acc: Ref, node) -> Ref:
    loc = lw.loc(node)
    if x.ty.rank not in (2, 3) or y.ty.rank != x.ty.rank or acc.ty.rank != x.ty.rank:
        raise lw.fail(node, "ct.mma needs 2-D (or batched 3-D) tiles of equal rank", "ct.mma")
    m, k = x.ty.shape[-2:]
    k2, n = y.ty.shape[-2:]
    lw.b.check_dims_equal(k, k2, loc, "ct.mma contraction dimension")
    lw.b.check_dims_equal(acc.ty.shape[-2], m, loc, "ct.mma accumulator rows")
    lw.b.check_dims_equal(acc.ty.shape[-1], n, loc, "ct.mma accumulator columns")

    def acc_ok(xd, yd, ad):
        return ad if xd == yd and ad in MMA_ACC.get(xd, ()) else None
    lw.b.dspace.lift(acc_ok, x.ty.dtype, y.ty.dtype, acc.ty.dtype,
                     what="ct.mma operand/accumulator dtypes", loc=loc)
    return lw.b.value(OpKind.MMA, (x, y, acc), acc.ty, loc, hint="acc")


def matmul(lw, x, y, node) -> Ref:
    x = _tile(lw, x, node, "matmul")
    y = _tile(lw, y, node, "matmul")
    loc = lw.loc(node)
    dtype = lw.b.promote(x.ty.dtype, y.ty.dtype, loc, "matmul")
    acc_dt = lw.b.dspace.lift(lambda d: MMA_ACC.get(d, (None,))[0], dtype, what="matmul accumulator", loc=loc)
    shape = x.ty.shape[:-1] + y.ty.shape[-1:]
    acc = lw.b.to_tile(Lit(0.0, ScalarT(acc_dt)), acc_dt, shape, loc)
    out = _mma(lw, lw.b.cast(x, dtype, loc), lw.b.cast(y, dtype, loc), acc, node)
    return lw.b.cast(out, dtype, loc)


@handler
def ct_matmul(lw, args, kwargs, node):
    x, y = _two(lw, args, node, "matmul")
    return matmul(lw, x, y, node)
