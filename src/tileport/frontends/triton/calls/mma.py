"""Matrix multiply-accumulate: `tl.dot`, its accumulator and input precision."""

from __future__ import annotations

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import memory as M
from tileport.frontends.triton.calls.arith import binary, bitcast
from tileport.frontends.triton.calls.base import _bind, _dtype, _tile
from tileport.frontends.triton.values import CV, Retry
from tileport.model import types as T
from tileport.model.ir import Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import DimOp, ScalarT, Sym


def dot(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "other", "acc", "input_precision", "allow_tf32", "max_num_imprecise_acc",
                                 "out_dtype"), node, "dot", 2)
    x, y = (_tile(lw, b[k], node, "tl.dot") for k in ("input", "other"))
    loc = lw.loc(node)
    if x.ty.rank != 2 or y.ty.rank != 2:
        raise lw.fail(node, "tl.dot needs 2-D tiles", "tl.dot")
    lw.b.check_dims_equal(x.ty.shape[1], y.ty.shape[0], loc, "tl.dot contraction dimension")
    out_int = not M._none(b.get("out_dtype")) and T.is_int(_dtype(lw, b["out_dtype"], node, "tl.dot"))
    if out_int or any(T.is_int(str(v.ty.dtype)) for v in (x, y)):  # an integer product: i8 operands (mma's)
        for v in (x, y):
            if lw.loaded.get(v.name) in lw.default_float | lw.assumed_ints:
                raise Retry("narrow", lw.loaded[v.name])
    if x.ty.dtype != y.ty.dtype:
        dt = lw.b.promote(x.ty.dtype, y.ty.dtype, loc, "tl.dot operands")
        x, y = lw.b.cast(x, dt, loc), lw.b.cast(y, dt, loc)
    float_in = lw.b.is_float(x.ty.dtype)
    out_dt = _dtype(lw, b.get("out_dtype"), node, "tl.dot", "f32" if float_in else "i32")
    shape = (x.ty.shape[0], y.ty.shape[1])
    acc = b.get("acc")
    given = not M._none(acc)
    if not given:
        acc = lw.b.to_tile(Lit(0.0 if float_in else 0, ScalarT(out_dt)), out_dt, shape, loc)
    else:
        acc = _tile(lw, acc, node, "tl.dot")
        if tuple(acc.ty.shape) != shape:
            raise lw.fail(node, f"tl.dot: acc shape {acc.ty.shape} is not {shape}", "tl.dot")
    _check_accumulator(lw, x.ty.dtype, acc.ty.dtype, node)
    precision = _dot_precision(lw, b, node)
    if precision == "ieee" or "f32" not in lw.b.dspace.values(x.ty.dtype):
        return lw.b.value(OpKind.MMA, (x, y, acc), acc.ty, loc, hint="acc")
    if precision == "tf32":
        _note(lw, "tl.dot of f32 tiles in tf32 (Triton's input_precision='tf32'): the low 13 mantissa bits of "
              "each f32 input dropped, as Triton's tensor cores read them")
        xt, yt = _tf32_truncated(lw, x, node), _tf32_truncated(lw, y, node)
        return lw.b.value(OpKind.MMA, (xt, yt, acc), acc.ty, loc, hint="acc")
    _note(lw, "tl.dot of f32 tiles in tf32x3: each input split into tf32 parts rounded to nearest, as Triton "
          "splits them")
    xh, yh = _tf32(lw, x, loc), _tf32(lw, y, loc)
    # tf32x3: a = hi + lo in tf32 each; a.b ~ hi.lo + lo.hi + hi.hi (small terms first), then the accumulator
    xl, yl = (_tf32(lw, binary(lw, "-", v, lw.b.cast(h, v.ty.dtype, loc), node), loc) for v, h in ((x, xh), (y, yh)))
    zero = lw.b.to_tile(Lit(0.0, ScalarT(acc.ty.dtype)), acc.ty.dtype, shape, loc) if given else acc
    part = lw.b.value(OpKind.MMA, (xh, yl, zero), acc.ty, loc, hint="d3")
    part = lw.b.value(OpKind.MMA, (xl, yh, part), acc.ty, loc, hint="d3")
    part = lw.b.value(OpKind.MMA, (xh, yh, part), acc.ty, loc, hint="d3")
    return binary(lw, "+", part, acc, node) if given else part


def _check_accumulator(lw, operand, accumulator, node) -> None:
    """Tile IR's mma (cutile 0.5.0 `mmaf`/`mmai`) takes these operands into this accumulator in every dtype
    configuration (a `dtype` diagnostic drops a configuration that does not from a generic kernel)."""
    ops, accs = lw.b.dspace.values(operand), lw.b.dspace.values(accumulator)
    for o, a in zip(ops * (len(accs) if len(ops) == 1 else 1), accs * (len(ops) if len(accs) == 1 else 1)):
        if a not in T.MMA_ACCUMULATORS.get(o, ()):
            allowed = " or ".join(T.MMA_ACCUMULATORS.get(o, ())) or "nothing"
            raise lw.fail(node, f"tl.dot of {o} operands into a {a} accumulator: Tile IR's mma has no such form "
                          f"(it accumulates {o} in {allowed})", "dtype",
                          "accumulate in a type Tile IR takes (out_dtype=, or the acc argument's type)")


DOT_PRECISIONS = ("tf32", "tf32x3", "ieee")


def _dot_precision(lw, b: dict, node) -> str:
    """Triton's input precision of an f32 dot: `input_precision`, else `allow_tf32=False` -> ieee, else tf32
    (its default on sm_80+)."""
    if not M._none(b.get("input_precision")):
        p = lw.compile_time(b["input_precision"], node, "tl.dot input_precision")
        if isinstance(p, (Sym, DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(p)), "tl.dot input_precision of a constexpr", lw.loc(node))
        if p not in DOT_PRECISIONS:
            raise lw.fail(node, f"tl.dot: input_precision={p!r} is not supported", "tl.dot",
                          f"use one of {', '.join(DOT_PRECISIONS)}")
        return p
    if not M._none(b.get("allow_tf32")) and not lw.compile_time(b["allow_tf32"], node, "tl.dot allow_tf32"):
        return "ieee"
    return "tf32"


def _tf32(lw, x: Ref, loc) -> Ref:
    """`x` with its f32 elements as tf32 (other float element types of a generic stay as they are)."""
    tf32 = lw.b.dspace.generic(tuple("tf32" if v == "f32" else v for v in lw.b.dspace.values(x.ty.dtype)))
    return lw.b.cast(x, tf32, loc)


TF32_KEPT_BITS = -(1 << 13)  # 0xFFFFE000 as an i32: sign, exponent and the 10 mantissa bits of tf32


def _tf32_truncated(lw, x: Ref, node) -> Ref:
    """`x` as a tensor core reads the f32 operands of a tf32 mma: its low 13 mantissa bits dropped (Triton passes
    the f32 bits unconverted; `mma.sync`/`wgmma` .tf32 ignore them). A generic element type has no bits to
    mask: its f32 arm is rounded to nearest."""
    if x.ty.dtype != "f32":
        _note(lw, "tl.dot of a generic element type: its f32 arm rounds the inputs to tf32 (nearest) where "
              "Triton's tensor cores drop their low 13 mantissa bits")
        return _tf32(lw, x, lw.loc(node))
    kept = binary(lw, "&", bitcast(lw, x, "i32", node), CV(TF32_KEPT_BITS), node)
    return _tf32(lw, bitcast(lw, kept, "f32", node), lw.loc(node))


def _note(lw, text: str) -> None:
    if text not in lw.notes:
        lw.notes.append(text)
