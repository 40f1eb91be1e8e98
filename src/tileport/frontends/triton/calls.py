"""`tl.*` calls, methods, attributes and operators of the Triton frontend, typed into model operations.

Each `tl` function has one handler in `TL` (a table, not name lookups); what has no lowering is a
located diagnostic naming the construct.
"""

from __future__ import annotations

import ast
import itertools
from typing import Any

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import affine as A
from tileport.frontends.triton import memory as M
from tileport.frontends.triton.values import CV, DT, BlockPtr, Builtin, Descriptor, Method, Module, Ptr, Retry
from tileport.model import types as T
from tileport.model.builder import lit_dtype, weak_result_dtype
from tileport.model.ir import Lit, Ref, sym_names
from tileport.model.ops import OpKind
from tileport.model.types import DimOp, ScalarT, Sym, TileT

TL_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32",
             "int64": "i64", "int16": "i16", "int8": "i8", "uint8": "u8", "uint32": "u32", "int1": "bool",
             "fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp64": "f64", "uint16": "u16", "uint64": "u64",
             "float8e4nv": "f8e4m3fn", "float8e5": "f8e5m2"}
# the names `str(tl.<dtype>)` gives (how a dtype constexpr is pinned), by model dtype
TL_DTYPE_NAMES = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp64": "f64", "int1": "bool", "int8": "i8",
                  "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                  "uint64": "u64", "fp8e4nv": "f8e4m3fn", "fp8e5": "f8e5m2"}
UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "sqrt_rn": "sqrt",
         "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "sinh": "sinh", "cosh": "cosh",
         "floor": "floor", "ceil": "ceil", "abs": "abs", "fabs": "abs", "exp_ftz": "exp", "expf": "exp",
         "logf": "log", "fast_expf": "exp", "fast_logf": "log"}
FLOAT_ONLY = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "floor",
              "ceil"}
REDUCE = {"sum": "sum", "max": "max", "min": "min", "reduce_sum": "sum"}
# The element type Triton 3.6 reduces (and returns) by input element type, where it is not the input's
# (triton/language/standard.py): sum and cumsum widen ints narrower than 32 bits keeping their signedness,
# bool being unsigned (`_pick_sum_dtype`); max and min widen narrow floats to f32 and narrow ints to i32;
# cumsum widens bf16 to f32 first (`_promote_bfloat16_to_float32`). A bf16 or f16 sum stays in its type.
_NARROW_SUM = {"bool": "u32", "u8": "u32", "u16": "u32", "i8": "i32", "i16": "i32"}
_NARROW_MAX = {"f16": "f32", "bf16": "f32", "bool": "i32", "i8": "i32", "i16": "i32", "u8": "i32", "u16": "i32"}
REDUCTION_DTYPES = {"sum": _NARROW_SUM, "max": _NARROW_MAX, "min": _NARROW_MAX,
                    "cumsum": {**_NARROW_SUM, "bf16": "f32"}}
IDENTITY = {"multiple_of", "max_contiguous", "max_constancy", "assume_aligned"}
NO_OP = {"static_assert", "device_assert", "static_print", "device_print", "debug_barrier", "assume"}
UNSUPPORTED = {
    "rand": "random numbers", "randn": "random numbers", "randint": "random numbers", "philox": "random numbers",
    "interleave": "tile interleaving",
    "histogram": "histograms", "inline_asm_elementwise": "inline assembly", "sort": "sorting", "gather": "tl.gather",
    "associative_scan": "custom scans", "reduce": "custom reductions", "erf": "erf", "pow": "pow",
    "umulhi": "umulhi", "clz": "clz", "popc": "popc", "flip": "tl.flip",
}
DESCRIPTOR_METHODS = {"load": M.descriptor_load, "store": M.descriptor_store}
_uid = itertools.count()


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


def expand(lw, x: Ref, items, node) -> Ref:
    """`x[:, None]`: a reshape adding unit axes (affine forms and mask bounds follow their axes)."""
    old = tuple(x.ty.shape)
    slices = sum(1 for e in items if isinstance(e, ast.Slice))
    ellipsis = any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in items)
    if slices > len(old) or (not ellipsis and slices != len(old)):
        raise lw.fail(node, f"indexing a rank-{len(old)} tile with {len(items)} entries", "subscript")
    new, mapping, j = [], {}, 0
    for e in items:
        if isinstance(e, ast.Slice):
            mapping[j] = len(new)
            new.append(old[j])
            j += 1
        elif e.value is None:
            new.append(1)
        else:
            for _ in range(len(old) - slices):
                mapping[j] = len(new)
                new.append(old[j])
                j += 1
    r, r2 = len(old), len(new)
    out = lw.b.value(OpKind.RESHAPE, (x,), TileT(x.ty.dtype, tuple(new)), lw.loc(node), hint=f"{x.name}_e",
                     shape=tuple(new))
    axes = {r - 1 - a: r2 - 1 - b for a, b in mapping.items()}
    if x.name in lw.poly:
        lw.poly[out.name] = A.remap_axes(lw.poly[x.name], axes)
    if x.name in lw.bounds:  # the mask's aranges move with the tile's axes, as the offsets' do
        lw.bounds[out.name] = [A.remap_bound(bd, axes) for bd in lw.bounds[x.name]]
    if x.name in lw.loaded:
        lw.loaded[out.name] = lw.loaded[x.name]
    return out


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


def _bind(lw, args, kwargs, names, node, fn, required):
    return M._bind(lw, args, kwargs, names, node, fn, required)


def _tile(lw, v, node, fn) -> Ref:
    if isinstance(v, Ref) and isinstance(v.ty, TileT):
        return v
    if isinstance(v, Ref):
        return lw.b.to_tile(v, v.ty.dtype, (), lw.loc(node))
    raise lw.fail(node, f"{fn}: expected a tile, got {lw.describe(v)}", fn)


def program_id(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("axis",), node, "program_id", 1)
    axis = lw.compile_time(b["axis"], node, "axis")
    if axis not in (0, 1, 2):
        raise lw.fail(node, "program_id axis must be 0, 1 or 2", "tl.program_id")
    out = lw.b.value(OpKind.BID, (), ScalarT("i32"), lw.loc(node), hint="pid", axis=axis)
    lw.track_scalar(out)
    return out


def num_programs(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("axis",), node, "num_programs", 1)
    axis = lw.compile_time(b["axis"], node, "axis")
    if axis not in (0, 1, 2):
        raise lw.fail(node, "num_programs axis must be 0, 1 or 2", "tl.num_programs")
    out = lw.b.value(OpKind.NUM_BLOCKS, (), ScalarT("i32"), lw.loc(node), hint="num_pids", axis=axis)
    lw.track_scalar(out)
    return out


def arange(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("start", "end"), node, "arange", 2)
    start = lw.compile_time(b["start"], node, "tl.arange start")
    end = lw.compile_time(b["end"], node, "tl.arange end")
    if start == 0:
        size = end
    elif type(start) is int and type(end) is int:
        size = end - start
    else:
        size = T.dim_op("-", end, start)
    if isinstance(size, int) and (size <= 0 or size & (size - 1)):
        raise lw.fail(node, f"tl.arange size {size} must be a positive power of two", "tl.arange")
    out = lw.b.value(OpKind.ARANGE, (), TileT("i32", (size,)), lw.loc(node), hint="offs", dtype="i32", size=size)
    ar = ("a", next(_uid), size, 0)
    lw.poly[out.name] = A.add(A.factor(ar), A.dim_poly(start) if start != 0 else {})
    if start != 0:
        out = binary(lw, "+", out, CV(start), node)
        lw.poly[out.name] = A.add(A.factor(ar), A.dim_poly(start))
    return out


def _shape(lw, v, node, fn) -> tuple:
    items = v if isinstance(v, tuple) else (v,)
    dims = tuple(lw.compile_time(i, node, f"{fn} shape") for i in items)
    if not all(type(d) is int or isinstance(d, (Sym, DimOp)) for d in dims):
        raise lw.fail(node, f"{fn}: shape entries must be integers", fn)
    return dims


def _dtype(lw, v, node, fn, default=None):
    if v is None or (isinstance(v, CV) and v.value is None):
        if default is None:
            raise lw.fail(node, f"{fn}: a dtype is required", fn)
        return default
    if isinstance(v, CV) and isinstance(v.value, (Sym, DimOp)):
        raise NeedsSpecialization(frozenset(sym_names(v.value)), f"a constexpr dtype ({fn} dtype={v.value})",
                                  lw.loc(node))
    if not isinstance(v, DT) or isinstance(v.dtype, tuple):
        raise lw.fail(node, f"{fn}: expected an element dtype, got {lw.describe(v)}", fn)
    return v.dtype


def full(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("shape", "value", "dtype"), node, "full", 3)
    return _filled(lw, _shape(lw, b["shape"], node, "tl.full"), b["value"], _dtype(lw, b["dtype"], node, "tl.full"),
                   node)


def zeros(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("shape", "dtype"), node, "zeros", 2)
    return _filled(lw, _shape(lw, b["shape"], node, "tl.zeros"), CV(0), _dtype(lw, b["dtype"], node, "tl.zeros"),
                   node)


def zeros_like(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "dtype"), node, "zeros_like", 1)
    x = _tile(lw, b["input"], node, "tl.zeros_like")
    return _filled(lw, x.ty.shape, CV(0), _dtype(lw, b.get("dtype"), node, "tl.zeros_like", x.ty.dtype), node)


def full_like(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "value", "dtype"), node, "full_like", 2)
    x = _tile(lw, b["input"], node, "tl.full_like")
    return _filled(lw, x.ty.shape, b["value"], _dtype(lw, b.get("dtype"), node, "tl.full_like", x.ty.dtype), node)


def _filled(lw, shape, value, dtype, node) -> Ref:
    if isinstance(value, CV) and isinstance(value.value, (Sym, DimOp)):
        value = materialize_int(lw, value, node)
    if dtype == "bool":  # the truth of the fill (the model has no casts to bool)
        if isinstance(value, CV):
            value = CV(bool(value.value))
        elif value.ty.dtype != "bool":
            value = compare(lw, "!=", value, CV(0), node)
    elif isinstance(value, Ref) and value.ty.dtype == "bool":
        value = to(lw, value, dtype, node)
    if isinstance(value, Ref) and isinstance(value.ty, TileT):
        if value.ty.rank:
            raise lw.fail(node, f"the fill value of a tile must be a scalar, got {value.ty}", "tl.full")
        value = lw.b.value(OpKind.SCALAR_OF, (value,), ScalarT(value.ty.dtype), lw.loc(node), hint="fill")
    return lw.b.to_tile(lw.atom(value, node, dtype), dtype, tuple(shape), lw.loc(node))


def pointer_type(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("element_ty", "address_space", "const"), node, "pointer_type", 1)
    return DT(("pointer", _dtype(lw, b["element_ty"], node, "tl.pointer_type")))


def recast(lw, ptr: Ptr, elem: str, node) -> Ptr:
    """`p.to(tl.pointer_type(dt))`: the same address read as `dt` elements (its offset counts the array's
    elements, so a re-cast of a moved pointer is refused unless the element types are the same width)."""
    if elem == ptr.dtype:
        return ptr
    if ptr.offset is not None and _BITS.get(str(ptr.dtype)) != _BITS.get(elem):
        raise lw.fail(node, "re-casting a pointer already moved from its parameter to another element width is not "
                      "supported", "tl.pointer_type", "re-cast the parameter itself, then add the offset in the new "
                      "element type")
    return Ptr(ptr.array, ptr.offset, elem)


def cdiv(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "div"), node, "cdiv", 2)
    x, y = b["x"], b["div"]
    if isinstance(x, CV) and isinstance(y, CV):
        return binary(lw, "//", binary(lw, "+", x, binary(lw, "-", y, CV(1), node), node), y, node)
    return binary(lw, "cdiv", x, y, node)


def where(lw, cond, x, y, node) -> Ref:
    loc = lw.loc(node)
    if isinstance(cond, CV) and dynamic(lw, cond):
        cond = compare(lw, "!=", at_run_time(lw, cond, node), CV(0), node)
    if isinstance(cond, CV):
        if isinstance(cond.value, (Sym, DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "tl.where on a constexpr", loc)
        return x if cond.value else y
    if not isinstance(cond, Ref):
        raise lw.fail(node, "tl.where: the condition must be a boolean tile", "tl.where")
    if isinstance(x, Ptr) and isinstance(y, Ptr):
        return _where_pointer(lw, cond, x, y, node)
    dtype = _operand_dtype(lw, x, y, node, "tl.where")
    shape = tuple(cond.ty.shape) if isinstance(cond.ty, TileT) else ()
    for v in (x, y):
        if isinstance(v, Ref) and isinstance(v.ty, TileT):
            shape = lw.b.broadcast_shape(shape, v.ty.shape, loc)
    c = lw.b.to_tile(lw.b.cast(cond, "bool", loc) if cond.ty.dtype != "bool" else cond, "bool", shape, loc)
    xs, ys = (lw.b.to_tile(_operand_atom(lw, v, dtype, node), dtype, shape, loc) for v in (x, y))
    out = lw.b.value(OpKind.SELECT, (c, xs, ys), TileT(dtype, shape), loc, hint="sel")
    _keep_loaded(lw, (x, y), out)
    return out


def _where_pointer(lw, cond: Ref, x: Ptr, y: Ptr, node) -> Ptr:
    """`p + a if c else p + b` (or tl.where) of pointers into one array: the pointer at the chosen offset."""
    if (x.array.name, x.elem) != (y.array.name, y.elem):
        raise lw.fail(node, f"a choice between {lw.describe(x)} and {lw.describe(y)}: pointers into different "
                      "arrays (or element types) are not supported", "pointer", "choose the offset, not the array")
    offset = where(lw, cond, CV(0) if x.offset is None else x.offset, CV(0) if y.offset is None else y.offset, node)
    return Ptr(x.array, offset, x.elem)


def _keep_loaded(lw, sources, out: Ref) -> None:
    """`out` carries values loaded from a pointer (an index array if they end up in pointer offsets): of several,
    one whose values are floats (the pointer whose element type a retry must change)."""
    loaded = [v for v in sources if isinstance(v, Ref) and v.name in lw.loaded]
    if loaded:
        floats = [v for v in loaded if lw.b.is_float(v.ty.dtype)]
        lw.loaded[out.name] = lw.loaded[(floats or loaded)[0].name]


def tl_where(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("condition", "x", "y"), node, "where", 3)
    return where(lw, b["condition"], b["x"], b["y"], node)


def math_fn(lw, fn: str, args, kwargs, node) -> Ref:
    if len(args) + len(kwargs) != 1:
        raise lw.fail(node, f"{fn} takes one argument", fn)
    x = args[0] if args else next(iter(kwargs.values()))
    if isinstance(x, CV) and isinstance(x.value, (int, float, Sym, DimOp)) and not isinstance(x.value, bool):
        # Triton makes a constant a 0-d tensor (fp32 / int32) and computes on it as on any tensor
        x = materialize_int(lw, x, node) if isinstance(x.value, (Sym, DimOp)) else \
            lw.b.to_tile(lw.atom(x, node, None), lit_dtype(x.value), (), lw.loc(node))
    x = _tile(lw, x, node, f"tl.{fn}")
    if fn in FLOAT_ONLY and not lw.b.is_float(x.ty.dtype):
        x = lw.b.cast(x, "f32", lw.loc(node))
    rounding = "approx" if fn == "exp" and x.ty.dtype == "f32" else None  # Triton: ex2.approx.f32(x * log2e)
    return lw.b.value(OpKind.UNARY, (x,), x.ty, lw.loc(node), hint=fn, fn=fn, rounding=rounding, ftz=None)


def sigmoid(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x",), node, "sigmoid", 1)
    x = _tile(lw, b["x"], node, "tl.sigmoid")
    e = math_fn(lw, "exp", [unary(lw, "USub", x, node)], {}, node)
    return binary(lw, "/", CV(1.0), binary(lw, "+", CV(1.0), e, node), node)


def trunc(lw, args, kwargs, node) -> Ref:
    """libdevice.trunc: toward zero (the model has floor and ceil)."""
    b = _bind(lw, args, kwargs, ("x",), node, "trunc", 1)
    x = math_fn(lw, "floor", [b["x"]], {}, node)  # the float tile of the argument, floored
    ceil = math_fn(lw, "ceil", [b["x"]], {}, node)
    return where(lw, compare(lw, "<", b["x"], CV(0.0), node), ceil, x, node)


def round_away(lw, args, kwargs, node) -> Ref:
    """libdevice.round: to the nearest integer, halves away from zero: trunc(x) moved one away from zero
    where |x - trunc(x)| >= 0.5 (the difference is exact in floating point)."""
    b = _bind(lw, args, kwargs, ("x",), node, "round", 1)
    t = trunc(lw, [b["x"]], {}, node)
    x = lw.b.cast(_tile(lw, b["x"], node, "round"), t.ty.dtype, lw.loc(node))
    away = where(lw, compare(lw, "<", x, CV(0.0), node), binary(lw, "-", t, CV(1.0), node),
                 binary(lw, "+", t, CV(1.0), node), node)
    half = compare(lw, ">=", math_fn(lw, "abs", [binary(lw, "-", x, t, node)], {}, node), CV(0.5), node)
    return where(lw, half, away, t, node)


def two(name):
    def handler(lw, args, kwargs, node):
        b = _bind(lw, args, kwargs, ("x", "y", "propagate_nan"), node, name, 2)
        return binary(lw, name[:3], b["x"], b["y"], node)
    return handler


def clamp(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "min", "max", "propagate_nan"), node, "clamp", 3)
    return binary(lw, "min", binary(lw, "max", b["x"], b["min"], node), b["max"], node)


def fma(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "y", "z"), node, "fma", 3)
    return binary(lw, "+", binary(lw, "*", b["x"], b["y"], node), b["z"], node)


def fdiv(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "y", "ieee_rounding"), node, "fdiv", 2)
    ieee = "ieee_rounding" in b and lw.compile_time(b["ieee_rounding"], node, "ieee_rounding") is True
    return binary(lw, "/", b["x"], b["y"], node, ieee=ieee)


def div_rn(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("x", "y"), node, "div_rn", 2)
    return binary(lw, "/", b["x"], b["y"], node, ieee=True)


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
    _note(lw, "tl.dot of f32 tiles: inputs rounded to tf32 (round to nearest; Triton's tf32 tensor cores drop "
          "the low mantissa bits) as Triton's input_precision=" + repr(precision))
    xh, yh = _tf32(lw, x, loc), _tf32(lw, y, loc)
    if precision == "tf32":
        return lw.b.value(OpKind.MMA, (xh, yh, acc), acc.ty, loc, hint="acc")
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


def _note(lw, text: str) -> None:
    if text not in lw.notes:
        lw.notes.append(text)


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


def permute(lw, x: Ref, axes: tuple, node) -> Ref:
    if sorted(axes) != list(range(x.ty.rank)):
        raise lw.fail(node, f"permutation {axes} does not match a rank-{x.ty.rank} tile", "permute")
    shape = tuple(x.ty.shape[a] for a in axes)
    return lw.b.value(OpKind.PERMUTE, (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_t",
                      axes=tuple(axes))


def trans(lw, args, kwargs, node):
    x = _tile(lw, args[0] if args else kwargs.get("input"), node, "tl.trans")
    dims = [lw.compile_time(d, node, "dims") for d in args[1:]] or (
        list(lw.compile_time(kwargs["dims"], node, "dims")) if "dims" in kwargs else None)
    if dims and len(dims) == 1 and isinstance(dims[0], tuple):
        dims = list(dims[0])
    axes = tuple(dims) if dims else tuple(reversed(range(x.ty.rank)))
    return permute(lw, x, axes, node)


def reshape(lw, args, kwargs, node):
    x = _tile(lw, args[0] if args else kwargs.get("input"), node, "tl.reshape")
    rest = args[1:] if len(args) > 1 else [kwargs.get("shape")]
    shape = _shape(lw, rest[0] if len(rest) == 1 else tuple(rest), node, "tl.reshape")
    out = lw.b.value(OpKind.RESHAPE, (x,), TileT(x.ty.dtype, shape), lw.loc(node), hint=f"{x.name}_r", shape=shape)
    _keep_loaded(lw, (x,), out)
    return out


def expand_dims(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "axis"), node, "expand_dims", 2)
    x = _tile(lw, b["input"], node, "tl.expand_dims")
    axis = lw.compile_time(b["axis"], node, "axis")
    if type(axis) is not int:
        raise lw.fail(node, "tl.expand_dims: axis must be an integer", "tl.expand_dims")
    rank = x.ty.rank + 1
    axis %= rank
    items = [ast.Slice() for _ in range(x.ty.rank)]
    items.insert(axis, ast.Constant(None))
    return expand(lw, x, items, node)


def broadcast_to(lw, args, kwargs, node):
    b = _bind(lw, args, kwargs, ("input", "shape"), node, "broadcast_to", 2)
    x = _tile(lw, b["input"], node, "tl.broadcast_to")
    shape = _shape(lw, b["shape"], node, "tl.broadcast_to")
    return lw.b.to_tile(x, x.ty.dtype, shape, lw.loc(node))


def split(lw, args, kwargs, node):
    """tl.split(a): a tile whose last dimension is 2 -> its two halves along it (extracts, then reshapes)."""
    b = _bind(lw, args, kwargs, ("a",), node, "split", 1)
    x = _tile(lw, b["a"], node, "tl.split")
    if not x.ty.shape or x.ty.shape[-1] != 2:
        raise lw.fail(node, f"tl.split: the last dimension of {x.ty} must be 2", "tl.split")
    part, out = tuple(x.ty.shape[:-1]) + (1,), tuple(x.ty.shape[:-1])
    halves = []
    for i in (0, 1):
        index = tuple(Lit(0, ScalarT("i32")) for _ in out) + (Lit(i, ScalarT("i32")),)
        e = lw.b.value(OpKind.EXTRACT, (x, *index), TileT(x.ty.dtype, part), lw.loc(node), hint=f"{x.name}_h{i}",
                       shape=part)
        halves.append(lw.b.value(OpKind.RESHAPE, (e,), TileT(x.ty.dtype, out), lw.loc(node), hint=f"{x.name}_{i}",
                                 shape=out))
        _keep_loaded(lw, (x,), halves[-1])
    return tuple(halves)


def join(lw, args, kwargs, node):
    """tl.join(a, b): one tile with a new last dimension of 2 (a, then b), as a concatenation."""
    b = _bind(lw, args, kwargs, ("a", "b"), node, "join", 2)
    x, y = (_tile(lw, b[k], node, "tl.join") for k in ("a", "b"))
    loc = lw.loc(node)
    dtype = lw.b.promote(x.ty.dtype, y.ty.dtype, loc, "tl.join")
    shape = lw.b.broadcast_shape(x.ty.shape, y.ty.shape, loc)
    parts = [lw.b.value(OpKind.RESHAPE, (lw.b.to_tile(lw.b.cast(v, dtype, loc), dtype, shape, loc),),
                        TileT(dtype, tuple(shape) + (1,)), loc, hint=f"{v.name}_j", shape=tuple(shape) + (1,))
             for v in (x, y)]
    return lw.b.value(OpKind.CAT, tuple(parts), TileT(dtype, tuple(shape) + (2,)), loc, hint="joined",
                      axis=len(shape))


def tl_range(lw, args, kwargs, node):
    raise lw.fail(node, "tl.range / tl.static_range are only supported as `for` loop iterables", "tl.range")


TL = {
    "program_id": program_id, "num_programs": num_programs, "arange": arange, "full": full, "zeros": zeros,
    "pointer_type": pointer_type,
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


# ---------------------------------------------------------------- operators

# `.to(dtype, fp_downcast_rounding=..)`: Triton's rounding of a float narrowing, by the model's rounding modes
DOWNCAST_ROUNDING = {None: None, "rtne": None, "rtz": "zero"}
_BITS = {"bool": 1, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "f16": 16, "bf16": 16, "i32": 32, "u32": 32, "f32": 32,
         "i64": 64, "u64": 64, "f64": 64}


def bitcast(lw, x, dtype: str, node) -> Any:
    """`.to(dtype, bitcast=True)`: the same bits as `dtype` (of the same width, in every dtype configuration)."""
    if not isinstance(x, Ref):
        raise lw.fail(node, f"bitcast of {lw.describe(x)} is not supported", ".to")

    def same_width(src, dst):
        return dst if "bool" not in (src, dst) and _BITS.get(src) == _BITS.get(dst) else None
    lw.b.dspace.lift(same_width, x.ty.dtype, dtype, what=".to(bitcast=True): the bit widths differ (or a bool)",
                     loc=lw.loc(node))
    if x.ty.dtype == dtype:
        return x
    t = _tile(lw, x, node, ".to(bitcast=True)")
    out = lw.b.value(OpKind.BITCAST, (t,), TileT(dtype, t.ty.shape), lw.loc(node), hint=f"{x.name}_bits")
    return out if isinstance(x.ty, TileT) else lw.b.value(OpKind.SCALAR_OF, (out,), ScalarT(dtype), lw.loc(node),
                                                           hint=f"{x.name}_bits")


def to(lw, x, dtype: str, node, rounding: str | None = None) -> Any:
    if isinstance(x, CV):
        return x
    if not isinstance(x, Ref):
        raise lw.fail(node, f".to() on {lw.describe(x)} is not supported", ".to")
    if dtype == "bool":
        return x if x.ty.dtype == "bool" else compare(lw, "!=", x, CV(0), node)
    if x.ty.dtype == "bool":  # the model has no bool casts: select 1 or 0
        return where(lw, x, CV(1.0 if lw.b.is_float(dtype) else 1), CV(0.0 if lw.b.is_float(dtype) else 0), node) \
            if dtype == "f32" or dtype == "i32" else to(lw, where(lw, x, CV(1), CV(0), node), dtype, node)
    narrowing = rounding and lw.b.is_float(x.ty.dtype) and lw.b.is_float(dtype) and x.ty.dtype != dtype
    out = lw.b.cast(x, dtype, lw.loc(node), rounding if narrowing else None)
    if out is not x and x.name in lw.poly and dtype in ("i32", "i64"):
        lw.poly[out.name] = lw.poly[x.name]  # integer widening keeps the value (indices are in range)
        if isinstance(out.ty, ScalarT):
            lw.factors[("v", out.name)] = out
    if x.name in lw.loaded and not lw.b.is_float(dtype):  # made a float on purpose: not an integer array's
        lw.loaded[out.name] = lw.loaded[x.name]
    return out


def dynamic(lw, *values) -> bool:
    """Constexprs among `values` with no known values, whose tests run at run time (they stay const generics)."""
    names = set().union(*(sym_names(v.value) for v in values if isinstance(v, CV)))
    return bool(names) and names <= lw.dynamic


def at_run_time(lw, v, node):
    """A symbolic constexpr value as a runtime i32 scalar (others as they are)."""
    if not (isinstance(v, CV) and isinstance(v.value, (Sym, DimOp))):
        return v
    out = materialize_int(lw, v, node)
    lw.static.add(out.name)
    return out


def materialize_int(lw, v: CV, node) -> Ref:
    atom = lw.atom(v, node, "i32")
    out = lw.b.value(OpKind.SCALAR, (atom,), ScalarT(atom.ty.dtype if isinstance(atom, Lit) else "i32"), lw.loc(node),
                     hint="c")
    p = lw.poly_of(v)
    if p is not None:
        lw.poly[out.name] = p
    return out


def _fold(lw, op: str, a: CV, b: CV, node) -> CV:
    x, y = a.value, b.value
    symbolic = isinstance(x, (Sym, DimOp)) or isinstance(y, (Sym, DimOp))
    dims = all(type(v) is int or isinstance(v, (Sym, DimOp)) for v in (x, y))
    if symbolic and dims and op in ("+", "-", "*", "//", "%"):
        return CV(T.dim_op(op, x, y))
    if symbolic:
        raise NeedsSpecialization(frozenset(sym_names(x) | sym_names(y)), f"`{op}` on constexprs", lw.loc(node))
    try:
        return CV(_PY[op](x, y))
    except (TypeError, ZeroDivisionError, OverflowError, ValueError) as e:
        raise lw.fail(node, f"constant expression fails: {e}", "constant") from None


_PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
       "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "&": lambda a, b: a & b,
       "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
       "min": min, "max": max, "cdiv": lambda a, b: -(-a // b)}


# A Python value of each dtype kind: what a runtime value Triton knows at compile time stands for in promotion.
_STATIC_SAMPLE = {"bool": True, "f32": 0.5}


def _as_constant(lw, v, other):
    """A runtime value that is a constant for Triton (`lw.static`) promotes as a Python number next to a value
    that is not (a Python number adopts the tile's dtype): for promotion it is a sample of its kind."""
    if isinstance(v, Ref) and v.name in lw.static and isinstance(other, Ref) and other.name not in lw.static:
        return CV(_STATIC_SAMPLE.get(v.ty.dtype, 1))
    return v


def _operand_dtype(lw, a, b, node, what):
    loc = lw.loc(node)
    a, b = _as_constant(lw, a, b), _as_constant(lw, b, a)
    da = a.ty.dtype if isinstance(a, Ref) else None
    db = b.ty.dtype if isinstance(b, Ref) else None
    if da is not None and db is not None:
        return lw.b.promote(da, db, loc, what)
    if da is None and db is None:
        vals = [v.value for v in (a, b) if isinstance(v, CV)]
        return "f32" if any(isinstance(v, float) for v in vals) else "i32"
    strong, weak = (da, b) if da is not None else (db, a)
    if not isinstance(weak, CV):
        raise lw.fail(node, f"{what}: unsupported operand {lw.describe(weak)}", "operand")
    if isinstance(weak.value, (Sym, DimOp)):
        return strong
    return weak_result_dtype(lw.b, strong, weak.value)


def _operand_atom(lw, v, dtype, node):
    if isinstance(v, CV) and isinstance(v.value, (Sym, DimOp)):
        return materialize_int(lw, v, node)
    if isinstance(v, Ref) and v.ty.dtype == "bool" and dtype != "bool":
        return to(lw, v, dtype, node)  # bool -> number: the model has no such cast, `to` selects 1 or 0
    if isinstance(v, Ref):
        return v
    return lw.atom(v, node, dtype)


def _check(lw, op, vals, node):
    for v in vals:
        if not (isinstance(v, CV) or (isinstance(v, Ref) and isinstance(v.ty, (ScalarT, TileT)))):
            raise lw.fail(node, f"operator {op} on {lw.describe(v)} is not supported", "operator")


def binary(lw, op: str, a: Any, b: Any, node, ieee: bool = False) -> Any:
    """`a op b` as Triton computes it (f32 tile `/` is div.full.f32 unless `ieee`: tl.div_rn, fdiv(.., True))."""
    if isinstance(a, Ptr) and op in ("+", "-"):
        return M.ptr_add(lw, a, b, node, negate=op == "-")
    if isinstance(b, Ptr) and op == "+":
        return M.ptr_add(lw, b, a, node)
    _check(lw, op, (a, b), node)
    if isinstance(a, CV) and isinstance(b, CV):
        symbolic = any(isinstance(v.value, (Sym, DimOp)) for v in (a, b))
        at_run = op in ("/", "**", "min", "max", "cdiv") or op not in ("+", "-", "*", "//", "%") and dynamic(lw, a, b)
        if not (symbolic and at_run):
            return _fold(lw, op, a, b, node)
        a = materialize_int(lw, a, node) if isinstance(a.value, (Sym, DimOp)) else a  # computed at run time
        b = materialize_int(lw, b, node) if isinstance(b.value, (Sym, DimOp)) else b
    loc = lw.loc(node)
    _float_scalar_params(lw, a, b)
    dtype = _operand_dtype(lw, a, b, node, f"operator {op}")
    if op == "/" and not lw.b.is_float(dtype):
        dtype = "f32"
    if dtype == "bool" and op in BOOL_ARITHMETIC:  # i1 arithmetic wraps: a product is `and`, a sum `xor`
        return binary(lw, BOOL_ARITHMETIC[op], a, b, node)
    if op == "**" and not lw.b.is_float(dtype):
        return int_power(lw, a, b, node)
    if op in ("&", "|", "^", "<<", ">>") and not all(T.is_int(v) or v == "bool" and op not in ("<<", ">>")
                                                     for v in lw.b.dspace.values(dtype)):
        _assumed_float_holds_ints(lw, a, b)
        raise lw.fail(node, f"operator {op} on {dtype} (Triton takes integers)", "dtype")
    if op in ("%", "//") and lw.b.is_float(dtype) and any(
            isinstance(v, CV) and type(v.value) is int or isinstance(v, Ref) and T.is_int(str(v.ty.dtype))
            for v in (a, b)):
        _assumed_float_holds_ints(lw, a, b)  # an index split into parts (`pos % BLOCK`)
    tiles = [v for v in (a, b) if isinstance(v, Ref) and isinstance(v.ty, TileT)]
    x, y = _operand_atom(lw, a, dtype, node), _operand_atom(lw, b, dtype, node)
    if tiles:
        shape = lw.b.broadcast_shape(*(v.ty.shape if isinstance(v, Ref) and isinstance(v.ty, TileT) else ()
                                       for v in (a, b)), loc)
        x, y = (lw.b.to_tile(v, dtype, shape, loc) for v in (x, y))
        ty = TileT(dtype, shape)
    else:
        x, y = (lw.b.cast(v, dtype, loc) if isinstance(v, Ref) else v for v in (x, y))
        ty = ScalarT(dtype)
    name = OP_NAMES[op]
    if op == "//" and lw.b.is_float(dtype):  # Triton: floor(a / b) for floats
        if not isinstance(ty, TileT):
            _fail_scalar(lw, node, "//")
        q = lw.b.value(OpKind.BINARY, (x, y), ty, loc, hint="quot", op="div", rounding=None, ftz=None, nan=None)
        out = lw.b.value(OpKind.UNARY, (q,), ty, loc, hint="fl", fn="floor", rounding=None, ftz=None)
        _keep_loaded(lw, (a, b), out)  # a loaded count divided: still an integer array's values
        return out
    if op in ("//", "%") and not lw.b.is_float(dtype):
        note = ("integer // and % on scalars round toward -inf (Python) and // on tiles too; Triton truncates "
                "toward zero: results differ for negative operands")
        if note not in lw.notes:
            lw.notes.append(note)
    if isinstance(ty, ScalarT) and (op in ("<<", ">>") or op in ("//", "%") and dtype in ("i64", "u64", "u32")):
        # the model's scalar // and % are i32 only, and it shifts tiles only: these run on 0-d tiles
        tx, ty0 = (lw.b.value(OpKind.TILE0, (v,), TileT(dtype, ()), loc, hint="t") for v in (x, y))
        t = lw.b.value(OpKind.BINARY, (tx, ty0), TileT(dtype, ()), loc, hint="q",
                       op={"//": "floordiv", "%": "rem"}.get(op, OP_NAMES[op]), rounding=None, ftz=None, nan=None)
        return lw.b.value(OpKind.SCALAR_OF, (t,), ty, loc, hint="q")
    if op == "%" and isinstance(ty, TileT):
        if lw.b.is_float(dtype):  # Triton: a - floor(a / b) * b (the sign of b, as Python's)
            return binary(lw, "-", a, binary(lw, "*", binary(lw, "//", a, b, node), b, node), node)
        name = "rem"  # Triton's % on integers is C's remainder (remi)
    full = name == "div" and dtype == "f32" and isinstance(ty, TileT) and not ieee
    out = lw.b.value(OpKind.BINARY, (x, y), ty, loc, hint={"+": "sum", "-": "diff", "*": "prod"}.get(op, "v"),
                     op=name, rounding="full" if full else None, ftz=None, nan=None)
    _affine(lw, op, a, b, out)
    _keep_loaded(lw, (a, b), out)
    if all(isinstance(v, CV) or v.name in lw.static for v in (a, b)):
        lw.static.add(out.name)  # arithmetic on constexprs is a constant for Triton
    if op in ("&",) and dtype == "bool":
        ba, bb = (lw.bounds.get(v.name) if isinstance(v, Ref) else None for v in (a, b))
        if ba is not None and bb is not None:
            lw.bounds[out.name] = ba + bb
    return out


def int_power(lw, a, b, node) -> Any:
    """Integer `a ** b`: by a constant exponent, repeated squaring (products wrap as Triton's do); a power of
    two with an integer exponent, `1 << b` times the rest. Else a located diagnostic."""
    if isinstance(b, CV) and type(b.value) is int and 0 <= b.value <= MAX_POWER:
        out, base, e = None, a, b.value
        while e:
            if e & 1:
                out = base if out is None else binary(lw, "*", out, base, node)
            e >>= 1
            if e:
                base = binary(lw, "*", base, base, node)
        return CV(1) if out is None else out
    if isinstance(a, CV) and type(a.value) is int and a.value > 0 and a.value & (a.value - 1) == 0:
        log2 = a.value.bit_length() - 1
        return binary(lw, "<<", CV(1), b if log2 == 1 else binary(lw, "*", b, CV(log2), node), node)
    if isinstance(b, CV) and isinstance(b.value, (Sym, DimOp)):
        raise NeedsSpecialization(frozenset(sym_names(b.value)), "integer ** by a constexpr", lw.loc(node))
    raise lw.fail(node, "integer ** by a runtime exponent (other than a power of two's) has no lowering",
                  "operator", f"write the product, or a constant exponent up to {MAX_POWER}")


def _assumed_float_holds_ints(lw, *values) -> None:
    """Values loaded through a pointer whose float element type is only assumed, used as integers: the pointer
    holds integers (the kernel is lowered again with it i32)."""
    for v in values:
        if isinstance(v, Ref) and lw.loaded.get(v.name) in lw.default_float:
            raise Retry("bits", lw.loaded[v.name])


def _float_scalar_params(lw, a, b) -> None:
    """A scalar parameter assumed i32 that meets a float tile is a Python float (Triton passes it as f32)."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Ref) and x.name in lw.maybe_float and isinstance(y, Ref) and isinstance(y.ty, TileT) \
                and lw.b.is_float(y.ty.dtype):
            raise Retry("float", next(p.name for p in lw.params if p.ident == x.name))


def _fail_scalar(lw, node, op):
    raise lw.fail(node, f"float {op} on scalars has no lowering in tileport's kernel model yet", "operator")


OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow",
            "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "min": "min", "max": "max", "cdiv": "cdiv",
            "maximum": "max", "minimum": "min"}
MAX_POWER = 64  # integer ** by a constant exponent: repeated squaring up to this exponent
BOOL_ARITHMETIC = {"*": "&", "+": "^", "-": "^"}


def _affine(lw, op: str, a, b, out: Ref) -> None:
    if op not in ("+", "-", "*") or out.ty.dtype not in ("i32", "i64"):
        return
    pa, pb = lw.poly_of(a), lw.poly_of(b)
    if pa is None or pb is None:
        return
    p = A.add(pa, pb) if op == "+" else A.sub(pa, pb) if op == "-" else A.mul(pa, pb)
    if isinstance(out.ty, ScalarT) and any(A.aranges(p)):
        return
    lw.poly[out.name] = p


def compare(lw, op: str, a, b, node) -> Any:
    if isinstance(a, DT) and isinstance(b, DT) and op in ("==", "!="):
        va, vb = lw.b.dspace.values(a.dtype) if isinstance(a.dtype, str) or hasattr(a.dtype, "name") else (), \
            lw.b.dspace.values(b.dtype) if isinstance(b.dtype, str) or hasattr(b.dtype, "name") else ()
        if len(va) == 1 or len(vb) == 1:  # a concrete dtype against each configuration's
            va, vb = va * len(vb) if len(va) == 1 else va, vb * len(va) if len(vb) == 1 else vb
        answers = {(x == y) == (op == "==") for x, y in zip(va, vb)}
        if len(answers) == 1:
            return CV(answers.pop())
        raise lw.fail(node, "a dtype comparison whose answer differs between the element types in use", "dtype",
                      "translate one dtype configuration at a time")
    _check(lw, op, (a, b), node)
    if isinstance(a, CV) and isinstance(b, CV) and dynamic(lw, a, b):
        a, b = at_run_time(lw, a, node), at_run_time(lw, b, node)
    if isinstance(a, CV) and isinstance(b, CV):
        if isinstance(a.value, (Sym, DimOp)) or isinstance(b.value, (Sym, DimOp)):
            raise NeedsSpecialization(frozenset(sym_names(a.value) | sym_names(b.value)),
                                      "a comparison of constexprs", lw.loc(node))
        import operator as pyop
        fn = {"<": pyop.lt, "<=": pyop.le, ">": pyop.gt, ">=": pyop.ge, "==": pyop.eq, "!=": pyop.ne}[op]
        try:
            return CV(fn(a.value, b.value))
        except TypeError:
            raise lw.fail(node, f"cannot compare {a.value!r} and {b.value!r}", "comparison") from None
    loc = lw.loc(node)
    dtype = _operand_dtype(lw, a, b, node, f"comparison {op}")
    x, y = _operand_atom(lw, a, dtype, node), _operand_atom(lw, b, dtype, node)
    tiles = [v for v in (a, b) if isinstance(v, Ref) and isinstance(v.ty, TileT)]
    if tiles:
        shape = lw.b.broadcast_shape(*(v.ty.shape if isinstance(v, Ref) and isinstance(v.ty, TileT) else ()
                                       for v in (a, b)), loc)
        x, y = (lw.b.to_tile(v, dtype, shape, loc) for v in (x, y))
        out = lw.b.value(OpKind.COMPARE, (x, y), TileT("bool", shape), loc, hint="mask", op=op)
    else:
        x, y = (lw.b.cast(v, dtype, loc) if isinstance(v, Ref) else v for v in (x, y))
        out = lw.b.value(OpKind.COMPARE, (x, y), ScalarT("bool"), loc, hint="cond", op=op)
        if all(isinstance(v, CV) or v.name in lw.static for v in (a, b)):
            lw.static.add(out.name)  # a test of constexprs: Triton folds it
        return out
    lhs, rhs = (a, b) if op == "<" else (b, a) if op == ">" else (None, None)
    if lhs is not None:
        pl, pr = lw.poly_of(lhs), lw.poly_of(rhs)
        bound = A.bound_of(pl, pr) if pl is not None and pr is not None else None
        if bound is not None:
            lw.bounds[out.name] = [bound]
    return out


def unary(lw, op: str, x, node) -> Any:
    if op == "UAdd":
        return x
    if isinstance(x, CV):
        v = x.value
        if op == "USub" and isinstance(v, (Sym, DimOp)):
            return CV(T.dim_op("-", 0, v))
        if isinstance(v, (Sym, DimOp)) and op == "Not" and dynamic(lw, x):
            return compare(lw, "==", at_run_time(lw, x, node), CV(0), node)
        if isinstance(v, (Sym, DimOp)):  # `not FLAG` has no value before FLAG's (Python's truth of a Sym lies)
            raise NeedsSpecialization(frozenset(sym_names(v)), f"operator {op} on a constexpr", lw.loc(node))
        try:
            return CV({"USub": lambda: -v, "Not": lambda: not v, "Invert": lambda: ~v}[op]())
        except TypeError:
            raise lw.fail(node, f"operator {op} on {v!r}", "operator") from None
    if not isinstance(x, Ref):
        raise lw.fail(node, f"operator {op} on {lw.describe(x)} is not supported", "operator")
    loc = lw.loc(node)
    if op == "USub":
        if isinstance(x.ty, TileT):
            out = lw.b.value(OpKind.UNARY, (x,), x.ty, loc, hint="neg", fn="negative", rounding=None, ftz=None)
        else:  # cutile-rs negates runtime scalars only as `0 - x`
            zero = Lit(0.0 if lw.b.is_float(x.ty.dtype) else 0, ScalarT(x.ty.dtype))
            out = lw.b.value(OpKind.BINARY, (zero, x), x.ty, loc, hint="neg", op="sub", rounding=None, ftz=None,
                             nan=None)
        if x.name in lw.poly:
            lw.poly[out.name] = A.scale(lw.poly[x.name], -1)
        return out
    if op in ("Not", "Invert") and x.ty.dtype == "bool":
        t = lw.b.to_tile(Lit(True, ScalarT("bool")), "bool", tuple(x.ty.shape), loc) \
            if isinstance(x.ty, TileT) else Lit(True, ScalarT("bool"))
        return lw.b.value(OpKind.BINARY, (x, t), x.ty, loc, hint="not", op="xor", rounding=None, ftz=None, nan=None)
    if op == "Not":  # Python's truth of a number
        return compare(lw, "==", x, CV(0), node)
    if op == "Invert" and isinstance(x.ty, TileT):
        ones = lw.b.to_tile(Lit(-1, ScalarT(x.ty.dtype)), x.ty.dtype, tuple(x.ty.shape), loc)
        return lw.b.value(OpKind.BINARY, (x, ones), x.ty, loc, hint="inv", op="xor", rounding=None, ftz=None, nan=None)
    raise lw.fail(node, f"operator {op} on {x.ty} is not supported", "operator")


__all__ = ["attribute", "subscript", "call", "binary", "compare", "unary", "where", "materialize_int", "to"]
