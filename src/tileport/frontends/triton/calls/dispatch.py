"""Entry points of the lowerer: attributes, subscripts, calls and methods, and `TL`, the table of `tl.*`
functions (one handler each; loads and stores are in `memory`).
"""

from __future__ import annotations

import ast
from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import memory as M
from tileport.frontends.triton.calls.arith import (DOWNCAST_ROUNDING, arange, binary, bitcast, cdiv, clamp, div_rn,
                                                   dynamic, fdiv, fma, full, full_like, materialize_int, math_fn,
                                                   pointer_type, recast, round_away, sigmoid, swizzle2d, tl_where, to,
                                                   trunc, two, zeros, zeros_like)
from tileport.frontends.triton.calls.atomics import ATOMIC_RMW, atomic_cas, atomic_rmw
from tileport.frontends.triton.calls.base import (DESCRIPTOR_METHODS, IDENTITY, NO_OP, TL_DTYPES, UNARY, UNSUPPORTED,
                                                  _bind)
from tileport.frontends.triton.calls.mma import dot
from tileport.frontends.triton.calls.reduce import arg_reduction, cumsum, reduction
from tileport.frontends.triton.calls.shape import (broadcast_to, expand, expand_dims, join, permute, reshape, split,
                                                   trans)
from tileport.frontends.triton.values import CV, DT, BlockPtr, Builtin, Descriptor, Method, Module, Ptr
from tileport.model.builder import lit_dtype
from tileport.model.ir import Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import DimOp, ScalarT, Sym, TileT


# ---------------------------------------------------------------- attributes and subscripts

def attribute(lw, obj: Any, attr: str, node) -> Any:
    if isinstance(obj, Module):
        if obj.name == "triton" and attr == "language":
            return Module("tl")
        if obj.name in ("tl", "triton") and attr in ("math",):
            return Module("libdevice")
        if obj.name in ("tl", "libdevice") and attr in ("extra", "cuda", "libdevice"):
            return Module("libdevice")
        if obj.name == "tl" and attr in TL_DTYPES:
            return DT(TL_DTYPES[attr])
        if obj.name == "tl" and attr == "constexpr":
            return Builtin("constexpr")
        return Method(obj, attr)
    if isinstance(obj, Ref):
        if attr == "dtype":
            return DT(obj.ty.dtype)
        if attr == "type":  # a block's (or scalar's) type: its element type is the dtype
            return DT(("block", obj.ty.dtype))
        if attr == "shape" and isinstance(obj.ty, TileT):
            return tuple(CV(d) for d in obj.ty.shape)
        if attr == "T":
            return permute(lw, obj, (1, 0), node)
        return Method(obj, attr)
    if isinstance(obj, Ptr):
        if attr in ("dtype", "type"):  # a pointer (tile)'s type: `.element_ty` is the pointee's dtype
            return DT(("pointer", obj.dtype), obj.array.name)
        return Method(obj, attr)
    if isinstance(obj, Descriptor) and attr in ("load", "store"):
        return Method(obj, attr)
    if isinstance(obj, Descriptor) and attr == "dtype":
        return DT(obj.array.array.ty.dtype)
    if isinstance(obj, BlockPtr) and attr in ("dtype", "type"):  # a block pointer's type: `.element_ty` is its data's
        return DT(("pointer", obj.array.dtype))
    if isinstance(obj, Descriptor) and attr == "block_shape":
        return tuple(CV(d) for d in obj.block)
    if isinstance(obj, DT):
        if attr == "element_ty" and isinstance(obj.dtype, tuple):
            return DT(obj.dtype[1], obj.of)
        if attr == "primitive_bitwidth" and isinstance(obj.dtype, str):
            return CV(_bits(obj.dtype))
    if isinstance(obj, CV) and attr == "value":
        return obj
    if isinstance(obj, CV) and type(obj.value) in (int, float) and attr in ("to", "cast"):
        # a number a helper takes as an argument is a 0-d tensor there (`exp(1.0)` -> `x.to(tl.float32)`)
        return Method(lw.b.to_tile(lw.atom(obj, node, None), lit_dtype(obj.value), (), lw.loc(node)), attr)
    raise lw.fail(node, f"attribute `.{attr}` of {lw.describe(obj)} is not supported", "attribute")


def _bits(dt: str) -> int:
    return {"bool": 1}.get(dt) or int("".join(c for c in dt if c.isdigit()) or 32)


def subscript(lw, obj: Any, node: ast.Subscript) -> Any:
    idx = node.slice
    if isinstance(obj, tuple):
        i = lw.compile_time(lw.expr(idx), node, "a tuple index")
        if type(i) is not int or not -len(obj) <= i < len(obj):
            raise lw.fail(node, f"tuple index {i!r} out of range", "subscript")
        return obj[i]
    items = idx.elts if isinstance(idx, ast.Tuple) else [idx]
    if not all(isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None
               or (isinstance(e, ast.Constant) and e.value in (None, Ellipsis)) for e in items):
        raise lw.fail(node, "only `[:, None]`-style indexing (new axes) is supported on tiles", "subscript",
                      "index tiles with None and : only")
    if isinstance(obj, Ptr):
        if obj.offset is None:
            raise lw.fail(node, "indexing a bare pointer is not supported", "subscript")
        return Ptr(obj.array, expand(lw, obj.offset, items, node), obj.elem)
    if isinstance(obj, Ref) and isinstance(obj.ty, TileT):
        return expand(lw, obj, items, node)
    raise lw.fail(node, f"indexing {lw.describe(obj)} is not supported", "subscript")


# ---------------------------------------------------------------- calls

def call(lw, f: Any, args: list, kwargs: dict, node) -> Any:
    if isinstance(f, Builtin):
        return builtin(lw, f.name, args, kwargs, node)
    if isinstance(f, Method) and isinstance(f.obj, Module):
        return tl_call(lw, f.name, args, kwargs, node, f.obj.name)
    if isinstance(f, Method):
        return method(lw, f.obj, f.name, args, kwargs, node)
    if isinstance(f, DT) and len(args) == 1 and isinstance(f.dtype, str):
        return to(lw, args[0], f.dtype, node)
    if isinstance(f, Method) and f.name == "cast" and isinstance(f.obj, Module):
        return method(lw, args[0], "cast", args[1:], kwargs, node)
    raise lw.fail(node, f"calling {lw.describe(f)} is not supported", "call")


def builtin(lw, name: str, args, kwargs, node):
    if name in ("min", "max") and len(args) == 2:
        return binary(lw, name, args[0], args[1], node)
    if name == "float" and len(args) == 1 and isinstance(args[0], CV) and isinstance(args[0].value, (Sym, DimOp)):
        if not dynamic(lw, args[0]):  # a constexpr without a value: its values, else computed at run time
            raise NeedsSpecialization(frozenset(sym_names(args[0].value)), "float() of a constexpr", lw.loc(node))
        return to(lw, materialize_int(lw, args[0], node), "f32", node)
    if name == "float" and len(args) == 1 and isinstance(args[0], CV):
        try:
            return CV(float(args[0].value))
        except (TypeError, ValueError):
            raise lw.fail(node, f"float({args[0].value!r}) is not a number", "float") from None
    if name == "int" and len(args) == 1 and isinstance(args[0], CV) and isinstance(args[0].value, (int, float)):
        return CV(int(args[0].value))
    if name == "abs" and len(args) == 1 and isinstance(args[0], CV) and type(args[0].value) in (int, float):
        return CV(abs(args[0].value))  # Python's abs of a constant
    if name == "abs" and len(args) == 1:
        return tl_call(lw, "abs", args, kwargs, node, "tl")
    if name == "constexpr" and len(args) == 1:
        return args[0]
    if name == "print":
        return CV(None)
    raise lw.fail(node, f"`{name}(...)` is not supported here", "builtin")


def tl_call(lw, name: str, args, kwargs, node, module: str):
    if name in UNSUPPORTED:
        raise lw.fail(node, f"`{module}.{name}`: {UNSUPPORTED[name]} have no lowering in tileport's kernel model "
                      "yet", f"tl.{name}", "the kernel cannot be ported as it is")
    if name in IDENTITY:
        return args[0] if args else kwargs.get("input")
    if name in NO_OP:
        return CV(None)
    handler = TL.get(name)
    if handler is None and name in UNARY:
        return math_fn(lw, UNARY[name], args, kwargs, node)
    if handler is None:
        raise lw.fail(node, f"`{module}.{name}` is not supported", f"tl.{name}")
    return handler(lw, args, kwargs, node)


def method(lw, obj, name: str, args, kwargs, node):
    if name in ("to", "cast"):
        b = _bind(lw, args, kwargs, ("dtype", "fp_downcast_rounding", "bitcast"), node, name, 1)
        dt = b["dtype"]
        if isinstance(dt, CV) and isinstance(dt.value, (Sym, DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(dt.value)), f"a constexpr dtype (.{name}({dt.value}))",
                                      lw.loc(node))
        if isinstance(obj, Ptr) and isinstance(dt, DT) and isinstance(dt.dtype, tuple) and dt.dtype[0] == "pointer":
            return recast(lw, obj, dt.dtype[1], node)
        if isinstance(dt, DT) and isinstance(dt.dtype, tuple) and dt.dtype[0] == "pointer":
            raise lw.fail(node, f"a pointer made from {lw.describe(obj)} (an address computed or loaded as an "
                          "integer) has no lowering: the port addresses memory through the kernel's pointer "
                          "parameters only", "tl.pointer_type", "pass the tensor itself as a kernel parameter")
        if not isinstance(dt, DT) or isinstance(dt.dtype, tuple):
            raise lw.fail(node, f".{name}() takes an element dtype", f".{name}")
        if not M._none(b.get("bitcast")) and lw.compile_time(b["bitcast"], node, "bitcast"):
            return bitcast(lw, obj, dt.dtype, node)
        rounding = None if M._none(b.get("fp_downcast_rounding")) else \
            lw.compile_time(b["fp_downcast_rounding"], node, "fp_downcast_rounding")
        if rounding not in DOWNCAST_ROUNDING:
            raise lw.fail(node, f"fp_downcast_rounding={rounding!r} is not supported", f".{name}",
                          f"use one of {', '.join(map(repr, filter(None, DOWNCAST_ROUNDING)))}")
        out = to(lw, obj, dt.dtype, node, DOWNCAST_ROUNDING[rounding])
        if isinstance(out, Ref) and dt.of in lw.default_float:  # values of that array's (assumed) element type
            lw.loaded[out.name] = dt.of
        return out
    if name in ("sum", "max", "min", "reshape", "trans", "permute", "broadcast_to", "cumsum", "argmax", "argmin",
                "exp", "log", "sqrt", "abs", "split"):
        return tl_call(lw, name, [obj, *args], kwargs, node, "tl")
    if isinstance(obj, Descriptor) and name in DESCRIPTOR_METHODS:
        return DESCRIPTOR_METHODS[name](lw, obj, args, kwargs, node)
    if name in ("load", "store") and isinstance(obj, Ref) and not isinstance(obj.ty, TileT):
        raise lw.fail(node, f"`.{name}()` on {lw.describe(obj)}: a host-side tensor descriptor is recognized "
                      "where its parameter itself is accessed (`param.load(...)`), not through another name",
                      "tensor descriptor", "call .load/.store on the descriptor parameter directly")
    raise lw.fail(node, f"method `.{name}()` of {lw.describe(obj)} is not supported", "method")


def _grid_value(lw, args, kwargs, node, name: str, kind: OpKind, hint: str):
    """tl.program_id / tl.num_programs: an i32 of the launch grid along a compile-time axis."""
    b = _bind(lw, args, kwargs, ("axis",), node, name, 1)
    axis = lw.compile_time(b["axis"], node, "axis")
    if axis not in (0, 1, 2):
        raise lw.fail(node, f"{name} axis must be 0, 1 or 2", f"tl.{name}")
    out = lw.b.value(kind, (), ScalarT("i32"), lw.loc(node), hint=hint, axis=axis)
    lw.track_scalar(out)
    return out


def program_id(lw, args, kwargs, node):
    return _grid_value(lw, args, kwargs, node, "program_id", OpKind.BID, "pid")


def num_programs(lw, args, kwargs, node):
    return _grid_value(lw, args, kwargs, node, "num_programs", OpKind.NUM_BLOCKS, "num_pids")


def tl_range(lw, args, kwargs, node):
    raise lw.fail(node, "tl.range / tl.static_range are only supported as `for` loop iterables", "tl.range")


TL = {
    "program_id": program_id, "num_programs": num_programs, "arange": arange, "full": full, "zeros": zeros,
    "pointer_type": pointer_type, "swizzle2d": swizzle2d,
    "zeros_like": zeros_like, "full_like": full_like, "cdiv": cdiv, "where": tl_where, "load": M.load,
    "store": M.store, "make_block_ptr": M.make_block_ptr, "advance": M.advance,
    "make_tensor_descriptor": M.make_tensor_descriptor, "load_tensor_descriptor": M.load_tensor_descriptor,
    "store_tensor_descriptor": M.store_tensor_descriptor, "sigmoid": sigmoid, "round": round_away,
    "trunc": trunc,
    "maximum": two("maximum"), "minimum": two("minimum"), "clamp": clamp, "fma": fma, "fdiv": fdiv,
    "div_rn": div_rn, "sum": reduction("sum"), "max": reduction("max"), "min": reduction("min"),
    "argmax": arg_reduction("argmax"), "argmin": arg_reduction("argmin"), "dot": dot, "cumsum": cumsum,
    "trans": trans, "permute": trans, "reshape": reshape, "view": reshape, "expand_dims": expand_dims,
    "broadcast_to": broadcast_to, "split": split, "join": join, "range": tl_range, "static_range": tl_range,
    "atomic_cas": atomic_cas,
    **{f"atomic_{mode}": atomic_rmw(mode) for mode in ATOMIC_RMW},
    "cast": lambda lw, args, kwargs, node: method(lw, args[0], "cast", args[1:], kwargs, node),
}
