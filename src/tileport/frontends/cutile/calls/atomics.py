"""Atomics: `ct.atomic_cas` and one `ct.atomic_<op>` read-modify-write handler per operation."""

from __future__ import annotations

from tileport.frontends.cutile.calls.base import Handler, _array, _common_shape, _kw, _opt_const, handler
from tileport.frontends.cutile.calls.memory import _check_implicit_cast, _indices
from tileport.frontends.cutile.calls.views import _not_a_view
from tileport.frontends.cutile.values import EnumVal
from tileport.model.ir import Ref
from tileport.model.ops import OpKind
from tileport.model.types import TileT


# ---- atomics: the pointer path of gather/scatter, then one read-modify-write (or compare-and-swap) per element
ATOMIC_RMW = ("add", "max", "min", "and", "or", "xor", "xchg")
_ATOMIC_BITWISE = ("and", "or", "xor")  # the update must have the array's dtype exactly (no implicit cast)
_ATOMIC_DTYPES = {"add": ("i32", "i64", "u32", "u64", "f32", "f64", "f16", "bf16"),
                  "xchg": ("i32", "i64", "u32", "u64", "f32", "f64"), "cas": ("i32", "i64", "u32", "u64", "f32", "f64")}
_ATOMIC_INT_DTYPES = ("i32", "i64", "u32", "u64")
_ORDERS = {"RELAXED": "relaxed", "ACQUIRE": "acquire", "RELEASE": "release", "ACQ_REL": "acq_rel"}
_SCOPES = {"BLOCK": "block", "DEVICE": "device", "SYS": "sys"}


def _atomic_enum(lw, v, enum: str, table: dict, default: str, node, fn: str) -> str:
    if v is None:
        return default
    if not (isinstance(v, EnumVal) and v.enum == enum and v.member in table):
        raise lw.fail(node, f"ct.{fn}: {enum.lower()} must be one of ct.{enum}."
                            f"{', '.join(sorted(table))}", f"ct.{fn}")
    return table[v.member]


def _atomic_value(lw, v, dtype, shape, node, fn: str, what: str, exact: bool) -> Ref:
    loc = lw.loc(node)
    if isinstance(v, Ref) and isinstance(v.ty, TileT):
        if exact and v.ty.dtype != dtype:
            raise lw.fail(node, f"ct.{fn}: the {what} must have the array's dtype (no implicit cast)", f"ct.{fn}")
        if not exact:
            _check_implicit_cast(lw, v.ty.dtype, dtype, node, f"ct.{fn} {what}")
        return lw.b.to_tile(v, dtype, shape, loc)
    return lw.b.to_tile(lw.scalar_atom(v, node), dtype, shape, loc)


def _atomic(lw, fn: str, mode: str, args, kwargs, node):
    values = ("expected", "desired") if mode == "cas" else ("update",)
    b = _kw(lw, args, kwargs, ("array", "indices", *values, "check_bounds", "memory_order", "memory_scope"), node,
            fn, 2 + len(values))
    arr = _array(lw, b["array"], node, fn)
    _not_a_view(lw, arr, node, fn)
    lw.b.require(arr.ty.dtype, lambda d: d in _ATOMIC_DTYPES.get(mode, _ATOMIC_INT_DTYPES),
                 f"ct.{fn}: unsupported array dtype", lw.loc(node))
    idx = _indices(lw, b["indices"], arr.ty.rank, node, fn)
    shape = _common_shape(lw, idx, node)  # the update is broadcast to the indices' shape, as cuTile does
    operands = tuple(_atomic_value(lw, b[k], arr.ty.dtype, shape, node, fn, k, mode in _ATOMIC_BITWISE)
                     for k in values)
    order = _atomic_enum(lw, b.get("memory_order"), "MemoryOrder", _ORDERS, "acq_rel", node, fn)
    scope = _atomic_enum(lw, b.get("memory_scope"), "MemoryScope", _SCOPES, "device", node, fn)
    attrs = dict(memory_order=order, memory_scope=scope, shape=shape,
                 check_bounds=_opt_const(lw, b.get("check_bounds"), node, "check_bounds", (bool,)))
    if mode != "cas":
        attrs["mode"] = mode
    return lw.b.value(OpKind.ATOMIC_CAS if mode == "cas" else OpKind.ATOMIC_RMW, (arr, *operands, *idx),
                      TileT(arr.ty.dtype, shape), lw.loc(node), hint=f"{arr.name}_old", **attrs)


@handler
def ct_atomic_cas(lw, args, kwargs, node):
    return _atomic(lw, "atomic_cas", "cas", args, kwargs, node)


def _atomic_rmw_handler(mode: str) -> Handler:
    def handle(lw, args, kwargs, node):
        return _atomic(lw, f"atomic_{mode}", mode, args, kwargs, node)
    handle.__name__ = f"ct_atomic_{mode}"
    return handle


for _mode in ATOMIC_RMW:
    handler(_atomic_rmw_handler(_mode))
