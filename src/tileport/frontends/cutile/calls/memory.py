"""Block indices and tile memory: `ct.bid`, `ct.load`/`ct.store`, `ct.gather`/`ct.scatter`, `ct.num_tiles`."""

from __future__ import annotations

from tileport.frontends.cutile.calls.base import (_array, _common_shape, _index, _kw, _memory_model, _opt_const, _order,
                                                  _shape, handler)
from tileport.frontends.cutile.calls.views import _accessed_array, _not_a_view
from tileport.frontends.cutile.dtypes import promote
from tileport.frontends.cutile.values import CV, EnumVal
from tileport.model import types as T
from tileport.model.ir import Atom, Ref
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, TileT


@handler
def ct_bid(lw, args, kwargs, node):
    axis = _kw(lw, args, kwargs, ("axis",), node, "bid", 1)["axis"]
    return lw.b.value(OpKind.BID, (), ScalarT("i32"), lw.loc(node), hint="bid", axis=_axis_const(lw, axis, node))


@handler
def ct_num_blocks(lw, args, kwargs, node):
    axis = _kw(lw, args, kwargs, ("axis",), node, "num_blocks", 1)["axis"]
    return lw.b.value(OpKind.NUM_BLOCKS, (), ScalarT("i32"), lw.loc(node), hint="num_blocks",
                      axis=_axis_const(lw, axis, node))


def _axis_const(lw, v, node) -> int:
    if not (isinstance(v, CV) and type(v.value) is int and v.value in (0, 1, 2)):
        raise lw.fail(node, "axis must be the constant 0, 1 or 2", "axis")
    return v.value


@handler
def ct_load(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "index", "shape", "order", "padding_mode", "check_bounds", "latency",
                               "allow_tma", "memory_order", "memory_scope"), node, "load", 3)
    arr = _array(lw, b["array"], node, "load")
    index = _index(lw, b["index"], arr.ty.rank, node, "load")
    shape = _shape(lw, b["shape"], node, "ct.load")
    scalar = len(shape) == 0 and arr.ty.rank > 0  # a 0-d load: a (1, ..) tile reshaped to (), as cuTile does
    shape = (1,) * arr.ty.rank if scalar else shape
    if len(shape) != arr.ty.rank:
        raise lw.fail(node, f"ct.load: tile rank {len(shape)} differs from the array rank {arr.ty.rank}", "ct.load",
                      _RANK_HINT.format(rank=arr.ty.rank))
    pad = b.get("padding_mode")
    pad = None if isinstance(pad, CV) and pad.value is None else pad
    if pad is not None and not (isinstance(pad, EnumVal) and pad.enum == "PaddingMode"):
        raise lw.fail(node, "padding_mode must be a ct.PaddingMode member", "padding_mode")
    _memory_model(lw, b, node, "load")
    attrs = dict(shape=shape, order=_order(lw, b.get("order"), arr.ty.rank, node),
                 padding=pad.member.lower() if pad is not None else "undetermined",
                 check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                 latency=_opt_const(lw, b.get("latency"), node, "latency"),
                 allow_tma=_opt_const(lw, b.get("allow_tma"), node, "allow_tma", (bool,)))
    tile = lw.b.value(OpKind.LOAD, (arr, *index), TileT(arr.ty.dtype, shape), lw.loc(node),
                      hint=f"{arr.name}_tile", **attrs, **_accessed_array(lw, arr))
    if scalar:
        return lw.b.value(OpKind.RESHAPE, (tile,), TileT(arr.ty.dtype, ()), lw.loc(node), hint=f"{arr.name}_0d",
                          shape=())
    return tile


# cuTile Python (1.7) accepts only a tile of the array's rank, or a 0-d one, for load and store.
_RANK_HINT = ("cuTile Python refuses this too: give the tile all {rank} dimensions (1 for the ones "
              "indexed by a single element) and reshape the result")


@handler
def ct_store(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "index", "tile", "order", "check_bounds", "latency", "allow_tma",
                               "memory_order", "memory_scope"), node, "store", 3)
    arr = _array(lw, b["array"], node, "store")
    index = _index(lw, b["index"], arr.ty.rank, node, "store")
    tile = b["tile"]
    if isinstance(tile, Ref) and isinstance(tile.ty, TileT) and tile.ty.rank == 0 < arr.ty.rank:
        full = (1,) * arr.ty.rank  # a 0-d store: reshaped to (1, ..), as cuTile does
        tile = lw.b.value(OpKind.RESHAPE, (tile,), TileT(tile.ty.dtype, full), lw.loc(node), hint=f"{arr.name}_1",
                          shape=full)
    if isinstance(tile, Ref) and isinstance(tile.ty, TileT):
        if tile.ty.rank != arr.ty.rank:
            raise lw.fail(node, f"ct.store: tile rank {tile.ty.rank} differs from the array rank {arr.ty.rank}",
                          "ct.store", _RANK_HINT.format(rank=arr.ty.rank))
        _check_implicit_cast(lw, tile.ty.dtype, arr.ty.dtype, node, "stored tile")
        tile = lw.b.cast(tile, arr.ty.dtype, lw.loc(node))
    else:
        tile = lw.b.to_tile(lw.scalar_atom(tile, node), arr.ty.dtype, (1,) * arr.ty.rank, lw.loc(node))
    _memory_model(lw, b, node, "store")
    lw.b.effect(OpKind.STORE, (arr, tile, *index), lw.loc(node), **_accessed_array(lw, arr),
                order=_order(lw, b.get("order"), arr.ty.rank, node),
                check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                latency=_opt_const(lw, b.get("latency"), node, "latency"),
                allow_tma=_opt_const(lw, b.get("allow_tma"), node, "allow_tma", (bool,)))
    return CV(None)


def _check_implicit_cast(lw, src, dst, node, what: str) -> None:
    def ok(s, d):
        return d if promote(s, d) == d else None
    lw.b.dspace.lift(ok, src, dst, what=f"{what}: cannot implicitly cast to the array's dtype", loc=lw.loc(node))


def _indices(lw, v, rank, node, fn) -> list[Ref | Atom]:
    items = list(v) if isinstance(v, tuple) else [v]
    if len(items) != rank:
        raise lw.fail(node, f"ct.{fn}: {len(items)} index tiles for an array of rank {rank}", f"ct.{fn}")
    if rank == 0:  # a 0-d tensor (a scalar loss gradient): no launcher or capture path takes rank 0 yet
        raise lw.fail(node, f"ct.{fn} of a 0-d array is not supported yet", f"ct.{fn}",
                      "pass the value as a 1-element array and gather index 0, or as a scalar parameter")
    out = []
    for it in items:
        if isinstance(it, Ref) and isinstance(it.ty, TileT):
            lw.b.require(it.ty.dtype, T.is_int, f"ct.{fn} indices must be integer tiles", lw.loc(node))
            out.append(it)
        else:
            out.append(lw.scalar_atom(it, node))
    return out


@handler
def ct_gather(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "indices", "mask", "padding_value", "check_bounds", "latency"),
            node, "gather", 2)
    arr = _array(lw, b["array"], node, "gather")
    _not_a_view(lw, arr, node, "gather")
    idx = _indices(lw, b["indices"], arr.ty.rank, node, "gather")
    mask = b.get("mask")
    mask = None if mask is None or (isinstance(mask, CV) and mask.value is None) else mask
    shape = _common_shape(lw, idx + ([mask] if mask is not None else []), node)
    loc = lw.loc(node)
    pad = _opt_const(lw, b.get("padding_value", CV(0)), node, "padding_value", (int, float))
    for dt in lw.b.dspace.values(arr.ty.dtype):
        if not T.is_float(dt) and not float(pad).is_integer():
            raise lw.fail(node, f"ct.gather: padding_value {pad!r} is not representable in {dt}", "padding_value")
        if not T.is_float(dt):
            lw.check_literal(int(pad), dt, node)
    # Indices stay in their own shapes: cuTile widens each to u64 before broadcasting it.
    args_ = (arr, *idx)
    if mask is not None:
        args_ += (lw.b.to_tile(mask, "bool", shape, loc),)
    return lw.b.value(OpKind.GATHER, args_, TileT(arr.ty.dtype, shape), loc, hint=f"{arr.name}_tile",
                      padding_value=pad, has_mask=mask is not None, shape=shape,
                      check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                      latency=_opt_const(lw, b.get("latency"), node, "latency"))


@handler
def ct_scatter(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "indices", "value", "mask", "check_bounds", "latency"), node,
            "scatter", 3)
    arr = _array(lw, b["array"], node, "scatter")
    _not_a_view(lw, arr, node, "scatter")
    idx = _indices(lw, b["indices"], arr.ty.rank, node, "scatter")
    mask = b.get("mask")
    mask = None if mask is None or (isinstance(mask, CV) and mask.value is None) else mask
    value = b["value"]
    items = idx + [value] + ([mask] if mask is not None else [])
    shape = _common_shape(lw, items, node)
    loc = lw.loc(node)
    if isinstance(value, Ref) and isinstance(value.ty, TileT):
        _check_implicit_cast(lw, value.ty.dtype, arr.ty.dtype, node, "scattered value")
        value = lw.b.to_tile(value, arr.ty.dtype, shape, loc)
    else:
        value = lw.b.to_tile(lw.scalar_atom(value, node), arr.ty.dtype, shape, loc)
    args_ = (arr, value, *idx)
    if mask is not None:
        args_ += (lw.b.to_tile(mask, "bool", shape, loc),)
    lw.b.effect(OpKind.SCATTER, args_, loc, has_mask=mask is not None, shape=shape,
                check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)),
                latency=_opt_const(lw, b.get("latency"), node, "latency"))
    return CV(None)


@handler
def ct_num_tiles(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("array", "axis", "shape", "order"), node, "num_tiles", 3)
    arr = _array(lw, b["array"], node, "num_tiles")
    axis = _opt_const(lw, b["axis"], node, "axis")
    shape = _shape(lw, b["shape"], node, "ct.num_tiles")
    if len(shape) != arr.ty.rank or not 0 <= axis < arr.ty.rank:
        raise lw.fail(node, "ct.num_tiles: shape rank or axis does not match the array", "ct.num_tiles")
    return lw.b.value(OpKind.NUM_TILES, (arr,), ScalarT("i32"), lw.loc(node), hint=f"{arr.name}_tiles",
                      axis=axis, shape=shape, order=_order(lw, b.get("order"), arr.ty.rank, node))
