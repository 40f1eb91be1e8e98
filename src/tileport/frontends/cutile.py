"""cuTile Python frontend: source text -> kernel model, with `ast` only (user code never runs).

One visitor method per Python construct (`stmt_<Node>`, `expr_<Node>`); `ct.<fn>` calls are typed by
the handlers in `cutile_calls`. Kernel-level facts the source does not state (array element dtypes,
scalar dtypes, constant values in use) come from `KernelConfig`s; what cannot be decided from them is
a `Diagnostic` with file:line:col.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.emit.names import rust_ident
from tileport.frontends.liveness import Frames, assigned, exposed_read
from tileport.model import types as T
from tileport.model.builder import Builder, DTypeSpace, lit_dtype
from tileport.model.ir import (Atom, Block, Break, CDim, Continue, For, If, Kernel, KernelModule, Let, Lit, Loc,
                               Param, Ref, Return, sym_names, walk)
from tileport.model.types import ArrayT, ConstT, DVar, ScalarT, Sym, TileT

CT_MODULE = "cuda.tile"
ARRAY_USES = {"load", "store", "gather", "scatter", "num_tiles", "atomic_add", "atomic_max", "atomic_min",
              "atomic_xchg", "atomic_cas", "atomic_and", "atomic_or", "atomic_xor"}


# ---------------------------------------------------------------- compile-time values

@dataclass(frozen=True)
class CV:
    """A compile-time value: int/float/bool/str/None, a symbolic Dim, a dtype, an enum or a tuple."""

    value: Any

    @property
    def is_dim(self) -> bool:
        return isinstance(self.value, (Sym, T.DimOp)) or (isinstance(self.value, int)
                                                          and not isinstance(self.value, bool))


@dataclass(frozen=True)
class DTypeVal:
    dtype: T.DType


@dataclass(frozen=True)
class EnumVal:
    enum: str  # PaddingMode, RoundingMode, ...
    member: str


@dataclass(frozen=True)
class Helper:
    node: ast.FunctionDef


@dataclass(frozen=True)
class ModuleRef:
    name: str  # "ct" for cuda.tile, "math"


Value = Any  # Ref | CV | tuple | Helper | ModuleRef | DTypeVal | EnumVal


# ---------------------------------------------------------------- configuration

@dataclass(frozen=True)
class KernelConfig:
    """What the source does not say: one mapping per configuration in use.

    Each configuration maps array and scalar parameters to a dtype name ("f16", "i32", ...) and
    `ct.Constant` parameters to a value. `ranks` gives array ranks when they are known from outside.
    `pinned` fixes constants to literals (literal-specialized entries).
    """

    configs: tuple[Mapping[str, Any], ...] = ()
    ranks: Mapping[str, int] = field(default_factory=dict)
    pinned: Mapping[str, Any] = field(default_factory=dict)


DEFAULT_FLOAT_DTYPES = ("f32", "f16", "bf16")


# ---------------------------------------------------------------- module scan

@dataclass
class ScannedModule:
    path: str
    tree: ast.Module
    ct_names: set[str]  # names bound to the cuda.tile module
    ct_imports: dict[str, str]  # local name -> cuda.tile attribute (from cuda.tile import X as Y)
    constants: dict[str, Any]  # module-level compile-time constants (already evaluated)
    const_aliases: dict[str, str]  # ConstInt = ct.Constant[int] -> {"ConstInt": "int"}
    helpers: dict[str, ast.FunctionDef]
    kernels: dict[str, ast.FunctionDef]
    math_names: set[str]


def loc_of(path: str, node: ast.AST) -> Loc:
    return Loc(path, getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1)


def scan_module(path: str, source: str | None = None) -> ScannedModule:
    """Find kernels, helpers, constants and imports. Raises Diagnostic on a syntax error."""
    text = Path(path).read_text() if source is None else source
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise Diagnostic(f"syntax error: {e.msg}", Loc(path, e.lineno or 0, e.offset or 0), "syntax") from None
    sm = ScannedModule(path, tree, set(), {}, {}, {}, {}, {}, set())
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == CT_MODULE and a.asname:
                    sm.ct_names.add(a.asname)
                elif a.name == "math":
                    sm.math_names.add(a.asname or "math")
        elif isinstance(node, ast.ImportFrom):
            if node.module == "cuda":
                sm.ct_names.update(a.asname or a.name for a in node.names if a.name == "tile")
            elif node.module == CT_MODULE:
                sm.ct_imports.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.FunctionDef):
            if any(_is_ct_attr(sm, d, "kernel") for d in node.decorator_list):
                sm.kernels[node.name] = node
            else:
                sm.helpers[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            _scan_assign(sm, node)
    return sm


def _is_ct_attr(sm: ScannedModule, node: ast.AST, attr: str) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id in sm.ct_names and node.attr == attr
    return isinstance(node, ast.Name) and sm.ct_imports.get(node.id) == attr


def _scan_assign(sm: ScannedModule, node: ast.Assign | ast.AnnAssign) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
        return
    name, value = targets[0].id, node.value
    kind = _const_annotation(sm, value)
    if kind:
        sm.const_aliases[name] = kind
        return
    try:
        sm.constants[name] = _eval_const(sm, value)
    except (ValueError, TypeError, ZeroDivisionError, KeyError):
        pass  # not a compile-time constant: a kernel that uses it gets a diagnostic


def _const_annotation(sm: ScannedModule, node: ast.AST | None) -> str | None:
    """`ct.Constant[int]` (or an alias of it) -> "int"."""
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in sm.const_aliases:
        return sm.const_aliases[node.id]
    if isinstance(node, ast.Subscript) and _is_ct_attr(sm, node.value, "Constant"):
        inner = node.slice
        if isinstance(inner, ast.Name) and inner.id in ("int", "bool", "float"):
            return inner.id
        return "int"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _const_annotation(sm, ast.parse(node.value, mode="eval").body)
    return None


_MATH = {"sqrt": math.sqrt, "log": math.log, "log2": math.log2, "exp": math.exp, "tanh": math.tanh,
         "pi": math.pi, "e": math.e, "inf": math.inf}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
           ast.MatMult: "@"}
_PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
       "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "&": lambda a, b: a & b,
       "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b}


def _eval_const(sm: ScannedModule, node: ast.AST) -> Any:
    """Evaluate a module-level constant expression without executing user code."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in sm.constants:
        return sm.constants[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_const(sm, node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _PY[_BINOPS[type(node.op)]](_eval_const(sm, node.left), _eval_const(sm, node.right))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in sm.math_names:
        return _MATH[node.attr]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id in sm.math_names):
        return _MATH[node.func.attr](*(_eval_const(sm, a) for a in node.args))
    raise ValueError("not a constant")


# ---------------------------------------------------------------- parameter classification

def classify_params(sm: ScannedModule, fn: ast.FunctionDef, cfg: KernelConfig) -> list[Param]:
    """Arrays are parameters used as arrays; constants are annotated; everything else is a scalar."""
    path = sm.path
    if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise Diagnostic("kernels take plain positional parameters only", loc_of(path, fn), "signature")
    arrays = array_uses(sm, fn, set())
    first = cfg.configs[0] if cfg.configs else {}
    params = []
    for a in fn.args.args:
        loc = loc_of(path, a)
        const_kind = _const_annotation(sm, a.annotation)
        if const_kind:
            params.append(Param(a.arg, ConstT(const_kind), const_kind))
        elif a.arg in arrays:
            rank = cfg.ranks.get(a.arg) or arrays[a.arg]
            if rank is None:
                raise Diagnostic(f"cannot tell the rank of array parameter `{a.arg}`", loc, "signature",
                                 "index it with a tuple in ct.load/ct.store, or give its rank in the config")
            params.append(Param(a.arg, ArrayT("?", rank)))
        else:
            ann = a.annotation.id if isinstance(a.annotation, ast.Name) else None
            default = "f32" if ann == "float" else "i32"
            params.append(Param(a.arg, ScalarT(first.get(a.arg, default))))
    return params


def array_uses(sm: ScannedModule, fn: ast.FunctionDef, active: set[str]) -> dict[str, int | None]:
    """Names `fn` uses as arrays (with the rank a load/store index shows), through helper calls too."""
    arrays: dict[str, int | None] = {}

    def note(name: str, rank: int | None) -> None:
        if arrays.get(name) is None:
            arrays[name] = rank
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = _ct_call_name(sm, node.func)
            if name in ARRAY_USES and node.args and isinstance(node.args[0], ast.Name):
                note(node.args[0].id, _rank_from_call(name, node))
            elif (isinstance(node.func, ast.Name) and node.func.id in sm.helpers
                  and node.func.id not in active):
                helper = sm.helpers[node.func.id]
                inner = array_uses(sm, helper, active | {fn.name})
                params = [a.arg for a in helper.args.args]
                bound = dict(zip(params, node.args)) | {k.arg: k.value for k in node.keywords if k.arg}
                for pname, arg in bound.items():
                    if pname in inner and isinstance(arg, ast.Name):
                        note(arg.id, inner[pname])
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.attr in ("shape", "strides", "ndim", "dtype")):
            note(node.value.id, None)
    return arrays


def _ct_call_name(sm: ScannedModule, func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in sm.ct_names:
        return func.attr
    if isinstance(func, ast.Name) and func.id in sm.ct_imports:
        return sm.ct_imports[func.id]
    return None


def _rank_from_call(name: str, call: ast.Call) -> int | None:
    idx = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg in ("index", "indices")), None)
    if isinstance(idx, ast.Tuple):
        return len(idx.elts)
    if name in ("gather", "scatter") and idx is not None:
        return 1
    return None


def dtype_space(params: list[Param], cfg: KernelConfig) -> tuple[DTypeSpace, dict[str, T.DType]]:
    """Group arrays whose dtypes vary together into generics E, E2, ...; fixed ones stay concrete."""
    configs = cfg.configs or tuple({p.name: dt for p in params if p.is_array} for dt in DEFAULT_FLOAT_DTYPES)
    space = DTypeSpace()
    by_vector: dict[tuple[str, ...], T.DType] = {}
    assigned: dict[str, T.DType] = {}
    for p in params:
        if not p.is_array:
            continue
        missing = [i for i, c in enumerate(configs) if p.name not in c]
        if missing:
            raise Diagnostic(f"no element dtype given for array `{p.name}`", None, "config")
        vec = tuple(T.TORCH_DTYPES.get(c[p.name], c[p.name]) for c in configs)
        if len(set(vec)) == 1:
            assigned[p.name] = vec[0]
            continue
        if vec not in by_vector:
            var = DVar("E" if not by_vector else f"E{len(by_vector) + 1}")
            by_vector[vec] = var
            space.vectors[var] = vec
        assigned[p.name] = by_vector[vec]
    return space, assigned


# ---------------------------------------------------------------- the kernel visitor

class _Scope:
    def __init__(self, kind: str, locals_: set[str] | None = None):
        self.kind = kind  # "fn" | "loop" | "if"
        self.vars: dict[str, Value] = {}
        self.locals = locals_ or set()  # outer names this block rebinds without carrying them out


class KernelLowerer:
    def __init__(self, sm: ScannedModule, fn: ast.FunctionDef, cfg: KernelConfig):
        from tileport.frontends import cutile_calls
        self.sm, self.fn, self.cfg = sm, fn, cfg
        self.path = sm.path
        self.calls = cutile_calls
        params = classify_params(sm, fn, cfg)
        space, array_dtypes = dtype_space(params, cfg)
        self.params = [Param(p.name, ArrayT(array_dtypes[p.name], p.ty.rank)) if p.is_array else p for p in params]
        self.params = [_rust_named(p, self.loc(fn)) for p in self.params]
        configs = list(cfg.configs)
        const_values = [{p.name: c[p.name] for p in self.params if p.is_const and p.name in c} for c in configs]
        self.b = Builder(self.path, space, const_values)
        self.scopes: list[_Scope] = []
        self.frames = Frames()
        self.inline_depth = 0

    def loc(self, node: ast.AST) -> Loc:
        return loc_of(self.path, node)

    def fail(self, node: ast.AST, message: str, construct: str = "", hint: str = "") -> Diagnostic:
        return Diagnostic(message, self.loc(node), construct, hint)

    # ---- entry
    def lower(self) -> Kernel:
        fn = self.fn
        self.scopes.append(_Scope("fn"))
        body = self.b.push()
        for p in self.params:
            if p.is_const:
                if p.name in self.cfg.pinned:
                    self.scopes[-1].vars[p.name] = CV(self.cfg.pinned[p.name])
                elif p.const_type == "int":
                    self.scopes[-1].vars[p.name] = CV(Sym(p.name))
                else:
                    raise NeedsSpecialization(frozenset({p.name}), f"`ct.Constant[{p.const_type}]` parameters "
                                              "have no const-generic form in Rust", self.loc(fn))
            else:
                self.scopes[-1].vars[p.name] = Ref(p.rust, p.ty)
                self.b.scope_names[-1].add(p.rust)
        self.block(fn.body, fn)
        self.b.pop()
        hints = self.kernel_hints()
        params = [p for p in self.params if not (p.is_const and p.name in self.cfg.pinned)]
        doc = ast.get_docstring(fn) or ""
        return Kernel(rust_ident(fn.name), params, body, self.loc(fn), hints, dict(self.b.dspace.vectors), doc,
                      module_name=rust_ident(Path(self.path).stem), base_name=fn.name, pinned=dict(self.cfg.pinned),
                      signature=tuple(p.name for p in self.params))

    def kernel_hints(self) -> dict[str, Any]:
        hints: dict[str, Any] = {}
        for d in self.fn.decorator_list:
            if isinstance(d, ast.Call) and _is_ct_attr(self.sm, d, "kernel"):
                for kw in d.keywords:
                    if kw.arg not in ("occupancy", "num_ctas", "num_worker_warps", "opt_level"):
                        raise self.fail(kw, f"kernel option `{kw.arg}` is not supported", "ct.kernel")
                    v = self.compile_time(kw.value, f"kernel option `{kw.arg}`")
                    hints[kw.arg] = v
        return hints

    # ---- scopes and variables
    def lookup(self, name: str, node: ast.AST) -> Value:
        for s in reversed(self.scopes):
            if name in s.vars:
                return s.vars[name]
        if name in self.sm.constants:
            return CV(self.sm.constants[name])
        if name in self.sm.helpers:
            return Helper(self.sm.helpers[name])
        if name in self.sm.ct_names:
            return ModuleRef("ct")
        if name in self.sm.math_names:
            return ModuleRef("math")
        if name in self.sm.ct_imports:  # `from cuda.tile import X`: what `ct.X` is
            return self.calls.attribute(self, ModuleRef("ct"), self.sm.ct_imports[name], node)
        if name in ("range", "min", "max", "len", "int", "float", "bool", "abs"):
            return ("builtin", name)
        raise self.fail(node, f"undefined name `{name}`", "name")

    def _owner(self, name: str) -> int | None:
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i].vars:
                return i
            if self.scopes[i].kind == "fn":
                return None
        return None

    def assign(self, name: str, value: Value, node: ast.AST) -> None:
        owner = self._owner(name)
        cur = len(self.scopes) - 1
        if owner is not None and any(name in self.scopes[j].locals for j in range(owner + 1, cur + 1)):
            owner = None  # a block-local rebinding, not an update of the outer variable
        if not isinstance(value, Ref):
            if owner is not None and owner != cur and isinstance(self.scopes[owner].vars[name], Ref):
                raise self.fail(node, f"`{name}` is a runtime value outside this block and cannot become a "
                                      "compile-time value inside it", "assignment")
            self.scopes[cur].vars[name] = value
            return
        if owner is not None and owner != cur:
            old = self.scopes[owner].vars[name]
            if not isinstance(old, Ref):
                raise self.fail(node, f"`{name}` is a compile-time value outside this block; assigning a "
                                      "runtime value to it inside a loop or branch is not supported",
                                "assignment", "initialize it from a runtime value before the block")
            if old.ty != value.ty:
                raise self.fail(node, f"`{name}` changes type inside a loop or branch ({old.ty} -> {value.ty})",
                                "loop-carried type", "keep loop-carried and branch-assigned values the same type")
            self._bind_update(old.name, value, node)
            self.scopes[owner].vars[name] = Ref(old.name, old.ty)
            return
        rust_name = name if name in self.b.scope_names[-1] else self.b.fresh(name)
        self._bind_new(rust_name, value)
        self.scopes[cur].vars[name] = Ref(rust_name, value.ty)

    def _bind_new(self, rust_name: str, value: Ref) -> None:
        last = self.b.blocks[-1].stmts[-1] if self.b.blocks[-1].stmts else None
        if isinstance(last, Let) and last.name == value.name and value.name in self.b.temps:
            self.b.temps.discard(last.name)
            if last.name != rust_name:
                self.b.scope_names[-1].discard(last.name)
                last.name = rust_name  # the temporary that produced the value takes the variable's name
        elif value.name != rust_name:
            self.b.emit(Let(rust_name, self.b_copy(value)))

    def _bind_update(self, rust_name: str, value: Ref, node: ast.AST) -> None:
        last = self.b.blocks[-1].stmts[-1] if self.b.blocks[-1].stmts else None
        if isinstance(last, Let) and last.name == value.name and value.name in self.b.temps:
            self.b.temps.discard(last.name)
            self.b.scope_names[-1].discard(last.name)
            last.name, last.update = rust_name, True
        else:
            self.b.emit(Let(rust_name, self.b_copy(value), update=True))

    def b_copy(self, value: Ref):
        from tileport.model.ir import Op
        return Op("copy", (value,), value.ty, Loc(self.path, 0, 0))

    # ---- statements
    def block(self, stmts: Sequence[ast.stmt], owner: ast.AST) -> None:
        frame = [stmts, 0, owner]
        self.frames.stack.append(frame)
        try:
            for i, s in enumerate(stmts):
                frame[1] = i
                handler = getattr(self, f"stmt_{type(s).__name__}", None)
                if handler is None:
                    raise self.fail(s, f"`{type(s).__name__}` statements are not supported in kernels",
                                    type(s).__name__)
                handler(s)
        finally:
            self.frames.stack.pop()

    def block_locals(self, stmts: Sequence[ast.stmt], loop: bool) -> set[str]:
        """Outer names `stmts` assigns that do not flow out of the block (see liveness.py)."""
        return {n for n in assigned(stmts)
                if self._owner(n) is not None and not self.frames.live_after(n)
                and not (loop and exposed_read(stmts, n))}

    def stmt_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        self.expr(s.value)

    def stmt_Pass(self, s: ast.Pass) -> None:
        pass

    def stmt_Assign(self, s: ast.Assign) -> None:
        if len(s.targets) != 1:
            raise self.fail(s, "chained assignment is not supported", "assignment")
        self.assign_target(s.targets[0], self.expr(s.value), s)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is None:
            raise self.fail(s, "a declaration without a value is not supported", "assignment")
        self.assign_target(s.target, self.expr(s.value), s)

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        if not isinstance(s.target, ast.Name):
            raise self.fail(s, "augmented assignment to anything but a name is not supported", "assignment")
        cur = self.lookup(s.target.id, s.target)
        self.assign_target(s.target, self.binop(_BINOPS.get(type(s.op)), cur, self.expr(s.value), s), s)

    def assign_target(self, target: ast.AST, value: Value, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign(target.id, value, node)
        elif isinstance(target, ast.Tuple):
            value = self.calls.materialize(self, value, node)
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.fail(node, "tuple unpacking needs a tuple of the same length", "assignment")
            for t, v in zip(target.elts, value):
                self.assign_target(t, v, node)
        else:
            raise self.fail(node, f"assignment to `{type(target).__name__}` is not supported", "assignment")

    def stmt_Return(self, s: ast.Return) -> None:
        if self.inline_depth:
            raise self.fail(s, "`return` inside a helper must be its last statement", "return")
        if s.value is not None:
            raise self.fail(s, "kernels cannot return a value", "return")
        self.b.emit(Return(self.loc(s)))

    def stmt_Break(self, s: ast.Break) -> None:
        self.b.emit(Break(self.loc(s)))

    def stmt_Continue(self, s: ast.Continue) -> None:
        self.b.emit(Continue(self.loc(s)))

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse:
            raise self.fail(s, "`for ... else` is not supported", "for-else")
        if not isinstance(s.target, ast.Name):
            raise self.fail(s.target, "the loop variable must be a single name", "for")
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and self.lookup("range", it) == ("builtin", "range")):
            raise self.fail(it, "only `for ... in range(...)` loops are supported", "for",
                            "iterate over range(start, stop, step)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.fail(it, "range() takes 1 to 3 positional arguments", "for")
        bounds = [self.scalar_atom(self.expr(a), a) for a in it.args]
        start, stop, step = (CDim(0), bounds[0], CDim(1)) if len(bounds) == 1 else \
            (bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else CDim(1))
        if isinstance(step, CDim) and isinstance(step.dim, int) and step.dim <= 0:
            raise self.fail(it, "range() step must be positive", "for")
        locals_ = self.block_locals(s.body, loop=True)
        self.materialize_carried(s.body, s, locals_)
        self.scopes.append(_Scope("loop", locals_))
        body = self.b.push()
        index = self.b.fresh(s.target.id)
        self.scopes[-1].vars[s.target.id] = Ref(index, ScalarT("i32"))
        self.block(s.body, s)
        self.b.pop()
        self.scopes.pop()
        self.b.emit(For(index, start, stop, step, body, self.loc(s), self.outer_updates(body)))

    def materialize_carried(self, body: Sequence[ast.stmt], node: ast.AST, locals_: set[str]) -> None:
        """Compile-time values that a loop body reassigns (and carries) become runtime variables first."""
        for name in sorted(assigned(body) - locals_):
            owner = self._owner(name)
            if owner is None:
                continue
            v = self.scopes[owner].vars[name]
            if isinstance(v, CV) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
                atom = self.scalar_atom(v, node)
                ty = ScalarT(lit_dtype(v.value)) if isinstance(atom, Lit) else ScalarT("i32")
                ref = self.b.value("scalar", (atom,), ty, self.loc(node), hint=name)
                self.scopes[owner].vars[name] = ref

    def stmt_While(self, s: ast.While) -> None:
        raise self.fail(s, "`while` loops are not supported yet", "while", "rewrite as a `for ... in range` loop")

    def stmt_If(self, s: ast.If) -> None:
        cond = self.expr(s.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, T.DimOp)):
            self.block(s.body if cond.value else s.orelse, s)  # folded, as cuTile Python folds it
            return
        if isinstance(cond, CV):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "a branch on a constant", self.loc(s))
        if not (isinstance(cond, Ref) and isinstance(cond.ty, ScalarT)):
            raise self.fail(s.test, "an `if` condition must be a scalar", "if")
        if cond.ty.dtype != "bool":
            cond = self.b.value("compare", (cond, Lit(0, ScalarT(cond.ty.dtype))), ScalarT("bool"),
                                self.loc(s.test), hint="cond", op="!=")
        branches = []
        for stmts in (s.body, s.orelse):
            self.scopes.append(_Scope("if", self.block_locals(stmts, loop=False)))
            blk = self.b.push()
            self.block(stmts, s)
            self.b.pop()
            self.scopes.pop()
            branches.append(blk)
        self.b.emit(If(cond, branches[0], branches[1], self.loc(s), self.outer_updates(*branches)))

    def outer_updates(self, *blocks: Block) -> tuple[str, ...]:
        """Variables of the enclosing blocks that `blocks` (just closed) reassign, sorted."""
        outside = self.b.scope_names_outside()
        return tuple(sorted({st.name for blk in blocks for st in walk(blk)
                             if isinstance(st, Let) and st.update and st.name in outside}))

    # ---- expressions
    def expr(self, node: ast.expr) -> Value:
        handler = getattr(self, f"expr_{type(node).__name__}", None)
        if handler is None:
            raise self.fail(node, f"`{type(node).__name__}` expressions are not supported in kernels",
                            type(node).__name__)
        return handler(node)

    def expr_Constant(self, node: ast.Constant) -> Value:
        if node.value is None or isinstance(node.value, (int, float, bool, str)):
            return CV(node.value)
        raise self.fail(node, f"literal {node.value!r} is not supported", "literal")

    def expr_Name(self, node: ast.Name) -> Value:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Value:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Value:
        base = self.expr(node.value)
        return self.calls.attribute(self, base, node.attr, node)

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        return self.calls.subscript(self, self.expr(node.value), node)

    def expr_Call(self, node: ast.Call) -> Value:
        callee = self.expr(node.func)
        if isinstance(callee, Helper):
            return self.inline(callee.node, node)
        args = [self.expr(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, "star-arguments are not supported", "call")
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.fail(node, "**kwargs are not supported", "call")
        return self.calls.call(self, callee, args, kwargs, node)

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")
        if op == "@":
            return self.calls.matmul(self, self.expr(node.left), self.expr(node.right), node)
        return self.binop(op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.expr(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if isinstance(v, CV):
                return CV(T.dim_op("-", 0, v.value) if v.is_dim and not isinstance(v.value, int) else -v.value)
            return self.calls.unary_fn(self, "negative", v, {}, node)
        if isinstance(node.op, ast.Not):
            if isinstance(v, CV):
                if isinstance(v.value, (Sym, T.DimOp)):
                    raise NeedsSpecialization(frozenset(sym_names(v.value)), "`not` on a constant", self.loc(node))
                return CV(not v.value)
            return self.calls.logical_not(self, v, node)
        raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        vals = [self.expr(v) for v in node.values]
        if all(isinstance(v, CV) and not isinstance(v.value, (Sym, T.DimOp)) for v in vals):
            out = vals[0].value
            for v in vals[1:]:
                out = (out and v.value) if isinstance(node.op, ast.And) else (out or v.value)
            return CV(out)
        op = "&" if isinstance(node.op, ast.And) else "|"
        acc = vals[0]
        for v in vals[1:]:
            acc = self.binop(op, acc, v, node)
        return acc

    def expr_Compare(self, node: ast.Compare) -> Value:
        if len(node.ops) != 1:
            raise self.fail(node, "chained comparisons are not supported", "comparison",
                            "split into two comparisons joined with `and`")
        op = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}.get(type(node.ops[0]))
        if op is None:
            raise self.fail(node, f"comparison {type(node.ops[0]).__name__} is not supported", "comparison")
        return self.calls.compare(self, op, self.expr(node.left), self.expr(node.comparators[0]), node)

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        cond = self.expr(node.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, T.DimOp)):
            return self.expr(node.body if cond.value else node.orelse)
        return self.calls.where(self, cond, self.expr(node.body), self.expr(node.orelse), node)

    def binop(self, op: str | None, a: Value, b: Value, node: ast.AST) -> Value:
        if op is None:
            raise self.fail(node, "operator not supported", "operator")
        return self.calls.binary(self, op, a, b, node)

    # ---- helpers
    def inline(self, fn: ast.FunctionDef, call: ast.Call) -> Value:
        if self.inline_depth > 16:
            raise self.fail(call, f"helper `{fn.name}` is recursive (or nested too deeply)", "recursion",
                            "kernels and helpers cannot recurse")
        params = [a.arg for a in fn.args.args]
        defaults = fn.args.defaults
        bound: dict[str, Value] = {}
        if len(call.args) > len(params):
            raise self.fail(call, f"`{fn.name}` takes {len(params)} arguments", "call")
        for name, a in zip(params, call.args):
            bound[name] = self.expr(a)
        for kw in call.keywords:
            if kw.arg not in params:
                raise self.fail(kw, f"`{fn.name}` has no parameter `{kw.arg}`", "call")
            bound[kw.arg] = self.expr(kw.value)
        for name, d in zip(params[len(params) - len(defaults):], defaults):
            bound.setdefault(name, self.expr(d))
        missing = [p for p in params if p not in bound]
        if missing:
            raise self.fail(call, f"missing argument(s) {', '.join(missing)} for `{fn.name}`", "call")
        body = fn.body
        ret = body[-1] if body and isinstance(body[-1], ast.Return) else None
        if any(isinstance(n, ast.Return) for st in (body[:-1] if ret else body) for n in ast.walk(st)):
            raise self.fail(call, f"helper `{fn.name}` may only return at its end", "return")
        scope = _Scope("fn")
        scope.vars.update(bound)
        self.scopes.append(scope)
        self.inline_depth += 1
        try:
            self.block(body[:-1] if ret else body, fn)
            result = self.expr(ret.value) if ret and ret.value is not None else CV(None)
        finally:
            self.inline_depth -= 1
            self.scopes.pop()
        return result

    # ---- conversions used by call handlers
    def compile_time(self, node: ast.AST, what: str) -> Any:
        v = self.expr(node) if isinstance(node, ast.AST) else node
        if not isinstance(v, CV):
            raise self.fail(node, f"{what} must be a compile-time constant", "constant")
        return v.value

    def scalar_atom(self, v: Value, node: ast.AST) -> Atom:
        """A runtime-or-constant scalar usable as a loop bound, index or scalar operand."""
        if isinstance(v, Ref) and isinstance(v.ty, ScalarT):
            return v
        if isinstance(v, Ref) and isinstance(v.ty, TileT) and v.ty.rank == 0:
            # a 0-d tile (e.g. a gathered length) is a scalar in cuTile; cutile-rs needs the scalar
            return self.b.value("scalar_of", (v,), ScalarT(v.ty.dtype), self.loc(node), hint=f"{v.name}_s")
        if isinstance(v, CV) and v.is_dim:
            return CDim(v.value)
        if isinstance(v, CV) and isinstance(v.value, (float, bool)):
            return Lit(v.value, ScalarT(lit_dtype(v.value)))
        raise self.fail(node, f"expected a scalar, got {_describe(v)}", "scalar")


def _rust_named(p: Param, loc: Loc) -> Param:
    """Give a parameter whose name is a Rust keyword or DSL name a safe Rust identifier."""
    ident = rust_ident(p.name)
    if ident == p.name:
        return p
    if p.is_const:
        raise Diagnostic(f"constant parameter `{p.name}` cannot be a Rust const generic name", loc, "signature",
                         "rename the ct.Constant parameter")
    return Param(p.name, p.ty, p.const_type, ident)


def _describe(v: Value) -> str:
    if isinstance(v, Ref):
        return str(v.ty)
    if isinstance(v, CV):
        return f"constant {v.value!r}"
    if isinstance(v, tuple):
        return "a tuple"
    return type(v).__name__


# ---------------------------------------------------------------- module entry points

@dataclass
class Translation:
    """Result of the frontend on one file: kernels (one per entry) and per-kernel diagnostics."""

    module: KernelModule
    diagnostics: list[Diagnostic]


def specialization_values(cfg: KernelConfig, names: frozenset[str]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for c in cfg.configs:
        if not names <= c.keys():
            continue
        key = tuple(sorted((n, c[n]) for n in names))
        if key not in seen:
            seen.add(key)
            out.append(dict(key))
    return out


def lower_kernel(sm: ScannedModule, name: str, cfg: KernelConfig) -> list[Kernel]:
    """One kernel, or several literal-specialized entries when constants cannot stay generic."""
    fn = sm.kernels[name]
    try:
        return [KernelLowerer(sm, fn, cfg).lower()]
    except NeedsSpecialization as need:
        values = specialization_values(cfg, need.constants | frozenset(cfg.pinned))
        if not values:
            raise Diagnostic(f"{need.reason}; constant(s) {', '.join(sorted(need.constants))} must be "
                             "specialized, but no values are known", need.loc, "specialization",
                             "give the constant values in use (a capture/config per value)") from None
        out = []
        for v in values:
            sub_cfg = KernelConfig(tuple(c for c in cfg.configs if all(c.get(k) == x for k, x in v.items())),
                                   cfg.ranks, {**cfg.pinned, **v})
            for k in lower_kernel(sm, name, sub_cfg):
                suffix = "_".join(f"{key.lower()}{_suffix(val)}" for key, val in sorted(v.items())
                                  if key not in cfg.pinned)
                k.name = f"{k.name}_{suffix}" if suffix else k.name
                out.append(k)
        return out


def _suffix(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v).replace(".", "p").replace("-", "m")


def translate_file(path: str, configs: Mapping[str, KernelConfig] | None = None,
                   only: Sequence[str] | None = None) -> Translation:
    """Parse `path` and lower every kernel (or those in `only`); diagnostics are per kernel."""
    try:
        sm = scan_module(path)
    except Diagnostic as d:  # a syntax error: nothing of the file can be translated
        return Translation(KernelModule(path, Path(path).stem, []), [d])
    kernels, diags = [], []
    names = list(only) if only else list(sm.kernels)
    for name in names:
        if name not in sm.kernels:
            diags.append(Diagnostic(f"no `@ct.kernel` function named `{name}`", Loc(path, 1, 1), "kernel"))
            continue
        try:
            kernels += lower_kernel(sm, name, (configs or {}).get(name, KernelConfig()))
        except Diagnostic as d:
            d.kernel = d.kernel or name
            if d.loc is None:
                d.loc = loc_of(path, sm.kernels[name])
            diags.append(d)
        except RecursionError:
            diags.append(Diagnostic("kernel nests too deeply", loc_of(path, sm.kernels[name]), "recursion",
                                    kernel=name))
        except Exception as e:  # noqa: BLE001 - a translator bug must not hide the other kernels
            diags.append(Diagnostic(f"internal translator error: {type(e).__name__}: {e}",
                                    loc_of(path, sm.kernels[name]), "internal", "please report this kernel",
                                    kernel=name))
    if not sm.kernels:
        diags.append(Diagnostic("no `@ct.kernel` functions found", Loc(path, 1, 1), "kernel",
                                "decorate kernels with @ct.kernel (import cuda.tile as ct)"))
    return Translation(KernelModule(path, Path(path).stem, kernels), diags)


__all__ = ["KernelConfig", "Translation", "translate_file", "scan_module", "CV", "DTypeVal", "EnumVal",
           "ModuleRef", "Helper", "KernelLowerer"]
