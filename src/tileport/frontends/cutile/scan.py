"""The scan of a cuTile Python module, with `ast` only: its `cuda.tile` imports, constants, helper functions
and closures (a kernel made by a factory), and the imported modules helpers come from.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tileport.diagnostics import Diagnostic
from tileport.frontends.cutile.values import (BINOPS, MATH, MAX_FOLD_BITS, ConstFoldError, NotConstant, call_math,
                                              checked, fold)
from tileport.frontends.imports import (FILES, FromModule, Guards, Imports, Outside, Resolver, WholeModule,
                                        module_statements, read_imports, resolver_for, star_exports)
from tileport.frontends.source import parse_module, read_source
from tileport.model.ir import Loc

CT_MODULE = "cuda.tile"
DTYPE_MODULES = ("numpy", "torch")  # their dtype names and inf/nan/pi/e mean what cuTile's do


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
