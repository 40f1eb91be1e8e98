"""The idiomatic rendering: the faithful translation (kernel.py) rewritten into the Rust a cutile-rs user writes.

The faithful emitter spells every model operation as its own typed `let`, every view with its memory modes
and every store through `unsafe` Tile IR ops, so that each line maps to one Tile IR op. This layer keeps the
operations and their order and changes only how they read (c2rust's transpile vs refactor split):

- entries are safe `pub fn`s; views are made once per array, tile shape and padding, with cutile's safe
  `Tensor::partition` where its padding is the source's and the crate's `tiles` helpers otherwise
  (templates/tiles.rs); loads and stores with the default memory modes take no mode arguments;
- an output the kernel writes once, at the tile of its block, is a `&mut Tensor` the tile block owns
  (`owned_outputs`), stored with `Tensor::store`;
- a value used once, by the next operation that reads it, is written inside that operation's expression
  when the order of the operations stays the same (`fold_plan`); a `let` whose type the DSL infers is not
  annotated;
- the source's comments are carried to the statements they precede, its docstrings become doc comments;
- entries of one module with the same body share it as one device function (`share_bodies`).

Each rewrite is one the corpus comparison proved to compile to the same Tile IR (docs/translator.md,
bench/results/idiomatic-vs-faithful.json).
"""

from __future__ import annotations

import ast
import functools
import io
import math
import re
import string
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from tileport.emit.rust import lowering as L
from tileport.emit.rust.kernel import (INDENT, KernelEmitter, _Fields, dtype_rs, shape_rs, type_rs,
                                       unit_axis_generics)
from tileport.model.ir import Block, Do, For, If, Kernel, Let, Op, Ref, Stmt, While, walk
from tileport.model.ops import OpKind
from tileport.model.types import PtrT
from tileport.passes.uses import atoms_of, updated_params, use_counts

# ---------------------------------------------------------------- owned outputs

OWNED_MAX_RANK = 3  # cutile 0.5.0: a `&mut Tensor` parameter has rank 1 to 3


def owned_outputs(kernel: Kernel) -> dict[str, Do | Let]:
    """The outputs a tile block owns, by parameter identifier, with their store: arrays the kernel reads
    nothing of and stores once, outside loops and branches, at the tile (bid(0), .., bid(rank - 1)) of a
    tile as wide as the array's rank, with the default memory modes. cutile's launcher hands such a
    parameter to each block as its own tile of the output (`&mut Tensor`); `Tensor::store` writes it at
    the block's tile, the view and store cuTile Python makes. cutile passes a `&mut Tensor` with its
    partition's shape and strides, after the array's own: only the entry's last parameter can take them
    without moving the others' (the machine code reads every later parameter at another offset)."""
    values = [p for p in kernel.params if not p.is_const]
    last = values[-1].ident if values and values[-1].is_array else None
    bids = {st.name: st.op.attr("axis") for st in kernel.body.stmts
            if isinstance(st, Let) and not st.update and st.op.kind == OpKind.BID}
    refs: dict[str, int] = {}
    for st in walk(kernel.body):
        for a in atoms_of(st):
            if isinstance(a, Ref):
                refs[a.name] = refs.get(a.name, 0) + 1
    out = {}
    for st in kernel.body.stmts:
        if not isinstance(st, (Do, Let)) or st.op.kind != OpKind.STORE:
            continue
        arr, tile, *index = st.op.args
        p = next((p for p in kernel.array_params if p.ident == arr.name), None)
        if (p is None or p.ident != last or refs.get(arr.name) != 1 or not 1 <= p.ty.rank <= OWNED_MAX_RANK
                or len(tile.ty.shape) != p.ty.rank or st.op.attr("token") is not None
                or st.op.attr("latency") is not None or st.op.attr("allow_tma") is False
                or [bids.get(a.name) if isinstance(a, Ref) else None for a in index] != list(range(p.ty.rank))):
            continue
        out[arr.name] = st
    return out


# ---------------------------------------------------------------- folding values into their one use

# Operations whose value rustc and the cutile JIT type from their operands: written inside another expression,
# or bound by an unannotated `let`. (A call of a `tiles` helper or of a shim, a cast, a reduction, a constant
# and a permutation are typed by their `let`: cutile's type check cannot infer them inside an expression.)
INFERRED = (OpKind.BINARY, OpKind.UNARY, OpKind.FMA, OpKind.SELECT, OpKind.COMPARE, OpKind.BROADCAST,
            OpKind.RESHAPE, OpKind.SPLAT, OpKind.ARRAY_DIM, OpKind.BID, OpKind.NUM_BLOCKS, OpKind.NUM_TILES,
            OpKind.COPY)
# Rendering methods that take operands written as expressions without changing the order of operations.
ABSORBING_METHODS = ("load", "store", "splat", "extract")
# Operations that take no expression operand: cutile types `tile_to_scalar` by its operand's binding (given an
# expression, the scalar stays a 0-d tile, and a view index made of it fails).
OPAQUE_ABSORBERS = (OpKind.SCALAR_OF,)
# Scalar functions (`min`, `max`, `ceil_div` on i32): cutile types an expression argument of theirs, and their
# value bound by an unannotated `let`, by the kernel's element type, not i32 (`binary Min requires operands of
# the same type, but got i32 and E`): they take no folded operand and keep their `let`'s type.
SCALAR_CALLS = frozenset(L.SCALAR_FN.values())
# Helpers of a store whose token nothing reads: bound all the same.
STORES_RETURNING_TOKEN = ("store_after(", "store_after_no_tma(", "scatter_tile(")
OPERAND_FIELDS = {"a": 0, "x": 0, "array": 0, "ptr": 0, "b": 1, "y": 1, "offset": 1, "c": 2, "acc": 2}

# Rust operator precedence of a template `{a} OP {b}` (higher binds tighter); calls and paths are atoms.
PRECEDENCE = {"*": 80, "/": 80, "%": 80, "+": 70, "-": 70, "<<": 65, ">>": 65, "&": 60, "^": 55, "|": 50,
              "==": 40, "!=": 40, "<": 40, "<=": 40, ">": 40, ">=": 40}
ATOM, UNARY_PREC = 100, 90
OPERATOR = re.compile(r"^\{(\w+)\} (\S+) \{(\w+)\}$")


def template_fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


@dataclass
class Inline:
    """A value written inside its one use: the expression, its precedence and its `let` (by id)."""

    text: str
    precedence: int
    let_id: int


WIDTH = 100  # rustfmt's line width: a statement a fold makes wider than this is written with that value bound


# ---------------------------------------------------------------- the source's comments

@dataclass(frozen=True)
class SourceFile:
    """What the idiomatic rendering reads of a source file (with `ast` and `tokenize`; nothing runs)."""

    comments: dict[int, str]  # comment text by line
    functions: list[tuple[int, int, str, str]]  # every function: (def line, last line, name, docstring)
    names: dict[int, frozenset[str]]  # the names each function assigns or takes, by its def line
    calls: dict[str, frozenset[str]]  # the names each function calls


@functools.cache
def _source(path: str) -> SourceFile | None:
    """The source file at `path`; None when it cannot be read (its kernels then carry no comments)."""
    try:
        text = Path(path).read_text()
        tree = ast.parse(text)
        comments = {tok.start[0]: tok.string[1:].strip()
                    for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}
    except (OSError, SyntaxError, UnicodeDecodeError, tokenize.TokenError, ValueError, RecursionError):
        return None  # (a file too deeply nested for `ast`: the frontend reported it)
    functions = [(n.lineno, n.end_lineno or n.lineno, n.name, ast.get_docstring(n) or "")
                 for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    names = {n.lineno: frozenset({m.id for m in ast.walk(n) if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store)}
                                 | {a.arg for m in ast.walk(n) if isinstance(m, ast.arguments)
                                    for a in m.posonlyargs + m.args + m.kwonlyargs})
             for n in defs}
    calls = {n.name: frozenset(c.func.id for c in ast.walk(n)
                               if isinstance(c, ast.Call) and isinstance(c.func, ast.Name))
             for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return SourceFile(comments, functions, names, calls)


def source_names(kernel: Kernel) -> frozenset[str]:
    """The names the kernel's source assigns or takes: those of the functions its operations come from (the
    kernel and the helpers it inlines)."""
    out: set[str] = set()
    for st in walk(kernel.body):
        loc = stmt_loc(st)
        fn = enclosing_function(loc.file, loc.line) if loc is not None and loc.file else None
        if fn is not None:
            out |= _source(loc.file).names[fn[0]]
    return frozenset(out)


TOOL_COMMENTS = re.compile(r"^(noqa|type:|pragma|fmt:|pylint|isort)", re.IGNORECASE)


def enclosing_function(file: str, line: int) -> tuple[int, int, str, str] | None:
    """The innermost function of `file` around `line`."""
    src = _source(file)
    if src is None:
        return None
    inside = [f for f in src.functions if f[0] <= line <= f[1]]
    return max(inside, key=lambda f: f[0]) if inside else None


class Comments:
    """The source's comments, each written once, before the first statement at or after its line in the
    same function (an inlined helper's comments come with its operations)."""

    def __init__(self) -> None:
        self.cursor: dict[tuple[str, int], int] = {}

    def before(self, loc) -> list[str]:
        if loc is None or not loc.file:
            return []
        fn = enclosing_function(loc.file, loc.line)
        src = _source(loc.file)
        if fn is None or src is None:
            return []
        key = (loc.file, fn[0])
        start = self.cursor.get(key, fn[0])
        if loc.line <= start:
            return []
        self.cursor[key] = loc.line
        return [f"// {text}" for line, text in sorted(src.comments.items())
                if start < line <= loc.line and text and not TOOL_COMMENTS.match(text)]


# ---------------------------------------------------------------- entries and shared bodies

@dataclass
class EntryText:
    """One rendered entry: doc comment lines, entry attributes, generic and value parameters, body lines."""

    kernel: Kernel
    doc: list[str]
    attrs: str
    generics: list[str]
    params: list[str]
    body: list[str]
    call: str = ""  # the shared body it calls instead of `body` (`share_bodies`)

    def signature(self, fn: str, name: str) -> str:
        gen = f"<{', '.join(self.generics)}>" if self.generics else ""
        return f"{INDENT}{fn} {name}{gen}({', '.join(self.params)}) {{"

    def render(self) -> str:
        body = [f"{INDENT * 2}{self.call}"] if self.call else self.body
        return "\n".join([*self.doc, f"{INDENT}#[cutile::entry({self.attrs})]",
                          self.signature(IdiomaticEmitter.ENTRY_FN, self.kernel.name), *body, f"{INDENT}}}"])

    @property
    def shareable(self) -> tuple:
        return (tuple(self.generics), tuple(self.params), tuple(self.body))


def share_bodies(entries: list[EntryText], taken: set[str]) -> list[str]:
    """Entries of one module with the same generics, parameters and body (kernels differing in their hints,
    or wrappers of one source helper): the body once, as a device function each entry calls (cutile inlines
    it). Returns the functions; the entries get their `call`. Entries with owned outputs keep their body."""
    groups: dict[tuple, list[EntryText]] = {}
    for e in entries:
        if not owned_outputs(e.kernel):
            groups.setdefault(e.shareable, []).append(e)
    out = []
    for same in groups.values():
        if len(same) < 2:
            continue
        first = same[0]
        name, doc = _shared_name(first, {e.kernel.base_name or e.kernel.name for e in same}, taken)
        taken.add(name)
        generic_args = ", ".join(g.split(":")[0].replace("const ", "").strip() for g in first.generics)
        args = ", ".join(p.split(":")[0].strip() for p in first.params)
        call = f"{name}::<{generic_args}>({args});" if generic_args else f"{name}({args});"
        for e in same:
            e.call = call
        lines = [f"{INDENT}/// {line}".rstrip() for line in doc.splitlines()]
        lines += [first.signature("fn", name), *first.body, f"{INDENT}}}"]
        out.append("\n".join(lines))
    return out


def _shared_name(entry: EntryText, kernels: set[str], taken: set[str]) -> tuple[str, str]:
    """The source helper the body was inlined from (name, docstring) when the body's operations come from one
    function besides the sharing kernels themselves, else `<kernel>_body` (numbered when another group of the
    module's entries took it)."""
    k = entry.kernel
    found = {fn for st in walk(k.body) if isinstance(st, (Let, Do)) and st.op.loc
             for fn in [enclosing_function(st.op.loc.file, st.op.loc.line)] if fn and fn[2] not in kernels}
    src = _source(k.loc.file)
    called = src.calls.get(k.base_name or k.name, frozenset()) if src else frozenset()
    outer = [fn for fn in found if fn[2] in called] if len(found) > 1 else list(found)
    if len(outer) == 1 and outer[0][2] not in taken:  # the helper the kernels call (it may call others)
        return outer[0][2], outer[0][3]
    base = name = f"{k.base_name or k.name}_body"
    n = 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name, f"The body of `{k.base_name or k.name}` and of the entries that share it."


# ---------------------------------------------------------------- the emitter

def stmt_loc(st: Stmt):
    return st.op.loc if isinstance(st, (Let, Do)) else getattr(st, "loc", None)


@dataclass
class IdiomaticEmitter(KernelEmitter):
    helpers: set[str] = field(default_factory=set)  # the `tiles` helpers the kernel calls
    module_fns: set[str] = field(default_factory=set)  # the module's private device functions it calls
    unfold: frozenset[int] = frozenset()  # `let`s (by id) kept bound: folded, their use was too wide

    ENTRY_FN = "pub fn"

    def __post_init__(self):
        self.owned = owned_outputs(self.kernel)
        super().__post_init__()
        self.rows = IDIOM_ROWS_BY_KIND
        self.view_names: dict[tuple, str] = {}
        self.inline: dict[str, Inline] = {}
        self.comments = Comments()
        self.named = source_names(self.kernel)
        self.dead_bids = self._dead_bids()
        self.load_casts = self.load_cast_plan()  # cast let id -> the load it reads
        self.cast_loads = {id(ld) for ld in self.load_casts.values()}
        self.store_casts = self.stored_casts()  # owned store op id -> the cast it stores
        self.stored = {id(c) for c in self.store_casts.values()}
        self.element_loads = self.element_load_plan()  # load op id -> the alignment `let` it takes in
        self.slice_aligns = self.slice_view_plan()  # view op id -> the alignment `let` of its pointer
        self.aligned = {id(st) for st in [*self.element_loads.values(), *self.slice_aligns.values()]}
        self.folded = self.fold_plan()
        self.depth = 0
        # (characters it saves a line, its position, let id) of each fold written into the statement being rendered
        self.consumed: list[tuple[int, int, int]] = []
        self.position = {id(st): i for i, st in enumerate(walk(self.kernel.body))}  # a stable order of statements
        self.too_wide: set[int] = set()  # folds whose use came out wider than a line

    def unit_axis_generics(self) -> dict[tuple[str, int], str]:
        owned = {self.kernel.param_by_ident(i).name for i in self.owned}
        return {k: g for k, g in unit_axis_generics(self.kernel).items() if k[0] not in owned}

    def _dead_bids(self) -> set[int]:
        """Block ids only an owned output's store read (`Tensor::store` reads its own)."""
        if not self.owned:
            return set()
        counts = use_counts(self.kernel, frozenset(id(st) for st in self.owned.values()))
        return {id(st) for st in self.kernel.body.stmts if isinstance(st, Let) and st.op.kind == OpKind.BID
                and not counts[id(st)]}

    # ---- entry
    def emit(self) -> str:
        k = self.kernel
        body = self.block(k.body, 2)
        types = {p.ident: self.param_type(p) for p in k.params if not p.is_const}
        prologue = self.view_decls + [f"let mut {n}: {types[n]} = {n};" for n in updated_params(k)]
        self.entry = EntryText(k, self.doc_lines(), self.entry_attrs(), self.generic_params(), self.entry_params(),
                               [INDENT * 2 + line for line in prologue] + body)
        return self.entry.render()

    def param_type(self, p) -> str:
        st = self.owned.get(p.ident) if p.is_array else None
        if st is None:
            return super().param_type(p)
        return f"&mut Tensor<{dtype_rs(p.ty.dtype)}, {{ [{shape_rs(st.op.args[1].ty.shape)}] }}>"

    def lead_in(self, st) -> list[str]:
        return self.comments.before(stmt_loc(st))

    def fact(self, op: Op, key: str):
        if key == "dtype":
            return str(op.ty.dtype) if op.ty is not None and hasattr(op.ty, "dtype") else None
        return super().fact(op, key)

    # ---- operands: a folded value is written where it is used
    def take_inline(self, name: str) -> Inline:
        inline = self.inline.pop(name)
        self.consumed.append((len(inline.text) - len(name), self.position[inline.let_id], inline.let_id))
        return inline

    def atom(self, a) -> str:
        if isinstance(a, Ref) and a.name in self.inline:
            return self.take_inline(a.name).text
        return super().atom(a)

    def operand(self, a, need: int) -> str:
        """An operand in a position that binds at `need` (parenthesized when its expression binds looser)."""
        if isinstance(a, Ref) and a.name in self.inline:
            inline = self.take_inline(a.name)
            return inline.text if inline.precedence >= need else f"({inline.text})"
        text = super().atom(a)
        return f"({text})" if text.startswith("-") and need > UNARY_PREC else text

    def render(self, op: Op, name: str):
        row = self.row(op)
        if row.template is None or row.refuse is not None or row.method is not None:
            return super().render(op, name)
        self.shims.update(row.shims)
        self.helpers.update(h for h in L.TILE_HELPERS if re.search(rf"(?<![\w.]){h}\(", row.template))
        return row.template.format_map(_OperandFields(self, op, row.template))

    # ---- statements
    def block(self, block: Block, depth: int) -> list[str]:
        outer, self.depth = self.depth, depth
        try:
            return super().block(block, depth)
        finally:
            self.depth = outer

    def measured(self, lines: list[str]) -> list[str]:
        """A statement's lines; when one is too wide, the fold kept bound next time is the smallest whose name
        alone would make it fit, else the largest."""
        over = max(len(INDENT * self.depth + line) for line in lines) - WIDTH if lines else 0
        if self.consumed and over > 0:
            enough = [c for c in self.consumed if c[0] >= over]
            self.too_wide.add(min(enough)[2] if enough else max(self.consumed)[2])
        self.consumed = []
        return lines

    def effect(self, op: Op) -> list[str]:
        lines = super().effect(op)
        if lines and lines[-1].startswith(STORES_RETURNING_TOKEN):  # cutile types a module function's call by
            lines[-1] = "let _stored: Token = " + lines[-1]  # its binding
        return self.measured(lines)

    def let(self, st: Let) -> list[str]:
        if (id(st) in self.dead_bids or id(st) in self.cast_loads or id(st) in self.stored
                or id(st) in self.aligned):
            return []  # a load read by its cast, a cast an owned output stores, an element's alignment: in their use
        if id(st) in self.load_casts:
            expr = self.load_as_f32(self.load_casts[id(st)])
            pre = self.take_local_views()
            if st.update:
                return self.measured(pre + [f"{st.name} = {expr};"])
            mut = "mut " if id(st) in self.needs_mut else ""
            return self.measured(pre + [f"let {mut}{st.name}: {type_rs(st.op.ty)} = {expr};"])
        if id(st) in self.folded:
            outer, self.consumed = self.consumed, []
            pre, expr = self.expr(st.op, st.name)
            self.inline[st.name] = Inline(expr, self.precedence(st.op), id(st))
            self.consumed = outer + self.consumed  # its folds count with the statement that takes it
            return self.take_local_views() + pre
        lines = super().let(st)
        head = f"let {st.name}: {type_rs(st.op.ty)} = "
        if (not st.update and id(st) not in self.needs_mut and self.inferred(st.op) and lines
                and lines[-1].startswith(head)):  # `let name: T = expr;` -> `let name = expr;`
            lines[-1] = f"let {st.name} = " + lines[-1][len(head):]
        return self.measured(lines)

    def precedence(self, op: Op) -> int:
        row = self.row(op)
        if row.template:
            m = OPERATOR.match(row.template)
            if m:
                return PRECEDENCE.get(m.group(2), 0)
            if row.template.startswith("-"):
                return UNARY_PREC
        return ATOM

    def inferred(self, op: Op) -> bool:
        """Whether the op's value is typed by its operands (see INFERRED)."""
        if op.kind not in INFERRED or isinstance(op.ty, PtrT) or any(isinstance(a.ty, PtrT) for a in op.args):
            return False
        row = self.row(op)
        if row.method == "splat":  # a scalar's or a finite f32/f64 literal's broadcast, a literal's 0-d reshape
            x, dt = op.args[0], str(op.ty.dtype)
            return (isinstance(x, Ref) or (dt in ("f32", "f64") and math.isfinite(x.value))
                    or (dt not in ("f32", "f64") and bool(op.ty.shape)))
        if row.method == "num_tiles":
            return True
        return (row.template is not None and row.template not in SCALAR_CALLS and not row.shims
                and not any(re.search(rf"(?<![\w.]){h}\(", row.template) for h in L.TILE_HELPERS))

    def fold_plan(self) -> set[int]:
        """The `let`s written inside their one use: a value read once, by an operation of the same block that
        takes expressions (a template, a load, a store, a broadcast), where the values it takes this way are
        the last ones computed before it, in the order it reads them (so the order of operations stays)."""
        counts = use_counts(self.kernel)
        folded: set[int] = set()
        # `let`s whose written expression holds a call cutile's type check cannot type inside an inlined
        # function's argument: a block id or count (`get_tile_block_id().0`), a method called on a method call's
        # value (`s.reshape(..).broadcast(..)`); inside a load helper's or a store helper's (generic in the element
        # type), any call (`maxf(x, c, ..)`): `calls`
        untyped: set[int] = set()
        calls: set[int] = set()
        named = self.named

        def foldable(st) -> bool:  # a value the source names keeps its name
            return (isinstance(st, Let) and not st.update and id(st) not in self.needs_mut and st.name not in named
                    and id(st) not in self.unfold
                    and counts[id(st)] == 1 and self.inferred(st.op) and id(st) not in self.dead_bids)

        def walk_block(block: Block, env: dict[str, Let]) -> None:
            pending: list[Let] = []
            for st in block.stmts:
                if id(st) in self.unused or id(st) in self.dead_bids:
                    continue
                reads = self.eval_refs(st)
                mine = [env[n] for n in reads or () if n in env and any(env[n] is p for p in pending)]
                memory = ((isinstance(st, (Let, Do)) and self.row(st.op).method in ("load", "store")
                           and not any(st is o for o in self.owned.values()))  # `Tensor::store` types its tile
                          or id(st) in self.stored)  # what it reads goes to `store_cast`
                if ((memory and any(id(m) in calls for m in mine))
                        or (self.calls_helper(st) and any(self.method_call(m.op) or id(m) in untyped for m in mine))):
                    mine = []  # cutile's type check cannot type such a value passed to an inlined function
                if mine and len({id(m) for m in mine}) == len(mine) and pending[len(pending) - len(mine):] == mine:
                    folded.update(id(m) for m in mine)
                    pending = pending[:len(pending) - len(mine)]
                    if isinstance(st, Let) and any(id(m) in untyped or (self.method_call(st.op)
                                                                         and self.method_call(m.op)) for m in mine):
                        untyped.add(id(st))
                    if isinstance(st, Let) and any(id(m) in calls for m in mine):
                        calls.add(id(st))
                if isinstance(st, Let) and st.op.kind in L.GRID:
                    untyped.add(id(st))
                if isinstance(st, Let) and self.written_as_call(st.op):
                    calls.add(id(st))
                for inner in _blocks(st):
                    walk_block(inner, dict(env))
                if isinstance(st, Let) and not st.update:
                    env[st.name] = st
                pending = pending + [st] if foldable(st) else []

        walk_block(self.kernel.body, {})
        return folded

    def stored_casts(self) -> dict[int, Let]:
        """Owned outputs' stores (by op id) of a cast (`convert_tile`) made by the statement before, for them
        only: one `store_cast` (cutile types a cast by its `let` only, so it cannot be written inside
        `Tensor::store`; the helper's `let` types it by the output's element type)."""
        counts = use_counts(self.kernel)
        owned = {id(st) for st in self.owned.values()}
        live = [st for st in self.kernel.body.stmts if id(st) not in self.unused and id(st) not in self.dead_bids]
        return {id(store.op): cast for cast, store in zip(live, live[1:])
                if id(store) in owned and isinstance(cast, Let) and cast.op.kind == OpKind.ASTYPE
                and not cast.update and counts[id(cast)] == 1 and isinstance(store.op.args[1], Ref)
                and store.op.args[1].name == cast.name
                and self.row(cast.op).template in (L.CAST[("f", "f")], L.CAST[("i", "f")], L.CAST[("f", "i")])}

    def load_cast_plan(self) -> dict[int, Let]:
        """Float tiles loaded (default memory modes) only to be cast to f32 by the next statement: the cast is
        written as the load (`load_f32`, one helper for both operations, in their order). A load the source
        names keeps its `let` unless the cast is named after it."""
        counts = use_counts(self.kernel)
        named = self.named
        out: dict[int, Let] = {}

        def plain_load(st) -> bool:
            if not isinstance(st, Let):
                return False
            op = st.op
            return (op.kind == OpKind.LOAD and not st.update and id(st) not in self.needs_mut
                    and counts[id(st)] == 1 and self.row(op).method == "load"
                    and op.attr("token") is None and op.attr("result_token") is None and op.attr("latency") is None
                    and self.kind(op.ty.dtype) == "f")

        def walk_block(block: Block) -> None:
            live = [st for st in block.stmts if id(st) not in self.unused and id(st) not in self.dead_bids]
            for prev, st in zip(live, live[1:]):
                if (plain_load(prev) and isinstance(st, Let) and st.op.kind == OpKind.ASTYPE
                        and str(st.op.ty.dtype) == "f32" and isinstance(st.op.args[0], Ref)
                        and st.op.args[0].name == prev.name and self.row(st.op).template == L.CAST[("f", "f")]
                        and (prev.name not in named or st.name.startswith(prev.name))):
                    out[id(st)] = prev
            for st in live:
                for inner in _blocks(st):
                    walk_block(inner)

        walk_block(self.kernel.body)
        return out

    def element_load_plan(self) -> dict[int, Let]:
        """Single-element gathers, by load op id, with the `let` stating their pointer's alignment: each an
        `assume_div_by` read by nothing else and a bounds-checked load after the array's token with the
        default modes, written as one call of the module's `load_element` (its two `unsafe` operations
        once per module, instead of at each gather)."""
        counts = use_counts(self.kernel)
        lets = {st.name: st for st in walk(self.kernel.body) if isinstance(st, Let) and not st.update}
        out: dict[int, Let] = {}
        for st in walk(self.kernel.body):
            if not isinstance(st, Let) or st.op.kind != OpKind.LOAD_PTR or st.op.ty.shape:
                continue
            ptrs, _, *mask = st.op.args
            aligned = lets.get(ptrs.name) if isinstance(ptrs, Ref) else None
            if (aligned is not None and aligned.op.kind == OpKind.ASSUME_DIV_BY and counts[id(aligned)] == 1
                    and self.row(aligned.op).method is None and mask and st.op.attr("token") is not None
                    and st.op.attr("result_token") is None and not st.op.attr("latency")):
                out[id(st.op)] = aligned
        return out

    def slice_view_plan(self) -> dict[int, Let]:
        """`Array.slice` views (by op id) of rank 1 to MAX_RANK, their last axis contiguous, whose pointer is an
        alignment `let` read by nothing else and that only zero-padded loads read (cutile's `Tensor::partition`;
        cutile cannot type a `tiles` view helper's call on a tensor a module function returns): each one call of
        the module's `slice_view_<rank>d`, which holds the view's assumptions and the view (once per module,
        instead of at each view)."""
        counts = use_counts(self.kernel)
        lets = {st.name: st for st in walk(self.kernel.body) if isinstance(st, Let) and not st.update}
        read_otherwise = {a.name for st in walk(self.kernel.body) if isinstance(st, (Let, Do))
                          and not _partition_load(st.op) for a in st.op.args if isinstance(a, Ref)}
        out: dict[int, Let] = {}
        for st in walk(self.kernel.body):
            if (not isinstance(st, Let) or st.op.kind != OpKind.MAKE_VIEW or id(st) in self.unused
                    or st.name in read_otherwise):
                continue
            ptr, rank = st.op.args[0], st.op.ty.rank
            aligned = lets.get(ptr.name) if isinstance(ptr, Ref) else None
            if (aligned is not None and aligned.op.kind == OpKind.ASSUME_DIV_BY and counts[id(aligned)] == 1
                    and 1 <= rank <= L.MAX_RANK and tuple(st.op.attr("strides")) == (-1,) * (rank - 1) + (1,)):
                out[id(st.op)] = aligned
        return out

    def lower_make_view(self, op: Op, name: str):
        aligned = self.slice_aligns.get(id(op))
        if aligned is None:
            return super().lower_make_view(op, name)
        _, array, *values = op.args
        rank = op.ty.rank
        align = self.alignments[id(aligned.op)] if aligned.op.attr("at_launch") else aligned.op.attr("divisor")
        self.module_fns.add(f"slice_view_{rank}d")
        call = L.IDIOM_SLICE_VIEW.format(rank=rank, dtype=dtype_rs(op.ty.dtype), align=align, ptr=self.atom(aligned.op.args[0]),
                                         divisors=", ".join(map(str, op.attr("divisors") or (1,) * rank)),
                                         values=", ".join(self.atom(v) for v in values), token=f"{array.name}.token()")
        dims = ", ".join(["-1"] * rank)
        return [f"let {name}: Tensor<{dtype_rs(op.ty.dtype)}, {{ [{dims}] }}> = {call};"], None

    def lower_store_ptr(self, op: Op, name: str) -> str:
        ptrs, value, *mask = op.args
        if not mask or op.attr("token") is None or op.attr("latency") or not op.args[1].ty.shape:
            return super().lower_store_ptr(op, name)
        self.module_fns.add("scatter_tile")
        return L.IDIOM_SCATTER_TILE.format(ptrs=self.atom(ptrs), value=self.atom(value), mask=self.atom(mask[0]),
                                           token=op.attr("token"))

    def lower_load_ptr(self, op: Op, name: str):
        aligned = self.element_loads.get(id(op))
        if aligned is None:
            return self.lower_gather(op, name)
        _, pad, mask = op.args
        self.module_fns.add("load_element")
        return L.IDIOM_LOAD_ELEMENT.format(dtype=dtype_rs(op.ty.dtype), align=aligned.op.attr("divisor"),
                                           ptr=self.atom(aligned.op.args[0]), mask=self.atom(mask),
                                           pad=self.atom(pad), token=op.attr("token"))

    def lower_gather(self, op: Op, name: str):
        """A tile gather with a mask, the array's token and the default modes, its token unread: one call of the
        module's `gather_tile` (its `unsafe` load once per module)."""
        ptrs, pad, *mask = op.args
        if (not mask or op.attr("token") is None or op.attr("result_token") is not None or op.attr("latency")
                or not op.ty.shape):
            return super().lower_load_ptr(op, name)
        self.module_fns.add("gather_tile")
        return L.IDIOM_GATHER_TILE.format(ptrs=self.atom(ptrs), mask=self.atom(mask[0]), pad=self.atom(pad),
                                          token=op.attr("token"))

    def load_as_f32(self, load: Let) -> str:
        """The load `load` cast to f32, as one helper call (see `load_cast_plan`)."""
        expr = self.lower_load(load.op, load.name)
        helper, rest = expr.split("(", 1)
        self.helpers.add(f"{helper}_f32")
        return f"{helper}_f32({rest}"

    def calls_helper(self, st) -> bool:
        """Whether the statement's operation is written as a call of a `tiles` helper or a `Tensor::store` (or is
        a cast a `store_cast` takes)."""
        if not isinstance(st, (Let, Do)):
            return False
        row = self.row(st.op)
        if row.method == "store" or row.method == "load" or id(st) in self.stored:
            return True
        return row.template is not None and any(re.search(rf"(?<![\w.]){h}\(", row.template) for h in L.TILE_HELPERS)

    def written_as_call(self, op: Op) -> bool:
        """Whether the op's value is written as a call: a function (`maxf(..)`), a method, a block id."""
        row = self.row(op)
        return (op.kind in L.GRID or self.method_call(op)
                or (row.template is not None and "(" in row.template and not OPERATOR.match(row.template)))

    def method_call(self, op: Op) -> bool:
        """Whether the op's value is written as a method call (`x.reshape(..)`, `s.broadcast(..)`)."""
        row = self.row(op)
        return row.method == "splat" or (row.template is not None and row.template.startswith("{")
                                          and not OPERATOR.match(row.template))

    def eval_refs(self, st) -> list[str] | None:
        """The names a statement reads as expression operands, in the order it evaluates them; None when it
        takes none."""
        if not isinstance(st, (Let, Do)) or st.op.kind in OPAQUE_ABSORBERS:
            return None
        op = st.op
        row = self.row(op)
        if row.template in SCALAR_CALLS:
            return None
        if row.template is not None and row.refuse is None:
            names = []
            for f in template_fields(row.template):
                if f == "tokens":
                    return None
                if f in OPERAND_FIELDS and OPERAND_FIELDS[f] < len(op.args):
                    a = op.args[OPERAND_FIELDS[f]]
                    names.append(a.name if isinstance(a, Ref) else None)
            return [n for n in names if n]
        if row.method not in ABSORBING_METHODS:
            return None
        if row.method in ("load", "store") and op.args[0].name in self.roots:
            return None  # its view is made before it
        if row.method == "store" and op.args[0].name in self.owned:
            return [op.args[1].name] if isinstance(op.args[1], Ref) else []
        if row.method == "store" and (op.attr("token") is not None or op.attr("latency") is not None):
            return None
        args = op.args[1:] if row.method in ("load", "store") else op.args
        return [a.name for a in args if isinstance(a, Ref)]

    # ---- views, loads and stores
    def view(self, array: str, shape, padding: str, order, mutable: bool) -> str:
        key = (array, tuple(shape), padding, tuple(order or ()), mutable)
        if key in self.view_names:
            return self.view_names[key]
        tensor = f"&{array}" if array in self.roots else array  # a local view is lent to a function
        if mutable:
            expr = L.IDIOM_VIEW_MUT.format(tensor=tensor, shape=shape_rs(shape))
            self.helpers.add("view_mut")
        elif order and padding == "zero":  # a method call borrows its receiver itself
            expr = L.IDIOM_VIEW_PERMUTED.format(tensor=array, shape=shape_rs(shape),
                                                order=", ".join(map(str, order)))
        elif not order:
            template = L.IDIOM_VIEW[padding]
            expr = template.format(tensor=array if template.startswith("{tensor}.") else tensor, shape=shape_rs(shape))
            self.helpers.update(h for h in L.TILE_HELPERS if expr.startswith(f"{h}("))
        else:  # a permuted view with another padding: the faithful spelling
            name = super().view(array, shape, padding, order, mutable)
            self.view_names[key] = name
            return name
        suffix = "tiles" if not any(k[0] == array for k in self.view_names) else \
            "out" if mutable else padding if padding != "undetermined" else "tiles"
        name = self.fresh(f"{array}_{suffix}")
        decls = self.local_views if array in self.roots else self.view_decls
        decls.append(f"let {'mut ' if mutable else ''}{name} = {expr};")
        self.view_names[key] = name
        return name

    def lower_splat(self, op: Op, name: str):
        (x,) = op.args
        if isinstance(x, Ref):
            return L.SCALAR_BROADCAST.format(scalar=self.operand(x, ATOM), shape=shape_rs(op.ty.shape))
        out = super().lower_splat(op, name)
        if not isinstance(out, tuple) or not op.ty.shape:
            return out
        # an f16/bf16/generic literal: its 0-d constant bound (typed), then reshaped and broadcast in one expression
        pre, _ = out
        scalar = pre[0].split(":")[0].removeprefix("let ").strip()
        ones = ", ".join("1" for _ in op.ty.shape)
        return pre[:1], L.IDIOM_SPLAT_LIT.format(scalar=scalar, ones=ones, shape=shape_rs(op.ty.shape))

    def lower_load(self, op: Op, name: str):
        token, result = op.attr("token"), op.attr("result_token")
        if token is not None and op.attr("latency") is None and op.attr("allow_tma") is not False:
            arr, *index = op.args
            view = self.view(arr.name, op.attr("shape"), op.attr("padding"), op.attr("order"), False)
            self.helpers.add("load_after")
            expr = L.IDIOM_LOAD_AFTER.format(view=view, index=self.index(index), token=token,
                                             inbounds=", ".join(["false"] * len(index)))
            return [f"let ({name}, {result or '_'}): ({type_rs(op.ty)}, Token) = {expr};"], None
        if token is not None or result is not None:
            return super().lower_load(op, name)
        arr, *index = op.args
        view = self.view(arr.name, op.attr("shape"), op.attr("padding"), op.attr("order"), False)
        if op.attr("latency") is None:
            tma = op.attr("allow_tma") is not False
            self.helpers.add("load" if tma else "load_no_tma")
            return L.IDIOM_LOAD[tma].format(view=view, index=self.index(index))
        latency = "None" if op.attr("latency") is None else f"Some({op.attr('latency')})"
        return L.IDIOM_LOAD_MODES.format(view=view, index=self.index(index), latency=latency,
                                         tma=L.TMA[op.attr("allow_tma")])

    def lower_store(self, op: Op, name: str) -> str:
        arr, tile, *index = op.args
        if arr.name in self.owned and id(op) in self.store_casts:
            self.helpers.add("store_cast")
            return L.IDIOM_STORE_CAST.format(array=arr.name, tile=self.atom(self.store_casts[id(op)].op.args[0]))
        if arr.name in self.owned:
            return L.IDIOM_STORE_OWNED.format(array=arr.name, tile=self.atom(tile))
        if op.attr("token") is not None and op.attr("latency") is None:
            view = self.view(arr.name, tile.ty.shape, "undetermined", None, False)
            tma = op.attr("allow_tma") is not False
            self.helpers.add("store_after" if tma else "store_after_no_tma")
            return L.IDIOM_STORE_AFTER[tma].format(view=view, tile=self.atom(tile), index=self.index(index),
                                              token=op.attr("token"), inbounds=", ".join(["false"] * len(index)))
        if op.attr("token") is not None or op.attr("latency") is not None:  # the raw store, its modes spelled
            return super().lower_store(op, name)
        view = self.view(arr.name, tile.ty.shape, "undetermined", None, True)
        tma = op.attr("allow_tma") is not False
        self.helpers.add("store" if tma else "store_no_tma")
        return L.IDIOM_STORE[tma].format(view=view, tile=self.atom(tile), index=self.index(index))

    def lower_extract(self, op: Op, name: str):
        x, *index = op.args
        tiles = ", ".join(L.IDIOM_EXTRACT_INDEX.format(x=self.atom(a)) for a in index)
        return L.EXTRACT.format(x=self.operand(x, 0), index=tiles)


class _OperandFields(_Fields):
    """A template's fields, each operand parenthesized as its position in the template needs."""

    def __init__(self, em: IdiomaticEmitter, op: Op, template: str):
        super().__init__(em, op)
        self.need = _positions(template)

    def __missing__(self, key: str) -> str:
        if key in OPERAND_FIELDS and OPERAND_FIELDS[key] < len(self.op.args):
            return self.em.operand(self.op.args[OPERAND_FIELDS[key]], self.need.get(key, 0))
        return super().__missing__(key)


@functools.cache
def _positions(template: str) -> dict[str, int]:
    """The precedence each operand field of a template needs: a method receiver or a prefix operand binds
    tightest; a binary operator's left operand its own level, its right one above it; a call argument any."""
    need: dict[str, int] = {}
    m = OPERATOR.match(template)
    if m:
        level = PRECEDENCE.get(m.group(2), ATOM)
        return {m.group(1): level, m.group(3): level + 1}
    for f in template_fields(template):
        at = template.index("{" + f + "}")
        after = template[at + len(f) + 2: at + len(f) + 3]
        before = template[at - 1: at] if at else ""
        need[f] = ATOM if after == "." else UNARY_PREC if before == "-" else 0
    return need


def _partition_load(op: Op) -> bool:
    """A load the idiomatic rendering reads through cutile's `Tensor::partition` (zero padding, no token)."""
    return (op.kind == OpKind.LOAD and op.attr("padding") == "zero" and op.attr("token") is None
            and op.attr("result_token") is None)


def _blocks(st) -> list[Block]:
    if isinstance(st, For):
        return [st.body]
    if isinstance(st, While):
        return [st.cond, st.body]
    if isinstance(st, If):
        return [st.then, st.orelse]
    return []


# Rows the idiomatic rendering spells otherwise (first match wins, then the faithful table).
IDIOM_ROWS = [
    *[L.Row(OpKind.UNARY, {"fn": fn, "rounding": "approx", "dtype": "f32"}, spelling)
      for fn, spelling in L.IDIOM_APPROX_F32.items()],
]
IDIOM_ROWS_BY_KIND = L.by_kind([*IDIOM_ROWS, *L.ROWS])


# ---------------------------------------------------------------- the idiomatic crate's module files

TILES_MODULE = "tiles"  # the crate's module of device helpers (src/tiles.rs)


@dataclass
class GroupText:
    """One C symbol's rendering: its entries, launcher, and the shims and helpers they use."""

    entries: list[EntryText]
    launcher: str
    shims: set[str]
    helpers: set[str]
    module_fns: set[str]


FOLD_PASSES = 16


def emit_entry(kernel: Kernel, source: str = "") -> IdiomaticEmitter:
    """The idiomatic rendering of one entry (its `entry`, `shims` and `helpers`); Diagnostic if it cannot be
    written."""
    from tileport.diagnostics import Diagnostic
    unfold: frozenset[int] = frozenset()
    try:
        for _ in range(FOLD_PASSES):  # fold less where a statement came out too wide, until none does
            em = IdiomaticEmitter(kernel, source, unfold=unfold)
            em.emit()
            if not em.too_wide - unfold:
                break
            unfold |= em.too_wide
    except Diagnostic:
        raise
    except Exception as e:  # noqa: BLE001 - an emitter bug fails this kernel only, with its location
        raise Diagnostic(f"internal translator error: {type(e).__name__}: {e}", kernel.loc, "internal",
                         "please report this kernel", kernel=kernel.base_name or kernel.name) from None
    return em


def emit_group(group, source: str = "") -> GroupText:
    from tileport.emit.rust.launch import emit_launcher
    ems = [emit_entry(k, source) for k in group.variants]
    return GroupText([em.entry for em in ems], emit_launcher(group, owned_outputs),
                     set().union(*(em.shims for em in ems)), set().union(*(em.helpers for em in ems)),
                     set().union(*(em.module_fns for em in ems)))


def module_doc(path: str) -> str:
    """The docstring of a source file (its module's doc comment)."""
    try:
        return ast.get_docstring(ast.parse(Path(path).read_text())) or ""
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return ""


def module_rs(mod, parts: list[GroupText], version: str, doc_path: str = "") -> str:
    """A module file: the source's docstring, the device module (its private functions, shared bodies, then
    the entries in source order) and the launchers."""
    entries = [e for part in parts for e in part.entries]
    fns = [L.MODULE_FNS[f].rstrip("\n") for f in L.MODULE_FNS if any(f in part.module_fns for part in parts)]
    taken = ({e.kernel.name for e in entries} | {h for part in parts for h in part.helpers | part.shims}
             | set(L.MODULE_FNS))
    shared = fns + share_bodies(entries, taken)
    uses_tiles = any(part.helpers or part.shims for part in parts)
    doc = module_doc(doc_path)
    head = [f"//! cuTile Rust port of `{mod.source}`, generated by tileport {version}.",
            "//! Do not edit: regenerate with `tileport translate`."]
    if doc:
        head += ["//!"] + [f"//! {line}".rstrip() for line in doc.splitlines()]
    head += ["", "#[cutile::module]", f"pub mod {mod.name} {{", "    use cutile::core::*;"]
    if uses_tiles:
        head.append(f"    use crate::{TILES_MODULE}::{TILES_MODULE}::*;")
    body = "\n\n".join(shared + [e.render() for e in entries])
    launchers = "\n\n".join(part.launcher for part in parts)
    return "\n".join(head + ["", body, "}", "", "use crate::support::*;", "", launchers, ""])


# Items of support.rs only the faithful launchers use (cutile's own launcher, called with borrowed tensors), cut
# from the idiomatic crate's copy: (first line, the line after the item).
FAITHFUL_SUPPORT = (("use cutile::tensor::Tensor;\n", "\n"),
                    ("/// A borrowed tensor passed to cutile's launcher", "/// Outputs are written by many blocks"),
                    ("    /// A non-owning view of caller memory", "}\n\n// ----"))


def support_rs(template: str, launch: str) -> str:
    """The idiomatic crate's support.rs: the template without what only the faithful launchers use, then the
    launch path its launchers share. A template that lost one of those items is a translator bug (raised)."""
    for first, after in FAITHFUL_SUPPORT:
        start = template.index(first)  # ValueError: the template changed
        end = template.index(after, start + len(first))
        template = template[:start] + template[end:]
    return template + launch


def tiles_rs(helpers: set[str], shims: set[str], version: str) -> str:
    """The crate's `tiles` module: the device helpers and op bindings (shims) its kernels call, each once."""
    items = [L.TILE_HELPERS[h] for h in L.TILE_HELPERS if h in helpers]
    items += [L.SHIMS[s] for s in sorted(shims)]
    return "\n".join([
        f"//! Device helpers the crate's kernels share, generated by tileport {version}.",
        "//! Do not edit: regenerate with `tileport translate`.", "",
        "#[cutile::module]", f"pub mod {TILES_MODULE} {{", "    use cutile::core::*;", "",
        "\n".join(items), "}", ""])
