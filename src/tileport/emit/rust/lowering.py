"""The lowering table: kernel-model operations -> cutile-rs 0.5.0 spellings, in one place.

Each entry was checked by compiling both sides and comparing Tile IR (docs/cutile-rs-lowering.md).
The emitter looks things up here and never spells a cutile-rs operation itself. The spelling tables
come first; `ROWS` at the end pairs each pattern (an operation kind and what its dtypes and attributes
must be) with its rendering, as one ordered list: the emitter takes the first row that matches.
In a template, `{a}` `{b}` `{c}` are the operands, `{x}` the first one, modes (`{rounding}`, `{ftz}`,
`{nan}`) are rendered with the mode tables below; a refusal is formatted with the raw attributes.
The shims a rendering needs (ops cutile-rs 0.5.0 lacks, declared in the generated module) are Rust, read
from templates/shims.rs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from tileport.model.ops import OpKind

# ---- element types
RUST_DTYPE = {
    "f32": "f32", "f16": "f16", "bf16": "bf16", "f64": "f64", "tf32": "tf32",
    "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64", "bool": "bool",
    "f8e4m3fn": "f8e4m3fn", "f8e5m2": "f8e5m2",
}
# Dtype codes of the C ABI descriptor (support.rs `dtype` module).
DTYPE_CODE = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3, "i32": 4, "i64": 5, "i16": 6, "i8": 7, "u8": 8, "bool": 9,
              "f8e4m3fn": 10, "f8e5m2": 11}
# Rust constant names for those codes.
DTYPE_CONST = {"f32": "F32", "f16": "F16", "bf16": "BF16", "f64": "F64", "i32": "I32", "i64": "I64",
               "i16": "I16", "i8": "I8", "u8": "U8", "bool": "BOOL", "f8e4m3fn": "F8E4M3FN", "f8e5m2": "F8E5M2"}
# Host-side (launcher) spelling: tf32 and the float8 types are not imported there.
HOST_DTYPE = {**RUST_DTYPE, **{dt: f"cutile::core::{dt}" for dt in ("tf32", "f8e4m3fn", "f8e5m2")}}
# Types that need `use cutile::half::...` on the host side.
HALF_TYPES = ("f16", "bf16")

# ---- modes
ROUNDING = {
    None: "rounding::NearestEven", "nearest_even": "rounding::NearestEven", "zero": "rounding::Zero",
    "negative_inf": "rounding::NegativeInf", "positive_inf": "rounding::PositiveInf",
    "approx": "rounding::Approx", "full": "rounding::Full",
}
FTZ = {None: "ftz::Disabled", False: "ftz::Disabled", True: "ftz::Enabled"}
NAN = {None: "nan::Disabled", False: "nan::Disabled", True: "nan::Enabled"}
PADDING = {
    "undetermined": "padding::None", "zero": "padding::Zero", "neg_zero": "padding::NegZero",
    "nan": "padding::Nan", "pos_inf": "padding::PosInf", "neg_inf": "padding::NegInf",
}
TMA = {None: "tma::Enabled", True: "tma::Enabled", False: "tma::Disabled"}

# ---- grid
GRID = {OpKind.BID: "get_tile_block_id().{axis}", OpKind.NUM_BLOCKS: "get_num_tile_blocks().{axis}"}

# ---- views
# `{tensor}`: the `&Tensor` (a parameter, or `&view` for a view made in the kernel: `Array.slice`)
LOAD_VIEW = ("unsafe {{ make_partition_view({tensor}, shape![{shape}], {padding}, {dim_map}, {array}.token()) }}")
STORE_VIEW = "unsafe {{ {array}.partition_full_mut(shape![{shape}]) }}"
LOAD = "load_view_tko(&{view}, [{index}], ordering::Weak, scope::TileBlock, {latency}, {tma})"
STORE = "unsafe {{ store_view_tko_mut(&mut {view}, {tile}, [{index}], ordering::Weak, scope::TileBlock, {latency}, {tma}) }}"
# With an explicit input token (cuTile's memory ordering): the raw view ops.
LOAD_RAW = ("unsafe {{ load_view_raw(&{view}, [{index}], {token}, ordering::Weak, scope::TileBlock, {tma}, "
            "{latency}, [{inbounds}], shape![{shape}]) }}")
STORE_RAW = ("unsafe {{ store_view_raw(&{view}, {tile}, [{index}], Some({token}), ordering::Weak, scope::TileBlock, "
             "{tma}, {latency}, [{inbounds}]) }}")
NUM_TILES = "num_tiles(&{view}, {axis}i32)"
ARRAY_DIM = "{array}.shape()[{axis}]"

# ---- creation
IOTA = "iota(shape![{n}])"
SPLAT_CONSTANT = "constant({value}, shape![{shape}])"        # a splat constant (ct.full, int literals)
SPLAT_CONSTANT_LIT = "constant_lit({value}, shape![{shape}])"  # same, for f16/bf16/generic element types
SCALAR_BROADCAST = "{scalar}.broadcast(shape![{shape}])"     # 0-d -> reshape -> broadcast, as cuTile

# ---- casts: (from-kind, to-kind) -> spelling; kinds are "f", "i" (signed int), "b" (bool)
CAST = {
    ("f", "f"): "convert_tile({x})",
    ("i", "f"): "convert_tile({x})",
    ("f", "i"): "convert_tile({x})",
    ("i", "i+"): "exti({x})",                       # widening
    ("i", "i-"): "trunci_fixed({x}, overflow::None)",  # narrowing (shim)
    ("i", "i="): "bitcast({x})",                     # same width, other signedness (i64 index -> u64)
    ("b", "f"): "itof({x}, rounding::NearestEven)",  # bool: unsigned, as cuTile converts it
    ("b", "i"): "exti({x})",
    ("f", "b"): "ftoi({x}, rounding::NearestIntToZero)",
}
BITCAST = "bitcast({x})"
SCAN_SUM = "scan_sum({x}, {axis}i32, {reverse}, {zero})"  # ct.cumsum: identity 0 of the element type
SCAN_REVERSE = {False: "reverse::Forward", True: "reverse::Reverse"}
FPOWI = "unsafe {{ fpowi({a}, {b}) }}"  # float ** integer tile (Tile IR 13.4), as cuTile emits it  # ct.bitcast: the result type comes from the let annotation
CAST_SCALAR = "convert_scalar({x})"
INT_CAST = {"same": CAST[("i", "i=")], "widen": CAST[("i", "i+")], "narrow": CAST[("i", "i-")]}  # by width

# ---- elementwise arithmetic on tiles
FLOAT_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
FLOAT_MODED = {"add": "addf", "sub": "subf", "mul": "mulf", "div": "divf"}
DIVF_FULL = "divf_full({a}, {b}, rounding::Full, {ftz})"  # shim: the built-in divf lacks rounding<full>
INT_OPERATOR = {"add": "+", "sub": "-", "mul": "*"}
INT_FN = {
    "floordiv": "divi({a}, {b}, rounding::NegativeInf)",
    "rem": "remi({a}, {b})",
    "cdiv": "divi({a}, {b}, rounding::PositiveInf)",
    "and": "andi({a}, {b})", "or": "ori({a}, {b})", "xor": "xori({a}, {b})",
    "max": "maxi({a}, {b})", "min": "mini({a}, {b})",
    "shl": "shli_fixed({a}, {b}, overflow::None)", "shr": "shri({a}, {b})",  # shri: arithmetic iff signed
}
INT_FN_SHIM = {"shl": "shli_fixed"}  # the shim an INT_FN row needs
FLOAT_FN = {
    "max": "maxf({a}, {b}, {nan}, {ftz})",
    "min": "minf({a}, {b}, {nan}, {ftz})",
    "pow": "pow({a}, {b})",
}
BOOL_FN = {"and": "andi({a}, {b})", "or": "ori({a}, {b})", "xor": "xori({a}, {b})"}
FMA = "fma({a}, {b}, {c}, {rounding}, {ftz})"

# ---- scalar arithmetic (i32/f32 values, not tiles)
SCALAR_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|", "xor": "^"}
SCALAR_FN = {
    "cdiv": "ceil_div({a}, {b})",
    "min": "min({a}, {b})",
    "max": "max({a}, {b})",
}
COMPARE_SCALAR = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
COMPARE_INT = "cmpi({a}, {b}, {predicate})"  # signedness follows the element type
PREDICATE = {"<": "predicate::LessThan", "<=": "predicate::LessThanOrEqual", ">": "predicate::GreaterThan",
             ">=": "predicate::GreaterThanOrEqual", "==": "predicate::Equal", "!=": "predicate::NotEqual"}
COMPARE_TILE = {"<": "lt_tile", "<=": "le_tile", ">": "gt_tile", ">=": "ge_tile", "==": "eq_tile",
                "!=": "ne_tile"}
SELECT = "select({a}, {b}, {c})"  # condition, then, else

# ---- unary math: fn -> (default spelling, spelling with modes)
UNARY = {
    "exp": "exp({x})",
    "exp:approx": "unsafe {{ exp_with_rounding({x}, rounding::Approx) }}",
    "exp2": "exp2({x}, {ftz})",
    "log": "log({x})",
    "log2": "log2({x})",
    "sqrt": "sqrt({x}, {rounding}, {ftz})",
    "rsqrt": "rsqrt({x}, {ftz})",
    "tanh": "tanh({x})",
    "tanh:approx": "unsafe {{ tanh_with_rounding({x}, rounding::Approx) }}",
    "sin": "sin({x})", "cos": "cos({x})", "tan": "tan({x})", "sinh": "sinh({x})", "cosh": "cosh({x})",
    "floor": "floor({x})", "ceil": "ceil({x})",
    "abs:f": "absf({x})", "abs:i": "absi({x})",
    "negative:f": "negf({x})", "negative:i": "negi({x}, overflow::None)",
}

# ---- reductions and shapes
REDUCE = {"sum": "reduce_sum({x}, {axis}i32)", "max": "reduce_max({x}, {axis}i32)",
          "min": "reduce_min({x}, {axis}i32)", "prod": "reduce_prod({x}, {axis}i32)"}
RESHAPE = "{x}.reshape(shape![{shape}])"
BROADCAST = "{x}.broadcast(shape![{shape}])"
TRANSPOSE = "{x}.transpose()"
PERMUTE = "permute({x}, const_array![{axes}])"
EXTRACT = "extract({x}, [{index}])"
CAT = "cat({x}, {y}, {axis}i32)"
MMA_FLOAT = "mmaf({a}, {b}, {acc})"  # acc: the third operand
MMA_INT = "mmai({a}, {b}, {acc}, signedness::Signed, signedness::Signed)"

# ---- pointer path (ct.gather / ct.scatter), expanded per call as cuTile does
PTR_BASE = "pointer_to_tile(cast_mut({array}.as_ptr()))"
PTR_OFFSET = "{ptr}.offset_tile({offset})"
PTR_CAST = "ptr_to_ptr({x})"  # the element type comes from the let annotation
# ---- Array.slice: a tensor view built in the kernel, as cutile's entry wrapper builds a parameter's (the extents
# and dynamic strides assumed non-negative, as cuTile Python's make_tensor_view operands are)
VIEW_OFFSET = "muli_fixed({a}, {b}, overflow::None)"  # not `*`: cutile-rs folds `*` of two constants, cuTile not
NON_NEGATIVE = "unsafe {{ assume_bounds_lower::<_, 0>({x}) }}"
DIVISIBLE = "unsafe {{ assume_div_by::<_, {divisor}>({x}) }}"
VIEW_SHAPE = "Shape::<{{ [{dims}] }}> {{ dims: &[{values}] }}"
VIEW_STRIDES = "Array::<{{ [{strides}] }}> {{ dims: &[{values}] }}"
MAKE_VIEW = "unsafe {{ make_tensor_view({ptr}, {shape}, {strides}, {array}.token()) }}"
GATHER = ("unsafe {{ load_ptr_tko_tpad({ptrs}, ordering::Weak, None::<scope::TileBlock>, {mask}, Some({pad}), {token}, "
          "Latency::<{latency}>) }}")
SCATTER = ("unsafe {{ store_ptr_tko({ptrs}, {value}, ordering::Weak, None::<scope::TileBlock>, {mask}, {token}, "
           "Latency::<{latency}>) }}")
ATOMIC_RMW = ("unsafe {{ atomic_rmw_tko({ptrs}, {value}, {mode}, {order}, {scope}, {mask}, {token}) }}")
ATOMIC_CAS = ("unsafe {{ atomic_cas_tko({ptrs}, {expected}, {desired}, {order}, {scope}, {mask}, {token}) }}")
# the cutile-rs mode of a cuTile atomic, by the element kind ('f' float, 'i' signed, 'u' unsigned)
ATOMIC_MODE = {("add", "f"): "atomic::AddF", ("add", "i"): "atomic::Add", ("add", "u"): "atomic::Add",
               ("max", "i"): "atomic::Max", ("max", "u"): "atomic::Umax",
               ("min", "i"): "atomic::Min", ("min", "u"): "atomic::Umin",
               **{(m, k): f"atomic::{m.capitalize()}" for m in ("and", "or", "xor") for k in ("i", "u")},
               **{("xchg", k): "atomic::Xchg" for k in ("f", "i", "u")}}
MEMORY_ORDER = {"relaxed": "ordering::Relaxed", "acquire": "ordering::Acquire", "release": "ordering::Release",
                "acq_rel": "ordering::AcqRel"}
MEMORY_SCOPE = {"block": "scope::TileBlock", "device": "scope::Device", "sys": "scope::System"}

# ---- entry attributes
ENTRY_HINT_KEYS = {"num_ctas": "num_cta_in_cga", "occupancy": "occupancy",
                   "num_worker_warps": "num_worker_warps_per_cta"}


# ---- user-declared op bindings ("shims") for gaps in cutile 0.5.0, in Rust (templates/shims.rs); emitted only
# when used.
def _read_shims(path: Path) -> dict[str, str]:
    """The shims of `path`, by function name: items after its header comment, one blank line apart."""
    _, *items = path.read_text().split("\n\n")
    return {re.search(r"^ *(?:pub )?(?:unsafe )?fn (\w+)", item, re.M).group(1): item.rstrip("\n") + "\n"
            for item in items}


SHIMS = _read_shims(Path(__file__).parent / "templates" / "shims.rs")

# ---- idiomatic spellings (tileport.emit.rust.idiom): the DSL's safe default forms and the crate's device
# helpers (templates/tiles.rs, the generated `tiles` module), each compiling to the Tile IR of the spelling
# above it replaces (the corpus comparison: bench/results/idiomatic-vs-faithful.json).
TILE_HELPERS = _read_shims(Path(__file__).parent / "templates" / "tiles.rs")
# a read-only view by its padding (`{tensor}`: a parameter, or `&view` for a view made in the kernel); cutile's
# `Tensor::partition` is the view with zero padding
IDIOM_VIEW = {"zero": "{tensor}.partition(shape![{shape}])", "undetermined": "view({tensor}, shape![{shape}])",
              "neg_inf": "view_neg_inf({tensor}, shape![{shape}])", "pos_inf": "view_pos_inf({tensor}, shape![{shape}])",
              "nan": "view_nan({tensor}, shape![{shape}])", "neg_zero": "view_neg_zero({tensor}, shape![{shape}])"}
IDIOM_VIEW_PERMUTED = "{tensor}.partition_permuted(shape![{shape}], const_array![{order}])"  # zero padding
IDIOM_VIEW_MUT = "view_mut({tensor}, shape![{shape}])"
IDIOM_LOAD = {True: "load(&{view}, [{index}])", False: "load_no_tma(&{view}, [{index}])"}  # by allow_tma
IDIOM_LOAD_MODES = "load_view_tko(&{view}, [{index}], ordering::Weak, scope::TileBlock, {latency}, {tma})"
IDIOM_STORE = {True: "store(&mut {view}, {tile}, [{index}])", False: "store_no_tma(&mut {view}, {tile}, [{index}])"}
# with an input token (cuTile's ordering of accesses to one array) and the default modes
IDIOM_LOAD_AFTER = "load_after(&{view}, [{index}], {token}, [{inbounds}])"
IDIOM_STORE_AFTER = {True: "store_after(&{view}, {tile}, [{index}], {token}, [{inbounds}])",  # by allow_tma
                     False: "store_after_no_tma(&{view}, {tile}, [{index}], {token}, [{inbounds}])"}
# an output the kernel writes once, at the tile of its block (`&mut Tensor`): cutile's `Tensor::store`
IDIOM_STORE_OWNED = "{array}.store({tile})"
IDIOM_STORE_CAST = "store_cast({array}, {tile})"  # the same, of a tile cast to the output's element type
IDIOM_APPROX_F32 = {"exp": "exp_approx({x})", "tanh": "tanh_approx({x})"}  # rounding_mode=APPROX on f32 tiles
IDIOM_SPLAT_LIT = "{scalar}.reshape(shape![{ones}]).broadcast(shape![{shape}])"  # a 0-d constant, as cuTile
IDIOM_EXTRACT_INDEX = "scalar_to_tile({x})"
# a kernel module's private device functions (templates/module_fns.rs), and the call of `load_element`: a
# single-element gather's alignment assumption and load
MODULE_FNS = _read_shims(Path(__file__).parent / "templates" / "module_fns.rs")
IDIOM_LOAD_ELEMENT = "load_element::<{dtype}, {align}>({ptr}, {mask}, {pad}, {token})"
# a tile gather (scatter) with a mask, the array's token and the default modes: the module's `gather_tile`
# (`scatter_tile`)
IDIOM_GATHER_TILE = "gather_tile({ptrs}, {mask}, {pad}, {token})"
IDIOM_SCATTER_TILE = "scatter_tile({ptrs}, {value}, {mask}, {token})"
MAX_RANK = 6  # cutile 0.5.0's rank-polymorphic functions (`variadic_op(N = 6)`)


def _slice_view(rank: int) -> str:
    """The module function that makes an `Array.slice` view of `rank` axes (last axis contiguous): the view's
    assumptions (the pointer's alignment, extents and row strides non-negative, extents divisible by D<i>
    where D<i> > 1) and the view, as MAKE_VIEW and the DIVISIBLE / NON_NEGATIVE lets before it spell them."""
    dims = ", ".join(["-1"] * rank)
    strides = ", ".join(["-1"] * (rank - 1) + ["1"])
    extents = [f"n{i}" for i in range(rank)]
    rows = [f"s{i}" for i in range(rank - 1)]
    generics = ", ".join(["E: ElementType", "const ALIGN: i32", *(f"const D{i}: i32" for i in range(rank))])
    params = ", ".join(["at: PointerTile<*mut E, { [] }>", *(f"{v}: i32" for v in extents + rows), "token: Token"])
    body = ["let aligned: PointerTile<*mut E, { [] }> = assume_div_by::<_, ALIGN>(at);"]
    for i, n in enumerate(extents):
        body.append(f"let {n}: i32 = assume_bounds_lower::<_, 0>({n});")
        body.append(f"let {n}: i32 = if D{i} == 1 {{ {n} }} else {{ assume_div_by::<_, D{i}>({n}) }};")
    body += [f"let {s}: i32 = assume_bounds_lower::<_, 0>({s});" for s in rows]
    body += [f"let shape: Shape<{{ [{dims}] }}> = Shape::<{{ [{dims}] }}> {{ dims: &[{', '.join(extents)}] }};",
             f"let strides: Array<{{ [{strides}] }}> = Array::<{{ [{strides}] }}> {{ dims: &[{', '.join(rows)}] }};",
             "make_tensor_view(aligned, shape, strides, token)"]
    pad = " " * 12
    return "\n".join([
        f"    /// `Array.slice`: the view of {rank} axes at `at`, `ALIGN`-byte aligned, its extents "
        f"{', '.join(extents)}, each",
        "    /// divisible by its D<i> where that is over 1, and its row strides"
        + (f" {', '.join(rows)}" if rows else "") + " in elements, the last axis contiguous.",
        "    ///",
        "    /// Only this module's entries call it, each with a pointer into one of its own arrays, the extents and",
        "    /// strides of a range of that array, as `Array.slice` computes them, and the array's ordering `token`.",
        f"    fn slice_view_{rank}d<{generics}>(",
        f"        {params},",
        f"    ) -> Tensor<E, {{ [{dims}] }}> {{",
        "        // SAFETY: the range lies inside the array, as above: its start is aligned as the launcher computes",
        "        // it, its extents and strides are non-negative, and divisible where cuTile Python states it.",
        f"        let view: Tensor<E, {{ [{dims}] }}> = unsafe {{",
        *(pad + line for line in body),
        "        };",
        "        view",
        "    }",
    ]) + "\n"


MODULE_FNS |= {f"slice_view_{rank}d": _slice_view(rank) for rank in range(1, MAX_RANK + 1)}
IDIOM_SLICE_VIEW = "slice_view_{rank}d::<{dtype}, {align}, {divisors}>({ptr}, {values}, {token})"


# ---------------------------------------------------------------- lowering rows

class Not(tuple):
    """A row condition: the fact is none of these values."""


@dataclass(frozen=True)
class Row:
    """`kind` + `when` (fact -> value, tuple of values, Not(...) or predicate) -> a rendering: a
    `template`, an emitter `method` (operations that bind several names or create views), or a
    `refuse` message. `shims`: user-declared ops the rendering needs.

    Facts: `value` ("tile" / "scalar": the result), `result_dtype`, `elem` and `operand` (the element kind of the
    result and of the first operand: "f", "i", "u", "b"), `width` (an integer cast: "narrow", "same",
    "widen"), `unit_axis` (an `array_dim` of an axis whose static length the launcher chooses), and every
    attribute of the operation by its name. A plain string names a kind too (its OpKind: an unknown
    name fails where the row is written)."""

    kind: OpKind
    when: Mapping[str, Any] = field(default_factory=dict)
    template: str | None = None
    method: str | None = None
    refuse: str | None = None
    shims: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind(self.kind))

    def matches(self, fact: Callable[[str], Any]) -> bool:
        return all(_holds(want, fact(key)) for key, want in self.when.items())


def _holds(want: Any, got: Any) -> bool:
    if isinstance(want, Not):
        return got not in want
    if isinstance(want, tuple):
        return got in want
    if callable(want):
        return bool(want(got))
    return got == want


INTS = ("i", "u")
UNSET = (None, False)  # a mode left at its default
_unset = lambda v: not v  # noqa: E731 - a reduction's rounding/ftz/nan: any falsy value is unset

ROWS: list[Row] = [
    # ---- grid, arrays, plain values
    Row(OpKind.BID, template=GRID[OpKind.BID]),
    Row(OpKind.NUM_BLOCKS, template=GRID[OpKind.NUM_BLOCKS]),
    Row(OpKind.ARRAY_DIM, when={"unit_axis": True}, method="array_dim_at_launch"),
    Row(OpKind.ARRAY_DIM, template=ARRAY_DIM),
    Row(OpKind.ARRAY_STRIDE, method="array_stride"),
    Row(OpKind.NUM_TILES, method="num_tiles"),
    Row(OpKind.SCALAR, template="{x}"),
    Row(OpKind.COPY, template="{x}"),
    Row(OpKind.ARANGE, template=IOTA),
    Row(OpKind.FULL, method="full"),
    Row(OpKind.SPLAT, method="splat"),
    Row(OpKind.TILE0, template="scalar_to_tile({x})"),
    Row(OpKind.SCALAR_OF, template="tile_to_scalar({x})"),
    # ---- casts
    Row(OpKind.ASTYPE, {"rounding": Not((None, "nearest_even"))},
        refuse="ct.astype with rounding_mode={rounding} is not supported yet"),
    # cutile 0.5.0's convert_scalar refuses integer -> integer: a 0-d tile cast, as cuTile emits it
    Row(OpKind.ASTYPE, {"value": "scalar", "operand": INTS, "elem": INTS, "width": "narrow"},
        method="scalar_int_cast", shims=("trunci_fixed",)),
    Row(OpKind.ASTYPE, {"value": "scalar", "operand": INTS, "elem": INTS}, method="scalar_int_cast"),
    Row(OpKind.ASTYPE, {"value": "scalar"}, CAST_SCALAR),
    # from bool as cuTile casts it: unsigned (`itof unsigned`, `exti unsigned`); float -> bool: `ftoi unsigned`
    Row(OpKind.ASTYPE, {"operand": "b", "elem": "f"}, CAST[("b", "f")]),
    Row(OpKind.ASTYPE, {"operand": "b", "elem": INTS}, CAST[("b", "i")]),
    Row(OpKind.ASTYPE, {"operand": "f", "elem": "b"}, CAST[("f", "b")]),
    Row(OpKind.ASTYPE, {"operand": "b"}, refuse="casts from or to bool are not supported yet"),
    Row(OpKind.ASTYPE, {"elem": "b"}, refuse="casts from or to bool are not supported yet"),
    Row(OpKind.ASTYPE, {"operand": INTS, "elem": INTS, "width": "same"}, CAST[("i", "i=")]),
    Row(OpKind.ASTYPE, {"operand": INTS, "elem": INTS, "width": "widen"}, CAST[("i", "i+")]),
    Row(OpKind.ASTYPE, {"operand": INTS, "elem": INTS, "width": "narrow"}, CAST[("i", "i-")], shims=("trunci_fixed",)),
    *[Row(OpKind.ASTYPE, {"operand": ks, "elem": kd}, spelling) for (ks, kd), spelling in CAST.items() if kd in ("f", "i")],
    # unsigned <-> float: convert_tile takes the signedness from the integer type (uitofp / fptoui)
    Row(OpKind.ASTYPE, {"operand": "u", "elem": "f"}, CAST[("i", "f")]),
    Row(OpKind.ASTYPE, {"operand": "f", "elem": "u"}, CAST[("f", "i")]),
    Row(OpKind.BITCAST, template=BITCAST),
    Row(OpKind.PACK, template="pack({x})"),
    Row(OpKind.UNPACK, template="unpack({x})"),
    # ---- binary arithmetic: scalars, then float, bool and integer tiles
    *[Row(OpKind.BINARY, {"value": "scalar", "op": k}, s) for k, s in SCALAR_FN.items()],
    Row(OpKind.BINARY, {"value": "scalar", "op": "div", "elem": Not(("f",))},
        refuse="scalar operator `{op}` on {dtype} is not supported yet"),
    *[Row(OpKind.BINARY, {"value": "scalar", "op": k}, f"{{a}} {s} {{b}}") for k, s in SCALAR_OPERATOR.items()],
    Row(OpKind.BINARY, {"value": "scalar"}, refuse="scalar operator `{op}` on {dtype} is not supported yet"),
    *[Row(OpKind.BINARY, {"elem": "f", "op": k, "rounding": (None, "nearest_even"), "ftz": UNSET}, f"{{a}} {s} {{b}}")
      for k, s in FLOAT_OPERATOR.items()],
    Row(OpKind.BINARY, {"elem": "f", "op": "div", "rounding": "full"}, DIVF_FULL, shims=("divf_full",)),
    Row(OpKind.BINARY, {"elem": "f", "op": tuple(FLOAT_MODED), "rounding": Not(tuple(ROUNDING))},
        refuse="operator `{op}` with rounding_mode={rounding} is not supported yet"),
    *[Row(OpKind.BINARY, {"elem": "f", "op": k}, f"{s}({{a}}, {{b}}, {{rounding}}, {{ftz}})")
      for k, s in FLOAT_MODED.items()],
    *[Row(OpKind.BINARY, {"elem": "f", "op": k}, s) for k, s in FLOAT_FN.items()],
    *[Row(OpKind.BINARY, {"elem": "b", "op": k}, s) for k, s in BOOL_FN.items()],
    *[Row(OpKind.BINARY, {"elem": INTS, "op": k}, f"{{a}} {s} {{b}}") for k, s in INT_OPERATOR.items()],
    *[Row(OpKind.BINARY, {"elem": INTS, "op": k}, s, shims=(INT_FN_SHIM[k],) if k in INT_FN_SHIM else ())
      for k, s in INT_FN.items()],
    Row(OpKind.BINARY, refuse="operator `{op}` on {ty} is not supported yet"),
    Row(OpKind.FMA, {"rounding": Not(tuple(ROUNDING))},
        refuse="fma with rounding_mode={rounding} is not supported yet"),
    Row(OpKind.FMA, template=FMA),
    Row(OpKind.FPOWI, template=FPOWI),
    # ---- comparisons and selection
    *[Row(OpKind.COMPARE, {"value": "scalar", "op": k}, f"{{a}} {s} {{b}}") for k, s in COMPARE_SCALAR.items()],
    *[Row(OpKind.COMPARE, {"operand": Not(("f",)), "op": k}, COMPARE_INT.replace("{predicate}", p))
      for k, p in PREDICATE.items()],
    *[Row(OpKind.COMPARE, {"op": k}, f"{s}({{a}}, {{b}})") for k, s in COMPARE_TILE.items()],
    Row(OpKind.SELECT, template=SELECT),
    # ---- unary math
    Row(OpKind.UNARY, {"value": "scalar", "fn": "negative"}, "-{x}"),
    Row(OpKind.UNARY, {"value": "scalar"}, refuse="`{fn}` on a scalar is not supported yet"),
    *[Row(OpKind.UNARY, {"fn": fn, "rounding": "approx"}, UNARY[f"{fn}:approx"]) for fn in ("exp", "tanh")],
    *[Row(OpKind.UNARY, {"fn": fn, "rounding": (None, "full")}, UNARY[fn]) for fn in ("exp", "tanh")],
    Row(OpKind.UNARY, {"fn": ("exp", "tanh")}, refuse="ct.{fn} with rounding_mode={rounding} is not supported yet"),
    Row(OpKind.UNARY, {"fn": "sqrt", "rounding": Not(tuple(ROUNDING))},
        refuse="ct.sqrt with rounding_mode={rounding} is not supported yet"),
    Row(OpKind.UNARY, {"fn": "sqrt"}, UNARY["sqrt"]),
    *[Row(OpKind.UNARY, {"fn": fn, "rounding": (None, "full", "approx")}, UNARY[fn])
      for fn in UNARY if ":" not in fn and fn not in ("exp", "tanh", "sqrt")],
    *[Row(OpKind.UNARY, {"fn": fn, "rounding": (None, "full", "approx"), "elem": "f"}, UNARY[f"{fn}:f"])
      for fn in ("abs", "negative")],
    *[Row(OpKind.UNARY, {"fn": fn, "rounding": (None, "full", "approx")}, UNARY[f"{fn}:i"])
      for fn in ("abs", "negative")],
    Row(OpKind.UNARY, {"fn": tuple({key.split(":")[0] for key in UNARY})},
        refuse="ct.{fn} with rounding_mode={rounding} is not supported yet"),
    Row(OpKind.UNARY, refuse="`{fn}` is not supported yet"),
    # ---- reductions, scans, shapes, matrix multiply
    *[Row(OpKind.REDUCE, {"fn": fn, "rounding": _unset, "ftz": _unset, "nan": _unset}, s) for fn, s in REDUCE.items()],
    Row(OpKind.REDUCE, refuse="reductions with rounding_mode/flush_to_zero/propagate_nan are not supported yet"),
    Row(OpKind.SCAN_SUM, {"result_dtype": HALF_TYPES}, method="scan_sum_half"),
    Row(OpKind.SCAN_SUM, template=SCAN_SUM),
    Row(OpKind.RESHAPE, template=RESHAPE),
    Row(OpKind.BROADCAST, template=BROADCAST),
    Row(OpKind.PERMUTE, {"axes": lambda axes: axes == (1, 0)}, TRANSPOSE),
    Row(OpKind.PERMUTE, template=PERMUTE),
    Row(OpKind.CAT, template=CAT),
    Row(OpKind.EXTRACT, method="extract"),
    Row(OpKind.MMA, {"operand": "f"}, MMA_FLOAT),
    Row(OpKind.MMA, template=MMA_INT),
    # ---- memory: views, pointers, tokens
    Row(OpKind.LOAD, {"check_bounds": False}, refuse="ct.load(check_bounds=False) is not supported by the translator yet"),
    Row(OpKind.LOAD, method="load"),
    Row(OpKind.STORE, {"order": bool}, refuse="ct.store with order= is not supported by the translator yet"),
    Row(OpKind.STORE, {"check_bounds": False}, refuse="ct.store(check_bounds=False) is not supported by the translator yet"),
    Row(OpKind.STORE, method="store"),
    Row(OpKind.LOAD_PTR, method="load_ptr", shims=("load_ptr_tko_tpad",)),
    Row(OpKind.STORE_PTR, method="store_ptr"),
    Row(OpKind.ATOMIC_RMW_PTR, method="atomic_rmw"),
    Row(OpKind.ATOMIC_CAS_PTR, method="atomic_cas"),
    Row(OpKind.PTR_BASE, template=PTR_BASE),
    Row(OpKind.PTR_OFFSET, template=PTR_OFFSET),
    Row(OpKind.PTR_CAST, template=PTR_CAST),
    Row(OpKind.VIEW_OFFSET, method="view_offset", shims=("muli_fixed",)),
    Row(OpKind.MAKE_VIEW, method="make_view"),
    Row(OpKind.ASSUME_DIV_BY, when={"at_launch": True}, method="assume_div_by_at_launch"),
    Row(OpKind.ASSUME_DIV_BY, template="unsafe {{ assume_div_by::<_, {divisor}>({x}) }}"),
    Row(OpKind.ENTRY_TOKEN, template="{x}.token()"),
    Row(OpKind.JOIN_TOKENS, template="join_tokens(&[{tokens}])"),
    Row(OpKind.YIELD, template="{x}"),
]

def by_kind(rows: list[Row]) -> dict[OpKind, list[Row]]:
    """Rows grouped by kind, in order. A backend that spells some operations differently puts its own rows
    first (`by_kind([*mine, *ROWS])`): the first row that matches wins."""
    out: dict[OpKind, list[Row]] = {}
    for row in rows:
        out.setdefault(row.kind, []).append(row)
    return out


ROWS_BY_KIND = by_kind(ROWS)


def lowered_kinds() -> set[OpKind]:
    """Every operation kind this table lowers."""
    return set(ROWS_BY_KIND)
