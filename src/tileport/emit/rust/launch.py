"""The idiomatic rendering's C-ABI launchers: a few lines each, over the crate's one generic launch path.

The C symbols, argument order and C types are those of ffi.py's launchers (the Python runtime calls both the
same way); an array descriptor crosses as `Desc` (`Option<&TensorDesc>`), a pointer that may be null, as before. The
launcher checks its arguments through `Launch` and describes the launch to `Call` (support.rs, from
templates/launch.rs), which keeps the key, the kernel parameters and the specialization in the order ffi.py's
launchers build them, so both launch the same function with the same parameters.
"""

from __future__ import annotations

import itertools
import re

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

MAX_GENERICS = 64  # templates/launch.rs: the bound a crate's support.rs keeps unless an entry needs more
MAX_GENERICS_LINE = "pub const MAX_GENERICS: usize = {};"
FLOATS = ["f32", "f16", "bf16"]  # templates/launch.rs `FLOATS`
# Locals of every launcher; C parameter names must not collide with them.
LOCALS = frozenset({"grid", "grid_x", "grid_y", "grid_z", "device_id", "stream", "l", "call", "launch", "dtype",
                    "arrays", "layout"})
WIDTH = 100  # rustfmt's line width
LINE = 88  # a launch's calls are grouped in statements of at most this many characters (rustfmt's width less indent)
TOP = WIDTH - 8  # the same, for a launch at the top of the launcher's closure (not in an `if`)


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
    return "Desc" if ty == "*const TensorDesc" else ty


CHECK = re.compile(r"^l(\.(?:writes|require|tiles)\(.*\)\?);$")  # a check that returns the `Launch`


def chained_checks(lines: list[str], width: int = LINE) -> list[str]:
    """Consecutive `l.check(..)?;` statements as `l.a(..)?.b(..)?;` chains of at most `width` characters."""
    out: list[str] = []
    for line in lines:
        m = CHECK.match(line)
        prev = CHECK.match(out[-1][:-1] + ";") if out and out[-1].endswith("?;") else None
        if m and prev and len(out[-1]) + len(m.group(1)) <= width:
            out[-1] = out[-1][:-1] + m.group(1) + ";"
        else:
            out.append(line)
    return out


def exhaustive(group: KernelGroup) -> bool:
    """The entries cover every value of the constants they are specialized for (booleans only): the last
    one takes what the others do not, and no call is left unspecialized."""
    names = group.pinned_names
    pins = {tuple(v.pinned.get(n) for n in names) for v in group.variants}
    return (bool(names) and all(pinned_kind(group, n) == "bool" for n in names)
            and all(set(v.pinned) == set(names) for v in group.variants) and len(pins) == 2 ** len(names)
            == len(group.variants))


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


def _unspecialized_message(group: KernelGroup, names) -> str:
    """format!(..) of the pinned parameters' values; an array pinned to None shows whether it was given (an
    optional array descriptor has no Debug form)."""
    shown, nones = [], []
    for n in group.pinned_names:
        if pinned_kind(group, n) == "none":
            shown.append(f"{n}={{}}")
            nones.append(f'if {names[n]}.is_none() {{ "None" }} else {{ "an array" }}')
        else:
            shown.append(f"{n}={{{names[n]}}}")
    args = "".join(", " + a for a in nones)
    return f'format!("{", ".join(shown)}"{args})'


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
    bodies = [_variant(v, names, owned_of(v), "entry") for v in group.variants]  # the entry chosen before
    if group.pinned_names:
        none = f"Err(l.unspecialized({_unspecialized_message(group, names)}))"
    else:
        none = "Err(l.no_dtype_entry())"
    covered = not by_dtype and exhaustive(group)  # the last entry needs no test
    tables: list[str] = []  # the entry tables the launcher reads, written before it
    table_name = group.base.upper()
    # entries whose launches differ in the entry only share one body, the entry chosen first
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, b in enumerate(bodies):
        groups.setdefault(tuple(b), []).append(i)
    if len(groups) == 1 and len(group.variants) > 1:  # one body: the entry chosen, else no entry takes the call
        (members,) = groups.values()
        if _tabled(group, members, covered):
            tables.append(_table(group, members, table_name))
            body.append(f"let entry = l.entry(&{table_name}, [{_pin_values(group, names)}])?;")
        else:
            body.append(_entry_choice(group, members, conds, none, covered))
        body += _variant(group.variants[members[0]], names, owned_of(group.variants[members[0]]), "entry", TOP)
        groups = {}
        by_dtype = False
        group_pinned = False
    elif len(groups) > 1 and not by_dtype and (laid := _layout_lines(group, names, owned_of, table_name)):
        table, lines = laid  # launches that differ in their arrays' dtypes and strides: one, from the table
        tables.append(table)
        body += lines
        groups = {}
        group_pinned = False
    else:
        group_pinned = bool(group.pinned_names) and not covered
    for n, members in enumerate(groups.values()):
        last = covered and n == len(groups) - 1  # launched without a test
        body += _arm(group, members, conds, names, owned_of, last, tables)
    if group_pinned or by_dtype:
        body.append(none)
    doc = [f"/// Enqueue `{k.module_name}::{group.base}` on `stream`, not waiting: 0, or a negative code (see "
           "`tileport_last_error`)."]
    head = f'launch("{group.base}", [grid_x, grid_y, grid_z], device_id, stream, |l| {{'
    head = [head] if len(head) + 4 <= WIDTH else ["let grid = [grid_x, grid_y, grid_z];",
                                                  f'launch("{group.base}", grid, device_id, stream, |l| {{']
    sig = f"pub extern \"C\" fn {group.symbol}({', '.join(c_params)}) -> i32 {{"
    return "\n\n".join(tables + ["\n".join(doc + ["#[unsafe(no_mangle)]", sig] + ["    " + h for h in head]
                                            + ["        " + b for b in chained_checks(body, TOP)] + ["    })", "}"])])


def _arm(group: KernelGroup, members: list[int], conds: list[str], names: dict[str, str], owned_of, last: bool,
         tables: list[str]) -> list[str]:
    """The launch of the entries `members`, which share one body: in `if <their constants> { .. }` (an
    `if let` of their table's entry), unless `last` (the call takes no other entry)."""
    first = group.variants[members[0]]
    cond = " || ".join(f"({conds[i]})" if " && " in conds[i] and len(members) > 1 else conds[i] for i in members)
    nested = bool(cond) and not last
    if len(members) == 1:
        lines = _variant(first, names, owned_of(first), _entry(first), LINE if nested else TOP)
    elif nested and _tabled(group, members, False):  # the group's table finds the entry
        name = f"{group.base.upper()}_{len(tables)}"
        tables.append(_table(group, members, name))
        cond = f"let Some(entry) = {name}.find([{_pin_values(group, names)}])"
        lines = _variant(first, names, owned_of(first), "entry", LINE)
    else:
        chain = " else ".join(f"if {conds[i]} {{ {_entry(group.variants[i])} }}" for i in members[:-1])
        lines = [f"let entry = {chain} else {{ {_entry(group.variants[members[-1]])} }};",
                 *_variant(first, names, owned_of(first), "entry", LINE if nested else TOP)]
    if not nested:
        return lines
    return [f"if {cond} {{", *["    " + x for x in chained_checks(lines[:-1])], f"    return {lines[-1]};", "}"]


def _layout_lines(group: KernelGroup, names: dict[str, str], owned_of, name: str) -> tuple[str, list[str]] | None:
    """(the `Layouts` table, the launch) of a group whose entries' launches differ only in their arrays' dtypes
    (one element type generic each) and stride arguments: one launch reads both from the entry's row. None
    for any other group."""
    every = list(range(len(group.variants)))
    if not _tabled(group, every, False):
        return None
    if not all(len(k.dtype_vars) == 1 and any(p.ty.dtype in k.dtype_vars for p in k.array_params)
               for k in group.variants):
        return None
    strided = any(stride_params(k) for k in group.variants)
    bodies = {tuple(_variant(k, names, owned_of(k), "entry", TOP, layout=strided)) for k in group.variants}
    if len(bodies) != 1:
        return None
    (body,) = bodies
    arrays = ", ".join(names[p.name] for p in group.first.array_params)
    return (_table(group, every, name, _layout),
            [f"let arrays = [{arrays}];", f"let (entry, layout) = l.layout(&{name}, [{_pin_values(group, names)}])?;",
             *body])


def _layout(k: Kernel) -> str:
    """The `Layout` of an entry: its arrays' dtypes and its stride arguments."""
    arrays = [p.name for p in k.array_params]
    dtypes = ", ".join("GENERIC" if isinstance(p.ty.dtype, DVar) else f"dtype::{L.DTYPE_CONST[p.ty.dtype]}"
                       for p in k.array_params)
    strides = ", ".join(f'({arrays.index(a)}, {d}, "{a}_stride{d}")' for a, d in stride_params(k))
    return f"Layout {{ dtypes: &[{dtypes}], strides: &[{strides}] }}"


def _tabled(group: KernelGroup, members: list[int], covered: bool) -> bool:
    """Whether the entries `members` are chosen from a table (`Entries`): several of them, each taking a value
    of every constant that selects one, all booleans or all integers. One boolean that selects between two
    entries indexes them in place (`_entry_choice`)."""
    names = group.pinned_names
    kinds = {pinned_kind(group, n) for n in names}
    return (len(members) > 1 and bool(names) and kinds in ({"bool"}, {"int"})
            and all(set(group.variants[i].pinned) == set(names) for i in members)
            and not (covered and len(names) == 1))


def _pin_values(group: KernelGroup, names: dict[str, str]) -> str:
    return ", ".join(names[n] for n in group.pinned_names)


def _table(group: KernelGroup, members: list[int], name: str, layout=None) -> str:
    """The `Entries` table of `members`: a row per entry, the values of its constants and the entry (and its
    `layout(kernel)`: a `Layouts` table)."""
    kind = pinned_kind(group, group.pinned_names[0])
    ty = "bool" if kind == "bool" else "i32"
    listed = ", ".join(f'"{n}"' for n in group.pinned_names)

    def value(v) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)
    rows = [f"        ([{', '.join(value(pinned_code(group, n, group.variants[i].pinned[n])) for n in group.pinned_names)}], "
            f"{_entry(group.variants[i])}{'' if layout is None else ', ' + layout(group.variants[i])}),"
            for i in members]
    k = group.first
    kind, what = ("Entries", "") if layout is None else ("Layouts", ", with their arrays' dtypes and strides")
    return "\n".join([f"/// The entries of `{k.module_name}::{group.base}` and the constants each is specialized for{what}.",
                      "#[rustfmt::skip]",
                      f"const {name}: {kind}<{ty}, {len(group.pinned_names)}> = {kind} {{",
                      f"    names: [{listed}],", "    rows: &[", *rows, "    ],", "};"])


def _entry_choice(group: KernelGroup, members: list[int], conds: list[str], none: str, covered: bool) -> str:
    """`let entry = ..;`: the entry whose constants the call's are. The entries of every value of one boolean
    are a table indexed by it."""
    entries = [_entry(group.variants[i]) for i in members]
    if covered and len(group.pinned_names) == 1:
        name = group.pinned_names[0]
        by_value = sorted(members, key=lambda i: group.variants[i].pinned[name])
        table = ", ".join(_entry(group.variants[i]) for i in by_value)
        return f"let entry = [{table}][{conds[by_value[1]]} as usize];"
    last = entries[-1] if covered else f"return {none};"
    chain = " else ".join(f"if {conds[i]} {{ {e} }}" for i, e in zip(members, entries[:-1] if covered else entries))
    return f"let entry = {chain} else {{ {last} }};"


def _variant(k: Kernel, names: dict[str, str], owned: dict, entry: str, width: int = LINE,
             layout: bool | None = None) -> list[str]:
    """The checks of one entry, then its launch (the last line, an expression) in statements of at most `width`
    characters. With a `layout` (`_layout_lines`; True: it passes strides), the arrays' dtypes and the strides
    come from it."""
    _check_fits(k, list(k.dtype_vars))
    lines = []
    codes = {}
    for dv in k.dtype_vars:
        members = [p for p in k.array_params if p.ty.dtype == dv]
        if members:
            allowed = list(dict.fromkeys(k.dtype_vars[dv]))
            listed = ", ".join(f"dtype::{L.DTYPE_CONST[d]}" for d in allowed)
            allowed_rs = "FLOATS" if allowed == FLOATS else f"&[{listed}]"
            codes[dv] = fresh_name(f"{dv.name.lower()}_code", set(names.values()))
            lines.append(f"let {codes[dv]} = l.typed(&arrays, layout, {allowed_rs})?;" if layout is not None else
                         f"let {codes[dv]} = l.dtype(&[{', '.join(names[p.name] for p in members)}], {allowed_rs})?;")
    fixed: dict[str, list[str]] = {}
    for p in k.array_params:
        if not isinstance(p.ty.dtype, DVar) and layout is None:
            fixed.setdefault(p.ty.dtype, []).append(names[p.name])
    lines += [f"l.require(&[{', '.join(arrs)}], dtype::{L.DTYPE_CONST[dt]})?;" for dt, arrs in fixed.items()]
    consts = tile_dim_consts(k)
    if consts:
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
    specialization, arguments = _chain(k, names, owned, call, derived, layout)
    return lines + _statements(f"l.call({entry})", specialization + arguments + [".go()"], width)


def generic_count(k: Kernel) -> int:
    """At most how many generic arguments a launch of `k` pushes (its parameters, dtypes, derived constants and
    array extents)."""
    return len(k.params) + len(k.dtype_vars) + len(derived_dims(k)) + sum(p.ty.rank for p in k.array_params)


def launch_rs(template: str, kernels: list[Kernel]) -> str:
    """templates/launch.rs with room for the generic arguments of the largest entry among `kernels` (the
    template's bound where all fit, so that crates within it keep the template's text)."""
    most = max([MAX_GENERICS, *(generic_count(k) for k in kernels)])
    line = MAX_GENERICS_LINE.format(MAX_GENERICS)
    if line not in template:
        raise ValueError(f"templates/launch.rs lost `{line}`")
    return template.replace(line, MAX_GENERICS_LINE.format(most))


def _statements(start: str, calls: list[str], width: int) -> list[str]:
    """The launch `start` and its calls as `let call = call.a().b();` statements of at most `width` characters,
    the last one the launch's expression (`Call` is a by-value builder)."""
    out, line = [], start
    for i, c in enumerate(calls):
        # a statement binds `call`; the last one is the launcher's value (`return ..;` in an `if`)
        frame = len("let call = ;") if i < len(calls) - 1 else len("return ;")
        if len(line) + len(c) + frame > width and line != "call":
            out.append(f"let call = {line};")
            line = "call"
        line += c
    return out + [line]


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


def _chain(k: Kernel, names: dict[str, str], owned: dict, dtype_calls: list[str], derived: dict,
           layout: bool | None = None) -> tuple[list[str], list[str]]:
    """The `Call` methods of one entry's launch, in the order its key, parameters and generics take them:
    (the specialization's, the arguments')."""
    out = [] if claims_cutile_python(k) else [".cutile_claims()"]
    out += dtype_calls
    for p in k.const_params:
        kind = {"bool": "bool", "float": "float"}.get(p.const_type, "int")
        out.append(f".{kind}({names[p.name]})")
    out += [f".int({derived[d]})" for d in derived_dims(k)]
    out = _ints(out) + [f".aligned({alignment_generic(st).lower()})" for st in launch_alignments(k)]
    unit = idiomatic_unit_axes(k, set(owned))
    with_axes = list(dict.fromkeys(a for a, _axis in unit))
    passed = [p.name for p in k.params if p.is_array and p.ident not in owned]
    # an array argument's unit-axis generics come with it (`unit_arrays`) when they are the last generics, in
    # the order of the arguments; else they are given first (`unit_axes`)
    with_arrays = with_axes == [a for a in passed if a in with_axes]
    if with_axes and not with_arrays:
        out.append(f".unit_axes(&[{', '.join(_arr(k.param(a), names) for a in with_axes)}])")
    spec, out = out, [f'.stride({names[a]}, {d}, "{a}_stride{d}")' for a, d in stride_params(k)]
    if layout is not None:
        out = [".strides(&arrays, layout)"] if layout else []
    arrays: list[str] = []  # consecutive array arguments, passed together

    def flush():
        for unit_run, run in itertools.groupby(arrays, lambda p: with_arrays and p.name in with_axes):
            out.append(f".{'unit_arrays' if unit_run else 'arrays'}(&[{', '.join(_arr(p, names) for p in run)}])")
        arrays.clear()
    for p in k.params:
        if p.is_array and p.ident not in owned:
            arrays.append(p)
            continue
        flush()
        if p.is_array:
            tile = ", ".join(_host_dim(d, names, derived) for d in owned[p.ident].op.args[1].ty.shape)
            out.append(f".owned({_arr(p, names)}, &[{tile}])")
        elif not p.is_const and _hinted(p):
            out.append(f'.scalar("{p.ident}", {names[p.name]})')
        elif not p.is_const:
            out.append(f".arg({names[p.name]})")
    flush()
    if layout is not None:  # the launcher's arrays, in order: the ones the layout reads
        every = f"(&[{', '.join(names[p.name] for p in k.array_params)}])"
        out = [c.replace(every, "(&arrays)") for c in out]
    return spec, out


def _hinted(p) -> bool:
    """A scalar whose value is a divisibility hint of the launch (templates/launch.rs `Scalar`): an integer."""
    return L.RUST_DTYPE[p.ty.dtype] in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def _ints(calls: list[str]) -> list[str]:
    """Consecutive `.int(a).int(b)` generics as one `.ints(&[a, b])`."""
    out: list[str] = []
    for c in calls:
        value = c[len(".int("):-1] if c.startswith(".int(") else None
        if value is not None and out and out[-1].startswith((".int(", ".ints(")):
            prev = out[-1]
            values = prev[len(".ints(&["):-2] if prev.startswith(".ints(") else prev[len(".int("):-1]
            out[-1] = f".ints(&[{values}, {value}])"
        else:
            out.append(c)
    return out


def _arr(p, names: dict[str, str]) -> str:
    return names[p.name] if p.ident == p.name else f'{names[p.name]}.ident("{p.ident}")'


def _host_dim(d, names: dict[str, str], derived: dict) -> str:
    if isinstance(d, int):
        return f"{d}i32"
    if isinstance(d, Sym):
        return names[d.name]
    return derived[d]
