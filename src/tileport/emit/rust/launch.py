"""The idiomatic rendering's C-ABI launchers: a few lines each, over the crate's one generic launch path.

The C symbols, argument order and C types are those of ffi.py's launchers (the Python runtime calls both the
same way); an array descriptor crosses as `Option<&TensorDesc>`, a pointer that may be null, as before. The
launcher checks its arguments through `Launch` and describes the launch to `Call` (support.rs, from
templates/launch.rs), which keeps the key, the kernel parameters and the specialization in the order ffi.py's
launchers build them, so both launch the same function with the same parameters.
"""

from __future__ import annotations

from tileport.diagnostics import Diagnostic
from tileport.emit.rust import lowering as L
from tileport.emit.rust.ffi import (GRID_ARGS, KernelGroup, _check_fits, _check_same_signature, _dtype_tests,
                                    _pinned_test, _split_by_dtype, claims_cutile_python, launcher_names, pinned_code,
                                    pinned_kind, rust_expr, signature, tile_dim_consts, written_arrays)
from tileport.emit.rust.kernel import (alignment_generic, derived_dims, derived_name, launch_alignments, stride_params,
                                       unit_axis_generics)
from tileport.emit.rust.names import fresh_name
from tileport.model.ir import Kernel, Let
from tileport.model.types import DVar, Sym

MAX_GENERICS = 64  # templates/launch.rs
FLOATS = ["f32", "f16", "bf16"]  # templates/launch.rs `FLOATS`
# Locals of every launcher; C parameter names must not collide with them.
LOCALS = frozenset({"grid", "grid_x", "grid_y", "grid_z", "device_id", "stream", "l", "call", "launch", "dtype"})
LINE = 88  # a launch's calls are grouped in statements of at most this many characters (rustfmt's width less indent)


def _packed(items: list[tuple[str, str]], statement, width: int = LINE) -> list[str]:
    """`statement(items, bound names)` over consecutive (item, name) pairs, as few as fit in `width` each."""
    out, group = [], []
    for item in items:
        if group and len(statement([i for i, _ in group + [item]], [n for _, n in group + [item]])) > width:
            out.append(statement([i for i, _ in group], [n for _, n in group]))
            group = []
        group.append(item)
    return out + ([statement([i for i, _ in group], [n for _, n in group])] if group else [])


def c_type(ty: str) -> str:
    return "Option<&TensorDesc>" if ty == "*const TensorDesc" else ty


def idiomatic_unit_axes(kernel: Kernel, owned: set[str]) -> dict[tuple[str, int], str]:
    """The unit-axis generics of an idiomatic entry: an owned output's lengths are dynamic (its `&mut Tensor`
    has the tile's static shape)."""
    names = {p.name for p in kernel.array_params if p.ident in owned}
    return {k: g for k, g in unit_axis_generics(kernel).items() if k[0] not in names}


def emit_launcher(group: KernelGroup, owned_of) -> str:
    """The launcher of one kernel group; `owned_of(kernel)` gives an entry's owned outputs (identifier -> store
    statement). Raises Diagnostic if it cannot be emitted."""
    try:
        return _launcher(group, owned_of)
    except Diagnostic:
        raise
    except Exception as e:  # noqa: BLE001 - an emitter bug fails this kernel only, with its location
        raise Diagnostic(f"internal translator error: {type(e).__name__}: {e}", group.first.loc, "internal",
                         "please report this kernel", kernel=group.base) from None


def _launcher(group: KernelGroup, owned_of) -> str:
    _check_same_signature(group)
    k = group.first
    names = launcher_names(group, LOCALS)
    c_params = [f"{names[n]}: {c_type(ty)}" for n, _kind, ty in signature(group)] + list(GRID_ARGS)
    body = []
    arrays = k.array_params
    body += _packed([(f'("{p.name}", {names[p.name]}, {p.ty.rank})', names[p.name]) for p in arrays],
                    lambda items, bound: f"let [{', '.join(bound)}] = l.arrays([{', '.join(items)}])?;")
    written = sorted(set().union(*(written_arrays(v) for v in group.variants)))
    body.append(f"l.writes(&[{', '.join(names[w] for w in written)}])?;")
    by_dtype = _split_by_dtype(group)
    descs = {p.name: f"{names[p.name]}.desc" for p in arrays}  # an array's descriptor, under its checked `Arr`
    conds = [" && ".join([_pinned_test(names[n], pinned_code(group, n, v)).replace(".is_null()", ".is_none()")
                          for n, v in sorted(variant.pinned.items())]
                         + (_dtype_tests(variant, descs) if by_dtype else [])) for variant in group.variants]
    bodies = [_variant(v, names, owned_of(v)) for v in group.variants]
    if group.pinned_names:
        shown = ", ".join(f"{n}={{{names[n]}{':?' if pinned_kind(group, n) == 'none' else ''}}}"
                          for n in group.pinned_names)
        none = f'Err(l.unspecialized(format!("{shown}")))'
    else:
        none = "Err(l.no_dtype_entry())"
    # entries whose launches differ in the entry only share one body, the entry chosen first
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (v, b) in enumerate(zip(group.variants, bodies)):
        groups.setdefault(tuple(line.replace(_entry(v), "entry") for line in b), []).append(i)
    if len(groups) == 1 and len(group.variants) > 1:  # one body: the entry chosen, else no entry takes the call
        (shared, members), = groups.items()
        chain = " else ".join(f"if {conds[i]} {{ {_entry(group.variants[i])} }}" for i in members)
        body.append(f"let entry = {chain} else {{ return {none}; }};")
        body += shared
        groups = {}
        by_dtype = False
        group_pinned = False
    else:
        group_pinned = bool(group.pinned_names)
    for shared, members in groups.items():
        if len(members) == 1:
            i = members[0]
            lines = bodies[i]
        else:
            chain = " else ".join(f"if {conds[i]} {{ {_entry(group.variants[i])} }}" for i in members[:-1])
            lines = [f"let entry = {chain} else {{ {_entry(group.variants[members[-1]])} }};", *shared]
        cond = " || ".join(f"({conds[i]})" if " && " in conds[i] and len(members) > 1 else conds[i]
                           for i in members)
        if cond:
            body.append(f"if {cond} {{")
            body += ["    " + x for x in lines[:-1]] + [f"    return {lines[-1]};", "}"]
        else:
            body += lines
    if group_pinned or by_dtype:
        body.append(none)
    doc = [f"/// Enqueue `{k.module_name}::{group.base}` on `stream` with the grid, without waiting: 0, or a negative",
           "/// code with a message from `tileport_last_error`."]
    head = ["let grid = [grid_x, grid_y, grid_z];", f'launch("{group.base}", grid, device_id, stream, |l| {{']
    sig = f"pub extern \"C\" fn {group.symbol}({', '.join(c_params)}) -> i32 {{"
    return "\n".join(doc + ["#[unsafe(no_mangle)]", sig] + ["    " + h for h in head] + ["        " + b for b in body]
                     + ["    })", "}"])


def _variant(k: Kernel, names: dict[str, str], owned: dict) -> list[str]:
    """The checks of one entry, then its launch (the last line, an expression)."""
    _check_fits(k, list(k.dtype_vars))
    if len(k.params) + len(k.dtype_vars) + len(derived_dims(k)) + sum(p.ty.rank for p in k.array_params) \
            > MAX_GENERICS:
        raise Diagnostic(f"`{k.name}` has more generic arguments than the launcher holds ({MAX_GENERICS})", k.loc,
                         "launcher", kernel=k.name)
    lines = []
    codes = {}
    for dv in k.dtype_vars:
        members = [p for p in k.array_params if p.ty.dtype == dv]
        if members:
            allowed = list(dict.fromkeys(k.dtype_vars[dv]))
            listed = ", ".join(f"dtype::{L.DTYPE_CONST[d]}" for d in allowed)
            allowed_rs = "FLOATS" if allowed == FLOATS else f"&[{listed}]"
            codes[dv] = fresh_name(f"{dv.name.lower()}_code", set(names.values()))
            lines.append(f"let {codes[dv]} = l.dtype(&[{', '.join(names[p.name] for p in members)}], {allowed_rs})?;")
    fixed: dict[str, list[str]] = {}
    for p in k.array_params:
        if not isinstance(p.ty.dtype, DVar):
            fixed.setdefault(p.ty.dtype, []).append(names[p.name])
    lines += [f"l.require(&[{', '.join(arrs)}], dtype::{L.DTYPE_CONST[dt]})?;" for dt, arrs in fixed.items()]
    consts = tile_dim_consts(k)
    if len(consts) == 1:
        lines.append(f'l.tile("{consts[0]}", {names[consts[0]]})?;')
    elif consts:
        listed = ", ".join(f'("{n}", {names[n]})' for n in consts)
        lines.append(f"l.tiles(&[{listed}])?;")
    derived = {}
    for d in derived_dims(k):
        derived[d] = derived_name(d).lower()
        lines.append(f'let {derived[d]} = l.tile("{derived_name(d)}", {rust_expr(d, names, top=True)})?;')
    call, dtype_lines = _dtype_generics(k, codes)
    lines += dtype_lines
    for st in launch_alignments(k):
        lines += _alignment(k, st, names)
    lines.append(f"let mut call = l.call({_entry(k)});")
    specialization, arguments = _chain(k, names, owned, call, derived)
    lines += _statements(specialization, ";") + _statements(arguments + [".go()"], "")
    return lines


def _statements(calls: list[str], end: str) -> list[str]:
    """`call.a().b();` statements of the calls, each line at most LINE characters (the last ends with `end`)."""
    out, line = [], "call"
    for c in calls:
        if len(line) + len(c) + 1 > LINE and line != "call":
            out.append(line + ";")
            line = "call"
        line += c
    return out + [line + end] if line != "call" else out


def _entry(k: Kernel) -> str:
    return f"crate::entry!({k.module_name}::{k.name})"


def _dtype_generics(k: Kernel, codes: dict) -> tuple[list[str], list[str]]:
    """The dtype generics' calls, and the lines choosing their names when a generic is derived from others
    (`tf32` for `f32` operands) or several are bound together."""
    dvars = list(k.dtype_vars)
    if all(dv in codes for dv in dvars) and len(dvars) <= 1:
        return [f".dtype({codes[dv]})" for dv in dvars], []
    bound = [dv for dv in dvars if dv in codes]
    names = [f"{dv.name.lower()}_name" for dv in dvars]
    lines = [f"let [{', '.join(names)}] = match ({', '.join(codes[dv] for dv in bound)},) {{"]
    for combo in dict.fromkeys(zip(*(k.dtype_vars[dv] for dv in dvars))):
        pat = ", ".join(f"dtype::{L.DTYPE_CONST[combo[dvars.index(dv)]]}" for dv in bound)
        lines.append(f"    ({pat},) => [{', '.join(repr(d).replace(chr(39), chr(34)) for d in combo)}],")
    lines.append('    _ => return Err(Error::new(Code::DType, "unsupported dtype combination".to_string())),')
    lines.append("};")
    return [f".dtype_name({n})" for n in names], lines


def _alignment(k: Kernel, st: Let, names: dict[str, str]) -> list[str]:
    """A view's alignment as cuTile Python's launcher specializes it (ffi.py `_alignment_lines`), with the
    element size from the array's dtype code."""
    array = next(p for p in k.params if p.name == st.op.attr("view_of"))
    desc = f"{names[array.name]}.desc"
    terms = [f"{start} * size" if last
             else f"if {desc}.strides[{axis}] * size % 16 == 0 {{ 0 }} else {{ {start} * size }}"
             for axis, start, last in st.op.attr("steps")]
    gcd16 = "fold(16i64, |d, t| if t == 0 { d } else { d.min(t & -t) })"
    return [f"let {alignment_generic(st).lower()}: i32 = {{",
            f"    let size = dtype::size({desc}.dtype).unwrap_or(1);",
            f"    [{', '.join(terms)}].into_iter().{gcd16} as i32",
            "};"]


def _chain(k: Kernel, names: dict[str, str], owned: dict, dtype_calls: list[str], derived: dict
           ) -> tuple[list[str], list[str]]:
    """The `Call` methods of one entry's launch, in the order its key, parameters and generics take them:
    (the specialization's, the arguments')."""
    out = [".python_claims()"] if claims_cutile_python(k) else []
    out += dtype_calls
    for p in k.const_params:
        kind = {"bool": "bool", "float": "float"}.get(p.const_type, "int")
        out.append(f".{kind}({names[p.name]})")
    out += [f".int({derived[d]})" for d in derived_dims(k)]
    out += [f".aligned({alignment_generic(st).lower()})" for st in launch_alignments(k)]
    unit = idiomatic_unit_axes(k, set(owned))
    with_axes = list(dict.fromkeys(a for a, _axis in unit))
    if with_axes:
        out.append(f".unit_axes(&[{', '.join(_arr(k.param(a), names) for a in with_axes)}])")
    spec, out = out, [f'.stride({names[a]}, {d}, "{a}_stride{d}")' for a, d in stride_params(k)]
    arrays: list[str] = []  # consecutive array arguments, passed together
    for p in k.params:
        if p.is_array and p.ident not in owned:
            arrays.append(_arr(p, names))
            continue
        if arrays:
            out.append(f".arrays(&[{', '.join(arrays)}])")
            arrays = []
        if p.is_array:
            tile = ", ".join(_host_dim(d, names, derived) for d in owned[p.ident].op.args[1].ty.shape)
            out.append(f".owned({_arr(p, names)}, &[{tile}])")
        elif not p.is_const:
            out.append(f'.scalar("{p.ident}", {names[p.name]})')
    if arrays:
        out.append(f".arrays(&[{', '.join(arrays)}])")
    return spec, out


def _arr(p, names: dict[str, str]) -> str:
    return names[p.name] if p.ident == p.name else f'{names[p.name]}.ident("{p.ident}")'


def _host_dim(d, names: dict[str, str], derived: dict) -> str:
    if isinstance(d, int):
        return f"{d}i32"
    if isinstance(d, Sym):
        return names[d.name]
    return derived[d]
