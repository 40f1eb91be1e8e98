"""Atomics: `tl.atomic_<op>` read-modify-writes and `tl.atomic_cas`."""

from __future__ import annotations

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import memory as M
from tileport.frontends.triton.calls.base import _bind
from tileport.frontends.triton.values import CV, Ptr
from tileport.model.ir import Ref
from tileport.model.ops import OpKind
from tileport.model.types import Sym, TileT


# ---------------------------------------------------------------- atomics

ATOMIC_RMW = ("add", "max", "min", "and", "or", "xor", "xchg")
# Triton's `sem` / `scope` strings -> the model's memory order / scope (defaults acq_rel, gpu)
ATOMIC_SEM = {"relaxed": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
ATOMIC_SCOPE = {"gpu": "device", "cta": "block", "sys": "sys"}
# element types cutile-rs has each atomic for (its `atomic::*` modes: AddF for floats, no float max/min)
ATOMIC_DTYPES = {"add": ("f32", "f64", "f16", "bf16", "i32", "i64", "u32", "u64"),
                 "xchg": ("f32", "f64", "i32", "i64", "u32", "u64"), "cas": ("f32", "f64", "i32", "i64", "u32", "u64")}
ATOMIC_INT_DTYPES = ("i32", "i64", "u32", "u64")


def _atomic_enum(lw, v, table: dict, default: str, node, fn: str, what: str) -> str:
    if M._none(v):
        return default
    s = lw.compile_time(v, node, f"tl.{fn} {what}")
    if isinstance(s, Sym):  # a constexpr (`sem: tl.constexpr = "release"`): one entry per value
        raise NeedsSpecialization(frozenset({s.name}), f"a constexpr {what} of tl.{fn}", lw.loc(node))
    if s not in table:
        raise lw.fail(node, f"tl.{fn}: {what}={s!r} is not one of {', '.join(sorted(table))}", f"tl.{fn}")
    return table[s]


def _atomic(lw, fn: str, mode: str, b: dict, values: tuple, node) -> Ref:
    """One read-modify-write (or compare-and-swap) per pointer element: the gather path of the pointer's
    buffer (1-D) with the source's mask; returns the old values in the pointers' shape."""
    ptr = b["pointer"]
    if not isinstance(ptr, Ptr):
        raise lw.fail(node, f"tl.{fn} of {lw.describe(ptr)}: a pointer (or a tile of pointers) is expected",
                      f"tl.{fn}")
    if ptr.elem is not None:
        raise lw.fail(node, f"tl.{fn} through a re-cast pointer is not supported (cutile-rs atomics take the "
                      "array's element type)", f"tl.{fn}", "apply the atomic through the pointer parameter itself")
    M._go_flat(lw, ptr)  # atomics address elements of the 1-D buffer
    dtype = ptr.array.ty.dtype
    loc = lw.loc(node)
    lw.b.require(dtype, lambda d: d in ATOMIC_DTYPES.get(mode, ATOMIC_INT_DTYPES),
                 f"tl.{fn}: cutile-rs has no such atomic for this element type", loc)
    mask = None if M._none(b.get("mask")) else b["mask"]
    if isinstance(mask, CV) and mask.value is True:
        mask = None
    if mask is not None and not (isinstance(mask, Ref) and mask.ty.dtype == "bool"):
        raise lw.fail(node, f"tl.{fn}: mask must be a boolean tile", f"tl.{fn}")
    for v in values:
        M.stored_ints(lw, ptr, v)
    shape = M._common_shape(lw, ptr, [mask, *values], node)
    operands = tuple(M._value_tile(lw, v, dtype, shape, node) for v in values)
    args = (M.array(lw, ptr, 1), *operands, M._offsets(lw, ptr, shape, node))
    if mask is not None:
        args += (lw.b.to_tile(mask, "bool", shape, loc),)
    attrs = dict(memory_order=_atomic_enum(lw, b.get("sem"), ATOMIC_SEM, "acq_rel", node, fn, "sem"),
                 memory_scope=_atomic_enum(lw, b.get("scope"), ATOMIC_SCOPE, "device", node, fn, "scope"),
                 shape=shape, check_bounds=None, has_mask=mask is not None)
    if mode != "cas":
        attrs["mode"] = mode
    return lw.b.value(OpKind.ATOMIC_CAS if mode == "cas" else OpKind.ATOMIC_RMW, args, TileT(dtype, shape), loc,
                      hint=f"{ptr.array.name}_old", **attrs)


def atomic_rmw(mode: str):
    def handler(lw, args, kwargs, node):
        b = _bind(lw, args, kwargs, ("pointer", "val", "mask", "sem", "scope"), node, f"atomic_{mode}", 2)
        return _atomic(lw, f"atomic_{mode}", mode, b, (b["val"],), node)
    return handler


def atomic_cas(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("pointer", "cmp", "val", "sem", "scope"), node, "atomic_cas", 3)
    return _atomic(lw, "atomic_cas", "cas", b, (b["cmp"], b["val"]), node)
