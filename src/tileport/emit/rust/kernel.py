"""Kernel model -> cutile-rs device code (one `#[cutile::entry]` function per kernel).

Faithful translation: every model operation becomes one typed `let`, spelled from the lowering
table, so the generated Tile IR matches cuTile Python's op for op. Views are created once, at the
top of the kernel, as cuTile Python hoists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tileport.diagnostics import Diagnostic
from tileport.emit.rust import lowering as L
from tileport.emit.rust.names import fresh_name
from tileport.model import types as T
from tileport.model.ir import (Atom, Block, Break, CDim, Continue, Do, For, If, Kernel, Let, Lit, Op, Ref, While,
                               Return, walk)
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, DVar, Dim, DimOp, PtrT, ScalarT, Sym, TileT, TokenT
from tileport.passes.uses import atoms_of, bindings_needing_mut, updated_params, use_counts

INDENT = "    "


# ---------------------------------------------------------------- names and types

def derived_name(d: DimOp) -> str:
    """A readable const-generic name for constant arithmetic used in a type position."""
    ops = {"+": "PLUS", "-": "MINUS", "*": "X", "//": "DIV", "%": "MOD"}

    def part(x: Dim) -> str:
        if isinstance(x, DimOp):
            lhs, rhs = x.lhs, x.rhs
            if x.op in ("*", "+") and isinstance(lhs, int):
                lhs, rhs = rhs, lhs  # `2 * BLOCK` reads as BLOCK_X_2
            return f"{part(lhs)}_{ops[x.op]}_{part(rhs)}"
        return str(x)
    name = part(d)
    return name if not name[0].isdigit() else f"C{name}"


def type_dims(kernel: Kernel) -> list[Dim]:
    """Every dimension in a type position (tile and pointer-tile shapes, `shape=` attributes), in
    first-use order."""
    found: dict[Dim, None] = {}

    def add_shape(shape) -> None:
        for d in shape or ():
            found.setdefault(d, None)
    for st in walk(kernel.body):
        if isinstance(st, (Let, Do)):
            if isinstance(st.op.ty, (TileT, PtrT)):
                add_shape(st.op.ty.shape)
            add_shape(st.op.attr("shape"))
    return list(found)


def derived_dims(kernel: Kernel) -> list[DimOp]:
    """Every constant expression that appears in a type position, in first-use order."""
    return [d for d in type_dims(kernel) if isinstance(d, DimOp)]


def array_roots(kernel: Kernel) -> dict[str, str]:
    """The parameter each view of the kernel (`Array.slice`: a `make_view`) looks into, by the view's name:
    a view has its array's strides."""
    parent = {st.name: st.op.args[1].name for st in walk(kernel.body)
              if isinstance(st, Let) and st.op.kind == OpKind.MAKE_VIEW}
    roots = {}
    for name in parent:
        root = name
        while root in parent:
            root = parent[root]
        roots[name] = root
    return roots


VIEW_PLUMBING = (OpKind.MAKE_VIEW, OpKind.ASSUME_DIV_BY)  # dropped when nothing reads them (cuTile Python's dead code)


def unused_views(kernel: Kernel) -> set[int]:
    """The views (`Array.slice`) nothing reads, and the alignment assumptions only they read, by statement id:
    a view sliced again is not made itself, as cuTile Python makes no tensor view nobody uses."""
    dead: frozenset[int] = frozenset()
    while True:
        counts = use_counts(kernel, dead)
        new = dead | {id(st) for st in walk(kernel.body) if isinstance(st, Let) and st.op.kind in VIEW_PLUMBING
                      and not st.update and not counts[id(st)]}
        if new == dead:
            return set(dead)
        dead = frozenset(new)


def launch_alignments(kernel: Kernel) -> list[Let]:
    """The view alignment assumptions (`Array.slice`) whose divisor the launcher computes from the strides
    (`at_launch`), in first-use order: each is an entry const generic (`alignment_generic`)."""
    dead = unused_views(kernel)
    return [st for st in walk(kernel.body) if isinstance(st, Let) and st.op.kind == OpKind.ASSUME_DIV_BY
            and st.op.attr("at_launch") and id(st) not in dead]


def alignment_generic(st: Let) -> str:
    return st.name.upper()


def unit_axis_generics(kernel: Kernel) -> dict[tuple[str, int], str]:
    """The entry const generic of each array parameter axis whose static length the launcher chooses, by
    (parameter, axis), in parameter order: 1 where the launch's length is 1, -1 (dynamic) elsewhere. cuTile
    Python's launcher compiles a length-1 axis as the constant 1 (a kernel per such launch); a port that kept
    it dynamic lost what that constant folds (a split axis of length 1: 3x the instructions). Only kernels
    whose source launcher does so (`Kernel.launch_unit_axes`) get them."""
    if not kernel.launch_unit_axes:
        return {}
    taken = ({dv.name for dv in kernel.dtype_vars} | {p.name for p in kernel.const_params}
             | {derived_name(d) for d in derived_dims(kernel)}
             | {alignment_generic(st) for st in launch_alignments(kernel)})
    bounding = loop_bound_arrays(kernel)
    return {(p.name, axis): fresh_name(f"{p.ident.upper()}_LEN{axis}", taken)
            for p in kernel.array_params if p.ident not in bounding for axis in range(p.ty.rank)}


LENGTH_READS = (OpKind.ARRAY_DIM, OpKind.NUM_TILES)  # ops whose value is a function of an array's lengths
# ops whose value the JIT never knows (memory, whatever their operands): a length reaching a loop bound only
# through one of them cannot fold that bound
MEMORY_READS = (OpKind.LOAD, OpKind.GATHER, OpKind.LOAD_PTR, OpKind.ATOMIC_RMW, OpKind.ATOMIC_CAS,
                OpKind.ATOMIC_RMW_PTR, OpKind.ATOMIC_CAS_PTR)


def loop_bound_arrays(kernel: Kernel) -> set[str]:
    """The array parameters (idents) a `for` loop's bounds depend on through a length. Their axes keep dynamic
    lengths: cutile 0.5.0 states `assume_bounds [start, stop - 1]` for a loop whose bounds it knows, and a
    loop it knows to be empty (`for c in 1..n_chunks`, n_chunks folded to 1 by a static length) makes that
    assumption invalid, so the kernel would not compile (softmax_online at [1, 1]). A whole array, not one
    axis: `unit_axis` decides an array's static axes together (see support.rs)."""
    roots = array_roots(kernel)
    lets = [st for st in walk(kernel.body) if isinstance(st, Let)]
    depends: dict[str, set[str]] = {}
    changed = True
    while changed:  # to a fixpoint: a loop-carried value may be read before its reassignment in the body
        changed = False
        for st in lets:
            found = set()
            if st.op.kind in LENGTH_READS and isinstance(st.op.args[0], Ref):
                found.add(roots.get(st.op.args[0].name, st.op.args[0].name))
            for a in st.op.args if st.op.kind not in MEMORY_READS else ():
                if isinstance(a, Ref):
                    found |= depends.get(a.name, set())
            if not found <= depends.get(st.name, set()):
                depends[st.name] = depends.get(st.name, set()) | found
                changed = True
    return {array for st in walk(kernel.body) if isinstance(st, For)
            for atom in (st.start, st.stop, st.step) if isinstance(atom, Ref)
            for array in depends.get(atom.name, ())}


UNIT_AXIS_CAPTURE = -1  # a unit-axis generic's value for the capture signature (no length known): dynamic


def stride_params(kernel: Kernel) -> list[tuple[str, int]]:
    """(array, dim) of every non-last stride a gather/scatter or a view needs, sorted.

    cutile 0.5.0 kernels cannot read a stride the JIT specialized to a constant (a column array's
    row stride is 1), so the launcher passes these strides as extra i32 arguments, first: after the
    arrays they would move the kernel's reads past the constant-bank line cuTile Python's reads
    stay in (softmax_gather 16-bit: 0.3-0.9 % slower on the H200,
    bench/results/2026-12-03-h200-param-offsets.json).
    """
    roots = array_roots(kernel)
    found: dict[tuple[str, int], None] = {}
    for st in walk(kernel.body):
        if isinstance(st, Let) and st.op.kind == OpKind.ARRAY_STRIDE:
            name = st.op.args[0].name
            found.setdefault((roots.get(name, name), st.op.attr("axis")), None)
    return sorted(found)


def stride_param_name(array: str, dim: int) -> str:
    return f"{array}_stride{dim}"


def dim_rs(d: Dim) -> str:
    if isinstance(d, DimOp):
        return derived_name(d)
    return str(d)


def shape_rs(shape) -> str:
    return ", ".join(dim_rs(d) for d in shape)


def dtype_rs(dt) -> str:
    return dt.name if isinstance(dt, DVar) else L.RUST_DTYPE[dt]


def tile_rs(ty: TileT) -> str:
    return f"Tile<{dtype_rs(ty.dtype)}, {{ [{shape_rs(ty.shape)}] }}>"


def type_rs(ty) -> str:
    if isinstance(ty, TileT):
        return tile_rs(ty)
    if isinstance(ty, ScalarT):
        return dtype_rs(ty.dtype)
    if isinstance(ty, ArrayT):
        dims = ", ".join(["-1"] * ty.rank)
        return f"&Tensor<{dtype_rs(ty.dtype)}, {{ [{dims}] }}>"
    if isinstance(ty, PtrT):
        return f"PointerTile<*mut {dtype_rs(ty.dtype)}, {{ [{shape_rs(ty.shape)}] }}>"
    if isinstance(ty, TokenT):
        return "Token"
    raise TypeError(ty)


def float_lit(v: float, suffix: str) -> str:
    if math.isinf(v):
        return f"{suffix}::{'INFINITY' if v > 0 else 'NEG_INFINITY'}"
    if math.isnan(v):
        return f"{suffix}::NAN"
    text = repr(float(v))
    if "e" in text or "E" in text:
        mantissa, exp = text.lower().split("e")
        if "." not in mantissa:
            mantissa += ".0"
        text = f"{mantissa}e{int(exp)}"
    return f"{text}{suffix}"


def lit_rs(value, dt: str) -> str:
    if dt == "bool":
        return "true" if value else "false"
    if dt in ("f32", "f64"):
        return float_lit(float(value), dt)
    return f"{int(value)}{dt}"


def const_expr_rs(d: Dim) -> str:
    """A compile-time integer in value position (i32)."""
    if isinstance(d, int):
        return f"{d}i32"
    if isinstance(d, Sym):
        return d.name
    ops = {"+": "+", "-": "-", "*": "*", "//": "/", "%": "%"}
    return f"({const_expr_rs(d.lhs)} {ops[d.op]} {const_expr_rs(d.rhs)})"


# ---------------------------------------------------------------- the emitter

@dataclass
class KernelEmitter:
    kernel: Kernel
    source: str = ""  # the source path as recorded in generated files
    shims: set[str] = field(default_factory=set)
    rows: dict = field(default_factory=lambda: L.ROWS_BY_KIND)  # kind -> lowering rows, first match wins

    def __post_init__(self):
        self.lines: list[str] = []
        self.view_decls: list[str] = []
        self.needs_mut = bindings_needing_mut(self.kernel)
        self.taken = {p.ident for p in self.kernel.params} | {st.name for st in walk(self.kernel.body)
                                                             if isinstance(st, Let)}
        self.arrays = {p.ident: p.ty for p in self.kernel.params if p.is_array}
        self.roots = array_roots(self.kernel)  # view -> the parameter it looks into
        self.arrays |= {st.name: st.op.ty for st in walk(self.kernel.body)
                        if isinstance(st, Let) and st.op.kind == OpKind.MAKE_VIEW}
        self.local_views: list[str] = []  # partition views of views, emitted before the statement using them
        self.unused = unused_views(self.kernel)
        self.alignments = {id(st.op): alignment_generic(st) for st in launch_alignments(self.kernel)}
        self.unit_axes = {(self.kernel.param(a).ident, axis): g
                          for (a, axis), g in self.unit_axis_generics().items()}

    def unit_axis_generics(self) -> dict[tuple[str, int], str]:
        return unit_axis_generics(self.kernel)

    # ---- helpers
    def fail(self, op: Op, message: str) -> Diagnostic:
        return Diagnostic(message, op.loc, op.kind, kernel=self.kernel.name)

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.taken)

    def kind(self, dt) -> str:
        """'f' float, 'i' signed int, 'u' unsigned, 'b' bool (a generic takes its values' kind)."""
        values = T.concrete_dtypes(dt, self.kernel.dtype_vars)
        kinds = {"b" if v == "bool" else "f" if T.is_float(v) else "u" if v.startswith("u") else "i"
                 for v in values}
        if len(kinds) != 1:
            raise Diagnostic(f"generic {dt} mixes dtype kinds {sorted(kinds)}", self.kernel.loc, "dtype",
                             kernel=self.kernel.name)
        return kinds.pop()

    def atom(self, a: Atom) -> str:
        if isinstance(a, Ref):
            return a.name
        if isinstance(a, CDim):
            return const_expr_rs(a.dim)
        dt = a.ty.dtype
        if isinstance(dt, DVar) or dt not in L.RUST_DTYPE:
            raise Diagnostic(f"literal {a.value!r} needs a concrete scalar type", self.kernel.loc, "literal",
                             kernel=self.kernel.name)
        return lit_rs(a.value, dt)

    def index(self, atoms) -> str:
        return ", ".join(self.atom(a) for a in atoms)

    def view(self, array: str, shape, padding: str, order, mutable: bool) -> str:
        """The partition view of one load/store/num_tiles site (cuTile Python makes one per site): at the top
        of the kernel for a parameter, before the statement for a view made in the kernel (`Array.slice`)."""
        dt = self.arrays[array].dtype
        name = self.fresh(f"{array}_out" if mutable else f"{array}_view")
        ty = f"{'PartitionMut' if mutable else 'Partition'}<{dtype_rs(dt)}, {{ [{shape_rs(shape)}] }}>"
        decls = self.local_views if array in self.roots else self.view_decls
        if mutable:
            expr = L.STORE_VIEW.format(array=array, shape=shape_rs(shape))
            decls.append(f"let mut {name}: {ty} = {expr};")
        else:
            dim_map = f"const_array![{', '.join(map(str, order))}]" if order else "dim_map::Identity"
            tensor = f"&{array}" if array in self.roots else array
            expr = L.LOAD_VIEW.format(tensor=tensor, array=array, shape=shape_rs(shape), padding=L.PADDING[padding],
                                      dim_map=dim_map)
            decls.append(f"let {name}: {ty} = {expr};")
        return name

    def take_local_views(self) -> list[str]:
        out, self.local_views = self.local_views, []
        return out

    # ---- entry
    def emit(self) -> str:
        k = self.kernel
        body = self.block(k.body, 2)
        generics = self.generic_params()
        out = self.doc_lines()
        out.append(f"{INDENT}#[cutile::entry({self.entry_attrs()})]")
        gen = f"<{', '.join(generics)}>" if generics else ""
        out.append(f"{INDENT}{self.ENTRY_FN} {k.name}{gen}({', '.join(self.entry_params())}) {{")
        out += [INDENT * 2 + d for d in self.view_decls]
        types = {p.ident: self.param_type(p) for p in k.params if not p.is_const}  # Rust parameters are immutable
        out += [f"{INDENT * 2}let mut {name}: {types[name]} = {name};" for name in updated_params(k)]
        out += body
        out.append(f"{INDENT}}}")
        return "\n".join(out)

    ENTRY_FN = "pub unsafe fn"  # R1: every entry is `unsafe` (its views and stores are)

    def doc_lines(self) -> list[str]:
        k = self.kernel
        out = [f"{INDENT}/// {line}".rstrip() for line in k.doc.splitlines()] if k.doc else []
        out.append(f"{INDENT}/// Translated from `{self.source or k.loc.file}:{k.loc.line}`.")
        return out

    def generic_params(self) -> list[str]:
        k = self.kernel
        generics = [f"{v.name}: ElementType" for v in k.dtype_vars]
        for p in k.const_params:
            generics.append(f"const {p.name}: {'bool' if p.const_type == 'bool' else 'i32'}")
        generics += [f"const {derived_name(d)}: i32" for d in derived_dims(k)]
        generics += [f"const {alignment_generic(st)}: i32" for st in launch_alignments(k)]
        generics += [f"const {g}: i32" for g in self.unit_axes.values()]
        return generics

    def entry_params(self) -> list[str]:
        k = self.kernel
        params = [f"{stride_param_name(a, d)}: i32" for a, d in stride_params(k)]
        return params + [f"{p.ident}: {self.param_type(p)}" for p in k.params if not p.is_const]

    def param_type(self, p) -> str:
        """A parameter's Rust type; an array's axes with a unit-axis generic take it as their static length."""
        if not p.is_array or (p.ident, 0) not in self.unit_axes:
            return type_rs(p.ty)
        dims = ", ".join(self.unit_axes[(p.ident, axis)] for axis in range(p.ty.rank))
        return f"&Tensor<{dtype_rs(p.ty.dtype)}, {{ [{dims}] }}>"

    def entry_attrs(self) -> str:
        hints = {L.ENTRY_HINT_KEYS[k]: v for k, v in self.kernel.hints.items() if k in L.ENTRY_HINT_KEYS}
        if not hints:
            return ""
        per_target = [v for v in hints.values() if isinstance(v, dict)]
        targets = sorted({t for v in per_target for t in v} - {"default"}) + ["default"]
        groups = []
        for target in targets:  # ct.ByTarget: one group per named target, each with every hint
            values = {key: (v.get(target, v.get("default")) if isinstance(v, dict) else v)
                      for key, v in hints.items()}
            values = {key: v for key, v in values.items() if v is not None}
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()):
                raise Diagnostic("kernel hints must be integer literals", self.kernel.loc, "ct.kernel",
                                 kernel=self.kernel.name)
            if values:
                groups.append(f"{target} = ({', '.join(f'{k} = {values[k]}' for k in sorted(values))},)")
        return f"optimization_hints = ({', '.join(groups)},)"

    # ---- statements
    def block(self, block: Block, depth: int) -> list[str]:
        lines: list[str] = []
        pad = INDENT * depth
        live = [st for st in block.stmts if id(st) not in self.unused]
        if len(live) >= 2 and _yields_result_of(live[-2], live[-1]):  # the branch's value is an `if`: its tail
            return (self.block(Block(live[:-2]), depth) + [pad + line for line in self.lead_in(live[-2])]
                    + self.if_lines(live[-2], pad, depth, tail=True))
        for st in live:
            lines += [pad + line for line in self.lead_in(st)]
            if isinstance(st, Let):
                lines += [pad + line for line in self.let(st)]
            elif isinstance(st, Do) and st.op.kind == OpKind.YIELD:  # the value of an if-expression's branch
                lines.append(pad + self.render(st.op, ""))
            elif isinstance(st, Do):
                lines += [pad + line for line in self.effect(st.op)]
            elif isinstance(st, For):
                lines.append(pad + self.for_header(st))
                lines += self.block(st.body, depth + 1)
                lines.append(pad + "}")
            elif isinstance(st, While):
                lines += self.while_header(st, pad, depth)
                lines += self.block(st.body, depth + 1)
                lines.append(pad + "}")
            elif isinstance(st, If):
                lines += self.if_lines(st, pad, depth)
            elif isinstance(st, Return):
                lines.append(pad + "return;")
            elif isinstance(st, Break):
                lines.append(pad + "break;")
            elif isinstance(st, Continue):
                lines.append(pad + "continue;")
        return lines

    def if_lines(self, st: If, pad: str, depth: int, tail: bool = False) -> list[str]:
        """An `if` statement, or a conditional expression bound to its result (`tail`: the value of the
        enclosing block). An else branch that is itself a conditional expression continues as
        `else if`, so that a chain `a if c else (b if d else ...)` stays at one depth (nested, rustfmt's
        time grows exponentially with the depth); cutile-rs compiles `else if` as the nested `if`."""
        bind = f"let {st.result}: {type_rs(st.result_ty)} = " if st.result and not tail else ""
        lines = [f"{pad}{bind}if {self.atom(st.cond)} {{"] + self.block(st.then, depth + 1)
        while st.result and (link := self.else_if(st.orelse)):
            before, st = link
            if before:  # computed in the else branch, before its `if`: the condition's block
                inner = INDENT * (depth + 1)
                lines += [f"{pad}}} else if {{", *self.block(Block(before), depth + 1), inner + self.atom(st.cond),
                          f"{pad}}} {{"]
            else:
                lines.append(f"{pad}}} else if {self.atom(st.cond)} {{")
            lines += self.block(st.then, depth + 1)
        if st.orelse.stmts:
            lines.append(f"{pad}}} else {{")
            lines += self.block(st.orelse, depth + 1)
        return lines + [pad + ("};" if bind else "}")]

    def else_if(self, orelse: Block) -> tuple[list, If] | None:
        """(the statements before it, the conditional expression) when an else branch's value is a
        conditional expression whose branches read none of those statements' names (they move into the
        `else if` condition's block, out of the branches' scope); else None."""
        live = [st for st in orelse.stmts if id(st) not in self.unused]
        if len(live) < 2 or not _yields_result_of(live[-2], live[-1]):
            return None
        before, inner = live[:-2], live[-2]
        if not all(isinstance(st, Let) and not st.update for st in before):
            return None
        if {st.name for st in before} & (_names_read(inner.then) | _names_read(inner.orelse)):
            return None
        return before, inner

    def lead_in(self, st) -> list[str]:
        """Lines before a statement (none here: a rendering that carries the source's comments adds them)."""
        return []

    def while_header(self, st: While, pad: str, depth: int) -> list[str]:
        """`while test {`, `while { <condition block>; test } {`, or `loop {` (no test: `while True`).
        cutile-rs lowers `while` as cuTile Python does: a `loop` whose body starts with
        `if test { yield } else { break }`."""
        if st.test is None:
            return [pad + "loop {"]
        if not st.cond.stmts:
            return [f"{pad}while {self.atom(st.test)} {{"]
        return ([pad + "while {"] + self.block(st.cond, depth + 1)
                + [f"{INDENT * (depth + 1)}{self.atom(st.test)}", pad + "} {"])

    def for_header(self, st: For) -> str:
        start, stop = self.atom(st.start), self.atom(st.stop)
        if isinstance(st.step, CDim) and st.step.dim == 1:
            return f"for {st.index} in {start}..{stop} {{"
        step = self.atom(st.step)
        return f"for {st.index} in ({start}..{stop}).step_by({step} as usize) {{"

    def let(self, st: Let) -> list[str]:
        pre, expr = self.expr(st.op, st.name)
        views = self.take_local_views()
        if expr is None:  # the handler bound the name itself (destructuring)
            if st.update or id(st) in self.needs_mut:
                return views + self.rebound(st)
            return views + pre
        pre = views + pre
        if st.update:
            return pre + [f"{st.name} = {expr};"]
        mut = "mut " if id(st) in self.needs_mut else ""
        return pre + [f"let {mut}{st.name}: {type_rs(st.op.ty)} = {expr};"]

    def rebound(self, st: Let) -> list[str]:
        """A destructuring operation's result that a loop or branch reassigns (a token-ordered load that
        initialises an accumulator, say): the operation is rendered again binding a fresh name (its views
        are already declared), which is then assigned to the variable, `let mut` where it is first defined.
        A view made in the kernel is a cutile-rs Tensor, no loop or branch value."""
        if st.op.kind == OpKind.MAKE_VIEW:
            raise Diagnostic("an `Array.slice` view cannot be reassigned in loops or branches yet",
                             st.op.loc, "array.slice", "slice in each branch where the view is used",
                             kernel=self.kernel.name)
        value = self.fresh(f"{st.name}_value")
        pre, expr = self.expr(st.op, value)
        if expr is not None:
            raise self.fail(st.op, f"`{st.op.kind}` results cannot be reassigned in loops or branches yet")
        pre = self.take_local_views() + pre
        if st.update:
            return pre + [f"{st.name} = {value};"]
        return pre + [f"let mut {st.name}: {type_rs(st.op.ty)} = {value};"]

    # ---- operations: one row lookup (tileport.emit.rust.lowering.ROWS), then the row's rendering
    def row(self, op: Op) -> L.Row:
        facts: dict[str, object] = {}

        def fact(key: str):
            if key not in facts:
                facts[key] = self.fact(op, key)
            return facts[key]
        for row in self.rows.get(op.kind, ()):
            if row.matches(fact):
                return row
        raise self.fail(op, f"no cutile-rs lowering for operation `{op.kind}`")

    def fact(self, op: Op, key: str):
        """What a row's condition reads: see `lowering.Row`."""
        if key == "value":
            return "scalar" if isinstance(op.ty, ScalarT) else "tile"
        if key == "elem":
            return self.kind(op.ty.dtype)
        if key == "result_dtype":
            return getattr(op.ty, "dtype", None)
        if key == "operand":
            return self.kind(op.args[0].ty.dtype)
        if key == "unit_axis":  # an array parameter's length whose static value the launcher chooses
            return op.kind == OpKind.ARRAY_DIM and (op.args[0].name, op.attr("axis")) in self.unit_axes
        if key == "width":
            src, dst = _bits(op.args[0].ty.dtype), _bits(op.ty.dtype)
            return "same" if src == dst else "widen" if src < dst else "narrow"
        return op.attr(key)

    def render(self, op: Op, name: str):
        """The expression of `op` (or `(lines, expression)`; expression None: the lines bind `name`)."""
        row = self.row(op)
        if row.refuse is not None:
            raise self.fail(op, row.refuse.format_map(_Raw(op)))
        self.shims.update(row.shims)
        if row.method is not None:
            return getattr(self, f"lower_{row.method}")(op, name)
        return row.template.format_map(_Fields(self, op))

    def expr(self, op: Op, name: str) -> tuple[list[str], str]:
        out = self.render(op, name)
        return out if isinstance(out, tuple) else ([], out)

    def lower_array_stride(self, op: Op, name: str) -> str:
        array = op.args[0].name
        return stride_param_name(self.roots.get(array, array), op.attr("axis"))

    def lower_assume_div_by_at_launch(self, op: Op, name: str) -> str:
        """A view's alignment as the launcher computes it (`launch_alignments`)."""
        return f"unsafe {{ assume_div_by::<_, {self.alignments[id(op)]}>({self.atom(op.args[0])}) }}"

    def lower_array_dim_at_launch(self, op: Op, name: str) -> str:
        """A parameter's length along an axis with a unit-axis generic: 1 where static; else `shape()`'s entry,
        which lists the dynamic lengths only, so its index is the axis less the static axes before it. Each
        condition compares a const generic with 1: the JIT folds it and compiles the one branch taken."""
        array, axis = op.args[0].name, op.attr("axis")

        def dynamic(earlier: list[str], static: int) -> str:
            if not earlier:
                return L.ARRAY_DIM.format(array=array, axis=axis - static)
            return (f"if {earlier[0]} == 1 {{ {dynamic(earlier[1:], static + 1)} }} "
                    f"else {{ {dynamic(earlier[1:], static)} }}")
        earlier = [self.unit_axes[(array, a)] for a in range(axis)]
        return f"if {self.unit_axes[(array, axis)]} == 1 {{ 1i32 }} else {{ {dynamic(earlier, 0)} }}"

    def lower_view_offset(self, op: Op, name: str):
        """`start * stride` on 0-d i32 tiles, widened to u64 (`Array.slice`)."""
        i32 = tile_rs(TileT("i32", ()))
        pre, tiles = [], []
        for which, atom in zip(("start", "stride"), op.args):
            tile = self.fresh(f"{name}_{which}")
            pre.append(f"let {tile}: {i32} = scalar_to_tile({self.atom(atom)});")
            tiles.append(tile)
        product = self.fresh(f"{name}_elems")
        pre.append(f"let {product}: {i32} = {L.VIEW_OFFSET.format(a=tiles[0], b=tiles[1])};")
        return pre, L.CAST[("i", "i+")].format(x=product)

    def lower_scalar_int_cast(self, op: Op, name: str):
        """An integer scalar cast as the cast of a 0-d tile (cuTile's `exti` / `trunci` of `tile<i32>`)."""
        x = op.args[0]
        tile, cast = self.fresh(f"{name}_tile"), self.fresh(f"{name}_cast")
        pre = [f"let {tile}: {tile_rs(TileT(x.ty.dtype, ()))} = scalar_to_tile({self.atom(x)});",
               f"let {cast}: {tile_rs(TileT(op.ty.dtype, ()))} = "
               f"{L.INT_CAST[self.fact(op, 'width')].format(x=tile)};"]
        return pre, f"tile_to_scalar({cast})"

    def lower_make_view(self, op: Op, name: str):
        """`Array.slice`: the tensor view at the offset pointer, with the array's memory token."""
        ptr, array, *values = op.args
        rank, strides = op.ty.rank, op.attr("strides")
        divisors = op.attr("divisors") or (1,) * rank
        pre, assumed = [], []
        for i, v in enumerate(values):  # extents, then dynamic strides: non-negative, as cuTile assumes them
            which = f"n{i}" if i < rank else f"s{i - rank}"
            bound = self.fresh(f"{name}_{which}")
            pre.append(f"let {bound}: i32 = {L.NON_NEGATIVE.format(x=self.atom(v))};")
            if i < rank and divisors[i] > 1:  # an extent known divisible, then divisible as well
                divisible = self.fresh(f"{bound}_div")
                pre.append(f"let {divisible}: i32 = {L.DIVISIBLE.format(x=bound, divisor=divisors[i])};")
                bound = divisible
            assumed.append(bound)
        dims = ", ".join(["-1"] * rank)
        shape, stride_rs = self.fresh(f"{name}_shape"), ", ".join(map(str, strides))
        strides_name = self.fresh(f"{name}_strides")
        pre.append(f"let {shape}: Shape<{{ [{dims}] }}> = "
                   f"{L.VIEW_SHAPE.format(dims=dims, values=', '.join(assumed[:rank]))};")
        pre.append(f"let {strides_name}: Array<{{ [{stride_rs}] }}> = "
                   f"{L.VIEW_STRIDES.format(strides=stride_rs, values=', '.join(assumed[rank:]))};")
        # bound by value (cutile-rs compiles no `&` binding); its partition views borrow it
        pre.append(f"let {name}: Tensor<{dtype_rs(op.ty.dtype)}, {{ [{dims}] }}> = "
                   f"{L.MAKE_VIEW.format(ptr=self.atom(ptr), shape=shape, strides=strides_name, array=array.name)};")
        return pre, None

    def lower_num_tiles(self, op: Op, name: str) -> str:
        view = self.view(op.args[0].name, op.attr("shape"), "undetermined", op.attr("order"), False)
        return L.NUM_TILES.format(view=view, axis=op.attr("axis"))

    def lower_load(self, op: Op, name: str):
        arr, *index = op.args
        shape = op.attr("shape")
        view = self.view(arr.name, shape, op.attr("padding"), op.attr("order"), False)
        latency = "None" if op.attr("latency") is None else f"Some({op.attr('latency')})"
        tma = L.TMA[op.attr("allow_tma")]
        token, result = op.attr("token"), op.attr("result_token")
        if token is None and result is None:
            return L.LOAD.format(view=view, index=self.index(index), latency=latency, tma=tma)
        expr = L.LOAD_RAW.format(view=view, index=self.index(index), token=_some(token), latency=latency, tma=tma,
                                 inbounds=", ".join(["false"] * len(index)), shape=shape_rs(shape))
        return [f"let ({name}, {result or '_'}): ({type_rs(op.ty)}, Token) = {expr};"], None

    def constant(self, value, dt, shape) -> str:
        """A splat constant of `dt`."""
        if isinstance(dt, DVar) or dt in ("f16", "bf16", "tf32"):
            if self.kind(dt) != "f":
                raise Diagnostic(f"literal of generic integer type {dt}", self.kernel.loc, "literal",
                                 kernel=self.kernel.name)
            self.shims.add("constant_lit")
            return L.SPLAT_CONSTANT_LIT.format(value=float_lit(float(value), "f32"), shape=shape_rs(shape))
        return L.SPLAT_CONSTANT.format(value=lit_rs(value, dt), shape=shape_rs(shape))

    def int_constant(self, value, dt, shape, name: str):
        """A splat integer constant; an unsigned one at or above 2^(bits - 1) as the bitcast of the signed
        constant with its bits: cutile 0.5.0 parses an integer literal as the signed type of its width
        (and encodes one it cannot parse as 0)."""
        signed = _signed_bits(value, dt)
        if signed is None:
            return [], self.constant(value, dt, shape)
        bits = self.fresh(f"{name}_bits")
        tile = tile_rs(TileT(f"i{dt[1:]}", tuple(shape)))
        return ([f"let {bits}: {tile} = {L.SPLAT_CONSTANT.format(value=signed, shape=shape_rs(shape))};"],
                L.BITCAST.format(x=bits))

    def lower_full(self, op: Op, name: str) -> str:
        (value,) = op.args
        if isinstance(value, CDim):
            if not isinstance(value.dim, int):
                raise self.fail(op, "a tile filled with a constant parameter's value is not supported yet")
            value = Lit(value.dim, ScalarT(op.ty.dtype))
        if self.kind(op.ty.dtype) == "u":
            return self.int_constant(value.value, op.ty.dtype, op.ty.shape, name)
        return self.constant(value.value, op.ty.dtype, op.ty.shape)

    def lower_splat(self, op: Op, name: str):
        (x,) = op.args
        shape = op.ty.shape
        dt = op.ty.dtype
        if isinstance(x, Ref):
            return L.SCALAR_BROADCAST.format(scalar=x.name, shape=shape_rs(shape))
        if (dt == "f32" or dt == "f64") and not math.isfinite(x.value):
            # `f32::NEG_INFINITY.broadcast(..)`: the cutile macro takes no associated const there
            return self.constant(x.value, dt, shape)
        if dt == "f32" or dt == "f64":
            value = lit_rs(x.value, dt)
            value = f"({value})" if value.startswith("-") else value  # `-1.0f32.broadcast()` negates the tile
            return L.SCALAR_BROADCAST.format(scalar=value, shape=shape_rs(shape))
        # f16/bf16/generic float or integer literal: 0-d constant, reshape to rank, broadcast (as cuTile).
        scalar = self.fresh(f"{name}_0d")
        pre, value = self.int_constant(x.value, dt, (), scalar) if self.kind(dt) == "u" else \
            ([], self.constant(x.value, dt, ()))
        pre.append(f"let {scalar}: {tile_rs(TileT(dt, ()))} = {value};")
        if not shape:
            return pre, scalar
        ones = (1,) * len(shape)
        reshaped = self.fresh(f"{name}_1")
        pre.append(f"let {reshaped}: {tile_rs(TileT(dt, ones))} = "
                   f"{L.RESHAPE.format(x=scalar, shape=shape_rs(ones))};")
        return pre, L.BROADCAST.format(x=reshaped, shape=shape_rs(shape))

    def lower_scan_sum_half(self, op: Op, name: str):
        """An f16/bf16 scan: its identity is a scalar bound with its type (no f16/bf16 literal exists)."""
        zero = self.fresh(f"{name}_zero")
        pre = [f"let {zero}: {op.ty.dtype} = convert_scalar(0.0f32);"]
        return pre, L.SCAN_SUM.format(x=self.atom(op.args[0]), axis=op.attr("axis"),
                                      reverse=L.SCAN_REVERSE[op.attr("reverse")], zero=zero)

    def lower_extract(self, op: Op, name: str):
        x, *index = op.args
        pre, names = [], []
        for i, atom in enumerate(index):
            idx = self.fresh(f"{name}_i{i}")
            pre.append(f"let {idx}: {tile_rs(TileT('i32', ()))} = scalar_to_tile({self.atom(atom)});")
            names.append(idx)
        return pre, L.EXTRACT.format(x=x.name, index=", ".join(names))

    def lower_store(self, op: Op, name: str) -> str:
        arr, tile, *index = op.args
        latency = "None" if op.attr("latency") is None else f"Some({op.attr('latency')})"
        tma = L.TMA[op.attr("allow_tma")]
        token = op.attr("token")
        if token is None:  # the view's own (entry) token, result unused: the safe-looking mutable view
            view = self.view(arr.name, tile.ty.shape, "undetermined", None, True)
            return L.STORE.format(view=view, tile=tile.name, index=self.index(index), latency=latency, tma=tma)
        view = self.view(arr.name, tile.ty.shape, "undetermined", None, False)
        return L.STORE_RAW.format(view=view, tile=tile.name, index=self.index(index), token=token,
                                  latency=latency, tma=tma, inbounds=", ".join(["false"] * len(index)))

    def effect(self, op: Op) -> list[str]:
        expr = self.render(op, "")
        result = op.attr("result_token")
        return self.take_local_views() + [f"let {result}: Token = {expr};" if result else f"{expr};"]

    def lower_store_ptr(self, op: Op, name: str) -> str:
        ptrs, value, *mask = op.args
        return L.SCATTER.format(ptrs=ptrs.name, value=value.name, mask=f"Some({mask[0].name})" if mask else "None",
                                token=_some(op.attr("token")), latency=op.attr("latency") or 0)

    def lower_load_ptr(self, op: Op, name: str):
        ptrs, pad, *mask = op.args
        expr = L.GATHER.format(ptrs=ptrs.name, mask=f"Some({mask[0].name})" if mask else "None", pad=pad.name,
                               token=_some(op.attr("token")), latency=op.attr("latency") or 0)
        token = op.attr("result_token") or "_"
        return [f"let ({name}, {token}): ({type_rs(op.ty)}, Token) = {expr};"], None

    def lower_atomic_rmw(self, op: Op, name: str):
        ptrs, value, *mask = op.args
        mode = L.ATOMIC_MODE.get((op.attr("mode"), self.kind(op.ty.dtype)))
        if mode is None:
            raise self.fail(op, f"atomic {op.attr('mode')} on {op.ty.dtype} is not supported")
        expr = L.ATOMIC_RMW.format(ptrs=ptrs.name, value=value.name, mode=mode, **self.atomic_fields(op, mask))
        return [f"let ({name}, {op.attr('result_token') or '_'}): ({type_rs(op.ty)}, Token) = {expr};"], None

    def lower_atomic_cas(self, op: Op, name: str):
        ptrs, expected, desired, *mask = op.args
        expr = L.ATOMIC_CAS.format(ptrs=ptrs.name, expected=expected.name, desired=desired.name,
                                   **self.atomic_fields(op, mask))
        return [f"let ({name}, {op.attr('result_token') or '_'}): ({type_rs(op.ty)}, Token) = {expr};"], None

    def atomic_fields(self, op: Op, mask: list) -> dict:
        return {"order": L.MEMORY_ORDER[op.attr("memory_order")], "scope": L.MEMORY_SCOPE[op.attr("memory_scope")],
                "mask": f"Some({mask[0].name})" if mask else "None", "token": _some(op.attr("token"))}


class _Fields(dict):
    """The fields of a row's template, each computed when the template names it."""

    def __init__(self, em: KernelEmitter, op: Op):
        super().__init__()
        self.em, self.op = em, op

    def __missing__(self, key: str) -> str:
        op, em = self.op, self.em
        operand = {"a": 0, "x": 0, "array": 0, "ptr": 0, "b": 1, "y": 1, "offset": 1, "c": 2, "acc": 2}
        if key in operand:
            return em.atom(op.args[operand[key]])
        modes = {"rounding": L.ROUNDING, "ftz": L.FTZ, "nan": L.NAN, "reverse": L.SCAN_REVERSE}
        if key in modes:
            return modes[key][op.attr(key)]
        if key == "shape":
            return shape_rs(op.ty.shape)
        if key == "n":
            return dim_rs(op.attr("size"))
        if key == "axes":
            return ", ".join(map(str, op.attr("axes")))
        if key == "tokens":
            return ", ".join(em.atom(a) for a in op.args)
        if key == "zero":  # the identity of a sum of the result's element type
            return lit_rs(0.0 if em.kind(op.ty.dtype) == "f" else 0, op.ty.dtype)
        return op.attr(key)  # axis, divisor


class _Raw(dict):
    """The fields of a refusal: the operation's raw attributes and its type."""

    def __init__(self, op: Op):
        super().__init__(ty=op.ty, dtype=getattr(op.ty, "dtype", None))
        self.op = op

    def __missing__(self, key: str):
        return self.op.attr(key)


def _yields_result_of(st, last) -> bool:
    """`st` is a conditional expression whose result `last` yields as its branch's value."""
    return (isinstance(st, If) and st.result is not None and isinstance(last, Do) and last.op.kind == "yield"
            and isinstance(last.op.args[0], Ref) and last.op.args[0].name == st.result)


def _names_read(block: Block) -> set[str]:
    """Every name the statements of `block`, nested ones included, read or reassign."""
    names: set[str] = set()
    for st in walk(block):
        names |= {a.name for a in atoms_of(st) if isinstance(a, Ref)}
        names |= set(getattr(st, "carried", ())) | set(getattr(st, "assigned", ()))
        if isinstance(st, While) and isinstance(st.test, Ref):
            names.add(st.test.name)
        if isinstance(st, Let) and st.update:
            names.add(st.name)
    return names


def _some(token: str | None) -> str:
    return f"Some({token})" if token else "None"


def _bits(dt: str) -> int:
    return {"i8": 8, "u8": 8, "i16": 16, "u16": 16, "i32": 32, "u32": 32, "i64": 64, "u64": 64}[dt]


def _signed_bits(value, dt: str) -> str | None:
    """The literal of the signed type with the same bits as an unsigned `value` at or above 2^(bits - 1)
    (None for any other value): cutile 0.5.0 parses an integer literal as the signed type of its width."""
    if not (isinstance(dt, str) and dt.startswith("u")) or int(value) < 1 << (_bits(dt) - 1):
        return None
    return f"{int(value) - (1 << _bits(dt))}i{dt[1:]}"


def emit_kernel(kernel: Kernel, source: str = "") -> tuple[str, set[str]]:
    """Rust source of one entry and the shims it needs (`source`: the path recorded in comments)."""
    em = KernelEmitter(kernel, source)
    try:
        text = em.emit()
    except Diagnostic:
        raise
    except Exception as e:  # noqa: BLE001 - an emitter bug fails this kernel only, with its location
        raise Diagnostic(f"internal translator error: {type(e).__name__}: {e}", kernel.loc, "internal",
                         "please report this kernel", kernel=kernel.base_name or kernel.name) from None
    return text, em.shims
