"""The lowering table: kernel-model operations -> cutile-rs 0.5.0 spellings, in one place.

Each entry was checked by compiling both sides and comparing Tile IR (docs/cutile-rs-lowering.md).
The emitter looks things up here and never spells a cutile-rs operation itself. The spelling tables
come first; `ROWS` at the end pairs each pattern (an operation kind and what its dtypes and attributes
must be) with its rendering, as one ordered list: the emitter takes the first row that matches.
In a template, `{a}` `{b}` `{c}` are the operands, `{x}` the first one, modes (`{rounding}`, `{ftz}`,
`{nan}`) are rendered with the mode tables below; a refusal is formatted with the raw attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# ---- element types
RUST_DTYPE = {
    "f32": "f32", "f16": "f16", "bf16": "bf16", "f64": "f64", "tf32": "tf32",
    "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64", "bool": "bool",
    "f8e4m3fn": "f8e4m3fn", "f8e5m2": "f8e5m2",
}
# Dtype codes of the C ABI descriptor (support.rs `dtype` module).
DTYPE_CODE = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3, "i32": 4, "i64": 5, "i16": 6, "i8": 7, "u8": 8, "bool": 9}
# Rust constant names for those codes.
DTYPE_CONST = {"f32": "F32", "f16": "F16", "bf16": "BF16", "f64": "F64", "i32": "I32", "i64": "I64",
               "i16": "I16", "i8": "I8", "u8": "U8", "bool": "BOOL"}
# Host-side (launcher) spelling: tf32 is not imported there (only derived generics use it).
HOST_DTYPE = {**RUST_DTYPE, "tf32": "cutile::core::tf32"}
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
GRID = {"bid": "get_tile_block_id().{axis}", "num_blocks": "get_num_tile_blocks().{axis}"}

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
}
BITCAST = "bitcast({x})"
SCAN_SUM = "scan_sum({x}, {axis}i32, {reverse}, {zero})"  # ct.cumsum: identity 0 of the element type
SCAN_REVERSE = {False: "reverse::Forward", True: "reverse::Reverse"}
FPOWI = "unsafe {{ fpowi({a}, {b}) }}"  # float ** integer tile (Tile IR 13.4), as cuTile emits it  # ct.bitcast: the result type comes from the let annotation
CAST_SCALAR = "convert_scalar({x})"

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

# ---- user-declared op bindings ("shims") for gaps in cutile 0.5.0; emitted only when used.
SHIMS = {
    "divf_full": """\
    /// `divf` with `rounding<full>` (cutile 0.5.0's `divf` has no `Full` spelling).
    #[cuda_tile::op(name = "cuda_tile.divf", since = "V13_2", params = ["lhs", "rhs"], static_params = ["rounding={NearestEven: rounding_mode=#cuda_tile.rounding<nearest_even>, Approx: rounding_mode=#cuda_tile.rounding<approx>, Full: rounding_mode=#cuda_tile.rounding<full>}", "ftz={Enabled: flush_to_zero=unit}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn divf_full<E: ElementType, const S: [i32; N], R: rounding::Mode, F: ftz::Mode>(
        lhs: Tile<E, S>,
        rhs: Tile<E, S>,
        rounding: R,
        ftz: F,
    ) -> Tile<E, S> {
        unreachable!()
    }
""",
    "trunci_fixed": """\
    /// `trunci` that writes its `overflow` attribute (cutile 0.5.0 omits it for `overflow::None`).
    #[cuda_tile::op(name = "cuda_tile.trunci", since = "V13_2", params = ["from"], static_params = ["overflow={None: overflow=#cuda_tile.overflow<none>, NoSignedWrap: overflow=#cuda_tile.overflow<no_signed_wrap>, NoUnsignedWrap: overflow=#cuda_tile.overflow<no_unsigned_wrap>, NoWrap: overflow=#cuda_tile.overflow<no_wrap>}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn trunci_fixed<EIn: ElementType, EOut: ElementType, const S: [i32; N], O: overflow::Mode>(
        from: Tile<EIn, S>,
        overflow: O,
    ) -> Tile<EOut, S> {
        unreachable!()
    }
""",
    "shli_fixed": """\
    /// `shli` that writes its `overflow` attribute (cutile 0.5.0 omits it for `overflow::None`).
    #[cuda_tile::op(name = "cuda_tile.shli", since = "V13_2", params = ["lhs", "rhs"], static_params = ["overflow={None: overflow=#cuda_tile.overflow<none>, NoSignedWrap: overflow=#cuda_tile.overflow<no_signed_wrap>, NoUnsignedWrap: overflow=#cuda_tile.overflow<no_unsigned_wrap>, NoWrap: overflow=#cuda_tile.overflow<no_wrap>}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn shli_fixed<E: ElementType, const S: [i32; N], O: overflow::Mode>(
        lhs: Tile<E, S>,
        rhs: Tile<E, S>,
        overflow: O,
    ) -> Tile<E, S> {
        unreachable!()
    }
""",
    "muli_fixed": """\
    /// `muli` that writes its `overflow` attribute (cutile 0.5.0 omits it for `overflow::None`).
    #[cuda_tile::op(name = "cuda_tile.muli", since = "V13_2", params = ["lhs", "rhs"], static_params = ["overflow={None: overflow=#cuda_tile.overflow<none>, NoSignedWrap: overflow=#cuda_tile.overflow<no_signed_wrap>, NoUnsignedWrap: overflow=#cuda_tile.overflow<no_unsigned_wrap>, NoWrap: overflow=#cuda_tile.overflow<no_wrap>}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn muli_fixed<E: ElementType, const S: [i32; N], O: overflow::Mode>(
        lhs: Tile<E, S>,
        rhs: Tile<E, S>,
        overflow: O,
    ) -> Tile<E, S> {
        unreachable!()
    }
""",
    "load_ptr_tko_tpad": """\
    /// `load_ptr_tko` whose padding operand is a whole tile, as cuTile Python passes it (the built-in
    /// takes a scalar and cannot broadcast it at rank >= 2).
    #[cuda_tile::op(name = "cuda_tile.load_ptr_tko", since = "V13_2", params = ["source"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub unsafe fn load_ptr_tko_tpad<
        E: ElementType,
        P: PointerTo<E>,
        const S: [i32; N],
        O: ordering::LoadMode,
        Sc: scope::Mode,
        const CYCLES: i32,
    >(
        source: PointerTile<P, S>,
        memory_ordering: O,
        memory_scope: Option<Sc>,
        mask: Option<Tile<bool, S>>,
        padding_value: Option<Tile<E, S>>,
        token: Option<Token>,
        latency: Latency<CYCLES>,
    ) -> (Tile<E, S>, Token) {
        unreachable!()
    }
""",
    "constant_lit": """\
    /// A constant written as an f32 literal but typed by its result (f16/bf16/generic element types).
    #[cuda_tile::op(name = "cuda_tile.constant", since = "V13_2", params = [], attribute_params = ["value:dense"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn constant_lit<E: ElementType, const S: [i32; N]>(value: f32, shape: Shape<S>) -> Tile<E, S> {
        unreachable!()
    }
""",
}


# ---------------------------------------------------------------- lowering rows

class Not(tuple):
    """A row condition: the fact is none of these values."""


@dataclass(frozen=True)
class Row:
    """`kind` + `when` (fact -> value, tuple of values, Not(...) or predicate) -> a rendering: a
    `template`, an emitter `method` (operations that bind several names or create views), or a
    `refuse` message. `shims`: user-declared ops the rendering needs.

    Facts: `value` ("tile" / "scalar": the result), `elem` and `operand` (the element kind of the
    result and of the first operand: "f", "i", "u", "b"), `width` (an integer cast: "narrow", "same",
    "widen"), `unit_axis` (an `array_dim` of an axis whose static length the launcher chooses), and every
    attribute of the operation by its name."""

    kind: str
    when: Mapping[str, Any] = field(default_factory=dict)
    template: str | None = None
    method: str | None = None
    refuse: str | None = None
    shims: tuple[str, ...] = ()

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
    Row("bid", template=GRID["bid"]),
    Row("num_blocks", template=GRID["num_blocks"]),
    Row("array_dim", when={"unit_axis": True}, method="array_dim_at_launch"),
    Row("array_dim", template=ARRAY_DIM),
    Row("array_stride", method="array_stride"),
    Row("num_tiles", method="num_tiles"),
    Row("scalar", template="{x}"),
    Row("copy", template="{x}"),
    Row("arange", template=IOTA),
    Row("full", method="full"),
    Row("splat", method="splat"),
    Row("tile0", template="scalar_to_tile({x})"),
    Row("scalar_of", template="tile_to_scalar({x})"),
    # ---- casts
    Row("astype", {"rounding": Not((None, "nearest_even"))},
        refuse="ct.astype with rounding_mode={rounding} is not supported yet"),
    Row("astype", {"value": "scalar"}, CAST_SCALAR),
    Row("astype", {"operand": "b"}, refuse="casts from or to bool are not supported yet"),
    Row("astype", {"elem": "b"}, refuse="casts from or to bool are not supported yet"),
    Row("astype", {"operand": INTS, "elem": INTS, "width": "same"}, CAST[("i", "i=")]),
    Row("astype", {"operand": INTS, "elem": INTS, "width": "widen"}, CAST[("i", "i+")]),
    Row("astype", {"operand": INTS, "elem": INTS, "width": "narrow"}, CAST[("i", "i-")], shims=("trunci_fixed",)),
    *[Row("astype", {"operand": ks, "elem": kd}, spelling) for (ks, kd), spelling in CAST.items() if kd in ("f", "i")],
    # unsigned <-> float: convert_tile takes the signedness from the integer type (uitofp / fptoui)
    Row("astype", {"operand": "u", "elem": "f"}, CAST[("i", "f")]),
    Row("astype", {"operand": "f", "elem": "u"}, CAST[("f", "i")]),
    Row("bitcast", template=BITCAST),
    Row("pack", template="pack({x})"),
    Row("unpack", template="unpack({x})"),
    # ---- binary arithmetic: scalars, then float, bool and integer tiles
    *[Row("binary", {"value": "scalar", "op": k}, s) for k, s in SCALAR_FN.items()],
    Row("binary", {"value": "scalar", "op": "div", "elem": Not(("f",))},
        refuse="scalar operator `{op}` on {dtype} is not supported yet"),
    *[Row("binary", {"value": "scalar", "op": k}, f"{{a}} {s} {{b}}") for k, s in SCALAR_OPERATOR.items()],
    Row("binary", {"value": "scalar"}, refuse="scalar operator `{op}` on {dtype} is not supported yet"),
    *[Row("binary", {"elem": "f", "op": k, "rounding": (None, "nearest_even"), "ftz": UNSET}, f"{{a}} {s} {{b}}")
      for k, s in FLOAT_OPERATOR.items()],
    Row("binary", {"elem": "f", "op": "div", "rounding": "full"}, DIVF_FULL, shims=("divf_full",)),
    Row("binary", {"elem": "f", "op": tuple(FLOAT_MODED), "rounding": Not(tuple(ROUNDING))},
        refuse="operator `{op}` with rounding_mode={rounding} is not supported yet"),
    *[Row("binary", {"elem": "f", "op": k}, f"{s}({{a}}, {{b}}, {{rounding}}, {{ftz}})")
      for k, s in FLOAT_MODED.items()],
    *[Row("binary", {"elem": "f", "op": k}, s) for k, s in FLOAT_FN.items()],
    *[Row("binary", {"elem": "b", "op": k}, s) for k, s in BOOL_FN.items()],
    *[Row("binary", {"elem": INTS, "op": k}, f"{{a}} {s} {{b}}") for k, s in INT_OPERATOR.items()],
    *[Row("binary", {"elem": INTS, "op": k}, s, shims=(INT_FN_SHIM[k],) if k in INT_FN_SHIM else ())
      for k, s in INT_FN.items()],
    Row("binary", refuse="operator `{op}` on {ty} is not supported yet"),
    Row("fma", {"rounding": Not(tuple(ROUNDING))}, refuse="fma with rounding_mode={rounding} is not supported yet"),
    Row("fma", template=FMA),
    Row("fpowi", template=FPOWI),
    # ---- comparisons and selection
    *[Row("compare", {"value": "scalar", "op": k}, f"{{a}} {s} {{b}}") for k, s in COMPARE_SCALAR.items()],
    *[Row("compare", {"operand": Not(("f",)), "op": k}, COMPARE_INT.replace("{predicate}", p))
      for k, p in PREDICATE.items()],
    *[Row("compare", {"op": k}, f"{s}({{a}}, {{b}})") for k, s in COMPARE_TILE.items()],
    Row("select", template=SELECT),
    # ---- unary math
    Row("unary", {"value": "scalar", "fn": "negative"}, "-{x}"),
    Row("unary", {"value": "scalar"}, refuse="`{fn}` on a scalar is not supported yet"),
    *[Row("unary", {"fn": fn, "rounding": "approx"}, UNARY[f"{fn}:approx"]) for fn in ("exp", "tanh")],
    *[Row("unary", {"fn": fn, "rounding": (None, "full")}, UNARY[fn]) for fn in ("exp", "tanh")],
    Row("unary", {"fn": ("exp", "tanh")}, refuse="ct.{fn} with rounding_mode={rounding} is not supported yet"),
    Row("unary", {"fn": "sqrt", "rounding": Not(tuple(ROUNDING))},
        refuse="ct.sqrt with rounding_mode={rounding} is not supported yet"),
    Row("unary", {"fn": "sqrt"}, UNARY["sqrt"]),
    *[Row("unary", {"fn": fn, "rounding": (None, "full", "approx")}, UNARY[fn])
      for fn in UNARY if ":" not in fn and fn not in ("exp", "tanh", "sqrt")],
    *[Row("unary", {"fn": fn, "rounding": (None, "full", "approx"), "elem": "f"}, UNARY[f"{fn}:f"])
      for fn in ("abs", "negative")],
    *[Row("unary", {"fn": fn, "rounding": (None, "full", "approx")}, UNARY[f"{fn}:i"]) for fn in ("abs", "negative")],
    Row("unary", {"fn": tuple({key.split(":")[0] for key in UNARY})},
        refuse="ct.{fn} with rounding_mode={rounding} is not supported yet"),
    Row("unary", refuse="`{fn}` is not supported yet"),
    # ---- reductions, scans, shapes, matrix multiply
    *[Row("reduce", {"fn": fn, "rounding": _unset, "ftz": _unset, "nan": _unset}, s) for fn, s in REDUCE.items()],
    Row("reduce", refuse="reductions with rounding_mode/flush_to_zero/propagate_nan are not supported yet"),
    Row("scan_sum", template=SCAN_SUM),
    Row("reshape", template=RESHAPE),
    Row("broadcast", template=BROADCAST),
    Row("permute", {"axes": lambda axes: axes == (1, 0)}, TRANSPOSE),
    Row("permute", template=PERMUTE),
    Row("cat", template=CAT),
    Row("extract", method="extract"),
    Row("mma", {"operand": "f"}, MMA_FLOAT),
    Row("mma", template=MMA_INT),
    # ---- memory: views, pointers, tokens
    Row("load", {"check_bounds": False}, refuse="ct.load(check_bounds=False) is not supported by the translator yet"),
    Row("load", method="load"),
    Row("store", {"order": bool}, refuse="ct.store with order= is not supported by the translator yet"),
    Row("store", {"check_bounds": False}, refuse="ct.store(check_bounds=False) is not supported by the translator yet"),
    Row("store", method="store"),
    Row("load_ptr", method="load_ptr", shims=("load_ptr_tko_tpad",)),
    Row("store_ptr", method="store_ptr"),
    Row("atomic_rmw_ptr", method="atomic_rmw"),
    Row("atomic_cas_ptr", method="atomic_cas"),
    Row("ptr_base", template=PTR_BASE),
    Row("ptr_offset", template=PTR_OFFSET),
    Row("ptr_cast", template=PTR_CAST),
    Row("view_offset", method="view_offset", shims=("muli_fixed",)),
    Row("make_view", method="make_view"),
    Row("assume_div_by", when={"at_launch": True}, method="assume_div_by_at_launch"),
    Row("assume_div_by", template="unsafe {{ assume_div_by::<_, {divisor}>({x}) }}"),
    Row("entry_token", template="{x}.token()"),
    Row("join_tokens", template="join_tokens(&[{tokens}])"),
    Row("yield", template="{x}"),
]

def by_kind(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows grouped by kind, in order. A backend that spells some operations differently puts its own rows
    first (`by_kind([*mine, *ROWS])`): the first row that matches wins."""
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(row.kind, []).append(row)
    return out


ROWS_BY_KIND = by_kind(ROWS)


def lowered_kinds() -> set[str]:
    """Every operation kind this table lowers."""
    return set(ROWS_BY_KIND)
