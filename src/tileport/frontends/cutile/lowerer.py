"""cuTile Python frontend: source text -> kernel model, with `ast` only (user code never runs).

One visitor method per Python construct (`stmt_<Node>`, `expr_<Node>`); `ct.<fn>` calls are typed by
the handlers registered in `calls`. Kernel-level facts the source does not state (array element dtypes,
scalar dtypes, constant values in use) come from `KernelConfig`s; what cannot be decided from them is
a `Diagnostic` with file:line:col.
"""

from __future__ import annotations

import ast
import contextlib
import math
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, Mapping, Sequence

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.frontends.base import KernelConfig, Translation
from tileport.frontends.cutile import calls
from tileport.frontends.liveness import Frames, assigned, exposed_read, reads
from tileport.frontends.cutile.dtypes import promote
from tileport.frontends.cutile.values import (BINOPS, CV, MATH, MAX_FOLD_BITS, ConstFoldError, DTypeVal, EnumVal,
                                              Helper, ModuleRef, NotConstant, SourceModule, Value, call_math, checked,
                                              describe, fold)
from tileport.frontends.imports import (FILES, FromModule, Guards, Imports, Outside, Resolver, WholeModule,
                                        module_statements, outside_hint, read_imports, resolver_for, star_exports,
                                        submodule)
from tileport.frontends.source import parse_module, read_source
from tileport.model import types as T
from tileport.model.builder import Builder, DTypeSpace, lit_dtype
from tileport.model.naming import Naming
from tileport.model.ir import (Atom, Block, Break, CDim, Continue, For, If, Kernel, KernelModule, Let, Lit, Loc,
                               Param, Ref, Return, While, sym_names, walk)
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ConstT, DVar, ScalarT, Sym, TileT
from tileport.dtypes import TORCH_DTYPES
from tileport.runtime.abi import DTYPE_CODES

CT_MODULE = "cuda.tile"
DTYPE_MODULES = ("numpy", "torch")  # their dtype names and inf/nan/pi/e mean what cuTile's do
ARRAY_USES = {"load", "store", "gather", "scatter", "num_tiles", "atomic_add", "atomic_max", "atomic_min",
              "atomic_xchg", "atomic_cas", "atomic_and", "atomic_or", "atomic_xor"}


def _const_number(v) -> bool:
    """A compile-time int, float or bool."""
    return isinstance(v, CV) and isinstance(v.value, (int, float)) and not isinstance(v.value, (Sym, T.DimOp))


# ---------------------------------------------------------------- configuration

CONST_SCALAR_DTYPES = {"int": "i32", "bool": "bool", "float": "f32"}  # a ct.Constant passed at run time


DEFAULT_FLOAT_DTYPES = ("f32", "f16", "bf16")
# `@ct.kernel` options and their legal values (cuda.tile 1.7.0, _compiler_options.py).
KERNEL_OPTIONS = {"occupancy": tuple(range(1, 33)), "num_ctas": (1, 2, 4, 8, 16),
                  "num_worker_warps": (1, 2, 4, 8, 16, 32), "opt_level": (0, 1, 2, 3)}
# Every helper call is inlined: helpers that call each other twice per level grow exponentially.
MAX_INLINED_CALLS = 4_096


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
    # other module-level names bound to an expression (PAD = ct.PaddingMode.ZERO, fexp = ct.exp),
    # evaluated where a kernel uses them
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    dtype_modules: dict[str, str] = field(default_factory=dict)  # np -> "numpy", torch -> "torch"
    closures: dict[str, "Closure"] = field(default_factory=dict)  # kernels built inside a factory function
    imports: Imports = field(default_factory=Imports)  # names bound to other modules (`from .utils import f`)
    resolver: Resolver = FILES  # where those modules lie
    guard_notes: list[str] = field(default_factory=list)  # module-level guards read as intended (`try: import ..`)
    bad_constants: dict[str, Diagnostic] = field(default_factory=dict)  # module constants that do not fold
    parse_diagnostics: list[Diagnostic] = field(default_factory=list)  # statements the parser could not take


@dataclass
class Closure:
    """The enclosing factory of a kernel defined inside a function: its constant locals, and the names
    whose values exist only when the factory runs (its parameters, its other locals)."""

    factory: str
    constants: dict[str, Any]
    runtime: set[str]


def loc_of(path: str, node: ast.AST) -> Loc:
    return Loc(path, getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1)


def scan_module(path: str, source: str | None = None, resolver: Resolver | None = None) -> ScannedModule:
    """Find kernels, helpers, constants and imports. Raises Diagnostic on unreadable or invalid source.

    Imports of other modules are read with `resolver` (`frontends.imports`); what the names they bind are
    there (cuda.tile, a constant, a helper, an alias) is looked up where this module uses them."""
    text = read_source(path) if source is None else source
    tree, parse_diagnostics = parse_module(path, text)
    sm = ScannedModule(path, tree, set(), {}, {}, {}, {}, {}, set(), parse_diagnostics=parse_diagnostics,
                       resolver=resolver_for(resolver))
    guards = Guards()
    statements = list(module_statements(tree.body, path, guards))
    sm.guard_notes = guards.notes
    sm.imports = read_imports(path, statements, sm.resolver)
    for node in statements:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == CT_MODULE and a.asname:
                    sm.ct_names.add(a.asname)
                elif a.name == "math":
                    sm.math_names.add(a.asname or "math")
                elif a.name in DTYPE_MODULES:
                    sm.dtype_modules[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom):
            if node.module == "cuda":
                sm.ct_names.update(a.asname or a.name for a in node.names if a.name == "tile")
            elif node.module and (node.module == CT_MODULE or node.module.startswith(CT_MODULE + ".")):
                # `from cuda.tile._numeric_semantics import RoundingMode`: the same object as ct.RoundingMode
                sm.ct_imports.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.FunctionDef):
            if any(is_ct_attr(sm, d, "kernel") for d in node.decorator_list):
                sm.kernels[node.name] = node
            else:
                sm.helpers[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            _scan_assign(sm, node)
    for factory in [n for n in statements if isinstance(n, ast.FunctionDef) and n.name in sm.helpers]:
        _scan_factory(sm, factory)
    return sm


MAX_IMPORT_DEPTH = 16  # re-exports followed through at most this many modules (they may import each other)


def imported_value(sm: ScannedModule, name: str, kind: str, depth: int = 0) -> Any:
    """What a name this module imports is in the module that defines it, when that is a cuda.tile name
    (`kind` "ct": True), a cuda.tile attribute ("ct_import": its name) or a constant ("constant": its value);
    None otherwise. A kernel file may take `ct` or a constant from another module of its package."""
    if depth > MAX_IMPORT_DEPTH or (name not in sm.imports.names and not sm.imports.stars):
        return None
    owner = defining_module(sm, name, depth)
    if owner is None:
        return None
    other, attr = owner
    own = {"ct": attr in other.ct_names or None, "ct_import": other.ct_imports.get(attr),
           "constant": other.constants.get(attr)}[kind]
    return own if own is not None else imported_value(other, attr, kind, depth + 1)


_IMPORTED: dict[tuple, ScannedModule | None] = {}


def imported_module(file: Path, resolver: Resolver) -> ScannedModule | None:
    """The scan of another module of the package (parsed once per file version and resolver); None while
    it is being scanned (modules that import each other) or when it cannot be read or parsed."""
    try:
        key = (str(file), file.stat().st_mtime_ns, resolver.key)
    except OSError:
        return None
    if key not in _IMPORTED:
        _IMPORTED[key] = None  # a module importing this one back finds nothing more while it is scanned
        try:
            _IMPORTED[key] = scan_module(str(file), resolver=resolver)
        except (Diagnostic, RecursionError):
            pass
    return _IMPORTED[key]


def helper_def(sm: ScannedModule, func: ast.AST, depth: int = 0) -> tuple[ScannedModule, ast.FunctionDef] | None:
    """The helper function a call names (`helper`, `utils.helper`): its own, or one of another module."""
    if depth > MAX_IMPORT_DEPTH:
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = module_binding(sm, func.value.id, depth)
        return None if module is None else helper_def(module, ast.Name(func.attr), depth + 1)
    if not isinstance(func, ast.Name):
        return None
    if func.id in sm.helpers:
        return sm, sm.helpers[func.id]
    owner = defining_module(sm, func.id, depth) if not _own_name(sm, func.id) else None
    return None if owner is None else helper_def(owner[0], ast.Name(owner[1]), depth + 1)


def _own_name(sm: ScannedModule, name: str) -> bool:
    return (name in sm.helpers or name in sm.constants or name in sm.aliases or name in sm.ct_names
            or name in sm.ct_imports or name in sm.math_names or name in sm.kernels)


def defining_module(sm: ScannedModule, name: str, depth: int = 0) -> tuple[ScannedModule, str] | None:
    """The module (and its name there) that a name this module imports comes from: a `from M import name`,
    else the first `from M import *` that brings it."""
    binding = sm.imports.names.get(name)
    if isinstance(binding, FromModule):
        other = imported_module(Path(binding.file), sm.resolver)
        return (other, binding.attr) if other is not None else None
    if binding is None and depth <= MAX_IMPORT_DEPTH:
        for file in sm.imports.stars:
            other = imported_module(Path(file), sm.resolver)
            if other is not None and star_exports(other.tree, name) and (
                    _own_name(other, name) or name in other.imports.names
                    or defining_module(other, name, depth + 1) is not None):
                return other, name
    return None


def module_binding(sm: ScannedModule, name: str, depth: int = 0) -> ScannedModule | None:
    """The scan of the package module a name is bound to (`from ..runtime import tl_extra as ext`)."""
    binding = sm.imports.names.get(name)
    if isinstance(binding, WholeModule):
        return imported_module(Path(binding.file), sm.resolver)
    if _own_name(sm, name) or isinstance(binding, Outside) or depth > MAX_IMPORT_DEPTH:
        return None
    owner = defining_module(sm, name, depth)
    return None if owner is None else module_binding(owner[0], owner[1], depth + 1)


def _scan_factory(sm: ScannedModule, factory: ast.FunctionDef) -> None:
    """Kernels a function builds (`def make(n): @ct.kernel def k(..): ..; return k`), with its closure."""
    nested = [n for n in ast.walk(factory) if isinstance(n, ast.FunctionDef) and n is not factory
              and any(is_ct_attr(sm, d, "kernel") for d in n.decorator_list)]
    if not nested:
        return
    a = factory.args
    runtime = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | {x.arg for x in (a.vararg, a.kwarg) if x}
    constants: dict[str, Any] = _factory_arguments(sm, factory)
    runtime -= set(constants)
    scoped = ScannedModule(sm.path, sm.tree, sm.ct_names, sm.ct_imports, {**sm.constants, **constants},
                           sm.const_aliases, {}, {}, sm.math_names)
    for st in factory.body:  # straight-line constant locals; anything else is known only at run time
        names = [t.id for t in getattr(st, "targets", [getattr(st, "target", None)]) if isinstance(t, ast.Name)]
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and len(names) == 1 and st.value is not None:
            try:
                constants[names[0]] = scoped.constants[names[0]] = eval_const(scoped, st.value)
                runtime.discard(names[0])
                continue
            except (ValueError, TypeError, ZeroDivisionError, KeyError, RecursionError):
                pass
        runtime |= {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for kernel in nested:
        if kernel.name not in sm.kernels:
            sm.kernels[kernel.name] = kernel
            sm.closures[kernel.name] = Closure(factory.name, constants, runtime - {kernel.name})


def _factory_arguments(sm: ScannedModule, factory: ast.FunctionDef) -> dict[str, Any]:
    """Parameters of a kernel factory that every call of it in the file gives the same compile-time value
    (`KERNEL = make(8)`; literals, module constants, or the parameter's default): the kernel it builds is
    then that one kernel, and the value a constant of its closure."""
    a = factory.args
    if a.vararg or a.kwarg or a.posonlyargs:
        return {}
    params = [x.arg for x in a.args] + [x.arg for x in a.kwonlyargs]
    defaults = dict(zip([x.arg for x in a.args][len(a.args) - len(a.defaults):], a.defaults))
    defaults |= {x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    calls = [n for n in ast.walk(sm.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == factory.name]
    if not calls:
        return {}
    seen: dict[str, set] = {p: set() for p in params}
    for call in calls:
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
            return {}
        given = dict(zip(params[:len(a.args)], call.args)) | {k.arg: k.value for k in call.keywords}
        for p in params:
            node = given.get(p, defaults.get(p))
            try:
                value = eval_const(sm, node) if node is not None else None
            except (ValueError, TypeError, ZeroDivisionError, KeyError, RecursionError):
                value = None
            seen[p].add((type(value), value))
    return {p: next(iter(v))[1] for p, v in seen.items() if len(v) == 1 and next(iter(v))[1] is not None}


def is_ct_attr(sm: ScannedModule, node: ast.AST, attr: str) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr == attr and is_ct_name(sm, node.value.id)
    return isinstance(node, ast.Name) and ct_import(sm, node.id) == attr


def is_ct_name(sm: ScannedModule, name: str) -> bool:
    """`name` is bound to the cuda.tile module (here, or in the module of the package it is imported from)."""
    return name in sm.ct_names or bool(imported_value(sm, name, "ct"))


def ct_import(sm: ScannedModule, name: str) -> str | None:
    """The cuda.tile attribute `name` is bound to (`from cuda.tile import load as ld`: "load"), if any."""
    return sm.ct_imports.get(name) or imported_value(sm, name, "ct_import")


def _scan_assign(sm: ScannedModule, node: ast.Assign | ast.AnnAssign) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
        return
    name, value = targets[0].id, node.value
    kind = None if isinstance(value, ast.Constant) else _const_annotation(sm, value)
    if kind:
        sm.const_aliases[name] = kind
        return
    sm.constants.pop(name, None)
    sm.bad_constants.pop(name, None)
    try:
        sm.constants[name] = eval_const(sm, value)
    except NotConstant:
        sm.aliases[name] = value  # evaluated (as kernel code would be) where a kernel uses the name
    except ConstFoldError as e:  # a constant expression that does not fold: a kernel that uses it gets this
        sm.bad_constants[name] = Diagnostic(f"module constant `{name}` is not a compile-time constant: {e}",
                                            loc_of(sm.path, e.node or value), "constant", e.hint)
    except RecursionError:
        sm.bad_constants[name] = Diagnostic(f"module constant `{name}` nests too deeply to evaluate",
                                            loc_of(sm.path, value), "constant", "split it into several constants")


def _const_annotation(sm: ScannedModule, node: ast.AST | None) -> str | None:
    """`ct.Constant[int]` (or an alias of it) -> "int"; a string annotation is parsed (once)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise Diagnostic(f"malformed string annotation {node.value[:40]!r}", loc_of(sm.path, node),
                             "annotation", "write the annotation without quotes (ct.Constant[int])") from None
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in sm.const_aliases:
        return sm.const_aliases[node.id]
    if isinstance(node, ast.Subscript) and is_ct_attr(sm, node.value, "Constant"):
        inner = node.slice
        if isinstance(inner, ast.Name) and inner.id in ("int", "bool", "float"):
            return inner.id
        return "int"
    return None


def eval_const(sm: ScannedModule, node: ast.AST) -> Any:
    """Evaluate a module-level constant expression without executing user code."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return checked(node.value, ConstFoldError(f"{node.value} exceeds {MAX_FOLD_BITS} bits", node))
    if isinstance(node, ast.Name) and node.id in sm.constants:
        return sm.constants[node.id]
    if isinstance(node, ast.Name) and imported_value(sm, node.id, "constant") is not None:
        return imported_value(sm, node.id, "constant")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _located(node, fold, "*", -1 if isinstance(node.op, ast.USub) else 1, eval_const(sm, node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        left, right = eval_const(sm, node.left), eval_const(sm, node.right)
        return _located(node, fold, BINOPS[type(node.op)], left, right)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in sm.math_names:
        if node.attr in MATH and not callable(MATH[node.attr]):
            return MATH[node.attr]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords
            and isinstance(node.func.value, ast.Name) and node.func.value.id in sm.math_names):
        return _located(node, call_math, node.func.attr, [eval_const(sm, a) for a in node.args])
    raise NotConstant("not a compile-time constant (numbers, + - * / // % ** and math.* only)", node)


def _located(node: ast.AST, fn, *args) -> Any:
    try:
        return fn(*args)
    except ConstFoldError as e:
        e.node = e.node or node
        raise


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
                or _SCALAR_ANNOTATIONS.get(getattr(a.annotation, "id", None)) \
                or launch_scalar_dtype(sm, fn.name, fn.args.args.index(a)) or scalar_use_dtype(fn, a.arg) or "i32"
            if dtype not in T.ELEMENT_DTYPES:
                raise Diagnostic(f"unsupported dtype {dtype!r} configured for scalar `{a.arg}`", loc, "config")
            params.append(Param(a.arg, ScalarT(dtype)))
    return params


_SCALAR_ANNOTATIONS = {"float": "f32", "int": "i32", "bool": "bool"}


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


# ---------------------------------------------------------------- the kernel visitor

class _Scope:
    def __init__(self, kind: str, locals_: set[str] | None = None):
        self.kind = kind  # "fn" | "loop" | "if"
        self.vars: dict[str, Value] = {}
        self.locals = locals_ or set()  # outer names this block rebinds without carrying them out
        self.shadows: dict[str, ast.AST] = {}  # carried names holding a value of another type for now


class KernelLowerer:
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

    # ---- statements
    def block(self, stmts: Sequence[ast.stmt], owner: ast.AST) -> None:
        frame = [stmts, 0, owner]
        self.frames.stack.append(frame)
        try:
            for i, s in enumerate(stmts):
                frame[1] = i
                self.stmt = s
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
        self.assign_target(s.target, self.binop(BINOPS.get(type(s.op)), cur, self.expr(s.value), s), s)

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
        bounds = [self.int_atom(self.expr(a), a, "a range() bound") for a in it.args]
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
        self.end_scope()
        self.b.emit(For(index, start, stop, step, body, self.loc(s), self.outer_updates(body)))

    def materialize_carried(self, body: Sequence[ast.stmt], node: ast.AST, locals_: set[str],
                            bools: bool = False) -> None:
        """Compile-time values that a loop body reassigns (and carries) become runtime variables first
        (bools too with `bools`: a `while` test over a flag the body sets)."""
        for name in sorted(assigned(body) - locals_):
            owner = self._owner(name)
            if owner is None:
                continue
            v = self.scopes[owner].vars[name]
            if isinstance(v, CV) and _const_number(v) and (bools or not isinstance(v.value, bool)):
                atom = self.scalar_atom(v, node)
                ty = ScalarT(lit_dtype(v.value)) if isinstance(atom, Lit) else ScalarT("i32")
                ref = self.b.value(OpKind.SCALAR, (atom,), ty, self.loc(node), hint=name)
                self.scopes[owner].vars[name] = ref

    def stmt_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.fail(s, "`while ... else` is not supported", "while-else")
        # A name the test reads is carried even if the body only writes it.
        locals_ = {n for n in self.block_locals(s.body, loop=True) if not reads(s.test, n)}
        self.materialize_carried(s.body, s, locals_, bools=True)
        self.scopes.append(_Scope("loop", locals_))
        cond = self.b.push()
        test = self.while_test(s)
        self.b.pop()
        if test is False:  # `while False:` never runs (cuTile Python folds the constant condition)
            self.scopes.pop()
            return
        body = self.b.push()
        self.block(s.body, s)
        self.b.pop()
        self.end_scope()
        self.b.emit(While(cond, test, body, self.loc(s), self.outer_updates(cond, body)))

    def while_test(self, s: ast.While) -> Atom | None | bool:
        """The loop's scalar condition, evaluated in the current (condition) block; None for a constant
        true condition, False for a constant false one."""
        test = self.expr(s.test)
        if isinstance(test, CV) and any(reads(s.test, n) for n in assigned(s.body)):
            # never folded: the body changes what the test reads (folding would loop forever or never)
            raise self.fail(s.test, "the `while` condition is a compile-time value that the body reassigns",
                            "while", "start the loop variables from runtime values")
        if isinstance(test, CV) and not isinstance(test.value, (Sym, T.DimOp)):
            return None if test.value else False
        if isinstance(test, CV):
            raise NeedsSpecialization(frozenset(sym_names(test.value)), "a `while` on a constant", self.loc(s))
        if not (isinstance(test, Ref) and (isinstance(test.ty, ScalarT) or test.ty.rank == 0)):
            raise self.fail(s.test, "a `while` condition must be a scalar", "while")
        return self.scalar_condition(test, s.test)

    def stmt_If(self, s: ast.If) -> None:
        before = len(self.b.blocks[-1].stmts)
        cond = self.expr(s.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, T.DimOp)):
            self.block(s.body if cond.value else s.orelse, s)  # folded, as cuTile Python folds it
            return
        if isinstance(cond, CV):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "a branch on a constant", self.loc(s))
        if isinstance(cond, self.calls.DTypeCond):
            raise self.fail(s.test, "a branch on an element dtype that differs between configurations", "dtype",
                            "choose the dtype with a conditional expression, or translate one dtype per "
                            "configuration (--config)")
        if not (isinstance(cond, Ref) and (isinstance(cond.ty, ScalarT) or cond.ty.rank == 0)):
            raise self.fail(s.test, "an `if` condition must be a scalar", "if")
        cond = self.scalar_condition(cond, s.test)
        defined = sorted(n for n in assigned(s.body) & assigned(s.orelse)
                         if self._owner(n) is None and self.frames.live_after(n))
        if defined:
            self.if_defining(cond, s, defined)
            return
        branches = []
        for stmts in (s.body, s.orelse):
            self.scopes.append(_Scope("if", self.block_locals(stmts, loop=False)))
            blk = self.b.push()
            self.block(stmts, s)
            self.b.pop()
            self.end_scope()
            branches.append(blk)
        if not any(blk.stmts for blk in branches):
            del self.b.blocks[-1].stmts[before:]  # an `if` that does nothing: cuTile Python drops it, condition too
            return
        self.b.emit(If(cond, branches[0], branches[1], self.loc(s), self.outer_updates(*branches)))

    def if_defining(self, cond: Ref, s: ast.If, names: list[str]) -> None:
        """An `if` on a runtime value whose branches both define a new variable read afterwards: an `if` with
        that variable as its result, as cuTile yields it (`res = a` / `res = b` -> `let res = if c {..; a}
        else {..; b};`)."""
        if len(names) > 1:
            raise self.fail(s, f"both branches of this `if` define {', '.join(f'`{n}`' for n in names)}, read "
                               "after it: one such variable is supported", "if",
                            f"assign {', '.join(names[1:])} before the `if`")
        name = names[0]

        def arm(stmts):
            def lower() -> Value:
                self.block(stmts, s)
                if name not in self.scopes[-1].vars:
                    raise self.fail(stmts[0], f"`{name}` is defined in both branches of the `if` but not in "
                                              "this branch's own statements", "if",
                                    f"assign `{name}` before the `if`")
                return self.scopes[-1].vars[name]
            return lower
        ref = self.branch_value(cond, [(s.body[0], arm(s.body)), (s.orelse[0], arm(s.orelse))], s)
        self.assign(name, ref, s)

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
        if isinstance(base, SourceModule):
            return self.module_attribute(base, node.attr, node)
        return self.calls.attribute(self, base, node.attr, node)

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        return self.calls.subscript(self, self.expr(node.value), node)

    def expr_Call(self, node: ast.Call) -> Value:
        callee = self.expr(node.func)
        if isinstance(callee, Helper):
            return self.inline(callee.node, node, callee.module)
        args = [self.expr(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, "star-arguments are not supported", "call")
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.fail(node, "**kwargs are not supported", "call")
        return self.calls.call(self, callee, args, kwargs, node)

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        op = BINOPS.get(type(node.op))
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
                return self.calls.negate(self, v, node)
            return self.calls.unary_fn(self, "negative", v, {}, node)
        if isinstance(node.op, ast.Not):
            if isinstance(v, CV):
                if isinstance(v.value, (Sym, T.DimOp)):
                    raise NeedsSpecialization(frozenset(sym_names(v.value)), "`not` on a constant", self.loc(node))
                return CV(not v.value)
            return self.calls.logical_not(self, v, node)
        if isinstance(node.op, ast.Invert):
            if isinstance(v, CV) and isinstance(v.value, (Sym, T.DimOp)):
                raise NeedsSpecialization(frozenset(sym_names(v.value)), "`~` on a constant", self.loc(node))
            return self.calls.invert(self, v, node)
        raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        first = self.expr(node.values[0])
        rest = node.values[1] if len(node.values) == 2 else ast.copy_location(
            ast.BoolOp(node.op, node.values[1:]), node.values[1])
        if isinstance(first, Ref) and (isinstance(first.ty, ScalarT) or first.ty.rank == 0):
            return self.short_circuit(first, rest, node)
        if isinstance(first, CV) and not isinstance(first.value, (Sym, T.DimOp)):
            if bool(first.value) != isinstance(node.op, ast.And):
                return first  # `False and b`, `True or b`: b is not evaluated (cuTile folds the branch)
            second = self.expr(rest)
            if isinstance(second, Ref) and (isinstance(second.ty, ScalarT) or second.ty.rank == 0):
                return self.scalar_condition(second, rest)
            vals = [first, second]
        else:
            vals = [first, *(self.expr(v) for v in node.values[1:])]
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

    def short_circuit(self, first: Ref, rest: ast.expr, node: ast.BoolOp) -> Ref:
        """`a and b` / `a or b` on a runtime scalar `a`, as cuTile evaluates it: `b` only in the branch that
        needs it (`if a { b } else { a }` / `if a { a } else { b }`), each side a bool."""
        cond = self.scalar_condition(first, node.values[0])

        def other() -> Value:
            v = self.expr(rest)
            if isinstance(v, CV) and not isinstance(v.value, (Sym, T.DimOp)):
                return CV(bool(v.value))
            if not (isinstance(v, Ref) and (isinstance(v.ty, ScalarT) or v.ty.rank == 0)):
                raise self.fail(rest, f"`{'and' if isinstance(node.op, ast.And) else 'or'}` takes scalar "
                                      f"conditions, got {describe(v)}", "condition")
            return self.scalar_condition(v, rest)
        arms = [(rest, other), (node.values[0], lambda: cond)]
        return self.branch_value(cond, arms if isinstance(node.op, ast.And) else arms[::-1], node)

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
        if isinstance(cond, self.calls.DTypeCond):
            return self.calls.choose_dtype(self, cond, self.expr(node.body), self.expr(node.orelse), node)
        if isinstance(cond, Ref) and (isinstance(cond.ty, ScalarT) or cond.ty.rank == 0):
            return self.if_value(cond, node)  # a runtime scalar condition: cuTile branches (an `if` with a result)
        return self.calls.where(self, cond, self.expr(node.body), self.expr(node.orelse), node)

    def if_value(self, cond: Ref, node: ast.IfExp) -> Ref:
        """`a if c else b` on a runtime scalar `c`: each arm evaluated in its own branch, as cuTile does
        (`%r = if %c -> (type) { yield a } else { yield b }`); the value type is the arms' common type."""
        cond = self.scalar_condition(cond, node.test)
        return self.branch_value(cond, [(node.body, lambda: self.expr(node.body)),
                                        (node.orelse, lambda: self.expr(node.orelse))], node)

    def branch_value(self, cond: Ref, arms, node: ast.AST) -> Ref:
        """An `if` with a result: each (node, thunk) arm computed in its own branch, the value of their
        common type."""
        from tileport.model.ir import Do, Op
        lowered = []
        for sub, thunk in arms:  # each arm lowered once (nested arms would otherwise double)
            scope = _Scope("if", set())
            self.scopes.append(scope)
            blk = self.b.push()
            names = self.b.scope_names[-1]
            try:
                lowered.append((sub, scope, blk, names, self.calls.materialize(self, thunk(), sub)))
            finally:
                self.b.pop()
                self.scopes.pop()
        ty = self.calls.common_value_type(self, lowered[0][4], lowered[1][4], node)
        blocks = []
        for sub, scope, blk, names, value in lowered:  # back into each arm: the value as the common type
            self.scopes.append(scope)
            self.b.resume(blk, names)
            atom = self.calls.as_type(self, value, ty, sub)
            self.b.emit(Do(Op(OpKind.YIELD, (atom,), ty, self.loc(sub))))
            self.b.pop()
            self.scopes.pop()
            blocks.append(blk)
        name = self.b.fresh("sel")
        self.b.temps.add(name)
        self.b.emit(If(cond, blocks[0], blocks[1], self.loc(node), self.outer_updates(*blocks), name, ty))
        return Ref(name, ty)

    def scalar_condition(self, cond: Ref, test: ast.AST) -> Ref:
        """A bool scalar from a scalar or 0-d tile condition (`!= 0` for numbers)."""
        if isinstance(cond.ty, TileT):
            cond = self.b.value(OpKind.SCALAR_OF, (cond,), ScalarT(cond.ty.dtype), self.loc(test), hint="cond")
        if cond.ty.dtype != "bool":
            cond = self.b.value(OpKind.COMPARE, (cond, Lit(0, ScalarT(cond.ty.dtype))), ScalarT("bool"),
                                self.loc(test), hint="cond", op="!=")
        return cond

    def binop(self, op: str | None, a: Value, b: Value, node: ast.AST) -> Value:
        if op is None:
            raise self.fail(node, "operator not supported", "operator")
        return self.calls.binary(self, op, a, b, node)

    # ---- helpers
    def inline(self, fn: ast.FunctionDef, call: ast.Call, module: ScannedModule | None = None) -> Value:
        if self.inline_depth > 16:
            raise self.fail(call, f"helper `{fn.name}` is recursive (or nested too deeply)", "recursion",
                            "kernels and helpers cannot recurse")
        self.inlined += 1
        if self.inlined > MAX_INLINED_CALLS:
            raise self.fail(call, f"helper calls expand to more than {MAX_INLINED_CALLS} inlined bodies", "size",
                            "call helpers fewer times (each call is inlined), or split the kernel")
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
        self.inline_calls.append(call)
        saved_sm, saved_path = self.sm, self.path
        if module is not None:  # an imported helper sees its own module's names, and reports its own file
            self.sm, self.path = module, module.path
        try:
            self.block(body[:-1] if ret else body, fn)
            result = self.expr(ret.value) if ret and ret.value is not None else CV(None)
        finally:
            self.sm, self.path = saved_sm, saved_path
            self.inline_depth -= 1
            self.inline_calls.pop()
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
            return self.b.value(OpKind.SCALAR_OF, (v,), ScalarT(v.ty.dtype), self.loc(node), hint=f"{v.name}_s")
        if isinstance(v, CV) and v.is_dim:
            self.check_literal(v.value, "i32", node)
            return CDim(v.value)
        if isinstance(v, CV) and isinstance(v.value, (float, bool)):
            self.check_literal(v.value, lit_dtype(v.value), node)
            return Lit(v.value, ScalarT(lit_dtype(v.value)))
        raise self.fail(node, f"expected a scalar, got {describe(v)}", "scalar")

    def int_atom(self, v: Value, node: ast.AST, what: str) -> Atom:
        """A scalar that must be an integer (an index, a loop bound)."""
        atom = self.scalar_atom(v, node)
        dtype = None if isinstance(atom, CDim) else atom.ty.dtype
        if dtype is not None and not all(T.is_int(d) for d in self.b.dspace.values(dtype)):
            raise self.fail(node, f"{what} must be an integer, got {describe(v)}", "index",
                            "convert it with int(...) or ct.astype")
        return atom

    def check_literal(self, value: Any, dtype: str, node: ast.AST) -> None:
        """A literal the generated Rust spells with `dtype` must be representable in it."""
        if isinstance(value, int) and not isinstance(value, bool) and dtype in _INT_RANGES:
            lo, hi = _INT_RANGES[dtype]
            if not lo <= value <= hi:
                raise self.fail(node, f"integer constant {value} does not fit in {dtype}", "literal",
                                f"constants must lie in [{lo}, {hi}]")
        if isinstance(value, float) and dtype == "f32" and math.isfinite(value) and abs(value) > _F32_MAX:
            raise self.fail(node, f"float constant {value!r} does not fit in f32", "literal")


_INT_RANGES = {f"{s}{bits}": ((-(1 << bits - 1), (1 << bits - 1) - 1) if s == "i" else (0, (1 << bits) - 1))
               for s in "iu" for bits in (8, 16, 32, 64)}
_F32_MAX = 3.4028234663852886e38


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
