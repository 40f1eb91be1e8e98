"""The op table: Tile IR op name -> NumPy implementation.

Every implementation has the signature `impl(ctx, op, args) -> list` (one value per result, tokens
included); `args` are the runtime values of `op.operands`, in order, and `ctx` is the executor
(memory, block id, grid, and `run_block` for ops with regions). An op missing from `OPS` is an
`UnsupportedOp` error naming the op and its location (executor.py), never skipped.

Rounding: float results are computed in the element's NumPy type (f16 natively, which NumPy rounds
once per op) or in float32 and rounded to bf16 / tf32 (nearest-even), so add/sub/mul/div/sqrt are
correctly rounded like the hardware. `flush_to_zero` flushes f32 subnormal inputs and results.
`rounding_mode = approx` (exp, divide) is computed exactly: the hardware's approximation error
(a few ulp) is left to the comparison tolerance.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..attrs import Dense, TypedFloat, TypedInt
from ..model import Op
from ..types import PartitionViewType, PointerType, TensorViewType, TileType
from .errors import InterpError, UnsupportedOp
from .values import (TOKEN, UNSIGNED, PartitionView, TensorView, elem_bytes, flush_subnormals,
                     padding_value, storage, to_elem)

Impl = Callable[[Any, Op, list], list]


# -- helpers ------------------------------------------------------------------------------------

def _elem(op: Op, i: int = 0):
    t = op.results[i].type
    return t.elem if isinstance(t, TileType) else t


def _operand_elem(op: Op, i: int):
    t = op.operands[i].type
    return t.elem if isinstance(t, TileType) else t


def _arg(op: Op, args: list, role: str):
    for r, v in zip(op.operand_roles, args):
        if r == role:
            return v
    return None


def _args(op: Op, args: list, role: str) -> list:
    return [v for r, v in zip(op.operand_roles, args) if r == role]


def _attr(op: Op, name: str, default=None):
    return op.attributes.get(name, default)


def _signed(x: np.ndarray, op: Op, attr: str = "signedness") -> np.ndarray:
    """The integer tile viewed with the op's signedness (bool stays bool)."""
    if _attr(op, attr, "signed") == "unsigned" and x.dtype in UNSIGNED:
        return x.view(UNSIGNED[x.dtype])
    return x


def _int_result(op: Op, value) -> list:
    with np.errstate(all="ignore"):
        return [np.asarray(value).astype(storage(_elem(op)))]  # C casts: wrap around


def _float_result(op: Op, value) -> list:
    out = to_elem(value, _elem(op))
    if _attr(op, "flush_to_zero"):
        out = flush_subnormals(out)
    return [out]


def _float_inputs(op: Op, args: list) -> list:
    if _attr(op, "flush_to_zero"):
        return [flush_subnormals(a) for a in args]
    return args


def _float(fn) -> Impl:
    """An element-wise float op: inputs (flushed if ftz), NumPy function, rounded result."""
    def impl(ctx, op: Op, args: list) -> list:
        with np.errstate(all="ignore"):
            return _float_result(op, fn(*_float_inputs(op, args)))
    return impl


def _int(fn) -> Impl:
    def impl(ctx, op: Op, args: list) -> list:
        with np.errstate(all="ignore"):
            return _int_result(op, fn(op, *args))
    return impl


def _by_zero(b: np.ndarray, result: np.ndarray) -> np.ndarray:
    """Lanes dividing by zero (undefined in Tile IR, often in lanes masked later) get all bits set,
    what the hardware's unsigned divide gives; both sides of a comparison get the same value."""
    return np.where(b == 0, np.array(-1).astype(result.dtype), result)


def _divi(op: Op, lhs, rhs):
    a, b = _signed(lhs, op), _signed(rhs, op)
    safe = np.where(b == 0, np.array(1, b.dtype), b)
    floor = np.floor_divide(a, safe)
    mode = _attr(op, "rounding", "zero")
    inexact = np.remainder(a, safe) != 0
    if mode == "negative_inf":
        q = floor
    elif mode == "positive_inf":
        q = floor + inexact
    elif mode == "zero":
        q = floor if a.dtype.kind == "u" else floor + (inexact & ((a < 0) != (safe < 0)))
    else:
        raise UnsupportedOp(f"divi rounding {mode}")
    return _by_zero(b, np.asarray(q, a.dtype))


def _remi(op: Op, lhs, rhs):
    a, b = _signed(lhs, op), _signed(rhs, op)
    safe = np.where(b == 0, np.array(1, b.dtype), b)
    return _by_zero(b, np.asarray(np.fmod(a, safe), a.dtype))  # sign of the dividend (C semantics)


def _shri(op: Op, lhs, rhs):
    return np.right_shift(_signed(lhs, op), rhs.astype(_signed(lhs, op).dtype))


def _mulhii(op: Op, lhs, rhs):
    bits = lhs.dtype.itemsize * 8
    if bits > 32:
        raise UnsupportedOp("mulhii on 64-bit integers")
    return (lhs.astype(np.int64) * rhs.astype(np.int64)) >> bits


_INT_BINARY = {
    "addi": lambda op, a, b: a + b,
    "subi": lambda op, a, b: a - b,
    "muli": lambda op, a, b: a * b,
    "andi": lambda op, a, b: a & b,
    "ori": lambda op, a, b: a | b,
    "xori": lambda op, a, b: a ^ b,
    "shli": lambda op, a, b: np.left_shift(a, b),
    "shri": _shri,
    "divi": _divi,
    "remi": _remi,
    "maxi": lambda op, a, b: np.maximum(_signed(a, op), _signed(b, op)),
    "mini": lambda op, a, b: np.minimum(_signed(a, op), _signed(b, op)),
    "mulhii": _mulhii,
    "negi": lambda op, a: -a,
    "absi": lambda op, a: np.abs(a),
}


_FLOAT_OPS = {
    "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide,
    "remf": np.fmod, "fpowf": np.power, "atan2": np.arctan2,
    "negf": np.negative, "absf": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda x: np.reciprocal(np.sqrt(x)), "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "floor": np.floor, "ceil": np.ceil,
}


def _minmaxf(nan_fn, num_fn) -> Impl:
    """maxf / minf: propagate_nan picks NaN-propagating or NaN-ignoring semantics."""
    def impl(ctx, op: Op, args: list) -> list:
        fn = nan_fn if _attr(op, "propagate_nan") else num_fn
        return _float_result(op, fn(*_float_inputs(op, args)))
    return impl


def _fma(ctx, op: Op, args: list) -> list:
    a, b, c = (np.asarray(v, np.float64) for v in _float_inputs(op, args))
    return _float_result(op, a * b + c)  # exact product in f64, one rounding to f32 (f16: two)


def _fpowi(ctx, op: Op, args: list) -> list:
    base, exponent = args
    with np.errstate(all="ignore"):
        return _float_result(op, np.power(base.astype(np.float64), exponent.astype(np.float64)))


# -- comparisons, select ------------------------------------------------------------------------

_PREDICATES = {"equal": np.equal, "not_equal": np.not_equal, "less_than": np.less,
               "less_than_or_equal": np.less_equal, "greater_than": np.greater,
               "greater_than_or_equal": np.greater_equal}


def _predicate(op: Op):
    name = _attr(op, "comparison_predicate")
    if name not in _PREDICATES:
        raise UnsupportedOp(f"comparison predicate {name}")
    return _PREDICATES[name]


def _cmpi(ctx, op: Op, args: list) -> list:
    return [np.asarray(_predicate(op)(_signed(args[0], op), _signed(args[1], op)))]


def _cmpf(ctx, op: Op, args: list) -> list:
    a, b = args
    with np.errstate(all="ignore"):
        result = _predicate(op)(a, b)
    nan = np.isnan(a) | np.isnan(b)
    if _attr(op, "comparison_ordering", "ordered") == "unordered":
        return [np.asarray(result | nan)]
    return [np.asarray(result & ~nan)]


def _select(ctx, op: Op, args: list) -> list:
    cond, t, f = args
    return [np.asarray(np.where(cond, t, f), dtype=storage(_elem(op)))]


# -- casts --------------------------------------------------------------------------------------

def _ftof(ctx, op: Op, args: list) -> list:
    src, dst = _operand_elem(op, 0), _elem(op)
    mode = _attr(op, "rounding_mode", "nearest_even")
    if mode == "zero" and getattr(dst, "name", "") in ("f16", "f32"):
        return [_toward_zero(args[0], dst)]
    if mode != "nearest_even" and storage(dst).itemsize < storage(src).itemsize:
        raise UnsupportedOp(f"ftof rounding {mode}")
    return [to_elem(args[0], dst)]


def _toward_zero(x, dst) -> np.ndarray:
    """`x` rounded toward zero to `dst` (held natively): nearest, then one step back toward zero
    where nearest went away from it (a finite overflow to inf steps back to the largest finite)."""
    out = to_elem(x, dst)
    with np.errstate(invalid="ignore"):
        away = np.abs(out.astype(np.float64)) > np.abs(np.asarray(x, np.float64))
    return np.where(away, np.nextafter(out, np.zeros_like(out)), out).astype(out.dtype)


_FTOI_ROUNDING = {"zero": np.trunc, "nearest_int_to_zero": np.trunc, "nearest_even": np.rint,
                  "negative_inf": np.floor, "positive_inf": np.ceil}


def _ftoi(ctx, op: Op, args: list) -> list:
    mode = _attr(op, "rounding_mode", "zero")
    if mode not in _FTOI_ROUNDING:
        raise UnsupportedOp(f"ftoi rounding {mode}")
    dt = storage(_elem(op))
    target = UNSIGNED[dt] if _attr(op, "signedness", "signed") == "unsigned" else dt
    info = np.iinfo(target)
    x = _FTOI_ROUNDING[mode](np.asarray(args[0], np.float64))
    x = np.clip(np.nan_to_num(x, nan=0.0), info.min, info.max)  # the hardware saturates
    return [np.asarray(x.astype(target)).astype(dt)]


def _itof(ctx, op: Op, args: list) -> list:
    x = args[0]
    if x.dtype == np.bool_ and _attr(op, "signedness") == "signed":
        return [to_elem(-x.astype(np.float64), _elem(op))]  # a signed i1 true is -1
    return [to_elem(_signed(x, op).astype(np.float64), _elem(op))]


def _exti(ctx, op: Op, args: list) -> list:
    x, dt = args[0], storage(_elem(op))
    if x.dtype == np.bool_:
        return [np.asarray(x.astype(dt) * (-1 if _attr(op, "signedness") == "signed" else 1), dt)]
    return [np.asarray(_signed(x, op).astype(dt))]


def _trunci(ctx, op: Op, args: list) -> list:
    dt = storage(_elem(op))
    if dt == np.bool_:
        return [np.asarray((args[0] & 1) != 0)]
    with np.errstate(all="ignore"):
        return [np.asarray(args[0].astype(UNSIGNED.get(dt, dt)).astype(dt))]


# The unsigned integer type of each storage type's bits.
_BITS = {**UNSIGNED, np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.uint32,
         np.dtype(np.float64): np.uint64}


def _bits(x: np.ndarray, elem) -> np.ndarray:
    if elem.name == "bf16":  # held as float32: its bits are the upper half
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.view(_BITS.get(x.dtype, x.dtype))


def _bitcast(ctx, op: Op, args: list) -> list:
    src, dst = _operand_elem(op, 0), _elem(op)
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        return [np.asarray(args[0], np.int64)]
    bits = _bits(np.ascontiguousarray(args[0]), src)
    if dst.name == "bf16":
        return [(bits.astype(np.uint32) << 16).view(np.float32)]
    return [bits.view(storage(dst))]


def _address(ctx, op: Op, args: list) -> list:
    return [np.asarray(args[0], np.int64)]


def _offset(ctx, op: Op, args: list) -> list:
    ptr, off = args
    size = elem_bytes(_elem(op).pointee)
    return [np.asarray(ptr + off.astype(np.int64) * size, np.int64)]


# -- shapes -------------------------------------------------------------------------------------

def _shape(op: Op, i: int = 0) -> tuple[int, ...]:
    return op.results[i].type.shape


def _reshape(ctx, op: Op, args: list) -> list:
    return [np.reshape(args[0], _shape(op))]


def _broadcast(ctx, op: Op, args: list) -> list:
    return [np.broadcast_to(args[0], _shape(op)).copy()]


def _permute(ctx, op: Op, args: list) -> list:
    return [np.ascontiguousarray(np.transpose(args[0], tuple(_attr(op, "permutation"))))]


def _slices(indices: list, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """extract / insert: indices count in units of the extracted shape."""
    return tuple(slice(int(i) * n, (int(i) + 1) * n) for i, n in zip(indices, shape))


def _extract(ctx, op: Op, args: list) -> list:
    source, *indices = args
    return [source[_slices(indices, _shape(op))].copy()]


def _insert(ctx, op: Op, args: list) -> list:
    source, dest, *indices = args
    out = dest.copy()
    out[_slices(indices, source.shape)] = source
    return [out]


def _cat(ctx, op: Op, args: list) -> list:
    return [np.concatenate(args, axis=_attr(op, "dim"))]


def _iota(ctx, op: Op, args: list) -> list:
    return [np.arange(_shape(op)[0]).astype(storage(_elem(op)))]


def _constant(ctx, op: Op, args: list) -> list:
    attr: Dense = _attr(op, "value")
    elem, shape = _elem(op), _shape(op)
    if elem.name == "bf16":
        raw = np.frombuffer(attr.data, np.uint16).astype(np.uint32) << 16
        values = raw.view(np.float32)
    elif elem.name == "i1":
        values = np.frombuffer(attr.data, np.uint8) != 0
    else:
        values = np.frombuffer(attr.data, storage(elem).newbyteorder("<"))
    count = math.prod(shape)
    if values.size not in (1, count):
        raise InterpError(f"constant has {values.size} values for shape {shape}")
    out = np.broadcast_to(values, (count,)) if values.size == 1 else values
    return [np.array(out, dtype=storage(elem)).reshape(shape)]


# -- kernel environment -------------------------------------------------------------------------

def _block_id(ctx, op: Op, args: list) -> list:
    return [np.asarray(v, np.int32) for v in ctx.block_id]


def _num_blocks(ctx, op: Op, args: list) -> list:
    return [np.asarray(v, np.int32) for v in ctx.grid]


def _identity(ctx, op: Op, args: list) -> list:
    return [args[0]]


def _token(ctx, op: Op, args: list) -> list:
    return [TOKEN] * len(op.results)


def _assert(ctx, op: Op, args: list) -> list:
    if not np.all(args[0]):
        raise InterpError(f"assertion failed: {_attr(op, 'message', '')}")
    return [TOKEN] * len(op.results)


# -- views and memory ---------------------------------------------------------------------------

def _make_tensor_view(ctx, op: Op, args: list) -> list:
    t: TensorViewType = op.results[0].type
    dyn_shape = iter(int(v) for v in _args(op, args, "dynamicShape"))
    dyn_strides = iter(int(v) for v in _args(op, args, "dynamicStrides"))
    shape = tuple(next(dyn_shape) if d is None else d for d in t.shape)
    strides = tuple(next(dyn_strides) if s is None else s for s in t.strides)
    base = int(_arg(op, args, "base"))
    return [TensorView(base, t.elem, shape, strides)]


def _make_partition_view(ctx, op: Op, args: list) -> list:
    t: PartitionViewType = op.results[0].type
    return [PartitionView(args[0], t.tile, t.dim_map, t.padding)]


def _index_space_shape(ctx, op: Op, args: list) -> list:
    view: PartitionView = args[0]
    return [np.asarray(-(-view.tensor.shape[d] // n), storage(_elem(op, i)))
            for i, (d, n) in enumerate(zip(view.dim_map, view.tile))]


def _tensor_shape(ctx, op: Op, args: list) -> list:
    view = args[0]
    return [np.asarray(n, storage(_elem(op, i))) for i, n in enumerate(view.shape)]


def _tile_addresses(view: PartitionView, index: list) -> tuple[np.ndarray, np.ndarray]:
    """Byte addresses and in-bounds mask of the tile at `index` of a partition view."""
    tv = view.tensor
    addr = np.full(view.tile, tv.base, dtype=np.int64)
    mask = np.ones(view.tile, dtype=bool)
    size = elem_bytes(tv.elem)
    for i, (d, n) in enumerate(zip(view.dim_map, view.tile)):
        coord = int(index[i]) * n + np.arange(n, dtype=np.int64)
        along = [1] * len(view.tile)
        along[i] = n
        coord = coord.reshape(along)
        addr = addr + coord * tv.strides[d] * size
        mask = mask & (coord >= 0) & (coord < tv.shape[d])
    return addr, mask


def _view(op: Op, args: list) -> PartitionView:
    view = _arg(op, args, "view")
    if not isinstance(view, PartitionView):
        raise UnsupportedOp(f"access through {op.operand('view').type}")
    return view


def _load_view(ctx, op: Op, args: list) -> list:
    view = _view(op, args)
    addr, mask = _tile_addresses(view, _args(op, args, "index"))
    fill = padding_value(view.padding, view.tensor.elem)
    tile = ctx.memory.load(addr, mask, view.tensor.elem, fill)
    return [tile.reshape(_shape(op)), TOKEN]


def _store_view(ctx, op: Op, args: list) -> list:
    view = _view(op, args)
    addr, mask = _tile_addresses(view, _args(op, args, "index"))
    value = np.reshape(_arg(op, args, "tile"), view.tile)
    ctx.memory.store(addr, to_elem(value, view.tensor.elem), mask, view.tensor.elem)
    return [TOKEN]


def _lane_mask(op: Op, args: list, shape) -> np.ndarray:
    mask = _arg(op, args, "mask")
    return np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)


def _load_ptr(ctx, op: Op, args: list) -> list:
    pointers = _arg(op, args, "source")
    elem = _operand_elem(op, 0).pointee
    mask = _lane_mask(op, args, pointers.shape)
    tile = ctx.memory.load(pointers, mask, elem, 0)
    pad = _arg(op, args, "paddingValue")
    if pad is not None:
        tile = np.where(mask, tile, pad).astype(tile.dtype)
    return [tile, TOKEN]


def _store_ptr(ctx, op: Op, args: list) -> list:
    pointers = _arg(op, args, "destination")
    elem = op.operand("destination").type.elem.pointee
    mask = _lane_mask(op, args, pointers.shape)
    ctx.memory.store(pointers, to_elem(_arg(op, args, "value"), elem), mask, elem)
    return [TOKEN]


_RMW = {"add": np.add, "addf": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
        "xor": np.bitwise_xor, "max": np.maximum, "min": np.minimum, "xchg": lambda old, new: new}


def _atomic(ctx, op: Op, args: list, update: Callable) -> list:
    """Blocks run one after another, so an atomic is a load, the update and a store, lane by lane
    (lanes hitting the same address see each other's update). `update(old, lane)` gives the new
    value, or None to leave memory as it is. Returns the old values."""
    pointers = _arg(op, args, "pointers")
    elem = _operand_elem(op, 0).pointee
    mask = _lane_mask(op, args, pointers.shape)
    old = np.zeros(pointers.shape, storage(elem))
    one = np.ones((1,), bool)
    for lane in zip(*np.nonzero(mask)):
        at = pointers[lane].reshape(1)
        old[lane] = ctx.memory.load(at, one, elem, 0)[0]
        new = update(old[lane], lane)
        if new is not None:
            ctx.memory.store(at, to_elem(new, elem).reshape(1), one, elem)
    return [old, TOKEN]


def _atomic_rmw(ctx, op: Op, args: list) -> list:
    mode = _attr(op, "mode")
    if mode not in _RMW:
        raise UnsupportedOp(f"atomic_rmw mode {mode}")
    value = np.broadcast_to(_arg(op, args, "arg"), _arg(op, args, "pointers").shape)
    return _atomic(ctx, op, args, lambda old, lane: _RMW[mode](old, value[lane]))


def _atomic_cas(ctx, op: Op, args: list) -> list:
    shape = _arg(op, args, "pointers").shape
    cmp = np.broadcast_to(_arg(op, args, "cmp"), shape)
    val = np.broadcast_to(_arg(op, args, "val"), shape)
    return _atomic(ctx, op, args, lambda old, lane: val[lane] if old == cmp[lane] else None)


# -- matrix multiply ----------------------------------------------------------------------------

def _matmul(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    # einsum's own loops, not BLAS: deterministic, and no thread pool contending for busy cores
    return np.einsum("...mk,...kn->...mn", lhs, rhs, optimize=False)


def _mmaf(ctx, op: Op, args: list) -> list:
    lhs, rhs, acc = args
    wide = np.float64 if acc.dtype == np.float64 else np.float32
    product = _matmul(lhs.astype(wide), rhs.astype(wide))
    return [to_elem(product + acc.astype(wide), _elem(op))]


def _mmai(ctx, op: Op, args: list) -> list:
    lhs, rhs, acc = args
    a = _signed(lhs, op, "signedness_lhs").astype(np.int64)
    b = _signed(rhs, op, "signedness_rhs").astype(np.int64)
    with np.errstate(all="ignore"):
        return [(_matmul(a, b) + acc).astype(storage(_elem(op)))]


# -- regions: control flow, reductions, scans ---------------------------------------------------

def _for(ctx, op: Op, args: list) -> list:
    lb, ub, step = (int(v) for v in args[:3])
    carried = list(args[3:])
    if step <= 0:
        raise InterpError(f"for step {step} is not positive")
    unsigned = bool(_attr(op, "unsignedCmp"))
    if unsigned:
        bits = op.operands[0].type.elem.bits
        lb, ub = lb % (1 << bits), ub % (1 << bits)
    iv_dtype = storage(op.operands[0].type.elem)
    body = op.regions[0].blocks[0]
    for iv in range(lb, ub, step):  # a runaway loop ends at the executor's op budget
        jump = ctx.run_block(body, [np.asarray(iv).astype(iv_dtype), *carried])
        if jump.kind == "return":
            return jump
        carried = jump.values
        if jump.kind == "break":
            break
    return carried


def _loop(ctx, op: Op, args: list) -> list:
    carried = list(args)
    body = op.regions[0].blocks[0]
    while True:  # a runaway loop ends at the executor's op budget
        jump = ctx.run_block(body, carried)
        if jump.kind == "return":
            return jump
        carried = jump.values
        if jump.kind == "break":
            return carried


def _if(ctx, op: Op, args: list) -> list:
    taken = 0 if bool(args[0]) else 1
    if taken >= len(op.regions) or not op.regions[taken].blocks:
        return []
    jump = ctx.run_block(op.regions[taken].blocks[0], [])
    if jump.kind in ("yield", "end"):  # "end": a region without results may omit its yield
        return jump.values
    return jump  # continue / break / return leave the enclosing block too


def _identity_value(ident, like: np.ndarray):
    value = ident.value if isinstance(ident, (TypedFloat, TypedInt)) else ident
    if value is None:
        raise UnsupportedOp(f"reduction identity {ident}")
    return np.asarray(value).astype(like.dtype)


def _combine(ctx, op: Op, lhs: list, rhs: list) -> list:
    """The combiner region on whole arrays (its block arguments are lhs_0, rhs_0, lhs_1, ...)."""
    params = [v for pair in zip(lhs, rhs) for v in pair]
    jump = ctx.run_block(op.regions[0].blocks[0], params)
    return [np.asarray(v) for v in jump.values]


def _reduce(ctx, op: Op, args: list) -> list:
    """Pairwise tree over the reduced dimension (adjacent pairs, so operand order is kept), started
    from the identities like the hardware's accumulators: a wrong identity shows in the result."""
    dim = _attr(op, "dim")
    identities = _attr(op, "identities")
    xs = [np.moveaxis(a, dim, 0) for a in args]
    while xs[0].shape[0] > 1:
        if xs[0].shape[0] % 2:
            xs = [np.concatenate([x, _identity_rows(i, x, 1)]) for x, i in zip(xs, identities)]
        xs = _combine(ctx, op, [x[0::2] for x in xs], [x[1::2] for x in xs])
    xs = _combine(ctx, op, [_identity_rows(i, x, 1) for x, i in zip(xs, identities)], xs)
    return [x[0].astype(storage(_elem(op, k))) for k, x in enumerate(xs)]


def _identity_rows(ident, like: np.ndarray, rows: int) -> np.ndarray:
    return np.broadcast_to(_identity_value(ident, like), (rows, *like.shape[1:]))


def _scan(ctx, op: Op, args: list) -> list:
    """Inclusive scan by doubling steps (Hillis-Steele); `reverse` scans from the end."""
    dim, reverse = _attr(op, "dim"), bool(_attr(op, "reverse"))
    identities = _attr(op, "identities")
    xs = [np.moveaxis(a, dim, 0) for a in args]
    if reverse:
        xs = [x[::-1] for x in xs]
    n, shift = xs[0].shape[0], 1
    while shift < n:
        earlier = [np.concatenate([_identity_rows(i, x, shift), x[:-shift]])
                   for x, i in zip(xs, identities)]
        xs = _combine(ctx, op, earlier, xs)
        shift *= 2
    if reverse:
        xs = [x[::-1] for x in xs]
    return [np.ascontiguousarray(np.moveaxis(x, 0, dim)).astype(storage(_elem(op, k)))
            for k, x in enumerate(xs)]


# -- the table ----------------------------------------------------------------------------------

OPS: dict[str, Impl] = {
    **{name: _float(fn) for name, fn in _FLOAT_OPS.items()},
    **{name: _int(fn) for name, fn in _INT_BINARY.items()},
    "maxf": _minmaxf(np.maximum, np.fmax),
    "minf": _minmaxf(np.minimum, np.fmin),
    "fma": _fma,
    "fpowi": _fpowi,
    "cmpi": _cmpi,
    "cmpf": _cmpf,
    "select": _select,
    "ftof": _ftof,
    "ftoi": _ftoi,
    "itof": _itof,
    "exti": _exti,
    "trunci": _trunci,
    "bitcast": _bitcast,
    "ptr_to_int": _address,
    "int_to_ptr": _address,
    "ptr_to_ptr": _address,
    "offset": _offset,
    "reshape": _reshape,
    "broadcast": _broadcast,
    "permute": _permute,
    "extract": _extract,
    "insert": _insert,
    "cat": _cat,
    "iota": _iota,
    "constant": _constant,
    "get_tile_block_id": _block_id,
    "get_num_tile_blocks": _num_blocks,
    "assume": _identity,
    "make_token": _token,
    "join_tokens": _token,
    "print_tko": _token,
    "gdc_wait_tko": _token,
    "gdc_launch_dependents_tko": _token,
    "memory_fence_alias_tko": _token,
    "assert": _assert,
    "make_tensor_view": _make_tensor_view,
    "make_partition_view": _make_partition_view,
    "get_index_space_shape": _index_space_shape,
    "get_tensor_shape": _tensor_shape,
    "load_view_tko": _load_view,
    "store_view_tko": _store_view,
    "load_ptr_tko": _load_ptr,
    "store_ptr_tko": _store_ptr,
    "atomic_rmw_tko": _atomic_rmw,
    "atomic_cas_tko": _atomic_cas,
    "mmaf": _mmaf,
    "mmai": _mmai,
    "for": _for,
    "loop": _loop,
    "if": _if,
    "reduce": _reduce,
    "scan": _scan,
}
