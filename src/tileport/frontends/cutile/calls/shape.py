"""Shape operations: reshape, permute/transpose, expand_dims, broadcast, extract, bitcast, byte packing, cat."""

from __future__ import annotations

from tileport.frontends.cutile.calls.base import _axis, _dim_values, _index, _kw, _opt_const, _shape, _tile, handler
from tileport.frontends.cutile.values import CV, DTypeVal, Value
from tileport.model import types as T
from tileport.model.ir import Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import TileT


def reshape(lw, x: Ref, shape: tuple, node) -> Ref:
    return lw.b.value(OpKind.RESHAPE, (x,), TileT(x.ty.dtype, tuple(shape)), lw.loc(node), hint=f"{x.name}_r",
                      shape=tuple(shape))


def permute(lw, x: Ref, axes: tuple, node) -> Ref:
    if sorted(axes) != list(range(x.ty.rank)):
        raise lw.fail(node, f"{axes} is not a permutation of the tile's axes", "permute")
    shape = tuple(x.ty.shape[a] for a in axes)
    return lw.b.value(OpKind.PERMUTE, (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_t",
                      axes=tuple(axes))


@handler
def ct_reshape(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "shape"), node, "reshape", 2)
    x = _tile(lw, b["x"], node, "ct.reshape")
    return reshape(lw, x, _reshape_target(lw, x, b["shape"], node), node)


def _reshape_target(lw, x: Ref, shape_v: Value, node) -> tuple:
    """A reshape's new shape: a tile shape with as many elements as `x` (in every configuration)."""
    shape = _shape(lw, shape_v, node, "ct.reshape")
    old, new = 1, 1
    for d in x.ty.shape:
        old = T.dim_op("*", old, d)
    for d in shape:
        new = T.dim_op("*", new, d)
    for c in lw.b.const_values if sym_names(old) | sym_names(new) else [{}]:
        if (sym_names(old) | sym_names(new)) <= c.keys() and T.eval_dim(old, c) != T.eval_dim(new, c):
            raise lw.fail(node, f"cannot reshape {T.shape_str(x.ty.shape)} to {T.shape_str(shape)}: the number "
                          "of elements differs", "ct.reshape")
    return shape


@handler
def ct_permute(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axes"), node, "permute", 2)
    x = _tile(lw, b["x"], node, "ct.permute")
    axes = tuple(_opt_const(lw, a, node, "axes") for a in b["axes"])
    return permute(lw, x, axes, node)


@handler
def ct_transpose(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axis0", "axis1"), node, "transpose", 1)
    x = _tile(lw, b["x"], node, "ct.transpose")
    a0 = _opt_const(lw, b.get("axis0"), node, "axis0")
    a1 = _opt_const(lw, b.get("axis1"), node, "axis1")
    axes = list(range(x.ty.rank))
    if a0 is None and a1 is None:
        if x.ty.rank != 2:
            raise lw.fail(node, "ct.transpose without axes needs a 2-D tile", "ct.transpose")
        a0, a1 = 0, 1
    a0, a1 = (_axis(lw, a, x.ty.rank, node, "ct.transpose") for a in (a0, a1))
    axes[a0], axes[a1] = axes[a1], axes[a0]
    return permute(lw, x, tuple(axes), node)


@handler
def ct_expand_dims(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "axis"), node, "expand_dims", 2)
    x = _tile(lw, b["x"], node, "ct.expand_dims")
    axis = _axis(lw, _opt_const(lw, b["axis"], node, "axis"), x.ty.rank + 1, node, "ct.expand_dims")
    shape = list(x.ty.shape)
    shape.insert(axis, 1)
    return reshape(lw, x, tuple(shape), node)


@handler
def ct_broadcast_to(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "shape"), node, "broadcast_to", 2)
    x = _tile(lw, b["x"], node, "ct.broadcast_to")
    return lw.b.to_tile(x, x.ty.dtype, _shape(lw, b["shape"], node, "ct.broadcast_to"), lw.loc(node))


@handler
def ct_extract(lw, args, kwargs, node):
    b = _kw(lw, args, kwargs, ("x", "index", "shape"), node, "extract", 3)
    x = _tile(lw, b["x"], node, "ct.extract")
    shape = _shape(lw, b["shape"], node, "ct.extract")
    index = _index(lw, b["index"], x.ty.rank, node, "extract")
    if len(shape) != x.ty.rank:
        raise lw.fail(node, "ct.extract: the subtile shape must have the tile's rank", "ct.extract")
    for full, sub in zip(x.ty.shape, shape):
        if isinstance(full, int) and isinstance(sub, int) and full % sub:
            raise lw.fail(node, f"ct.extract: {sub} does not divide {full}", "ct.extract")
    return lw.b.value(OpKind.EXTRACT, (x, *index), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_part",
                      shape=shape)


_BITS = {"bool": 1, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "f16": 16, "bf16": 16, "i32": 32, "u32": 32,
         "f32": 32, "tf32": 32, "i64": 64, "u64": 64, "f64": 64, "f8e4m3fn": 8, "f8e5m2": 8}


@handler
def ct_bitcast(lw, args, kwargs, node):
    """ct.bitcast(x, dtype): the same bits as another dtype of the same width (no-op for the same dtype)."""
    b = _kw(lw, args, kwargs, ("x", "dtype"), node, "bitcast", 2)
    x = _tile(lw, b["x"], node, "ct.bitcast")
    if not isinstance(b["dtype"], DTypeVal):
        raise lw.fail(node, "ct.bitcast needs a dtype", "ct.bitcast")
    dst = b["dtype"].dtype

    def same_width(src, d):
        return d if "bool" not in (src, d) and _BITS.get(src) == _BITS.get(d) else None
    lw.b.dspace.lift(same_width, x.ty.dtype, dst, what="ct.bitcast: the bit widths differ (or a bool)",
                     loc=lw.loc(node))
    if x.ty.dtype == dst:
        return x
    return lw.b.value(OpKind.BITCAST, (x,), TileT(dst, x.ty.shape), lw.loc(node), hint=f"{x.name}_bits")


@handler
def ct_pack_to_bytes(lw, args, kwargs, node):
    """ct.pack_to_bytes(x): the raw bytes of the flattened tile as a 1-D u8 tile (cuTile: reshape to 1-D, then
    a bitcast for 8-bit elements, else Tile IR `pack`)."""
    x = _tile(lw, _kw(lw, args, kwargs, ("x",), node, "pack_to_bytes", 1)["x"], node, "ct.pack_to_bytes")
    widths = {_BITS.get(v) for v in lw.b.dspace.values(x.ty.dtype)}
    if "bool" in lw.b.dspace.values(x.ty.dtype) or None in widths:
        raise lw.fail(node, "ct.pack_to_bytes takes a numeric tile (not bool)", "ct.pack_to_bytes")
    if len(widths) != 1:
        raise lw.fail(node, "ct.pack_to_bytes of a tile whose element width differs between configurations",
                      "ct.pack_to_bytes", "translate one dtype per configuration (--config)")
    (bits,) = widths
    count = x.ty.shape[0] if x.ty.shape else 1
    for d in x.ty.shape[1:]:
        count = T.dim_op("*", count, d)
    if x.ty.shape != (count,):
        x = reshape(lw, x, (count,), node)
    if bits == 8:
        return lw.b.value(OpKind.BITCAST, (x,), TileT("u8", (count,)), lw.loc(node), hint=f"{x.name}_bytes")
    if bits % 8:
        raise lw.fail(node, f"ct.pack_to_bytes of {bits}-bit elements is not supported", "ct.pack_to_bytes")
    size = T.dim_op("*", count, bits // 8)
    return lw.b.value(OpKind.PACK, (x,), TileT("u8", (size,)), lw.loc(node), hint=f"{x.name}_bytes")


@handler
def ct_unpack_from_bytes(lw, args, kwargs, node):
    """ct.unpack_from_bytes(x, dtype): a 1-D u8 tile's bytes as a 1-D tile of `dtype` (cuTile: a bitcast for
    8-bit dtypes, else Tile IR `unpack`)."""
    b = _kw(lw, args, kwargs, ("x", "dtype"), node, "unpack_from_bytes", 2)
    x = _tile(lw, b["x"], node, "ct.unpack_from_bytes")
    if x.ty.rank != 1 or x.ty.dtype != "u8":
        raise lw.fail(node, "ct.unpack_from_bytes takes a 1-D uint8 tile", "ct.unpack_from_bytes")
    if not isinstance(b["dtype"], DTypeVal) or b["dtype"].dtype not in _BITS or b["dtype"].dtype == "bool":
        raise lw.fail(node, "ct.unpack_from_bytes needs a numeric dtype (not bool)", "ct.unpack_from_bytes")
    dtype = b["dtype"].dtype
    bits = _BITS[dtype]
    if bits == 8:
        return lw.b.value(OpKind.BITCAST, (x,), TileT(dtype, x.ty.shape), lw.loc(node), hint=f"{x.name}_{dtype}")
    (n,) = x.ty.shape
    for value in _dim_values(lw, n, node):
        if value * 8 % bits:
            raise lw.fail(node, f"ct.unpack_from_bytes: {value} bytes are not a whole number of {dtype}",
                          "ct.unpack_from_bytes")
    size = T.dim_op("//", n, bits // 8)
    return lw.b.value(OpKind.UNPACK, (x,), TileT(dtype, (size,)), lw.loc(node), hint=f"{x.name}_{dtype}")


@handler
def ct_cat(lw, args, kwargs, node):
    """ct.cat((a, b), axis): as cuTile, two tiles of one dtype and rank, equal off the axis."""
    b = _kw(lw, args, kwargs, ("tiles", "axis"), node, "cat", 2)
    tiles = b["tiles"]
    if not isinstance(tiles, tuple) or not 1 <= len(tiles) <= 2:
        raise lw.fail(node, "ct.cat takes a tuple of one or two tiles", "ct.cat")
    tiles = tuple(_tile(lw, t, node, "ct.cat") for t in tiles)
    if len(tiles) == 1:
        return tiles[0]
    x, y = tiles
    rank = x.ty.rank
    axis = b["axis"].value if isinstance(b["axis"], CV) else None
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise lw.fail(node, f"ct.cat: the axis must be a constant in [{-rank}, {rank})", "ct.cat")
    axis %= rank
    if y.ty.rank != rank or not lw.b.dspace.values(x.ty.dtype) == lw.b.dspace.values(y.ty.dtype):
        raise lw.fail(node, f"ct.cat: tiles must have the same rank and dtype ({x.ty} vs {y.ty})", "ct.cat")
    for i, (dx, dy) in enumerate(zip(x.ty.shape, y.ty.shape)):
        if i != axis:
            lw.b.check_dims_equal(dx, dy, lw.loc(node), "ct.cat")
    shape = list(x.ty.shape)
    shape[axis] = T.dim_op("+", x.ty.shape[axis], y.ty.shape[axis])
    return lw.b.value(OpKind.CAT, (x, y), TileT(x.ty.dtype, tuple(shape)), lw.loc(node), hint="cat", axis=axis)
