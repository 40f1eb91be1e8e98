"""A kernel file rebuilt from its AST for cuTile's compiler: nothing of the user's file runs.

cuTile Python compiles a function object and reads the function's source itself (`inspect.findsource`,
through `linecache`). `sanitize` writes a module text made only of tileport-generated code, line-aligned
with the user's file so that cuTile's locations point at the user's lines:

| in the user's file                                       | in the sanitized module                   |
|----------------------------------------------------------|-------------------------------------------|
| `import cuda.tile as ct`, `import math`                  | the same imports (line 1)                 |
| `from cuda.tile import X` (any `cuda.tile.*` module)     | `from cuda.tile import X`, if a kernel uses it (line 1) |
| module constants (`BLOCK = 64 * 2`, `math.pi / 2`)       | values folded by the frontend (line 1)    |
| aliases (`PAD = ct.PaddingMode.ZERO`, `DT = torch.float16`, `ConstInt = ct.Constant[int]`, `h2 = helper`) |
|                                                          | resolved assignments (last line)          |
| `@ct.kernel` functions and the helpers they use          | the same lines; other decorators dropped  |
| `def make(occupancy): SHIFT = 6; @ct.kernel(..) def k..; return k` with `K = make(4)` in the file |
|                                                          | `def make(occupancy):`, `SHIFT = 6`, the kernel and `return (k,)` on the factory's lines; `(k,) = make(occupancy=4)` last |
| `@ct.kernel(...)`/`@ct.function(...)` arguments          | kept when static (literals, `ct.*` calls) |
| annotations                                              | resolved `ct`/builtin ones, others dropped|
| default arguments                                        | literals and constants; others dropped    |
| `torch.float16`, `np.int32`, `cp.inf` in a body          | `ct.float16`, `ct.int32`, `math.inf`      |
| helpers and constants of other modules of the package   | bound before the module runs: helpers from|
|   (`from .utils import swizzle`, `utils.swizzle`)        | their own module rebuilt the same way     |
| everything else (host code, classes, loggers, imports)   | blank lines                               |

A kernel that needs a value the AST cannot give (a module name bound at run time, a decorator argument
that calls user code, a `ct.static_eval` that calls a function) is not defined; asking for it gives a
located diagnostic. The module runs with a reduced set of builtins, so even cuTile's compile-time
evaluation (`ct.static_eval`) cannot open files, import modules or run other programs.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import math
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Collection

from tileport.diagnostics import Diagnostic
from tileport.frontends.cutile.scan import (ScannedModule, eval_const, helper_def, imported_value, is_ct_attr, loc_of,
                                           module_binding, scan_module)
from tileport.frontends.imports import module_statements, resolver_for
from tileport.frontends.source import read_source
from tileport.model.ir import Loc

CT = "_tileport_ct"  # the sanitized module's own names for cuda.tile and math
MATH = "_tileport_math"
HOST_MODULES = ("torch", "numpy", "cupy")  # dtype names spelled through these map to ct
CT_DTYPES = frozenset({"bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                       "float16", "bfloat16", "float32", "float64", "tfloat32", "float8_e4m3fn", "float8_e5m2"})
HOST_DTYPE_RENAMES = {"bool": "bool_", "half": "float16", "float": "float32", "double": "float64",
                      "int": "int32", "long": "int64", "short": "int16"}
HOST_FLOATS = {"inf": "inf", "nan": "nan", "pi": "pi", "e": "e"}
STATIC_EVAL = ("static_eval", "static_assert", "static_iter", "static_exception")
SAFE_BUILTINS = ("range", "len", "min", "max", "abs", "int", "float", "bool", "str", "tuple", "list", "dict",
                 "isinstance", "print", "sum", "zip", "enumerate", "reversed", "divmod", "round", "pow", "all", "any",
                 "slice", "Exception", "ValueError", "TypeError", "AssertionError", "RuntimeError",
                 "NotImplementedError", "IndexError", "KeyError", "ZeroDivisionError")
IMPORTABLE = ("__future__", "cuda", "cuda.tile", "math")
MAX_ALIAS_DEPTH = 32


class SourceError(Exception):
    """The file cannot be rebuilt at all (does not parse)."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


@dataclass
class SanitizedModule:
    path: Path
    source: str  # the generated module text (line-aligned with the user's file)
    kernels: list[str]  # kernels defined in `source`
    problems: dict[str, Diagnostic] = field(default_factory=dict)  # kernel -> why it is not defined
    functions: set[str] = field(default_factory=set)  # every function defined in `source` (helpers too)
    unkept: dict[str, Diagnostic] = field(default_factory=dict)  # every other function -> why
    # names bound before `source` runs: a helper of another module (`local` -> (file, function)), and
    # modules of the package (`local` -> {attribute: (file, function) or ("", constant value)})
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)
    modules: dict[str, dict[str, tuple[str, Any]]] = field(default_factory=dict)


def _restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0 or name not in IMPORTABLE:
        raise ImportError(f"a sanitized kernel module imports only {', '.join(IMPORTABLE)}, not {name!r}")
    return builtins.__import__(name, globals, locals, fromlist, level)


def restricted_builtins() -> dict[str, Any]:
    """What the sanitized module's code (and cuTile's compile-time evaluation of it) may call."""
    out = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    out["__import__"] = _restricted_import
    return out


# ---------------------------------------------------------------- names of the user's module

@dataclass
class _Names:
    sm: ScannedModule
    host: dict[str, str]  # local name -> "torch" | "numpy"
    functions: dict[str, ast.FunctionDef]
    aliases: dict[str, ast.expr]  # NAME = <expr> that is not a folded constant

    def is_ct_chain(self, node: ast.AST) -> bool:
        """`ct.X.Y...` or a name imported from cuda.tile (no private attribute on the way)."""
        while isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                return False
            node = node.value
        return isinstance(node, ast.Name) and (node.id in self.sm.ct_names or node.id in self.sm.ct_imports)

    def is_math_chain(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and not node.attr.startswith("_") and isinstance(node.value, ast.Name)
                and node.value.id in self.sm.math_names)


def _names(sm: ScannedModule) -> _Names:
    host: dict[str, str] = {}
    statements = list(module_statements(sm.tree.body, sm.path))  # guards read as the frontend reads them
    for node in statements:
        if isinstance(node, ast.Import):
            host.update({a.asname or a.name: a.name for a in node.names if a.name in HOST_MODULES})
    functions = {n.name: n for n in statements if isinstance(n, ast.FunctionDef)}
    aliases = {}
    for node in statements:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
                and len(getattr(node, "targets", [None])) == 1):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id not in sm.constants:
                aliases[target.id] = node.value
    return _Names(sm, host, functions, aliases)


def _host_rewrite(names: _Names, node: ast.AST) -> ast.expr | None:
    """`torch.float16` -> `_tileport_ct.float16`, `np.inf` -> `_tileport_math.inf`; None if not such a name."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names.host):
        return None
    dtype = HOST_DTYPE_RENAMES.get(node.attr, node.attr)
    if dtype in CT_DTYPES:
        return ast.Attribute(ast.Name(CT, ast.Load()), dtype, ast.Load())
    if node.attr in HOST_FLOATS:
        return ast.Attribute(ast.Name(MATH, ast.Load()), HOST_FLOATS[node.attr], ast.Load())
    return None


def _literal(value: Any) -> ast.expr | None:
    if isinstance(value, float) and not math.isfinite(value):
        inf = ast.Attribute(ast.Name(MATH, ast.Load()), "nan" if math.isnan(value) else "inf", ast.Load())
        return ast.UnaryOp(ast.USub(), inf) if value < 0 else inf
    if isinstance(value, (bool, int, float)):
        return ast.Constant(value)
    return None


def _static(names: _Names, node: ast.AST, depth: int = 0, calls: bool = False) -> ast.expr | None:
    """A header expression (decorator argument, annotation, default, alias) rebuilt from static parts only.

    Allowed: literals, module constants (folded by the frontend), `ct.*`/`math.*` names, torch/numpy dtype
    names, aliases of those, tuples, lists and subscripts of them; with `calls` (decorator arguments such as
    `ct.ByTarget(...)`) also calls of `ct.*` (library code). None when anything else appears: the expression
    would run user code or depends on run time.
    """
    if depth > MAX_ALIAS_DEPTH:
        return None
    sm = names.sm
    if isinstance(node, ast.Constant):
        return ast.Constant(node.value) if isinstance(node.value, (int, float, bool, str, type(None))) else None
    if isinstance(node, ast.Name) and node.id in ("int", "float", "bool"):
        return ast.Name(node.id, ast.Load())
    host = _host_rewrite(names, node)
    if host is not None:
        return host
    if names.is_ct_chain(node) or names.is_math_chain(node):
        return _copy(node)
    if isinstance(node, ast.Name) and node.id in names.aliases:
        return _static(names, names.aliases[node.id], depth + 1, calls)
    if isinstance(node, (ast.Name, ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Call)):
        folded = _fold(sm, node)
        if folded is not None:
            return folded
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):  # -np.inf
        operand = _static(names, node.operand, depth + 1, calls)
        return None if operand is None else ast.UnaryOp(type(node.op)(), operand)
    if isinstance(node, (ast.Tuple, ast.List)):
        elts = [_static(names, e, depth + 1, calls) for e in node.elts]
        return None if None in elts else type(node)(elts, ast.Load())
    if isinstance(node, ast.Subscript):
        value, index = _static(names, node.value, depth + 1, calls), _static(names, node.slice, depth + 1, calls)
        return None if value is None or index is None else ast.Subscript(value, index, ast.Load())
    if calls and isinstance(node, ast.Call) and names.is_ct_chain(node.func):
        args = [_static(names, a, depth + 1, calls) for a in node.args]
        kwargs = [(k.arg, _static(names, k.value, depth + 1, calls)) for k in node.keywords]
        if None in args or any(v is None for _, v in kwargs) or any(k is None for k, _ in kwargs):
            return None
        return ast.Call(_copy(node.func), args, [ast.keyword(k, v) for k, v in kwargs])
    return None


def _fold(sm: ScannedModule, node: ast.AST) -> ast.expr | None:
    """A compile-time number through the frontend's constant evaluator (it runs no user code)."""
    try:
        return _literal(eval_const(sm, node))
    except (ValueError, TypeError, ZeroDivisionError, KeyError, OverflowError, AttributeError, RecursionError,
            MemoryError):
        return None


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


def _annotation(names: _Names, node: ast.expr) -> ast.expr | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return _static(names, node)


# ---------------------------------------------------------------- one function

@dataclass
class _Edit:
    start: tuple[int, int]  # (line, utf-8 column) as in the AST
    end: tuple[int, int]
    text: str


@dataclass
class _Function:
    node: ast.FunctionDef
    decorators: list[str]  # kept decorators (text, without "@"), one per original decorator line
    decorator_lines: list[int]
    edits: list[_Edit]
    uses: set[str]  # top-level functions it references
    problem: Diagnostic | None = None
    free: dict[str, ast.AST] = field(default_factory=dict)  # module names it reads -> first read
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # helpers of other modules it calls
    constants: dict[str, Any] = field(default_factory=dict)  # constants of other modules it reads
    modules: dict[str, dict[str, tuple[str, Any]]] = field(default_factory=dict)  # `utils.x` it reads


def _locals(fn: ast.FunctionDef) -> set[str]:
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _problem(names: _Names, node: ast.AST, construct: str, message: str, hint: str) -> Diagnostic:
    return Diagnostic(message, loc_of(names.sm.path, node), construct, hint=hint)


def _static_eval_problem(names: _Names, fn: ast.FunctionDef, call: ast.Call, local: set[str]) -> Diagnostic | None:
    """cuTile evaluates the argument of `ct.static_eval` & co. in Python: allow no call of user code."""
    for n in ast.walk(call):
        if n is call:
            continue
        bad = None
        if isinstance(n, (ast.Lambda, ast.NamedExpr)):
            bad = "a lambda or assignment"
        elif isinstance(n, ast.Attribute) and n.attr.startswith("_"):
            bad = f"the private attribute `{n.attr}`"
        elif isinstance(n, ast.Call):
            func = n.func
            root = func
            while isinstance(root, ast.Attribute):
                root = root.value
            ok = (names.is_ct_chain(func) or names.is_math_chain(func)
                  or (isinstance(func, ast.Name) and func.id in SAFE_BUILTINS and func.id not in names.functions)
                  or (isinstance(func, ast.Attribute) and isinstance(root, ast.Name) and root.id in local))
            bad = None if ok else f"a call of `{ast.unparse(func)}`"
        if bad:
            return _problem(names, n, "static_eval", f"`{ast.unparse(call.func)}` evaluates {bad} in Python "
                            "at compile time; tileport does not run code of the kernel file",
                            "compute the value in the kernel or pass it as a ct.Constant parameter")
    return None


def _body(names: _Names, fn: ast.FunctionDef, f: _Function) -> None:
    """Host dtype names rewritten; free names checked; helper uses collected; static_eval checked."""
    sm, local = names.sm, _locals(fn)
    aliases = {a for a, v in names.aliases.items() if _resolve_function(names, a) or _static(names, v) is not None}
    known = (set(sm.ct_names) | set(sm.ct_imports) | set(sm.math_names) | set(sm.constants) | aliases
             | set(names.functions) | set(SAFE_BUILTINS))
    skip: set[int] = set()
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    for stmt in fn.body:
        for n in ast.walk(stmt):
            host = _host_rewrite(names, n)
            if host is not None:
                f.edits.append(_Edit((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset), ast.unparse(host)))
                skip.add(id(n.value))
            elif isinstance(n, ast.Call) and any(is_ct_attr(sm, n.func, a) for a in STATIC_EVAL):
                f.problem = f.problem or _static_eval_problem(names, fn, n, local)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip:
                if n.id in local:
                    continue
                if n.id not in known and _imported(names, n, parents.get(id(n)), f):
                    continue
                if n.id not in known:
                    f.problem = f.problem or _problem(
                        names, n, "module name", f"`{fn.name}` uses `{n.id}`, which is not a cuda.tile or math "
                        "name, a module constant or a function of this file", "tileport reads the file without "
                        "running it: give the value as a literal constant at module level or a ct.Constant parameter")
                f.uses.add(_resolve_function(names, n.id) or "")
    f.uses.discard("")


def _imported(names: _Names, node: ast.Name, parent: ast.AST | None, f: _Function) -> bool:
    """`node` names a helper or constant of another module of the package, or such a module whose attribute
    `parent` reads (`utils.swizzle`): recorded on `f` (bound before the module runs); False otherwise."""
    sm = names.sm
    found = helper_def(sm, node)
    if found is not None and found[0] is not sm:
        f.imports[node.id] = (found[0].path, found[1].name)
        return True
    value = imported_value(sm, node.id, "constant")
    if value is not None and _literal(value) is not None:
        f.constants[node.id] = value
        return True
    module = module_binding(sm, node.id)
    if module is None or not (isinstance(parent, ast.Attribute) and parent.value is node):
        return False
    found = helper_def(module, ast.Name(parent.attr))
    value = module.constants.get(parent.attr, imported_value(module, parent.attr, "constant"))
    if found is not None:
        f.modules.setdefault(node.id, {})[parent.attr] = (found[0].path, found[1].name)
    elif value is not None:
        f.modules.setdefault(node.id, {})[parent.attr] = ("", value)
    else:
        return False
    return True


def _resolve_function(names: _Names, name: str, depth: int = 0) -> str | None:
    if name in names.functions:
        return name
    target = names.aliases.get(name)
    if isinstance(target, ast.Name) and depth < MAX_ALIAS_DEPTH:
        return _resolve_function(names, target.id, depth + 1)
    return None


def _decorators(names: _Names, fn: ast.FunctionDef, f: _Function) -> None:
    """`ct.*` decorators kept (their arguments must be static); every other decorator dropped."""
    for d in fn.decorator_list:
        head = d.func if isinstance(d, ast.Call) else d
        if not names.is_ct_chain(head):
            continue  # framework decorator (registration, logging, wrappers): not needed to compile the kernel
        rebuilt = _static(names, d, calls=True) if isinstance(d, ast.Call) else _copy(d)
        if rebuilt is None:
            f.problem = f.problem or _problem(
                names, d, "decorator", f"the arguments of `@{ast.unparse(head)}` on `{fn.name}` are not static",
                "use literals, module constants or ct.* values in the decorator")
            continue
        f.decorators.append(ast.unparse(rebuilt))
        f.decorator_lines.append(d.lineno)


def _signature(names: _Names, fn: ast.FunctionDef, f: _Function) -> None:
    """Annotations resolved or dropped; defaults kept when literal (a dropped one drops those before it)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    for arg in positional + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
        if arg.annotation is None:
            continue
        rebuilt = _annotation(names, arg.annotation)
        if rebuilt is not None:
            f.edits.append(_Edit(_start(arg.annotation), _end(arg.annotation), ast.unparse(rebuilt)))
        else:  # `name: <ann>` -> `name`
            f.edits.append(_Edit(_name_end(arg), _end(arg.annotation), ""))
    defaults = [(_static(names, d), d) for d in a.defaults]
    keep_from = max((i + 1 for i, (v, _) in enumerate(defaults) if v is None), default=0)
    for i, (value, node) in enumerate(defaults):
        arg = positional[len(positional) - len(defaults) + i]
        _default_edit(f, arg, node, value if i >= keep_from else None)
    for arg, node in zip(a.kwonlyargs, a.kw_defaults):
        if node is not None:
            _default_edit(f, arg, node, _static(names, node))
    if fn.returns is not None:
        rebuilt = _annotation(names, fn.returns)
        f.edits.append(_Edit(_start(fn.returns), _end(fn.returns), ast.unparse(rebuilt) if rebuilt else "None"))


def _default_edit(f: _Function, arg: ast.arg, node: ast.expr, value: ast.expr | None) -> None:
    if value is not None:
        f.edits.append(_Edit(_start(node), _end(node), ast.unparse(value)))
    else:  # `name: ann = <default>` -> `name: ann` (the annotation edit ends before the "=")
        f.edits.append(_Edit(_end(arg.annotation) if arg.annotation else _name_end(arg), _end(node), ""))


def _start(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _end(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno, node.end_col_offset


def _name_end(arg: ast.arg) -> tuple[int, int]:
    return arg.lineno, arg.col_offset + len(arg.arg.encode())


def _analyze(names: _Names, fn: ast.FunctionDef) -> _Function:
    f = _Function(fn, [], [], [], set())
    _decorators(names, fn, f)
    _signature(names, fn, f)
    _body(names, fn, f)
    local = _locals(fn)
    for n in ast.walk(fn):  # decorators, annotations and defaults too: they are evaluated in the module
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
            f.free.setdefault(n.id, n)
    return f


def _module_names(names: _Names, functions: list[_Function]) -> dict[str, ast.AST]:
    """The module-level names `functions` read, through the aliases they use (name -> where it is read)."""
    out: dict[str, ast.AST] = {}
    for f in functions:
        for name, node in f.free.items():
            out.setdefault(name, node)
    todo = [n for n in out if n in names.aliases]
    while todo:
        for n in ast.walk(names.aliases[todo.pop()]):
            if isinstance(n, ast.Name) and n.id not in out:
                out[n.id] = n
                if n.id in names.aliases:
                    todo.append(n.id)
    return out


def _missing_import(names: _Names, used: dict[str, ast.AST], available: Collection[str] | None) -> Diagnostic | None:
    """A `from cuda.tile import X` the kernel uses that the installed cuda.tile does not have."""
    for name, node in used.items():
        attr = names.sm.ct_imports.get(name)
        if attr is not None and available is not None and attr not in available:
            return _problem(names, node, "import", f"`{name}` is `cuda.tile.{attr}`, which the installed cuda.tile "
                            "does not have", "use a cuda.tile name of the installed version (cuda-tile 1.7.0)")
    return None


# ---------------------------------------------------------------- the module

def _apply(lines: list[bytes], edits: list[_Edit]) -> None:
    """Replace source ranges in place, keeping every line where it was (a removed range leaves blank lines)."""
    edits = sorted(edits, key=lambda e: e.start)
    if any(nxt.start < prev.end for prev, nxt in zip(edits, edits[1:])):
        raise ValueError("overlapping source edits")  # ranges are disjoint by construction
    for e in reversed(edits):  # from the end, so earlier positions stay valid
        (l0, c0), (l1, c1) = e.start, e.end
        lines[l0 - 1] = lines[l0 - 1][:c0] + e.text.encode() + lines[l1 - 1][c1:]
        lines[l0:l1] = [b""] * (l1 - l0)


def _prelude(names: _Names, used: Collection[str], constants: dict[str, Any]) -> str:
    """Imports and folded constants on line 1: of cuda.tile's names, only those the kept functions use (an
    import for host code, or of a name the installed cuda.tile lacks, would stop every kernel of the file);
    module constants and the other modules' constants kept functions read."""
    sm = names.sm
    # postponed annotations: one annotation cuTile lacks fails only the kernel that carries it
    parts = ["from __future__ import annotations", f"import cuda.tile as {CT}", f"import math as {MATH}"]
    parts += [f"import cuda.tile as {n}" for n in sorted(sm.ct_names)]
    parts += [f"from cuda.tile import {attr} as {local}" for local, attr in sorted(sm.ct_imports.items())
              if local in used]
    parts += [f"import math as {n}" for n in sorted(sm.math_names)]
    for name, value in {**constants, **sm.constants}.items():
        lit = _literal(value)
        if lit is not None:
            parts.append(f"{name} = {ast.unparse(lit)}")
    return "; ".join(parts)


def _postlude(names: _Names, defined: set[str], used: Collection[str]) -> list[str]:
    """Aliases the kept kernels use, resolved (functions only when defined)."""
    out = []
    for name, value in names.aliases.items():
        if name not in used:
            continue
        target = _resolve_function(names, name)
        if target is not None:
            if target in defined and target != name:
                out.append(f"{name} = {target}")
            continue
        rebuilt = _static(names, value)
        if rebuilt is not None:
            out.append(f"{name} = {ast.unparse(rebuilt)}")
    return out


def _closure(functions: dict[str, _Function], roots: list[str]) -> list[str]:
    seen, todo = [], list(roots)
    while todo:
        name = todo.pop()
        if name not in seen and name in functions:
            seen.append(name)
            todo.extend(sorted(functions[name].uses))
    return seen


def _factories(names: _Names) -> dict[str, ast.FunctionDef]:
    """Kernels built by a factory function of the module: kernel -> its factory."""
    out = {}
    for kernel, closure in names.sm.closures.items():
        factory = names.functions.get(closure.factory)
        if factory is not None:
            out[kernel] = factory
    return out


def _factory_problem(names: _Names, kernel: str, factory: ast.FunctionDef) -> Diagnostic | None:
    """A factory kernel is rebuilt inside a generated function of the factory's name, lines kept, which the
    module calls with the values of the factory's parameters: the kernel must be a direct statement of its
    factory, followed by a line of the factory (its `return`) that can return it."""
    node = names.sm.kernels[kernel]
    if node not in factory.body:
        return _problem(names, node, "factory", f"`{kernel}` is nested in a block of its factory `{factory.name}`",
                        "define the kernel directly in the factory's body")
    if factory.end_lineno <= max(k.end_lineno for k in factory.body if isinstance(k, ast.FunctionDef)):
        return _problem(names, node, "factory", f"the factory `{factory.name}` ends with the definition of "
                        f"`{kernel}`", "return the kernel from the factory")
    if any(_literal(v) is None for v in names.sm.closures[kernel].constants.values()):
        return _problem(names, node, "factory", f"the factory `{factory.name}` of `{kernel}` binds a value that "
                        "is no number", "make it a module constant or a ct.Constant parameter")
    return None


def _write_factories(names: _Names, out: list[bytes], kept: set[str], factories: dict[str, ast.FunctionDef]) -> list[str]:
    """Each factory of kept kernels as a generated function (its header, its constant locals, the kernels,
    a `return` of them) on the factory's own lines; the statements that call it (postlude lines)."""
    calls = []
    for factory in sorted({id(f): f for k, f in factories.items() if k in kept}.values(), key=lambda f: f.lineno):
        kernels = [k for k in sorted(kept) if factories.get(k) is factory]
        closure = names.sm.closures[kernels[0]]
        a = factory.args
        params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        pad, body_pad = b" " * factory.col_offset, b" " * factory.body[0].col_offset
        out[factory.lineno - 1] = pad + f"def {factory.name}({', '.join(params)}):".encode()
        for st in factory.body:
            targets = st.targets if isinstance(st, ast.Assign) else [getattr(st, "target", None)]
            bound = {t.id for t in targets if isinstance(t, ast.Name)}
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and len(bound) == 1 and bound <= set(closure.constants):
                (name,) = bound
                out[st.lineno - 1] = body_pad + f"{name} = {ast.unparse(_literal(closure.constants[name]))}".encode()
        out[factory.end_lineno - 1] = body_pad + f"return ({', '.join(kernels)},)".encode()
        args = ", ".join(f"{p}={ast.unparse(_literal(closure.constants[p])) if p in closure.constants else None}"
                         for p in params)
        calls.append(f"({', '.join(kernels)},) = {factory.name}({args})")
    return calls


_SIBLINGS: dict[tuple, SanitizedModule | None] = {}
_SIBLINGS_LOCK = threading.RLock()  # a sibling is marked "being rebuilt" (None) while it is: per thread, once


def _sibling(file: str, available: Collection[str] | None) -> SanitizedModule | None:
    """Another module of the package, rebuilt the same way (once per text); None while it is being rebuilt
    (modules importing each other) or when it cannot be."""
    try:
        text = read_source(file)
    except Diagnostic:
        return None
    key = (file, hashlib.sha256(text.encode()).hexdigest(), resolver_for(None).key,
           None if available is None else tuple(sorted(available)))
    with _SIBLINGS_LOCK:
        if key not in _SIBLINGS:
            _SIBLINGS[key] = None
            try:
                _SIBLINGS[key] = sanitize(file, text, available)
            except SourceError:
                pass
        return _SIBLINGS[key]


def _foreign_problem(names: _Names, f: _Function, available: Collection[str] | None) -> Diagnostic | None:
    """Why a helper of another module that `f` uses cannot be rebuilt, if one cannot."""
    used = list(f.imports.values()) + [t for attrs in f.modules.values() for t in attrs.values() if t[0]]
    for file, fn in used:
        other = _sibling(file, available)
        if other is None and any(k[0] == file for k in _SIBLINGS if _SIBLINGS[k] is None):
            continue  # being rebuilt (a module importing this one back): its own rebuild reports it
        if other is None or fn not in other.functions:
            why = other.unkept.get(fn) if other is not None else None
            return _problem(names, f.node, "import", f"`{f.node.name}` uses `{fn}` of {Path(file).name}, which "
                            f"cannot be rebuilt without running code" + (f": {why}" if why else ""),
                            "give the helper only literal constants, cuda.tile and math names")
    return None


def _host_problem(names: _Names, f: _Function) -> Diagnostic | None:
    """A function other than a kernel that refers to a kernel launches it: host code, never a helper (device
    code cannot call a kernel); kept, it would bring the host's imports and aliases into the module."""
    kernel = next((k for k in sorted(f.uses) if k in names.sm.kernels), None)
    if kernel is None or f.node.name in names.sm.kernels:
        return None
    return _problem(names, f.node, "host", f"`{f.node.name}` refers to the kernel `{kernel}`: host code",
                    "call only helpers from kernels and helpers")


def sanitize(path: str | Path, text: str, available: Collection[str] | None = None) -> SanitizedModule:
    """The module text cuTile compiles instead of the user's file (see the module docstring): every
    function whose code (and the helpers it calls, in this module or another one of the package) needs
    nothing that would have to run; the others are recorded with why.

    `available`: the names the installed cuda.tile has; a function that imports another one is not defined
    (a located problem), the file's other functions are."""
    try:
        sm = scan_module(str(path), text)
    except Diagnostic as d:
        raise SourceError(d) from None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:  # the frontend's scan gave up
        raise SourceError(Diagnostic(f"the file cannot be scanned: {type(e).__name__}: {e}", Loc(str(path), 0, 0),
                                     "module")) from None
    names = _names(sm)
    analyzed = {name: _analyze(names, fn) for name, fn in names.functions.items()}
    factories = _factories(names)
    for kernel, factory in factories.items():  # its factory's constants are module constants for it
        scoped = replace(names, sm=replace(sm, constants={**sm.constants, **sm.closures[kernel].constants}))
        analyzed[kernel] = _analyze(scoped, sm.kernels[kernel])
        analyzed[kernel].problem = analyzed[kernel].problem or _factory_problem(names, kernel, factory)
    for f in analyzed.values():
        first = min([f.node.lineno] + f.decorator_lines + [d.lineno for d in f.node.decorator_list])
        if first < 2:
            f.problem = f.problem or _problem(names, f.node, "layout", f"`{f.node.name}` begins on the first line "
                                              "of its file", "start the file with its imports")
        f.problem = f.problem or _foreign_problem(names, f, available)
    problems: dict[str, Diagnostic] = {}
    kept: set[str] = set()
    used: set[str] = set()
    makers = {f.name for f in factories.values()}  # rebuilt by _write_factories, never kept as they are
    for name in [n for n in analyzed if n not in makers]:
        reach = _closure(analyzed, [name])
        reads = _module_names(names, [analyzed[n] for n in reach])
        bad = _host_problem(names, analyzed[name]) \
            or next((analyzed[n].problem for n in reach if analyzed[n].problem), None) \
            or _missing_import(names, reads, available)
        if bad is not None:
            problems[name] = bad
        else:
            kept.update(reach)
            used.update(reads)
    lines = text.encode().split(b"\n")
    out = [b""] * len(lines)
    made = _write_factories(names, out, kept, factories)
    result = SanitizedModule(Path(path), "", [k for k in sm.kernels if k in kept],
                             {k: d for k, d in problems.items() if k in sm.kernels}, kept,
                             {k: d for k, d in problems.items() if k not in kept})
    constants: dict[str, Any] = {}
    for name in sorted(kept, key=lambda n: analyzed[n].node.lineno):
        f = analyzed[name]
        body = list(lines)
        _apply(body, f.edits)
        out[f.node.lineno - 1:f.node.end_lineno] = body[f.node.lineno - 1:f.node.end_lineno]
        for text_, line in zip(f.decorators, f.decorator_lines):
            out[line - 1] = b" " * f.node.col_offset + b"@" + text_.encode()
        result.imports.update(f.imports)
        constants.update(f.constants)
        for local, attrs in f.modules.items():
            result.modules.setdefault(local, {}).update(attrs)
    out[0] = _prelude(names, used, constants).encode()
    result.source = b"\n".join(out).decode() + "\n" + "\n".join(_postlude(names, kept, used) + made) + "\n"
    return result
