"""cuTile Python frontend: source text -> kernel model, with `ast` only (user code never runs).

One visitor method per Python construct (`stmt_<Node>`, `expr_<Node>`); `ct.<fn>` calls are typed by
the handlers registered in `calls`. Kernel-level facts the source does not state (array element dtypes,
scalar dtypes, constant values in use) come from `KernelConfig`s; what cannot be decided from them is
a `Diagnostic` with file:line:col.

`KernelLowerer` keeps the scopes, the kernel entry and specialization here; its statement methods are in
`control` (`ControlFlowMixin`), its expression methods in `expressions` (`ExpressionMixin`), the module scan
in `scan`.
"""

from __future__ import annotations

import ast
import contextlib
import math
from dataclasses import replace
from itertools import product
from pathlib import Path
from typing import Any, Mapping, Sequence

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.dtypes import TORCH_DTYPES
from tileport.frontends.base import KernelConfig, Translation
from tileport.frontends.cutile import calls
from tileport.frontends.cutile.control import ControlFlowMixin, _Scope, _const_number
from tileport.frontends.cutile.dtypes import promote
from tileport.frontends.cutile.expressions import ExpressionMixin
from tileport.frontends.cutile.scan import (ScannedModule, _const_annotation, _own_name, ct_import, defining_module,
                                            helper_def, imported_module, is_ct_attr, is_ct_name, loc_of, scan_module)
from tileport.frontends.cutile.values import CV, DTypeVal, EnumVal, Helper, ModuleRef, SourceModule, Value
from tileport.frontends.imports import Outside, Resolver, WholeModule, outside_hint, submodule
from tileport.frontends.liveness import Frames
from tileport.model import types as T
from tileport.model.builder import Builder, DTypeSpace
from tileport.model.ir import Kernel, KernelModule, Let, Lit, Loc, Param, Ref, walk
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ConstT, DVar, ScalarT, Sym
from tileport.runtime.abi import DTYPE_CODES

ARRAY_USES = {"load", "store", "gather", "scatter", "num_tiles", "atomic_add", "atomic_max", "atomic_min",
              "atomic_xchg", "atomic_cas", "atomic_and", "atomic_or", "atomic_xor"}


# ---------------------------------------------------------------- configuration

CONST_SCALAR_DTYPES = {"int": "i32", "bool": "bool", "float": "f32"}  # a ct.Constant passed at run time


DEFAULT_FLOAT_DTYPES = ("f32", "f16", "bf16")
# `@ct.kernel` options and their legal values (cuda.tile 1.7.0, _compiler_options.py).
KERNEL_OPTIONS = {"occupancy": tuple(range(1, 33)), "num_ctas": (1, 2, 4, 8, 16),
                  "num_worker_warps": (1, 2, 4, 8, 16, 32), "opt_level": (0, 1, 2, 3)}


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
        if const_kind and a.arg in cfg.runtime:
            params.append(Param(a.arg, ScalarT(CONST_SCALAR_DTYPES[const_kind])))
        elif const_kind:
            params.append(Param(a.arg, ConstT(const_kind), const_kind))
        elif a.arg in arrays:
            rank = cfg.ranks.get(a.arg) or arrays[a.arg]
            if rank is None:
                raise Diagnostic(f"cannot tell the rank of array parameter `{a.arg}`", loc, "signature",
                                 "index it with a tuple in ct.load/ct.store, or give its rank in the config")
            params.append(Param(a.arg, ArrayT("?", rank)))
        else:
            configured = first.get(a.arg)
            dtype = (TORCH_DTYPES.get(str(configured), configured) if configured is not None else None) \
                or _SCALAR_ANNOTATIONS.get(getattr(a.annotation, "id", None)) or _int64_annotation(sm, a.annotation) \
                or launch_scalar_dtype(sm, fn.name, fn.args.args.index(a)) or scalar_use_dtype(fn, a.arg) or "i32"
            if dtype not in T.ELEMENT_DTYPES:
                raise Diagnostic(f"unsupported dtype {dtype!r} configured for scalar `{a.arg}`", loc, "config")
            params.append(Param(a.arg, ScalarT(dtype)))
    return params


_SCALAR_ANNOTATIONS = {"float": "f32", "int": "i32", "bool": "bool"}


def _int64_annotation(sm: ScannedModule, node: ast.AST | None) -> str | None:
    """`ct.ScalarInt64` (or the name imported from cuda.tile): cuTile launches the argument as an int64."""
    return "i64" if node is not None and not isinstance(node, ast.Call) and is_ct_attr(sm, node, "ScalarInt64") \
        else None


def launch_scalar_dtype(sm: ScannedModule, kernel: str, index: int) -> str | None:
    """The dtype of a kernel's scalar argument from the file's `ct.launch(stream, grid, kernel, (args..))`
    sites (host code, read, never run): a number literal, or a parameter of the launching function with a
    `float`/`int`/`bool` annotation or a number default. None when the sites disagree or say nothing."""
    votes: set[str | None] = set()
    for fn in ast.walk(sm.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional = fn.args.posonlyargs + fn.args.args
        params = {a.arg: a for a in positional + fn.args.kwonlyargs}
        defaults = dict(zip([a.arg for a in positional][len(positional) - len(fn.args.defaults):], fn.args.defaults))
        defaults |= {a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
        for call in ast.walk(fn):
            if (isinstance(call, ast.Call) and _ct_call_name(sm, call.func) == "launch" and len(call.args) >= 4
                    and isinstance(call.args[2], ast.Name) and call.args[2].id == kernel
                    and isinstance(call.args[3], ast.Tuple) and index < len(call.args[3].elts)):
                votes.add(_host_dtype(call.args[3].elts[index], params, defaults))
    return votes.pop() if len(votes) == 1 else None


def _host_dtype(node: ast.expr, params: dict[str, ast.arg], defaults: dict[str, ast.expr]) -> str | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
        return {int: "i32", float: "f32", bool: "bool"}[type(node.value)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SCALAR_ANNOTATIONS \
            and len(node.args) == 1:  # `float(scale)` at the launch site: a Python float, whatever scale is
        return _SCALAR_ANNOTATIONS[node.func.id]
    if isinstance(node, ast.Name) and node.id in params:
        ann = params[node.id].annotation
        if isinstance(ann, ast.Name) and ann.id in _SCALAR_ANNOTATIONS:
            return _SCALAR_ANNOTATIONS[ann.id]
        if node.id in defaults:
            return _host_dtype(defaults[node.id], {}, {})
    return None


def scalar_use_dtype(fn: ast.FunctionDef, name: str) -> str | None:
    """The dtype of an un-annotated scalar parameter, from its uses: next to a float literal or in a true
    division -> f32; as a range() bound, in // or %, or next to an int literal -> i32; None if nothing says."""
    votes: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.BinOp, ast.Compare)):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.left, *node.comparators]
            if not any(isinstance(o, ast.Name) and o.id == name for o in operands):
                continue
            others = [o for o in operands if not (isinstance(o, ast.Name) and o.id == name)]
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                votes.add("f32")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
                votes.add("i32")
            for o in others:
                if isinstance(o, ast.Constant) and type(o.value) in (int, float):
                    votes.add("f32" if isinstance(o.value, float) else "i32")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
              and any(isinstance(x, ast.Name) and x.id == name for x in node.args)):
            votes.add("i32")
    return votes.pop() if len(votes) == 1 else None


def array_uses(sm: ScannedModule, fn: ast.FunctionDef, active: set[str],
               memo: dict[tuple[str, str], dict[str, int | None]] | None = None) -> dict[str, int | None]:
    """Names `fn` uses as arrays (with the rank a load/store index shows), through helper calls too.

    Each helper is scanned once (`memo`): helpers calling each other twice per level would otherwise
    take exponential time."""
    memo = {} if memo is None else memo
    arrays: dict[str, int | None] = {}

    def note(name: str, rank: int | None) -> None:
        if arrays.get(name) is None:
            arrays[name] = rank
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = _ct_call_name(sm, node.func)
            found = helper_def(sm, node.func) if name not in ARRAY_USES else None
            if name in ARRAY_USES and node.args and isinstance(node.args[0], ast.Name):
                note(node.args[0].id, _rank_from_call(name, node, fn))
            elif found is not None and found[1].name not in active:
                owner, helper = found
                key = (str(owner.path), helper.name)
                if key not in memo:
                    memo[key] = array_uses(owner, helper, active | {fn.name}, memo)
                inner = memo[key]
                params = [a.arg for a in helper.args.args]
                bound = dict(zip(params, node.args)) | {k.arg: k.value for k in node.keywords if k.arg}
                for pname, arg in bound.items():
                    if pname in inner and isinstance(arg, ast.Name):
                        note(arg.id, inner[pname])
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.attr in ("shape", "strides", "ndim", "dtype")):
            note(node.value.id, None)
    for view, base in reversed(_array_views(fn)):  # a view has its array's rank (`v = x.slice(axis=0, ..)`)
        note(base, arrays.get(view))
    return arrays


def _array_views(fn: ast.FunctionDef) -> list[tuple[str, str]]:
    """(view, array) for each `view = array.slice(...)` (chains included), in source order."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            while (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                   and value.func.attr == "slice"):
                value = value.func.value
            if value is not node.value and isinstance(value, ast.Name):
                out.append((node.targets[0].id, value.id))
    return out


def _ct_call_name(sm: ScannedModule, func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and is_ct_name(sm, func.value.id):
        return func.attr
    if isinstance(func, ast.Name):
        return ct_import(sm, func.id)
    return None


def _rank_from_call(name: str, call: ast.Call, fn: ast.FunctionDef) -> int | None:
    idx = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg in ("index", "indices")), None)
    if isinstance(idx, ast.Tuple):
        return len(idx.elts)
    if (name in ("gather", "scatter") or name.startswith("atomic_")) and idx is not None:
        return 1
    if name in ("load", "store") and idx is not None and _scalar_index(idx, fn):  # ct.load(x, i, shape=())
        return 1
    return None


def _scalar_index(node: ast.expr, fn: ast.FunctionDef, seen: frozenset[str] = frozenset()) -> bool:
    """An index expression that is a single number, never a tuple of indices: a literal, arithmetic, a call
    of a `ct` function, a `range` loop variable, or a name bound to such values only (a kernel's parameter
    is a scalar; a helper's may be a tuple)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute)  # ct.bid(0), ct.astype(..): not a helper that may build a tuple
    if not isinstance(node, ast.Name) or node.id in seen:
        return False
    if any(isinstance(t, ast.arg) and t.arg == node.id for t in ast.walk(fn.args)):
        return _is_kernel_decorator(fn) and not _bindings(fn, node.id)
    bindings = _bindings(fn, node.id)
    return bool(bindings) and all(b is None or (not isinstance(b, (ast.Tuple, ast.List))
                                                and _scalar_index(b, fn, seen | {node.id})) for b in bindings)


def _bindings(fn: ast.FunctionDef, name: str) -> list[ast.expr | None]:
    """What `fn` assigns to `name` (None: a `range` loop variable); a tuple unpacking counts as a tuple."""
    out: list[ast.expr | None] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.For):
            if isinstance(n.target, ast.Name) and n.target.id == name:
                out.append(None)
            elif name in _assigned_names(ast.Assign([n.target], n.iter)):
                out.append(ast.Tuple([], ast.Load()))
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None \
                and name in _assigned_names(n):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            direct = any(isinstance(t, ast.Name) and t.id == name for t in targets)
            out.append(n.value if direct else ast.Tuple([], ast.Load()))
    return out


def _is_kernel_decorator(fn: ast.FunctionDef) -> bool:
    """`fn` is decorated `@<module>.kernel` (a kernel: its parameters are arrays, scalars or constants)."""
    heads = [d.func if isinstance(d, ast.Call) else d for d in fn.decorator_list]
    return any(isinstance(h, ast.Attribute) and h.attr == "kernel" for h in heads)


# What a configuration may give a `ct.Constant[kind]` parameter (bool is not an int here, as in a Rust const).
_CONST_VALUE_TYPES = {"int": (int,), "bool": (bool,), "float": (int, float)}


def check_constant_values(path: str, fn: ast.FunctionDef, params: list[Param], cfg: KernelConfig) -> None:
    """Configured constant values must have their parameter's kind (they become literals and const generics)."""
    locs = {a.arg: loc_of(path, a) for a in fn.args.args}
    for c in (*cfg.configs, cfg.pinned):
        for p in params:
            if not p.is_const or p.name not in c:
                continue
            v = c[p.name]
            ok = isinstance(v, _CONST_VALUE_TYPES[p.const_type]) and (p.const_type == "bool" or not isinstance(v, bool))
            if ok and p.const_type == "int":
                ok = -2**31 <= v < 2**31
            if ok and p.const_type == "float":
                ok = math.isfinite(v)
            if not ok:
                raise Diagnostic(f"configured value {v!r} of `{p.name}` is not a ct.Constant[{p.const_type}] value",
                                 locs[p.name], "config", "fix the configuration (capture) of this kernel")


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
        vec = tuple(TORCH_DTYPES.get(str(c[p.name]), c[p.name]) for c in configs)
        unsupported = sorted({str(d) for d in vec if d not in DTYPE_CODES})
        if unsupported:
            raise Diagnostic(f"unsupported dtype(s) {', '.join(unsupported)} configured for array `{p.name}`",
                             None, "config", f"one of {', '.join(DTYPE_CODES)}")
        if len(set(vec)) == 1:
            assigned[p.name] = vec[0]
            continue
        if vec not in by_vector:
            var = DVar("E" if not by_vector else f"E{len(by_vector) + 1}")
            by_vector[vec] = var
            space.vectors[var] = vec
        assigned[p.name] = by_vector[vec]
    return space, assigned


class KernelLowerer(ControlFlowMixin, ExpressionMixin):
    def __init__(self, sm: ScannedModule, fn: ast.FunctionDef, cfg: KernelConfig, naming: Naming):
        self.sm, self.fn, self.cfg = sm, fn, cfg
        self.home = sm  # the kernel's own module (helpers of other modules are lowered in theirs)
        self.path = sm.path
        self.calls = calls
        params = classify_params(sm, fn, cfg)
        check_constant_values(sm.path, fn, params, cfg)
        space, array_dtypes = dtype_space(params, cfg)
        self.params = [Param(p.name, ArrayT(array_dtypes[p.name], p.ty.rank)) if p.is_array else p for p in params]
        self.params = [_safely_named(p, self.loc(fn), naming) for p in self.params]
        configs = list(cfg.configs)
        const_values = [{p.name: c[p.name] for p in self.params if p.is_const and p.name in c} for c in configs]
        self.b = Builder(self.path, space, const_values, naming, promote)
        self.scopes: list[_Scope] = []
        self.frames = Frames()
        self.inline_depth = 0
        self.inline_calls: list[ast.Call] = []  # the helper calls being inlined, innermost last
        # ct.Constant parameters passed at run time (no values known): typed against a tile as cuTile types
        # their literal (weakly: `f16_tile + eps` stays f16)
        self.weak_scalars: set[str] = set()
        self.active_aliases: set[tuple[str, str]] = set()  # (file, name) of module aliases being evaluated
        self.use_site: tuple[str, ast.AST] | None = None  # where a name chased through other modules is used
        self.chasing: set[tuple[str, str]] = set()  # (file, name) of imported names being looked up there
        self.inlined = 0  # helper bodies inlined so far (bounded: see MAX_INLINED_CALLS)
        self.stmt: ast.AST = fn  # the statement being lowered (where a too-deep nesting is reported)

    def loc(self, node: ast.AST) -> Loc:
        return loc_of(self.path, node)

    def fail(self, node: ast.AST, message: str, construct: str = "", hint: str = "") -> Diagnostic:
        return Diagnostic(message, self.loc(node), construct, hint)

    # ---- entry
    def lower(self) -> Kernel:
        fn = self.fn
        hints = self.kernel_hints()
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
                self.scopes[-1].vars[p.name] = Ref(p.ident, p.ty)
                self.b.scope_names[-1].add(p.ident)
                if p.name in self.cfg.runtime:
                    self.weak_scalars.add(p.ident)
        try:
            self.block(guard_returns(fn.body), fn)
        except RecursionError:
            raise self.fail(self.stmt, "this statement nests too deeply to translate (an expression or a chain "
                            "of helper calls)", "nesting", "split it into several statements") from None
        self.b.pop()
        params = [p for p in self.params if not (p.is_const and p.name in self.cfg.pinned)]
        doc = ast.get_docstring(fn) or ""
        notes = [f"scalar parameter `{a.arg}` has no annotation and its uses do not decide its type: assumed i32"
                 for a in fn.args.args if self._assumed_i32(a)]
        ident = self.b.naming.ident
        return Kernel(ident(fn.name), params, body, self.loc(fn), hints, dict(self.b.dspace.vectors), doc,
                      module_name=ident(Path(self.path).stem), base_name=fn.name, pinned=dict(self.cfg.pinned),
                      signature=tuple(p.name for p in self.params), notes=notes,
                      launch_unit_axes=True)

    def _assumed_i32(self, a: ast.arg) -> bool:
        p = next((p for p in self.params if p.name == a.arg), None)
        return (p is not None and not p.is_array and not p.is_const and a.annotation is None
                and not any(a.arg in c for c in self.cfg.configs) and scalar_use_dtype(self.fn, a.arg) is None
                and launch_scalar_dtype(self.sm, self.fn.name, self.fn.args.args.index(a)) is None)

    def kernel_hints(self) -> dict[str, Any]:
        """`@ct.kernel(...)` options: module-level constants (no kernel names), checked as cuTile checks them."""
        hints: dict[str, Any] = {}
        self.b.push()  # a scratch block: an option that is not a constant is refused, whatever it emits
        try:
            for d in self.fn.decorator_list:
                if isinstance(d, ast.Call) and is_ct_attr(self.sm, d, "kernel"):
                    for kw in d.keywords:
                        if kw.arg not in KERNEL_OPTIONS:
                            raise self.fail(kw, f"kernel option `{kw.arg}` is not supported", "ct.kernel")
                        v = self.hint_value(kw.value, kw.arg)
                        for one in (v.values() if isinstance(v, dict) else (v,)):  # ct.ByTarget: each target's
                            self.check_option(kw, one)
                        if v is not None:
                            hints[kw.arg] = v
        finally:
            self.b.pop()
        return hints

    def hint_value(self, node: ast.AST, option: str) -> Any:
        """A kernel option: a compile-time constant, or `ct.ByTarget(sm_100=.., default=..)` -> {target: v}."""
        if isinstance(node, ast.Name) and node.id in self.sm.aliases:
            node = self.sm.aliases[node.id]  # HINTS = ct.ByTarget(...) at module level
        if isinstance(node, ast.Call) and _ct_call_name(self.sm, node.func) == "ByTarget":
            if node.args or any(kw.arg is None for kw in node.keywords):
                raise self.fail(node, "ct.ByTarget takes keyword arguments only (sm_XX=value, default=value)",
                                "ct.ByTarget")
            per_target = {kw.arg: self.compile_time(kw.value, f"kernel option `{option}`") for kw in node.keywords}
            bad = [t for t in per_target if t != "default" and not t.startswith("sm_")]
            if bad:
                raise self.fail(node, f"ct.ByTarget: unknown target(s) {', '.join(bad)}", "ct.ByTarget",
                                "targets are named sm_XX, or default")
            return per_target
        return self.compile_time(node, f"kernel option `{option}`")

    def check_option(self, kw: ast.keyword, v: Any) -> None:
        """A kernel option's value is one cuTile accepts."""
        if v is not None and (type(v) is not int or v not in KERNEL_OPTIONS[kw.arg]):
            raise self.fail(kw, f"kernel option {kw.arg}={v!r} is out of range", "ct.kernel",
                            f"one of {', '.join(map(str, KERNEL_OPTIONS[kw.arg]))}")

    # ---- scopes and variables
    def lookup(self, name: str, node: ast.AST) -> Value:
        for s in reversed(self.scopes):
            if name in s.vars:
                return s.vars[name]
        closure = self.sm.closures.get(self.fn.name) if self.sm is self.home else None
        if closure and name in closure.constants:
            return CV(closure.constants[name])
        if closure and name in closure.runtime:
            raise self.fail(node, f"`{name}` belongs to the factory `{closure.factory}` that builds this kernel; "
                                  "its value exists only when the factory runs", "closure",
                            f"make `{name}` a ct.Constant parameter of the kernel, or a module-level constant")
        if name in self.sm.constants:
            return CV(self.sm.constants[name])
        if name in self.sm.helpers:
            return Helper(self.sm.helpers[name], self.sm)
        if name in self.sm.ct_names:
            return ModuleRef("ct")
        if name in self.sm.math_names:
            return ModuleRef("math")
        if name in self.sm.ct_imports:  # `from cuda.tile import X`: what `ct.X` is
            return self.calls.attribute(self, ModuleRef("ct"), self.sm.ct_imports[name], node)
        if name in self.sm.dtype_modules:
            return ModuleRef(self.sm.dtype_modules[name])
        if name in self.sm.aliases:
            return self.module_alias(name, node)
        imported = self.imported(name, node) if name in self.sm.imports.names or self.sm.imports.stars else None
        if imported is not None:
            return imported
        if name in ("range", "min", "max", "len", "int", "float", "bool", "abs"):
            return ("builtin", name)
        if name in self.sm.bad_constants:
            raise replace(self.sm.bad_constants[name])
        raise self.fail(node, f"undefined name `{name}`", "name")

    def imported(self, name: str, node: ast.AST) -> Value | None:
        """A name this module imports from another module of the package (`from .utils import swizzle`, a
        re-export, `from .a import *`): a helper, a constant, an alias or a module of that module, evaluated
        in that module's scope. None when no star import brings it."""
        binding = self.sm.imports.names.get(name)
        if isinstance(binding, Outside):
            raise self.fail_at_use(node, f"`{name}` is imported from `{binding.module}`, which tileport does not "
                                   "read", "import", outside_hint(self.sm.resolver, binding))
        if isinstance(binding, WholeModule):
            module = imported_module(Path(binding.file), self.sm.resolver)
            if module is None:
                raise self.fail_at_use(node, f"{self.sm.imports.describe(name)}, which cannot be read or parsed",
                                       "import")
            return SourceModule(module)
        owner = defining_module(self.sm, name)
        if owner is None:
            if binding is None:
                return None  # no star import brings it
            raise self.fail_at_use(node, f"{self.sm.imports.describe(name)}, which cannot be read or parsed", "import")
        return self.module_attribute(SourceModule(owner[0]), owner[1], node, name)

    def module_attribute(self, module: SourceModule, attr: str, node: ast.AST, name: str | None = None) -> Value:
        """`attr` of another module of the package, in that module's scope (its own names, its imports, its
        submodules)."""
        other = module.module
        with self.at_use(node):
            if _own_name(other, attr) or attr in other.imports.names or defining_module(other, attr) is not None:
                key = (other.path, attr)
                if key in self.chasing:  # modules that take the name from each other, none defining it
                    raise self.fail_at_use(node, f"`{name or attr}` is imported from module to module in a cycle; "
                                           "none of them defines it", "import")
                saved = self.sm, self.path, self.scopes
                self.sm, self.path, self.scopes = other, other.path, []  # that module's scope, not the kernel's
                self.chasing.add(key)
                try:
                    return self.lookup(attr, node)
                finally:
                    self.chasing.discard(key)
                    self.sm, self.path, self.scopes = saved
            sub = submodule(other.resolver, other.path, attr)
            found = imported_module(Path(sub), other.resolver) if sub else None
            if found is not None:
                return SourceModule(found)
            what = f"`{name}` is imported from {Path(other.path).name}" if name else f"{Path(other.path).name}"
            raise self.fail_at_use(node, f"{what}, which defines no helper function, constant or alias `{attr}`",
                                   "import")

    @contextlib.contextmanager
    def at_use(self, node: ast.AST):
        """While a name is chased through other modules, its resolution errors are located where the name is
        used (the node and file it started from), not in the modules it passes through."""
        outer = self.use_site is None
        if outer:
            self.use_site = (self.path, node)
        try:
            yield
        finally:
            if outer:
                self.use_site = None

    def fail_at_use(self, node: ast.AST, message: str, construct: str = "", hint: str = "") -> Diagnostic:
        path, node = self.use_site or (self.path, node)
        return Diagnostic(message, loc_of(path, node), construct, hint)

    def module_alias(self, name: str, node: ast.AST) -> Value:
        """A module-level name bound to an expression, evaluated in the module's scope (not the kernel's)."""
        key = (self.sm.path, name)
        if key in self.active_aliases:
            raise self.fail(node, f"module-level name `{name}` is defined in terms of itself", "name")
        saved, self.scopes = self.scopes, []
        self.active_aliases.add(key)
        try:
            return self.expr(self.sm.aliases[name])
        finally:
            self.active_aliases.discard(key)
            self.scopes = saved

    def end_scope(self) -> None:
        """Leave a loop or branch block: a carried name must hold its carried type again at the end."""
        scope = self.scopes.pop()
        for name, node in scope.shadows.items():
            outer = self._owner(name)
            old = self.scopes[outer].vars[name] if outer is not None else None
            new = scope.vars[name]
            raise self.fail(node, f"`{name}` changes type inside a loop or branch "
                                  f"({getattr(old, 'ty', '?')} -> {getattr(new, 'ty', '?')})",
                            "loop-carried type", "keep loop-carried and branch-assigned values the same type")

    def _owner(self, name: str, top: int | None = None) -> int | None:
        """The innermost scope (at or below `top`, default the current one) binding `name`, within the function."""
        for i in range((len(self.scopes) if top is None else top + 1) - 1, -1, -1):
            if name in self.scopes[i].vars:
                return i
            if self.scopes[i].kind == "fn":
                return None
        return None

    def assign(self, name: str, value: Value, node: ast.AST) -> None:
        owner = self._owner(name)
        cur = len(self.scopes) - 1
        if owner == cur and name in self.scopes[cur].shadows:
            outer = self._owner(name, cur - 1)
            if isinstance(value, Ref) and outer is not None and self.scopes[outer].vars[name].ty == value.ty:
                del self.scopes[cur].vars[name], self.scopes[cur].shadows[name]  # back to the carried type
                owner = outer
        if owner is not None and any(name in self.scopes[j].locals for j in range(owner + 1, cur + 1)):
            owner = None  # a block-local rebinding, not an update of the outer variable
        if not isinstance(value, Ref):
            old = self.scopes[owner].vars[name] if owner is not None and owner != cur else None
            if isinstance(old, Ref) and isinstance(old.ty, ScalarT) and _const_number(value) \
                    and isinstance(value.value, bool) == (old.ty.dtype == "bool"):
                # `done = True` in a loop over a runtime `done`: the constant becomes a value of its type
                value = self.b.value(OpKind.SCALAR, (Lit(value.value, old.ty),), old.ty, self.loc(node), hint=name)
            elif isinstance(old, Ref):
                raise self.fail(node, f"`{name}` is a runtime value outside this block and cannot become a "
                                      "compile-time value inside it", "assignment")
        if not isinstance(value, Ref):
            self.scopes[cur].vars[name] = value
            return
        if owner is not None and owner != cur:
            old = self.scopes[owner].vars[name]
            if not isinstance(old, Ref):
                raise self.fail(node, f"`{name}` is a compile-time value outside this block; assigning a "
                                      "runtime value to it inside a loop or branch is not supported",
                                "assignment", "initialize it from a runtime value before the block")
            if old.ty != value.ty:  # a value of another type on the way (t = load(..); t = astype(t, f32)): a
                self.scopes[cur].shadows[name] = node  # local of the block until the carried type comes back
                rust_name = self.b.fresh(name)
                self._bind_new(rust_name, value)
                self.scopes[cur].vars[name] = Ref(rust_name, value.ty)
                return
            self._bind_update(old.name, value, node)
            self.scopes[owner].vars[name] = Ref(old.name, old.ty)
            return
        reuse = name in self.b.scope_names[-1] and not self._held_by_caller(name)
        rust_name = name if reuse else self.b.fresh(name)
        self._bind_new(rust_name, value)
        self.scopes[cur].vars[name] = Ref(rust_name, value.ty)

    def _held_by_caller(self, rust_name: str) -> bool:
        """A variable of the code that called the inlined helper being lowered is bound to `rust_name` and
        still needed: rebinding the name would change the caller's variable (inlining is hygienic). Not
        needed: the caller's statement (`s = helper(s)`) itself rebinds it, in the same block, and reads it
        no more after the call."""
        frame = max(i for i, s in enumerate(self.scopes) if s.kind == "fn")
        held = {py for s in self.scopes[:frame] for py, v in s.vars.items() if isinstance(v, Ref) and v.name == rust_name}
        if not held:
            return False
        body = max(i for i, f in enumerate(self.frames.stack) if isinstance(f[2], ast.FunctionDef))
        stmts, index, _ = self.frames.stack[body - 1]
        stmt, call = stmts[index], self.inline_calls[-1]
        rebound = _assigned_names(stmt)
        for py in held:
            later = any(isinstance(n, ast.Name) and n.id == py
                        and (n.lineno, n.col_offset) >= (call.end_lineno, call.end_col_offset) for n in ast.walk(stmt))
            if later or py not in rebound or py not in self.scopes[frame - 1].vars:
                return True
        return False

    def _bind_new(self, rust_name: str, value: Ref) -> None:
        last = self.b.blocks[-1].stmts[-1] if self.b.blocks[-1].stmts else None
        if isinstance(last, Let) and last.name == value.name and value.name in self.b.temps:
            self.b.temps.discard(last.name)
            if last.name != rust_name:
                self.b.release(last.name)
                last.name = rust_name  # the temporary that produced the value takes the variable's name
        elif value.name != rust_name:
            self.b.emit(Let(rust_name, self.b_copy(value)))

    def _bind_update(self, rust_name: str, value: Ref, node: ast.AST) -> None:
        last = self.b.blocks[-1].stmts[-1] if self.b.blocks[-1].stmts else None
        if isinstance(last, Let) and last.name == value.name and value.name in self.b.temps:
            self.b.temps.discard(last.name)
            self.b.release(last.name)
            last.name, last.update = rust_name, True
        else:
            self.b.emit(Let(rust_name, self.b_copy(value), update=True))

    def b_copy(self, value: Ref):
        from tileport.model.ir import Op
        return Op(OpKind.COPY, (value,), value.ty, Loc(self.path, 0, 0))


def guard_returns(stmts: Sequence[ast.stmt]) -> list[ast.stmt]:
    """A kernel body whose `if` branches return early, as nested branches instead: the statements after the
    `if` move into each branch that does not end with a bare `return` (`if c: ..; return` then `rest` ->
    `if c: .. else: rest`). cutile-rs lowers a `return` only at the end of the kernel body; cuTile Python
    returns from the branch; both run `rest` exactly when no return was taken. A `return` in a loop stays
    (cutile-rs refuses it, located)."""
    for i, st in enumerate(stmts):
        if not (isinstance(st, ast.If) and _may_return(st)):
            continue
        rest = list(stmts[i + 1:])
        branches = [guard_returns(b[:-1] if _returns(b) else b + rest) for b in (st.body, st.orelse)]
        then = branches[0] or [ast.copy_location(ast.Pass(), st)]
        return [*stmts[:i], ast.copy_location(ast.If(st.test, then, branches[1]), st)]
    return list(stmts)


def _may_return(st: ast.stmt) -> bool:
    """A `return` in `st` outside loops (and nested functions)."""
    if isinstance(st, ast.Return):
        return True
    if isinstance(st, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(_may_return(c) for c in ast.iter_child_nodes(st) if isinstance(c, ast.stmt))


def _returns(stmts: Sequence[ast.stmt]) -> bool:
    """The statements end with a bare `return` (always leave the kernel)."""
    return bool(stmts) and isinstance(stmts[-1], ast.Return) and stmts[-1].value is None


def _assigned_names(stmt: ast.stmt) -> set[str]:
    """The names an assignment statement binds (none for other statements)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _safely_named(p: Param, loc: Loc, naming: Naming) -> Param:
    """Give a parameter whose name is a Rust keyword or DSL name a safe Rust identifier."""
    ident = naming.ident(p.name)
    if ident == "_":  # the Rust wildcard, not a name
        ident = "underscore_"
    if ident == p.name:
        return p
    if p.is_const:
        raise Diagnostic(f"constant parameter `{p.name}` cannot be a Rust const generic name", loc, "signature",
                         "rename the ct.Constant parameter")
    return Param(p.name, p.ty, p.const_type, ident)


# ---------------------------------------------------------------- module entry points

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


def lower_kernel(sm: ScannedModule, name: str, cfg: KernelConfig, naming: Naming) -> list[Kernel]:
    """One kernel, or several literal-specialized entries when constants cannot stay generic, or one entry
    per group of dtypes when cuTile's fma contraction differs between the dtypes (`_split_by_fma`)."""
    kernels = _lower_configured(sm, name, cfg, naming) if cfg.configs else _lower_unconfigured(sm, name, cfg, naming)
    if len(kernels) != 1 or not kernels[0].dtype_vars:
        return kernels
    if _generic_int_literal(kernels[0]):  # cutile-rs spells no literal of a generic integer type: one per dtype
        arrays = _generic_arrays(kernels[0])
        combos = list(dict.fromkeys(zip(*(kernels[0].dtype_vars[p.ty.dtype] for p in arrays))))
        split = _split_by_fma(sm, name, cfg, kernels[0], [(None, [c]) for c in combos], naming)
        return split if split is not None else kernels
    groups = _fma_groups(sm, name, cfg, kernels[0], naming)
    if groups is None:
        return kernels
    split = _split_by_fma(sm, name, cfg, kernels[0], groups, naming)
    if split is None:  # the groups do not lower apart: one generic entry, which says where it is not exact
        kernels[0].notes.append(_per_dtype_note(groups, split=False))
        return kernels
    for k in split:
        k.notes.append(_per_dtype_note(groups, split=True))
    return split


FMA_PER_DTYPE = "fma contraction differs per element type"  # the start of the note (the wild table reads it)
VIEW_ALIGNMENT_PER_DTYPE = "the alignment of `Array.slice` views differs per element type"
DtypeCombo = tuple[str, ...]  # the dtypes of a kernel's generic arrays, in parameter order
# What must be equal for dtype combinations to share one entry: the fused a*b+c pairs and the alignments
# cuTile Python assumes for the kernel's `Array.slice` views (a byte offset: a multiple of the element size).
DtypeFacts = tuple[int, tuple[int, ...]]


def _generic_int_literal(kernel: Kernel) -> bool:
    """A literal (a fill, an operand) of an integer type the kernel is generic over (`ct.full(.., 0x7F,
    dtype=ct.int32 if x.dtype == ct.float32 else ct.int16)`)."""
    def generic_int(dt) -> bool:
        return isinstance(dt, DVar) and all(T.is_int(d) for d in kernel.dtype_vars.get(dt, ("f32",)))
    for st in walk(kernel.body):
        op = getattr(st, "op", None)
        if op is None:
            continue
        if op.kind == OpKind.FULL and generic_int(op.ty.dtype):
            return True
        if any(isinstance(a, Lit) and generic_int(a.ty.dtype) for a in op.args):
            return True
    return False


def _view_alignments(kernel: Kernel) -> tuple[int, ...]:
    return tuple(st.op.attr("divisor") for st in walk(kernel.body)
                 if isinstance(st, Let) and st.op.kind == OpKind.ASSUME_DIV_BY)


def _generic_arrays(kernel: Kernel) -> list[Param]:
    return [p for p in kernel.params if p.is_array and isinstance(p.ty.dtype, DVar)]


def _fma_groups(sm: ScannedModule, name: str, cfg: KernelConfig, generic: Kernel,
                naming: Naming) -> list[tuple[DtypeFacts, list[DtypeCombo]]] | None:
    """cuTile Python fuses `a*b + c` only where the product and the add share a dtype: in a kernel generic
    over dtypes, `f32_acc += x * x` fuses for f32 inputs and not for f16 ones (their product is converted
    first), and it assumes an `Array.slice` view aligned as its offset in bytes allows, so one generic port
    cannot match every reference. Lowering each dtype combination alone (as cuTile compiles one kernel per
    dtype): the combinations grouped by fused count and view alignments, or None when all agree."""
    from tileport.passes.fma import fuse_fma
    arrays = _generic_arrays(generic)
    combos = list(dict.fromkeys(zip(*(generic.dtype_vars[p.ty.dtype] for p in arrays))))
    facts: dict[DtypeCombo, DtypeFacts] = {}
    for combo in combos:
        try:
            (alone,) = _lower_configured(sm, name, _combo_config(generic, arrays, [combo], cfg), naming)
        except (Diagnostic, ValueError):
            return None  # the comparison needs one entry per dtype; the generic port stands as it is
        facts[combo] = (fuse_fma(alone, naming), _view_alignments(alone))
    if len(set(facts.values())) < 2:
        return None
    groups: dict[DtypeFacts, list[DtypeCombo]] = {}
    for combo, key in facts.items():
        groups.setdefault(key, []).append(combo)
    return list(groups.items())


def _combo_config(generic: Kernel, arrays: list[Param], combos: list[DtypeCombo], cfg: KernelConfig) -> KernelConfig:
    """`cfg` restricted to the configurations of `combos` (without configurations: one entry per combo)."""
    names = [p.name for p in arrays]
    if cfg.configs:
        kept = tuple(c for c in cfg.configs
                     if tuple(TORCH_DTYPES.get(str(c[n]), c[n]) for n in names) in combos)
        return replace(cfg, configs=kept)
    fixed = {p.name: p.ty.dtype for p in generic.params if p.is_array and p not in arrays}
    return replace(cfg, configs=tuple(fixed | dict(zip(names, combo)) for combo in combos))


def _split_by_fma(sm: ScannedModule, name: str, cfg: KernelConfig, generic: Kernel,
                  groups: list[tuple[DtypeFacts, list[DtypeCombo]]], naming: Naming) -> list[Kernel] | None:
    """One entry per group of dtypes with the same fma contraction (`layer_norm_kernel_f32`,
    `layer_norm_kernel_f16_bf16`); the launcher picks the entry by the arrays' dtypes."""
    arrays = _generic_arrays(generic)
    out = []
    for _n, combos in groups:
        try:
            kernels = _lower_configured(sm, name, _combo_config(generic, arrays, combos, cfg), naming)
        except (Diagnostic, ValueError):
            return None
        if len(kernels) != 1:
            return None
        k = kernels[0]
        k.name = f"{k.name}_{'_'.join(dict.fromkeys(c[0] for c in combos))}"
        out.append(k)
    return out


def _per_dtype_note(groups: list[tuple[DtypeFacts, list[DtypeCombo]]], split: bool) -> str:
    what = ("one entry per group of dtypes, each matching its references" if split else
            "one port generic over the dtype cannot; its IR matches the reference of some dtypes only "
            "(translate with one dtype per --config for an exact port of each)")
    if len({fused for (fused, _), _ in groups}) > 1:
        shown = ", ".join(f"{'/'.join(dict.fromkeys(c))}: {n}" for (n, _), combos in groups for c in combos)
        return (f"{FMA_PER_DTYPE} (fused a*b+c pairs per dtype: {shown}): cuTile Python fuses only where the "
                f"product and the add share a dtype: {what}")
    shown = ", ".join(f"{'/'.join(dict.fromkeys(c))}: {list(a)}" for (_, a), combos in groups for c in combos)
    return (f"{VIEW_ALIGNMENT_PER_DTYPE} (assumed byte alignments per dtype: {shown}): cuTile Python derives "
            f"them from the offset in bytes: {what}")


INDEX_DTYPE = "i64"  # arrays whose elements index other arrays (token ids, gather rows): torch.long


def _lower_unconfigured(sm: ScannedModule, name: str, cfg: KernelConfig, naming: Naming) -> list[Kernel]:
    """No configuration: the arrays share one generic element type over the float dtypes with which the
    kernel type-checks (cuTile Python refuses the others just the same); index arrays are i64."""
    fn = sm.kernels[name]
    arrays = [p.name for p in classify_params(sm, fn, cfg) if p.is_array]
    indexes = index_arrays(sm, fn)
    candidates = [{a: INDEX_DTYPE if a in indexes else dt for a in arrays} for dt in DEFAULT_FLOAT_DTYPES]
    kept, first_error = [], None
    for c in candidates:
        try:
            _lower_configured(sm, name, replace(cfg, configs=(c,)), naming)
            kept.append(c)
        except Diagnostic as d:
            if d.construct != "dtype":
                raise  # not a question of dtypes: the same for every candidate
            first_error = first_error or d
    if not kept:
        raise first_error
    unique = tuple(dict(t) for t in dict.fromkeys(tuple(sorted(c.items())) for c in kept))
    return _lower_configured(sm, name, replace(cfg, configs=tuple(c for c in kept if c in unique)), naming)


def index_arrays(sm: ScannedModule, fn: ast.FunctionDef) -> set[str]:
    """Names whose loaded values end up as gather/scatter indices (data flow through local assignments)."""
    loads_of: dict[str, set[str]] = {}

    def sources(node: ast.AST) -> set[str]:
        out: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and _ct_call_name(sm, n.func) in ("load", "gather") and n.args \
                    and isinstance(n.args[0], ast.Name):
                out.add(n.args[0].id)
            elif isinstance(n, ast.Name):
                out |= loads_of.get(n.id, set())
        return out
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name)]
    for _ in range(len(assigns) + 1):  # to a fixed point
        before = sum(map(len, loads_of.values()))
        for a in assigns:
            loads_of.setdefault(a.targets[0].id, set()).update(sources(a.value))
        if sum(map(len, loads_of.values())) == before:
            break
    found: set[str] = set()
    for n in ast.walk(fn):  # gather/scatter indices, and tile indices of loads and stores
        if isinstance(n, ast.Call) and _ct_call_name(sm, n.func) in ("gather", "scatter", "load", "store"):
            idx = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords
                                                         if k.arg in ("indices", "index")), None)
            if idx is not None:
                found |= sources(idx)
    return found


def _lower_configured(sm: ScannedModule, name: str, cfg: KernelConfig, naming: Naming) -> list[Kernel]:
    fn = sm.kernels[name]
    try:
        return [KernelLowerer(sm, fn, cfg, naming).lower()]
    except NeedsSpecialization as need:
        values = specialization_values(cfg, need.constants | frozenset(cfg.pinned))
        unknown = Diagnostic(f"{need.reason}; constant(s) {', '.join(sorted(need.constants))} must be "
                             "specialized, but no values are known", need.loc, "specialization",
                             "give the constant values in use (translate/port --config)")
        few = len(need.constants) <= MAX_ENUMERATED_BOOLS
        enumerated = not values and need.constants <= _bool_constants(sm, name) - set(cfg.pinned) and few
        if not values and not enumerated and not need.constants <= cfg.runtime | cfg.generic:
            # no values known: int constants stay const generics and are compared as such, or the constants
            # become typed runtime parameters (cuTile folds them; the port computes with them), so the
            # kernel still translates without a configuration
            ints = need.constants <= _int_constants(sm, name)
            tries = ([replace(cfg, generic=cfg.generic | need.constants)] if ints else []) \
                + [replace(cfg, runtime=cfg.runtime | need.constants)]
            for retry in tries:
                try:
                    return _lower_configured(sm, name, retry, naming)
                except Diagnostic as d:
                    if d.construct == "dtype":
                        raise  # about element types, not the constant (unconfigured kernels try several)
                    unknown.message += f" (as {_ROUTE[retry.runtime == cfg.runtime]}: {d.message})"
            # e.g. a branch on it changes a type: values are needed; an int only tested for truth is a flag
            if need.constants <= _flag_constants(sm, name) - set(cfg.pinned) and few:
                values, enumerated = _combinations(need.constants, (0, 1)), True
        elif enumerated:  # a bool has two values: one entry for each, as cuTile compiles one per value
            values = _combinations(need.constants, (False, True))
        if not values:
            raise unknown from None
        out = []
        for v in values:
            configs = (tuple({**c, **v} for c in cfg.configs) if enumerated
                       else tuple(c for c in cfg.configs if all(c.get(k) == x for k, x in v.items())))
            sub_cfg = replace(cfg, configs=configs, pinned={**cfg.pinned, **v})
            for k in _lower_configured(sm, name, sub_cfg, naming):
                suffix = "_".join(f"{key.lower()}{_suffix(val)}" for key, val in sorted(v.items())
                                  if key not in cfg.pinned)
                k.name = f"{k.name}_{suffix}" if suffix else k.name
                out.append(k)
        return out


# how a retry without values passes the constants (by whether it added runtime parameters)
_ROUTE = {False: "runtime values", True: "const generics compared at run time"}
MAX_ENUMERATED_BOOLS = 3  # at most 8 entries per kernel without values


def _int_constants(sm: ScannedModule, name: str) -> set[str]:
    fn = sm.kernels[name]
    return {a.arg for a in fn.args.args if _const_annotation(sm, a.annotation) == "int"}


def _combinations(names: frozenset, choices: tuple) -> list[dict]:
    ordered = sorted(names)
    return [dict(zip(ordered, combo)) for combo in product(choices, repeat=len(ordered))]


def _flag_constants(sm: ScannedModule, name: str) -> set[str]:
    """Int constants the kernel only tests for truth (`if HAS_BETA:`, `not C`, `C and D`, `a if C else b`):
    flags, whose values are 0 and 1 (an entry for each; the launcher refuses another value)."""
    fn = sm.kernels[name]

    def truth(node: ast.AST) -> list[ast.AST]:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return truth(node.operand)
        if isinstance(node, ast.BoolOp):
            return [n for v in node.values for n in truth(v)]
        return [node] if isinstance(node, ast.Name) else []
    tested = {id(n) for t in ast.walk(fn) if isinstance(t, (ast.If, ast.While, ast.IfExp)) for n in truth(t.test)}
    names = [n for st in fn.body for n in ast.walk(st) if isinstance(n, ast.Name)]
    return {c for c in _int_constants(sm, name)
            if any(n.id == c for n in names) and all(id(n) in tested for n in names if n.id == c)}


def _bool_constants(sm: ScannedModule, name: str) -> set[str]:
    fn = sm.kernels[name]
    return {a.arg for a in fn.args.args if _const_annotation(sm, a.annotation) == "bool"}


def _suffix(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v).replace(".", "p").replace("-", "m")


def translate_file(path: str, configs: Mapping[str, KernelConfig] | None, only: Sequence[str] | None,
                   naming: Naming, resolver: Resolver | None = None) -> Translation:
    """Parse `path` and lower every kernel (or those in `only`); diagnostics are per kernel. Imports of
    other modules are read with `resolver` (`frontends.imports.resolver_for`)."""
    try:
        sm = scan_module(path, resolver=resolver)
    except Diagnostic as d:  # unreadable or a syntax error: nothing of the file can be translated
        return Translation(KernelModule(path, Path(path).stem, []), [d])
    except Exception as e:  # noqa: BLE001 - a translator bug: reported, never a traceback
        return Translation(KernelModule(path, Path(path).stem, []), [Diagnostic(
            f"internal translator error: {type(e).__name__}: {e}", Loc(path, 1, 1), "internal",
            "please report this file")])
    kernels, diags = [], list(sm.parse_diagnostics)
    names = list(only) if only else list(sm.kernels)
    for name in names:
        if name not in sm.kernels:
            diags.append(Diagnostic(f"no `@ct.kernel` function named `{name}`", Loc(path, 1, 1), "kernel"))
            continue
        try:
            lowered = lower_kernel(sm, name, (configs or {}).get(name, KernelConfig()), naming)
            for k in lowered:
                k.notes += [n for n in sm.guard_notes if n not in k.notes]
            kernels += lowered
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
    if not sm.kernels and not sm.parse_diagnostics:
        diags.append(Diagnostic("no `@ct.kernel` functions found", Loc(path, 1, 1), "kernel",
                                "decorate kernels with @ct.kernel (import cuda.tile as ct)"))
    return Translation(KernelModule(path, Path(path).stem, kernels), diags)


__all__ = ["KernelConfig", "Translation", "translate_file", "scan_module", "CV", "DTypeVal", "EnumVal",
           "ModuleRef", "Helper", "KernelLowerer"]
