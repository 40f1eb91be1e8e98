"""Tables of the Triton language (dtypes, math, reductions, no-op and unsupported functions) and the
argument binding and checks every handler shares.
"""

from __future__ import annotations

import itertools

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.triton import memory as M
from tileport.frontends.triton.values import CV, DT
from tileport.model.ir import Ref, sym_names
from tileport.model.types import DimOp, Sym, TileT

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


def _bind(lw, args, kwargs, names, node, fn, required):
    return M._bind(lw, args, kwargs, names, node, fn, required)


def _tile(lw, v, node, fn) -> Ref:
    if isinstance(v, Ref) and isinstance(v.ty, TileT):
        return v
    if isinstance(v, Ref):
        return lw.b.to_tile(v, v.ty.dtype, (), lw.loc(node))
    raise lw.fail(node, f"{fn}: expected a tile, got {lw.describe(v)}", fn)


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
