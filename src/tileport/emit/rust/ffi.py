"""C-ABI launchers: one `extern "C"` symbol per kernel, with dtype dispatch and argument checks.

A launcher checks every descriptor before the device is touched (null, rank, dtype, layout, tile
constants, grid), borrows the caller's memory and stream without copying, selects the entry that
was specialized for the constant values given (if any), and enqueues the kernel asynchronously.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tileport.diagnostics import Diagnostic
from tileport.emit.rust import lowering as L
from tileport.emit.rust.kernel import (alignment_generic, array_roots, derived_dims, derived_name, launch_alignments,
                                       stride_param_name, stride_params, type_dims, unit_axis_generics)
from tileport.emit.rust.names import fresh_name
from tileport.model.ir import Do, Kernel, Let, walk
from tileport.model.ops import OpKind
from tileport.model.types import DVar, Sym

GRID_ARGS = ("grid_x: u32", "grid_y: u32", "grid_z: u32", "device_id: i32", "stream: u64")


@dataclass
class KernelGroup:
    """One C symbol: a kernel and its literal-specialized variants (same parameters)."""

    symbol: str
    base: str  # source kernel name
    module: str
    variants: list[Kernel]

    @property
    def first(self) -> Kernel:
        return self.variants[0]

    @property
    def pinned_names(self) -> list[str]:
        return sorted({k for v in self.variants for k in v.pinned})


def written_arrays(kernel: Kernel) -> set[str]:
    """The array parameters the kernel writes (directly, or through views of them)."""
    out = set()
    for st in walk(kernel.body):
        if isinstance(st, (Let, Do)) and st.op.kind == OpKind.STORE:
            out.add(st.op.args[0].name)
        elif isinstance(st, (Let, Do)) and st.op.kind in (OpKind.STORE_PTR, OpKind.SCATTER):
            out.add(st.op.attr("array") or st.op.args[0].name)
    roots = array_roots(kernel)
    return {roots.get(name, name) for name in out}


def tile_dim_consts(kernel: Kernel) -> list[str]:
    """Constant parameters used as tile dimensions (must be powers of two)."""
    return [d.name for d in type_dims(kernel) if isinstance(d, Sym)]


def const_param_rs(kind: str | None) -> str:
    """The C type of a constant argument ("none": an argument the entries take as None, a null pointer)."""
    return {"bool": "bool", "float": "f64", "none": "*const TensorDesc"}.get(kind or "int", "i32")


def rust_expr(d, names, top: bool = False) -> str:
    """A derived constant computed on the host from the launcher's arguments; `top`: the whole
    expression (no parentheses around it), else an operand."""
    if isinstance(d, int):
        return f"{d}i32"
    if isinstance(d, Sym):
        return names[d.name]
    if d.op == "//":
        return f"{rust_expr(d.lhs, names)}.div_euclid({rust_expr(d.rhs, names)})"
    if d.op == "%":
        return f"{rust_expr(d.lhs, names)}.rem_euclid({rust_expr(d.rhs, names)})"
    expr = f"{rust_expr(d.lhs, names)} {d.op} {rust_expr(d.rhs, names)}"
    return expr if top else f"({expr})"


def _check_same_signature(group: KernelGroup) -> None:
    """Specialized entries may differ in element types, not in parameter names, kinds or ranks."""
    def shape(k: Kernel):
        return [(p.name, p.is_array, p.is_const, getattr(p.ty, "rank", None)) for p in k.params]
    first = group.first
    for v in group.variants[1:]:
        if shape(v) != shape(first):
            raise Diagnostic(f"specialized entries of `{group.base}` differ in their parameters", v.loc,
                             "specialization", kernel=group.base)


# Locals of every launcher; C parameter names must not collide with them.
LAUNCHER_LOCALS = {"grid", "grid_x", "grid_y", "grid_z", "device_id", "stream", "target", "op", "dtype_names",
                   "key", "params", "function", "spec"}


def signature(group: KernelGroup) -> list[tuple[str, str, str]]:
    """(name, kind, type) of every C argument before the grid, in the source kernel's order;
    constants fixed by specialization stay arguments (they select the entry)."""
    k = group.first
    params = {p.name: p for p in k.params}
    out = []
    for name in k.signature or [p.name for p in k.params]:
        p = params.get(name)
        if p is None:
            out.append((name, "const", const_param_rs(pinned_kind(group, name))))
        elif p.is_array:
            out.append((name, "array", "*const TensorDesc"))
        elif p.is_const:
            out.append((name, "const", const_param_rs(p.const_type)))
        else:
            out.append((name, "scalar", L.RUST_DTYPE[p.ty.dtype]))
    return out


def launcher_names(group: KernelGroup, locals_: frozenset[str] | set[str] = LAUNCHER_LOCALS) -> dict[str, str]:
    """C argument names, by source and by Rust parameter name, plus `<name>#tensor` and `<name>#claimed`
    temporaries; none is one of the launcher's `locals_`."""
    taken = set(locals_) | {f"{dv.name.lower()}_code" for v in group.variants for dv in v.dtype_vars}
    names: dict[str, str] = {}
    for name, kind, _ in signature(group):
        base = name.lower() if kind == "const" else name
        names[name] = fresh_name("underscore_" if base == "_" else base, taken)  # `_` is no Rust name
    for v in group.variants:
        for p in v.params:
            names[p.ident] = names[p.name]
    for p in group.first.array_params:
        names[f"{p.name}#tensor"] = fresh_name(f"{names[p.name]}_t", taken)
        names[f"{p.name}#claimed"] = fresh_name(f"{names[p.name]}_c", taken)
    return names


def emit_launcher(group: KernelGroup) -> str:
    """The C-ABI launcher of one kernel group; raises Diagnostic if it cannot be emitted."""
    try:
        return _launcher(group)
    except Diagnostic:
        raise
    except Exception as e:  # noqa: BLE001 - an emitter bug fails this kernel only, with its location
        raise Diagnostic(f"internal translator error: {type(e).__name__}: {e}", group.first.loc, "internal",
                         "please report this kernel", kernel=group.base) from None


def _launcher(group: KernelGroup) -> str:
    _check_same_signature(group)
    k = group.first
    arg_names = launcher_names(group)
    c_params = [f"{arg_names[name]}: {ty}" for name, _kind, ty in signature(group)] + list(GRID_ARGS)

    body = [f'guard("{group.base}", || {{']
    for p in k.array_params:
        body.append(f'    let {arg_names[p.name]} = check_desc("{p.name}", {arg_names[p.name]}, {p.ty.rank})?;')
    for name in sorted(set().union(*(written_arrays(v) for v in group.variants))):
        body.append(f'    require_disjoint("{name}", {arg_names[name]})?;')
    body.append("    let grid = (grid_x, grid_y, grid_z);")
    body.append("    check_grid(grid)?;")
    by_dtype = _split_by_dtype(group)
    for variant in group.variants:
        cond = " && ".join([_pinned_test(arg_names[n], pinned_code(group, n, v))
                            for n, v in sorted(variant.pinned.items())]
                           + (_dtype_tests(variant, arg_names) if by_dtype else []))
        launch = _variant_body(variant, arg_names)
        if cond:
            body.append(f"    if {cond} {{")
            body += ["        " + x for x in launch[:-1]]
            body.append("        return {")
            body += ["            " + line for line in launch[-1].splitlines()]
            body.append("        };")
            body.append("    }")
        else:
            body += ["    " + x for x in launch]
    if group.pinned_names:
        shown = ", ".join(f"{n}={{{arg_names[n]}{':?' if pinned_kind(group, n) == 'none' else ''}}}"
                          for n in group.pinned_names)
        body.append(f'    Err(Error::new(Code::InvalidArgument, format!("no entry of `{group.base}` is '
                    f'specialized for {shown}")))')
    elif by_dtype:
        body.append(f'    Err(Error::new(Code::DType, "no entry of `{group.base}` takes these dtypes".to_string()))')
    body.append("})")
    doc = [f"/// Enqueue `{k.module_name}::{group.base}` on `stream` (no host synchronization).",
           f"/// Arguments follow the kernel's parameters ({', '.join(n for n, _, _ in signature(group))}), then the grid,",
           "/// the device id and the raw CUDA stream. Returns 0, or a negative code with a message from",
           "/// `tileport_last_error`."]
    sig = f"pub unsafe extern \"C\" fn {group.symbol}({', '.join(c_params)}) -> i32 {{"
    return "\n".join(doc + ["#[unsafe(no_mangle)]", sig] + ["    " + b for b in body] + ["}"])


def _split_by_dtype(group: KernelGroup) -> bool:
    """Entries with the same pinned constants differ in their arrays' dtypes (a frontend splits a kernel
    whose compiled form differs per dtype): the launcher then picks the entry by dtype."""
    pins = [tuple(sorted(v.pinned.items())) for v in group.variants]
    return len(set(pins)) < len(pins)


def _dtype_tests(variant: Kernel, arg_names) -> list[str]:
    tests = []
    for p in variant.array_params:
        dtypes = variant.dtype_vars[p.ty.dtype] if isinstance(p.ty.dtype, DVar) else (p.ty.dtype,)
        codes = " | ".join(f"dtype::{L.DTYPE_CONST[d]}" for d in dict.fromkeys(dtypes))
        tests.append(f"matches!({arg_names[p.name]}.dtype, {codes})")
    return tests


def _variant_body(k: Kernel, arg_names) -> list[str]:
    """Checks that depend on the entry (dtypes, tile constants), then the launch; the last line is
    the launch's `Result` expression (possibly a multi-line `match`)."""
    lines = []
    dvars = list(k.dtype_vars)
    for dv in dvars:
        members = [p for p in k.array_params if p.ty.dtype == dv]
        if not members:
            continue  # derived from the others (e.g. tf32 for f32 inputs): set by the match arm
        allowed = ", ".join(f"dtype::{L.DTYPE_CONST[d]}" for d in dict.fromkeys(k.dtype_vars[dv]))
        listed = ", ".join(f'("{p.name}", {arg_names[p.name]})' for p in members)
        lines.append(f"let {dv.name.lower()}_code = common_dtype(&[{listed}], &[{allowed}])?;")
    for p in k.array_params:
        if not isinstance(p.ty.dtype, DVar):
            lines.append(f'require_dtype("{p.name}", {arg_names[p.name]}, dtype::{L.DTYPE_CONST[p.ty.dtype]})?;')
    for name in tile_dim_consts(k):
        lines.append(f'check_tile_dim("{name}", {arg_names[name]})?;')
    for d in derived_dims(k):
        lines.append(f"let {derived_name(d).lower()} = {rust_expr(d, arg_names, top=True)};")
        lines.append(f'check_tile_dim("{derived_name(d)}", {derived_name(d).lower()})?;')
    lines.append("let target = LaunchTarget::get(device_id, stream)?;")
    launch = _launch_match(k, arg_names, dvars)
    # Fold the (possibly multi-line) final expression into one list entry per line, last = expression.
    return lines + ["\n".join(launch)]


def pinned_kind(group: KernelGroup, name: str) -> str:
    values = {type(v.pinned[name]) for v in group.variants if name in v.pinned}
    if type(None) in values and values != {type(None)}:
        raise Diagnostic(f"entries of `{group.base}` take `{name}` as None and as a value: one C argument "
                         "cannot be both", group.first.loc, "specialization", kernel=group.base)
    return "none" if values == {type(None)} else "bool" if values == {bool} else "float" if float in values \
        else "int"


def pinned_codes(group: KernelGroup, name: str) -> dict[str, int]:
    """String specialization values (a Triton mode, a dtype name) reach the launcher as their index here."""
    return {v: i for i, v in enumerate(sorted({k.pinned[name] for k in group.variants
                                               if isinstance(k.pinned.get(name), str)}))}


def pinned_code(group: KernelGroup, name: str, value):
    return pinned_codes(group, name)[value] if isinstance(value, str) else value


def _pinned_test(arg: str, value) -> str:
    if value is None:
        return f"{arg}.is_null()"
    if isinstance(value, bool):
        return arg if value else f"!{arg}"
    if isinstance(value, float):
        return f"{arg}.is_nan()" if math.isnan(value) else f"{arg} == {_f64_literal(value)}"
    return f"{arg} == {value}"


def _f64_literal(value: float) -> str:
    if math.isinf(value):
        return "f64::INFINITY" if value > 0 else "f64::NEG_INFINITY"
    return repr(value)


def _launch_match(variant: Kernel, arg_names, dvars) -> list[str]:
    """The launch, once per dtype combination in use: a local macro instantiated per match arm."""
    launch = _launch_call(variant, arg_names, dvars)
    if not dvars:
        return ["{", *["    " + x for x in launch], "}"]
    combos = list(dict.fromkeys(zip(*(variant.dtype_vars[dv] for dv in dvars))))
    bound = [i for i, dv in enumerate(dvars) if any(p.ty.dtype == dv for p in variant.array_params)]
    codes = ", ".join(f"{dvars[i].name.lower()}_code" for i in bound)
    metas = ", ".join(f"${dv.name}:ty" for dv in dvars)
    aliases = " ".join(f"type {dv.name} = ${dv.name};" for dv in dvars)
    out = [f"macro_rules! launch {{ ({metas}, $names:expr) => {{{{", f"    {aliases}",
           f"    let dtype_names: [&str; {len(dvars)}] = $names;"]
    out += ["    " + x for x in launch]
    out += ["}}; }", f"match ({codes},) {{" if len(bound) == 1 else f"match ({codes}) {{"]
    for combo in combos:
        pat = ", ".join(f"dtype::{L.DTYPE_CONST[combo[i]]}" for i in bound)
        pat = f"({pat},)" if len(bound) == 1 else f"({pat})"
        types = ", ".join(L.HOST_DTYPE[d] for d in combo)
        names = ", ".join(f'"{d}"' for d in combo)
        out.append(f"    {pat} => launch!({types}, [{names}]),")
    out.append('    _ => Err(Error::new(Code::DType, "unsupported dtype combination".to_string())),')
    out.append("}")
    return out


KEY_WORDS = 192  # support.rs KEY_WORDS
MAX_PARAMS = 128  # support.rs MAX_PARAMS
INTEGER_SCALARS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")  # cutile's scalar DivHint types
FLOAT_SCALARS = ("f16", "bf16", "f32", "f64")


def _launch_call(variant: Kernel, arg_names, dvars) -> list[str]:
    """The launch of one entry and dtype combination: directly with the function loaded for an
    equal LaunchKey (support.rs), else through cutile's launcher, then resolved for later launches."""
    _check_fits(variant, dvars)
    strides = [(f"{arg_names[a]}.strides[{d}] as i32", stride_param_name(a, d)) for a, d in stride_params(variant)]
    return (_key_lines(variant, arg_names, dvars) + _resolved_lines(variant, arg_names, strides)
            + _first_launch_lines(variant, arg_names, dvars, strides))


def _check_fits(variant: Kernel, dvars) -> None:
    arrays = [p for p in variant.params if p.is_array]
    scalars = [p for p in variant.params if not p.is_array and not p.is_const]
    words = 6 + 2 * len(dvars) + len(variant.const_params) + len(derived_dims(variant)) \
        + sum(2 + 2 * p.ty.rank for p in arrays) + len(scalars)
    params = sum(1 + 2 * p.ty.rank for p in arrays) + len(scalars) + len(stride_params(variant))
    if words > KEY_WORDS or params > MAX_PARAMS:
        raise Diagnostic(f"`{variant.name}` has {params} kernel parameters and a launch key of {words} words; the "
                         f"launcher holds at most {MAX_PARAMS} and {KEY_WORDS}", variant.loc, "launcher",
                         kernel=variant.name)


def _scalar_key(p, a: str) -> str:
    dtype = p.ty.dtype
    return f"key.float(f64::from({a}));" if dtype in FLOAT_SCALARS else f"key.word({a} as i64);"


def _key_lines(variant: Kernel, arg_names, dvars) -> list[str]:
    lines = [f'let mut key = LaunchKey::new("{variant.module_name}::{variant.name}", device_id, grid);']
    lines += [f"key.text(dtype_names[{i}]);" for i in range(len(dvars))]
    for p in variant.const_params:
        a = arg_names[p.name]
        lines.append(f"key.float({a});" if p.const_type == "float" else f"key.word({a} as i64);")
    lines += [f"key.word({derived_name(d).lower()} as i64);" for d in derived_dims(variant)]
    for p in variant.params:
        if p.is_array:
            lines.append(f"key.array({arg_names[p.name]});")
        elif not p.is_const:
            lines.append(_scalar_key(p, arg_names[p.name]))
    return lines


def _resolved_lines(variant: Kernel, arg_names, strides) -> list[str]:
    lines = ["if let Some(function) = resolved(&key) {", "    let mut params = KernelParams::new();"]
    lines += [f"    params.push({expr});" for expr, _ in strides]
    for p in variant.params:
        if p.is_array:
            lines.append(f"    params.array({arg_names[p.name]});")
        elif not p.is_const:
            lines.append(f"    params.push({arg_names[p.name]});")
    lines.append(f'    return launch_resolved(target, function, grid, &mut params).map_err(|e| launch_error("{variant.name}", e));')
    lines.append("}")
    return lines


def _alignment_lines(variant: Kernel, st: Let, arg_names) -> list[str]:
    """A view's alignment as cuTile Python's launcher specializes it (`view_alignment` in the cuTile frontend):
    gcd(16, each `Array.slice` offset in bytes), where a non-last axis' offset is a multiple of 16 bytes when its
    stride is (`stride_divisible_by`), else of start x element bytes; the key holds the strides it reads."""
    array = next(p for p in variant.params if p.name == st.op.attr("view_of"))
    desc = arg_names[array.name]
    element = array.ty.dtype.name if isinstance(array.ty.dtype, DVar) else L.HOST_DTYPE[array.ty.dtype]
    terms = [f"{start} * size" if last
             else f"if {desc}.strides[{axis}] * size % 16 == 0 {{ 0 }} else {{ {start} * size }}"
             for axis, start, last in st.op.attr("steps")]
    gcd16 = "fold(16i64, |d, t| if t == 0 { d } else { d.min(t & -t) })"  # gcd(16, t, ..): lowest set bits, at most 16
    return [f"let {alignment_generic(st).lower()}: i32 = {{",
            f"    let size = std::mem::size_of::<{element}>() as i64;",
            f"    [{', '.join(terms)}].into_iter().{gcd16} as i32",
            "};"]


def claims_cutile_python(variant: Kernel) -> bool:
    """Whether the launch claims the divisibility cuTile Python's launcher claims (support.rs `Claimed`): for
    a kernel cuTile Python launches (the cuTile frontend marks them, `Kernel.launch_unit_axes`). A Triton
    port keeps cutile's claims: Triton's launcher claims 16 elements of a stride, more than 16 bytes."""
    return variant.launch_unit_axes


def static_axes(variant: Kernel, array, desc: str) -> str:
    """The axes of `array` the entry takes as constants (its unit-axis generics at 1), as Rust bools: where
    the launch claims cuTile Python's divisibility (support.rs `Claimed`) lays the lengths' claims out."""
    generics = unit_axis_generics(variant)
    if not any((array.name, axis) in generics for axis in range(array.ty.rank)):
        return ""
    return ", ".join(f"unit_axis({desc}, {axis}) == 1" if (array.name, axis) in generics else "false"
                     for axis in range(array.ty.rank))


def _first_launch_lines(variant: Kernel, arg_names, dvars, strides) -> list[str]:
    args, lines, tensors = [expr for expr, _ in strides], [], []
    ints = [f'("{name}", {expr})' for expr, name in strides]
    for p in variant.params:
        a = arg_names[p.name]
        if p.is_array:
            dt = p.ty.dtype.name if isinstance(p.ty.dtype, DVar) else L.HOST_DTYPE[p.ty.dtype]
            tensor, claimed = arg_names[f"{p.name}#tensor"], arg_names[f"{p.name}#claimed"]
            lines.append(f"let {tensor} = target.tensor::<{dt}>({a});")
            if claims_cutile_python(variant):
                lines.append(f"let {claimed} = Claimed::new(&{tensor}, {a}, &[{static_axes(variant, p, a)}]);")
                args.append(claimed)
                tensors.append(f'("{p.rust}", {claimed}.spec().clone())')
            else:
                args.append(f"&{tensor}")
                tensors.append(f'("{p.rust}", {tensor}.spec().clone())')
        elif not p.is_const:
            args.append(a)
            if p.ty.dtype in INTEGER_SCALARS:
                ints.append(f'("{p.rust}", {a} as i32)')
    generics = [f"dtype_names[{i}].to_string()" for i in range(len(dvars))]
    generics += [f"{arg_names[p.name]}.to_string()" for p in variant.const_params]
    generics += [f"{derived_name(d).lower()}.to_string()" for d in derived_dims(variant)]
    for st in launch_alignments(variant):
        lines += _alignment_lines(variant, st, arg_names)
        generics.append(f"{alignment_generic(st).lower()}.to_string()")
    # the static length of each array axis, chosen from the launch's lengths (support.rs `unit_axis`)
    generics += [f"unit_axis({arg_names[array]}, {axis}).to_string()" for array, axis in unit_axis_generics(variant)]
    listed = f"vec![{', '.join(generics)}]"
    lines.append(f"let spec = Specialization {{ generics: {listed}, tensors: vec![{', '.join(tensors)}], "
                 f"int_scalars: vec![{', '.join(ints)}] }};")
    call = f"{variant.module_name}::{variant.name}({', '.join(args)})"
    lines.append(f"let op = unsafe {{ {call} }}")
    lines.append(f"    .generics({listed})")
    lines.append("    .grid(grid);")
    lines.append(f'unsafe {{ op.async_on(&target.stream) }}.map_err(|e| launch_error("{variant.name}", e))?;')
    m = variant.module_name
    lines.append(f'resolve(key, target, {m}::__module_ast_self, "{m}", "{variant.name}", {m}::_SOURCE_HASH, spec)')
    return lines
