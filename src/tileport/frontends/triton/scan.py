"""Module scan of a Triton file: which functions are kernels, their autotune/heuristics candidates, the
module's constants and `@triton.jit` helpers. Only `ast` is used: the user's module never runs."""

from __future__ import annotations

import ast
import os
import stat
from dataclasses import dataclass, field
from typing import Any

from tileport.diagnostics import Diagnostic
from tileport.frontends.imports import (FILES, FromModule, Guards, Imports, Outside, Resolver, WholeModule,
                                        module_statements, read_imports, resolver_for, star_exports)
from tileport.model.ir import Loc

MAX_SOURCE_BYTES = 1 << 20
TRITON_MODULES = ("triton",)
TL_MODULES = ("triton.language",)
LIBDEVICE_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                     "triton.language.math", "triton.language.extra")


def loc_of(path: str, node: ast.AST) -> Loc:
    return Loc(path, getattr(node, "lineno", 0) or 1, getattr(node, "col_offset", 0) + 1)


@dataclass
class TritonModule:
    path: str
    tree: ast.Module
    triton_names: set[str] = field(default_factory=set)  # names bound to `triton`
    tl_names: set[str] = field(default_factory=set)  # names bound to `triton.language`
    libdevice_names: set[str] = field(default_factory=set)  # libdevice / tl.math modules
    tl_imports: dict[str, str] = field(default_factory=dict)  # from triton.language import exp -> {"exp": "exp"}
    libdevice_imports: dict[str, str] = field(default_factory=dict)  # from ...libdevice import rsqrt
    constants: dict[str, Any] = field(default_factory=dict)  # NAME = 3 / NAME: tl.constexpr = tl.constexpr(3)
    kernels: dict[str, ast.FunctionDef] = field(default_factory=dict)
    helpers: dict[str, ast.FunctionDef] = field(default_factory=dict)  # @triton.jit functions (inlined)
    candidates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # autotune configs per kernel
    heuristics: dict[str, set[str]] = field(default_factory=dict)  # constants a heuristic decides
    aliases: dict[str, str] = field(default_factory=dict)  # k = triton.jit(fn), k = fn -> {"k": "fn"}
    wrappers: dict[str, list[str]] = field(default_factory=dict)  # decorators of a kernel that are not Triton's
    decorators: dict[str, list[ast.expr]] = field(default_factory=dict)  # of jit functions, function forms included
    launches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # literal arguments of `k[grid](..)`
    naming: Any = None  # the target's Naming (identifiers), set by the frontend before lowering
    value_aliases: dict[str, ast.expr] = field(default_factory=dict)  # exp = tl.exp: evaluated where a kernel uses it
    imports: Imports = field(default_factory=Imports)  # names bound to other modules (`from .utils import f`)
    resolver: Resolver = FILES  # where those modules lie
    guard_notes: list[str] = field(default_factory=list)  # module-level guards read as intended


def read_source(path: str) -> str:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise Diagnostic("not a regular file", Loc(path, 1, 1), "file", "give a .py kernel file")
        with open(path, "rb") as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        raise Diagnostic(f"cannot read the file: {e.strerror or e}", Loc(path, 1, 1), "file") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise Diagnostic("the file is larger than 1 MiB", Loc(path, 1, 1), "file size", "split the file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Diagnostic(f"the file is not valid UTF-8 (byte {e.start})", Loc(path, 1, 1), "encoding",
                         "save the file as UTF-8") from None


def parse(path: str, text: str) -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as e:
        raise Diagnostic(f"syntax error: {e.msg}", Loc(path, e.lineno or 1, e.offset or 1), "syntax") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise Diagnostic(f"the file cannot be parsed: {type(e).__name__}", Loc(path, 1, 1), "syntax") from None


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` as a string (None for anything but names and attributes)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


DECORATORS = ("jit", "autotune", "heuristics")


def _decorator_name(tm: TritonModule, d: ast.AST) -> str | None:
    """`jit`, `autotune`, `heuristics` for triton decorators (called or not), else None."""
    name = dotted(d.func if isinstance(d, ast.Call) else d)
    if not name:
        return None
    head, _, attr = name.rpartition(".")
    if head in tm.triton_names and attr in DECORATORS:
        return attr
    if not head and tm.tl_imports.get(name) in DECORATORS:
        return tm.tl_imports[name]
    return None


def scan(path: str, text: str | None = None, resolver: Resolver | None = None) -> TritonModule:
    """The module's kernels, helpers, constants and imports; imports of other modules are read with
    `resolver` (`frontends.imports`), module-level guards as intended (`try: import triton`)."""
    text = read_source(path) if text is None else text
    tree = parse(path, text)
    tm = TritonModule(path, tree, resolver=resolver_for(resolver))
    guards = Guards()
    statements = list(module_statements(tree.body, path, guards))
    tm.guard_notes = guards.notes
    tm.imports = read_imports(path, statements, tm.resolver)
    for node in _module_level(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _scan_import(tm, node)
    for node in statements:
        if isinstance(node, ast.FunctionDef):
            _scan_function(tm, node, node.decorator_list)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            _scan_constant(tm, node)
    for node in tree.body:
        if isinstance(node, ast.Assign):
            _scan_wrapped(tm, node)
    _called_kernels_are_helpers(tm)
    _scan_launches(tm)
    return tm


def _scan_launches(tm: TritonModule) -> None:
    """The literal arguments (numbers, bools, strings, module constants) of each launch `k[grid](...)` of a
    kernel in the file's host code, by parameter name: values the launches give its constexprs. A module constant
    counts where no function binds the name too (a local of the launching function could shadow it)."""
    local = {n.id for f in ast.walk(tm.tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
             for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
        a.arg for f in ast.walk(tm.tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for a in ast.walk(f.args) if isinstance(a, ast.arg)}
    for call in ast.walk(tm.tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
                and isinstance(call.func.value, ast.Name)):
            continue
        fn = tm.kernels.get(tm.aliases.get(call.func.value.id, call.func.value.id))
        if fn is None or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        params = [a.arg for a in fn.args.args]
        given = [*zip(params, call.args), *((k.arg, k.value) for k in call.keywords if k.arg in params)]
        values = {name: v for name, node in given if (v := _launch_literal(tm, node, local)) is not None}
        if values and values not in tm.launches.setdefault(fn.name, []):
            tm.launches[fn.name].append(values)


def _launch_literal(tm: TritonModule, node: ast.AST, local: set[str]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return None if node.id in local else tm.constants.get(node.id)
    return _literal(node)


def _scan_wrapped(tm: TritonModule, node: ast.Assign) -> None:
    """`k = triton.jit(fn)`, `k = triton.autotune(...)(triton.jit(fn))`, `k = triton.heuristics({..})(k0)`
    and `k = k0` at module level: the decorators in function form. The kernel keeps the function's name (as
    Triton's launches report it); `k` is an alias of it (calls and launches through `k`)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return
    layers, e = [], node.value
    while isinstance(e, ast.Call) and len(e.args) == 1:
        layers.append(e.func)
        e = e.args[0]
    if not isinstance(e, ast.Name):
        return
    name = tm.aliases.get(e.id, e.id)
    fn = next((n for n in tm.tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None:
        return
    jitted = fn.name in tm.kernels or fn.name in tm.helpers
    if layers:
        tm.kernels.pop(fn.name, None)
        tm.helpers.pop(fn.name, None)
        _scan_function(tm, fn, [*layers, *tm.decorators.get(fn.name, fn.decorator_list)])
    if not (jitted or fn.name in tm.kernels or fn.name in tm.helpers):
        return  # a function Triton never compiles
    tm.value_aliases.pop(node.targets[0].id, None)  # a function, not a value
    if node.targets[0].id != fn.name:
        tm.aliases[node.targets[0].id] = fn.name


_IMPORTED: dict[tuple, TritonModule | None] = {}
MAX_IMPORT_DEPTH = 16  # re-exports followed through at most this many modules (they may import each other)


def imported_module(file: str, resolver: Resolver) -> TritonModule | None:
    """The scan of another module of the package (parsed once per file version and resolver); None while it
    is being scanned (modules that import each other) or when it cannot be read or parsed."""
    try:
        key = (file, os.stat(file).st_mtime_ns, resolver.key)
    except OSError:
        return None
    if key not in _IMPORTED:
        _IMPORTED[key] = None
        try:
            _IMPORTED[key] = scan(file, resolver=resolver)
        except (Diagnostic, RecursionError):
            pass
    return _IMPORTED[key]


def defines(tm: TritonModule, name: str) -> bool:
    """Whether the module binds `name` itself (not through an import)."""
    return (name in tm.constants or name in tm.helpers or name in tm.kernels or name in tm.aliases
            or name in tm.value_aliases or name in tm.tl_names or name in tm.triton_names or name in tm.libdevice_names
            or name in tm.tl_imports or name in tm.libdevice_imports)


def defining_module(tm: TritonModule, name: str, depth: int = 0) -> tuple[TritonModule, str] | None:
    """The module (and its name there) a name this module imports comes from: `from M import name`, else
    the first `from M import *` that brings it."""
    binding = tm.imports.names.get(name)
    if isinstance(binding, FromModule):
        other = imported_module(binding.file, tm.resolver)
        return (other, binding.attr) if other is not None else None
    if binding is None and depth <= MAX_IMPORT_DEPTH:
        for file in tm.imports.stars:
            other = imported_module(file, tm.resolver)
            if other is not None and star_exports(other.tree, name) and (
                    defines(other, name) or name in other.imports.names
                    or defining_module(other, name, depth + 1) is not None):
                return other, name
    return None


def module_binding(tm: TritonModule, name: str, depth: int = 0) -> TritonModule | None:
    """The scan of the package module a name is bound to (`from ..runtime import tl_extra as ext`)."""
    binding = tm.imports.names.get(name)
    if isinstance(binding, WholeModule):
        return imported_module(binding.file, tm.resolver)
    if defines(tm, name) or isinstance(binding, Outside) or depth > MAX_IMPORT_DEPTH:
        return None
    owner = defining_module(tm, name, depth)
    return None if owner is None else module_binding(owner[0], owner[1], depth + 1)


def helper_of(tm: TritonModule, func: ast.AST, depth: int = 0) -> tuple[TritonModule, ast.FunctionDef] | None:
    """The `@triton.jit` function a call names (`helper`, `utils.helper`): this module's, or one another
    module of the package defines (a jit function there is a helper here whatever it looks like)."""
    if depth > MAX_IMPORT_DEPTH:
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = module_binding(tm, func.value.id, depth)
        return None if module is None else helper_of(module, ast.Name(func.attr), depth + 1)
    if not isinstance(func, ast.Name):
        return None
    if func.id in tm.helpers:
        return tm, tm.helpers[func.id]
    if depth and func.id in tm.kernels:
        return tm, tm.kernels[func.id]
    owner = defining_module(tm, func.id, depth) if not defines(tm, func.id) else None
    return None if owner is None else helper_of(owner[0], ast.Name(owner[1]), depth + 1)


def _called_kernels_are_helpers(tm: TritonModule) -> None:
    """A jit function another jit function calls, and which this module never launches (`f[grid](...)`), is a
    helper (inlined where it is called) even when it stores like a kernel."""
    jit = {**tm.kernels, **tm.helpers}
    called = {tm.aliases.get(n.func.id, n.func.id) for fn in jit.values() for n in ast.walk(fn)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and tm.aliases.get(n.func.id, n.func.id) != fn.name}
    launched = {tm.aliases.get(n.value.id, n.value.id) for n in ast.walk(tm.tree)
                if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}
    for name in sorted(called & tm.kernels.keys() - launched):
        if name not in tm.candidates and name not in tm.heuristics:
            tm.helpers[name] = tm.kernels.pop(name)
    for alias, name in tm.aliases.items():  # helpers are called by the name bound to them
        if name in tm.helpers:
            tm.helpers[alias] = tm.helpers[name]


def _module_level(stmts):
    """Module-level statements, including those inside `try`/`if` blocks (version-dependent imports)."""
    for node in stmts:
        yield node
        if isinstance(node, ast.Try):
            yield from _module_level(node.body)
            for h in node.handlers:
                yield from _module_level(h.body)
        elif isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)


def _scan_import(tm: TritonModule, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for a in node.names:
            local = a.asname or a.name.split(".")[0]
            if a.name in TRITON_MODULES:
                tm.triton_names.add(local)
            elif a.name in TL_MODULES and a.asname:
                tm.tl_names.add(a.asname)
            elif a.name == "triton.language" and not a.asname:
                tm.triton_names.add("triton")
            elif a.name in LIBDEVICE_MODULES and a.asname:
                tm.libdevice_names.add(a.asname)
        return
    mod = node.module or ""
    for a in node.names:
        local = a.asname or a.name
        full = f"{mod}.{a.name}"
        if mod == "triton" and a.name == "language":
            tm.tl_names.add(local)
        elif full in LIBDEVICE_MODULES or (a.name == "libdevice" and "triton" in mod):
            tm.libdevice_names.add(local)
        elif mod in LIBDEVICE_MODULES:
            tm.libdevice_imports[local] = a.name
        elif mod == "triton" and a.name in ("jit", "autotune", "heuristics", "cdiv", "Config"):
            tm.tl_imports[local] = a.name
        elif mod == "triton.language":
            tm.tl_imports[local] = a.name


def _scan_function(tm: TritonModule, fn: ast.FunctionDef, decorators: list[ast.expr]) -> None:
    """A function with `decorators` (outermost first): a kernel or a helper when Triton's jit is one of them."""
    kinds = [_decorator_name(tm, d) for d in decorators]
    if "jit" not in kinds:
        return
    tm.decorators[fn.name] = decorators
    is_kernel = any(k in ("autotune", "heuristics") for k in kinds) or _looks_like_kernel(tm, fn)
    (tm.kernels if is_kernel else tm.helpers)[fn.name] = fn
    others = [ast.unparse(d) for d, k in zip(decorators, kinds) if k is None]
    if others:
        tm.wrappers[fn.name] = others
    for d, k in zip(decorators, kinds):
        if k == "autotune" and isinstance(d, ast.Call):
            tm.candidates[fn.name] = _autotune_configs(tm, d)
        elif k == "heuristics" and isinstance(d, ast.Call) and d.args and isinstance(d.args[0], ast.Dict):
            tm.heuristics.setdefault(fn.name, set()).update(
                k.value for k in d.args[0].keys if isinstance(k, ast.Constant) and isinstance(k.value, str))


def _looks_like_kernel(tm: TritonModule, fn: ast.FunctionDef) -> bool:
    """A jit function is a kernel (not a helper) when it reads a program id or stores, and returns nothing."""
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))
    if returns:
        return False
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            name = dotted(n.func) or ""
            if name.rpartition(".")[2] in ("program_id", "store", "atomic_add", "atomic_max", "atomic_min",
                                           "atomic_xchg", "atomic_cas"):
                return True
    return False


def _autotune_configs(tm: TritonModule, call: ast.Call) -> list[dict[str, Any]]:
    """The constexpr values of `triton.Config({...}, ...)` entries that are static: listed, or built by a
    comprehension over literal lists (`for BM in [64, 128]`); others are skipped. A `pre_hook` of the
    module that sets a host-side descriptor's block shape from the config (`nargs["d"].block_shape =
    [1, nargs["BLOCK_M"]]`) adds that field (`d.block_shape`)."""
    configs_node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "configs"), None)
    if isinstance(configs_node, ast.Name):
        configs_node = _module_value(tm, configs_node.id)
    tuner_hook = next((k.value for k in call.keywords if k.arg == "pre_hook"), None)
    out: list[dict[str, Any]] = []
    for c, env in _elements(tm, configs_node):
        if not (isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Dict)):
            continue
        entry = {}
        for k, v in zip(c.args[0].keys, c.args[0].values):
            value = _static(tm, v, env)
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(value, (int, float, bool)):
                entry[k.value] = value
        hook = next((k.value for k in c.keywords if k.arg == "pre_hook"), tuner_hook)
        entry.update(_hook_fields(tm, hook, entry))
        if entry and entry not in out:
            out.append(entry)
    return out


MAX_EXPANDED = 1024  # configs a comprehension may make (beyond: not read)


def _elements(tm: TritonModule, node: ast.AST | None) -> list[tuple[ast.expr, dict[str, Any]]]:
    """The elements of a list or tuple, or of a comprehension over static iterables with static conditions,
    each with the values of the comprehension's variables; [] when they are not static."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [(e, {}) for e in node.elts]
    if not isinstance(node, ast.ListComp):
        return []
    envs: list[dict[str, Any]] = [{}]
    for g in node.generators:
        grown = []
        for env in envs:
            values = _static(tm, g.iter, env)
            if g.is_async or not isinstance(values, (list, tuple)):
                return []
            for v in values:
                inner = dict(env)
                if not _bind(g.target, v, inner):
                    return []
                tests = [_static(tm, t, inner) for t in g.ifs]
                if any(t is None for t in tests):
                    return []
                if all(tests):
                    grown.append(inner)
        envs = grown
        if len(envs) > MAX_EXPANDED:
            return []
    return [(node.elt, env) for env in envs]


def _bind(target: ast.AST, value: Any, env: dict[str, Any]) -> bool:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return True
    if isinstance(target, ast.Tuple) and isinstance(value, (list, tuple)) and len(value) == len(target.elts):
        return all(_bind(t, v, env) for t, v in zip(target.elts, value))
    return False


_STATIC_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.FloorDiv: lambda a, b: a // b if b else None, ast.Mod: lambda a, b: a % b if b else None,
               ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
               ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
               ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _static(tm: TritonModule, node: ast.AST, env: dict[str, Any], nargs: tuple[str, dict] | None = None) -> Any:
    """The value of an expression of literals, `env`'s names, the module's constants, `range(..)` and
    arithmetic / comparisons on them (`nargs`: a hook's parameter name and the config it reads); None
    when it is not static."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, (int, float, bool, str)) else None
    if isinstance(node, ast.Name):
        return env[node.id] if node.id in env else tm.constants.get(node.id)
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_static(tm, e, env, nargs) for e in node.elts]
        return None if any(v is None for v in values) else values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.Subscript) and nargs and isinstance(node.value, ast.Name) \
            and node.value.id == nargs[0] and isinstance(node.slice, ast.Constant):
        return nargs[1].get(node.slice.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _static(tm, node.operand, env, nargs)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _STATIC_OPS:
        a, b = _static(tm, node.left, env, nargs), _static(tm, node.right, env, nargs)
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        return _STATIC_OPS[type(node.op)](a, b) if ok else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _STATIC_OPS:
        a, b = _static(tm, node.left, env, nargs), _static(tm, node.comparators[0], env, nargs)
        try:
            return None if a is None or b is None else bool(_STATIC_OPS[type(node.ops[0])](a, b))
        except TypeError:
            return None
    if isinstance(node, ast.BoolOp):
        values = [_static(tm, v, env, nargs) for v in node.values]
        if any(v is None for v in values):
            return None
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and "range" not in env and not node.keywords and 1 <= len(node.args) <= 3:
        bounds = [_static(tm, a, env, nargs) for a in node.args]
        if all(type(b) is int for b in bounds) and (len(bounds) < 3 or bounds[2]):
            values = range(*bounds)
            return list(values) if len(values) <= MAX_EXPANDED else None
    return None


# The fields a pre_hook may set on a host-side descriptor (`frontends.triton.descriptors` reads them under
# `PARAM.FIELD`).
HOOK_FIELDS = ("block_shape", "padding")


def _hook_fields(tm: TritonModule, hook: ast.AST | None, entry: dict[str, Any]) -> dict[str, Any]:
    """`{"d.block_shape": [..]}` of the descriptors a module-level pre_hook sets from the config `entry`;
    {} unless its body is only assignments (of locals and descriptor fields) with static values."""
    fn = next((n for n in tm.tree.body if isinstance(n, ast.FunctionDef) and isinstance(hook, ast.Name)
               and n.name == hook.id), None)
    if fn is None or not fn.args.args:
        return {}
    nargs, env, out = (fn.args.args[0].arg, entry), {}, {}
    for st in fn.body:
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue  # docstring
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
            return {}
        t, value = st.targets[0], _static(tm, st.value, env, nargs)
        if isinstance(t, ast.Name):
            env[t.id] = value
        elif isinstance(t, ast.Attribute) and t.attr in HOOK_FIELDS and isinstance(t.value, ast.Subscript) \
                and isinstance(t.value.value, ast.Name) and t.value.value.id == nargs[0] \
                and isinstance(t.value.slice, ast.Constant) and value is not None:
            out[f"{t.value.slice.value}.{t.attr}"] = value
        else:
            return {}
    return out


def _module_value(tm: TritonModule, name: str) -> ast.AST | None:
    for node in tm.tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name:
            return node.value
    return None


def _literal(node: ast.AST) -> Any:
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, (int, float, bool)) else None


def _scan_constant(tm: TritonModule, node: ast.Assign | ast.AnnAssign) -> None:
    """A literal (`tl.constexpr(literal)`) is a constant; another expression an alias, evaluated where a
    kernel uses it (`exp = tl.exp`, `DTYPE = tl.float16`)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
        return
    name, value = targets[0].id, node.value
    tm.constants.pop(name, None)
    tm.value_aliases.pop(name, None)
    if isinstance(value, ast.Call) and (dotted(value.func) or "").endswith("constexpr") and len(value.args) == 1:
        value = value.args[0]
    v = _literal(value)
    if v is not None:
        tm.constants[name] = v
    else:
        tm.value_aliases[name] = node.value
