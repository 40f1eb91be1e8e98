"""A Triton kernel file rebuilt from its AST, so that the GPU harness can run a file's SOURCE Triton
kernels without running the file (its host code, imports of other packages, module-level work).

`sanitize` writes a module text made only of lines of the user's file that are kept verbatim, at
their own line numbers (every other line is blank), so Triton's compiler, which reads a kernel's
source through `inspect` / `linecache`, reports the user's lines:

| in the user's file                                           | in the rebuilt module                   |
|--------------------------------------------------------------|-----------------------------------------|
| `import triton`, `import triton.language as tl`, `from triton... import ...`, `import math` | kept      |
| an import switch: `if <host test>:` / `else:` (or `try:` / `except ImportError:`) whose branches only import from triton / math, e.g. a libdevice import per Triton version | kept, `if` / `else:` read as `try:` / `except ImportError:` (the first branch that imports binds the names) |
| `@triton.jit` functions (kernels and helpers)                | kept, with only their jit decorator     |
| `@triton.jit(...)` with literal arguments                    | kept                                    |
| `@triton.autotune(...)`, `@triton.heuristics(...)`, others   | dropped (the record holds the values they chose) |
| `NAME = tl.constexpr(<constant expression>)`, `NAME = tl.float16`, `NAME = <jit function>` | kept |
| everything else                                              | blank lines                             |

A jit function that needs a name the rebuilt module does not bind (a global of the user's host code,
an import of another package, a non-literal decorator argument or default) is not defined; asking
for it gives a located diagnostic, and so does a function that calls one. The module runs with a
reduced set of builtins whose `__import__` admits only triton and math.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import linecache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tileport.capture.source import SAFE_BUILTINS
from tileport.diagnostics import Diagnostic
from tileport.model.ir import Loc

IMPORTABLE_ROOTS = ("triton", "math")
SWITCH_ERRORS = ("ImportError", "ModuleNotFoundError")  # the handlers an import switch may have
JIT_DECORATORS = ("triton.jit", "jit")  # spellings after the file's own import aliases are resolved
TRITON_BUILTINS = frozenset({"range", "len", "min", "max", "float", "int", "bool", "print", "isinstance", "tuple",
                             "list", "abs", "getattr", "hasattr", "type", "zip", "enumerate", "round", "str",
                             "AssertionError", "ValueError", "TypeError", "RuntimeError", "NotImplementedError",
                             "True", "False", "None", "__file__", "__name__"})


@dataclass
class TritonModule:
    path: Path
    source: str                                   # the rebuilt text (line-aligned with the user's file)
    functions: list[str]                          # jit functions defined in `source`
    kernels: list[str]                            # every jit function of the file, in order
    problems: dict[str, Diagnostic] = field(default_factory=dict)  # jit function -> why it is not defined


class TritonSourceError(Exception):
    """The file cannot be rebuilt at all (it does not parse)."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


def _allowed_module(name: str) -> bool:
    return name.split(".")[0] in IMPORTABLE_ROOTS


def _restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0 or not _allowed_module(name):
        raise ImportError(f"a rebuilt Triton kernel module imports only {', '.join(IMPORTABLE_ROOTS)}, not {name!r}")
    return builtins.__import__(name, globals, locals, fromlist, level)


def restricted_builtins() -> dict[str, Any]:
    out = {name: getattr(builtins, name) for name in SAFE_BUILTINS + SWITCH_ERRORS}
    out["__import__"] = _restricted_import
    return out


# ------------------------------------------------------------------------------------ reading the file

def _import_aliases(tree: ast.Module) -> tuple[dict[str, str], list[ast.stmt]]:
    """local name -> dotted triton/math name it is bound to, and the import statements kept."""
    aliases, kept = {}, []
    for node in tree.body:
        if isinstance(node, ast.Import) and all(_allowed_module(a.name) for a in node.names):
            kept.append(node)
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and _allowed_module(node.module) and all(a.name != "*" for a in node.names)):
            kept.append(node)
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases, kept


def _imports_only(stmts: list[ast.stmt]) -> bool:
    """Statements that only import from triton / math (`pass`, and `try` / `except ImportError` around them)."""
    for st in stmts:
        if isinstance(st, ast.Pass):
            continue
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            if not _import_aliases(ast.Module(body=[st], type_ignores=[]))[1]:
                return False
        elif isinstance(st, ast.Try):
            handlers_ok = all(h.type is None or (isinstance(h.type, ast.Name) and h.type.id in SWITCH_ERRORS)
                              for h in st.handlers)
            if not (handlers_ok and _imports_only(st.body) and not st.finalbody and _imports_only(st.orelse)
                    and all(_imports_only(h.body) for h in st.handlers)):
                return False
        else:
            return False
    return True


def _import_switch(node: ast.stmt, lines: list[str]) -> dict[int, str] | None:
    """A module-level import switch (see the module docstring): the lines (1-based) to rewrite when it is
    kept, or None. `if` / `else` become `try:` / `except ImportError:` at the same indentation, so the
    branches run in order until one imports (the host test, code tileport does not run, is not evaluated)."""
    if isinstance(node, ast.Try):
        return {} if _imports_only([node]) else None
    if not (isinstance(node, ast.If) and node.orelse and _imports_only(node.body) and _imports_only(node.orelse)):
        return None
    if node.body[0].lineno == node.lineno:
        return None  # `if c: import x` on one line
    else_line = next((i for i in range(node.body[-1].end_lineno + 1, node.orelse[0].lineno)
                      if lines[i - 1].split("#")[0].strip() == "else:"), None)
    if else_line is None:
        return None  # an `elif`, or `else: import x` on one line
    indent = " " * node.col_offset
    rewrite = {i: "" for i in range(node.lineno + 1, node.body[0].lineno)}  # a test over several lines
    rewrite.update({node.lineno: f"{indent}try:", else_line: f"{indent}except ImportError:"})
    return rewrite


def _switch_aliases(node: ast.stmt) -> dict[str, str]:
    """Names an import switch binds -> their dotted names (the first branch's spelling first)."""
    out: dict[str, str] = {}
    for st in ast.walk(node):
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            for name, dotted in _import_aliases(ast.Module(body=[st], type_ignores=[]))[0].items():
                out.setdefault(name, dotted)
    return out


def _resolved(node: ast.AST, aliases: dict[str, str]) -> str:
    """`tl.constexpr` -> `triton.language.constexpr` (the dotted name after the file's import aliases)."""
    text = ast.unparse(node)
    head, _, rest = text.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def _jit_decorator(fn: ast.FunctionDef, aliases: dict[str, str]) -> ast.expr | None:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if _resolved(target, aliases) in ("triton.jit", "triton.runtime.jit.jit", "triton.runtime.jit"):
            return d
    return None


def _constant_expr(node: ast.AST, known: set[str]) -> bool:
    """Literals, names of kept constants, arithmetic and unary operators only."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, bool, str, type(None)))
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.UnaryOp):
        return _constant_expr(node.operand, known)
    if isinstance(node, ast.BinOp):
        return _constant_expr(node.left, known) and _constant_expr(node.right, known)
    return False


def _kept_constant(node: ast.stmt, aliases: dict[str, str], known: set[str], functions: set[str]) -> str | None:
    """The name a module-level assignment binds when the rebuilt module keeps it."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    if not isinstance(target, ast.Name):
        return None
    if isinstance(value, ast.Call) and _resolved(value.func, aliases) in ("triton.language.constexpr",
                                                                           "triton.language.core.constexpr"):
        ok = len(value.args) == 1 and not value.keywords and _constant_expr(value.args[0], known)
        return target.id if ok else None
    if isinstance(value, ast.Attribute) and _resolved(value, aliases).startswith("triton.language."):
        return target.id  # a dtype or another triton.language object
    if isinstance(value, ast.Name) and value.id in functions:
        return target.id  # an alias of a jit function
    return None


def _free_names(fn: ast.FunctionDef) -> list[ast.Name]:
    """Names a function reads that it does not bind itself (parameters, assignments, loop targets)."""
    args = fn.args
    bound = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    bound |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
    body = [n for stmt in fn.body for n in ast.walk(stmt)]
    return [n for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound]


def _signature_names(fn: ast.FunctionDef) -> list[ast.Name]:
    """Names evaluated when the `def` runs: defaults and annotations."""
    args = fn.args
    nodes = list(args.defaults) + [d for d in args.kw_defaults if d is not None]
    nodes += [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs if a.annotation is not None]
    return [n for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)]


def sanitize(path: str | Path, text: str) -> TritonModule:
    """The rebuilt module of a Triton file (see the module docstring)."""
    path = Path(path)
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise TritonSourceError(Diagnostic(f"syntax error: {e.msg}", Loc(str(path), e.lineno or 1, e.offset or 1),
                                           "syntax", "the file must parse as Python")) from None
    aliases, imports = _import_aliases(tree)
    source_lines = text.splitlines()
    switches = {node: rw for node in tree.body if (rw := _import_switch(node, source_lines)) is not None}
    for node in switches:
        aliases = {**_switch_aliases(node), **aliases}
    jit_fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and _jit_decorator(n, aliases)}
    constants: set[str] = set()
    kept_stmts: list[ast.stmt] = list(imports) + list(switches)
    for node in tree.body:
        name = _kept_constant(node, aliases, constants, set(jit_fns))
        if name is not None:
            constants.add(name)
            kept_stmts.append(node)
    known = set(aliases) | constants | set(jit_fns) | TRITON_BUILTINS
    problems: dict[str, Diagnostic] = {}

    def problem(fn: ast.FunctionDef, node: ast.AST, message: str, hint: str) -> Diagnostic:
        return Diagnostic(message, Loc(str(path), node.lineno, node.col_offset + 1), "triton.jit", hint, fn.name)
    for fn in jit_fns.values():
        deco = _jit_decorator(fn, aliases)
        if isinstance(deco, ast.Call) and not all(_literal(a) for a in deco.args + [k.value for k in deco.keywords]):
            problems[fn.name] = problem(fn, deco, "the jit decorator's arguments are not literals",
                                        "pass literal options to @triton.jit")
            continue
        unknown = [n for n in _free_names(fn) + _signature_names(fn) if n.id not in known]
        if unknown:
            n = unknown[0]
            problems[fn.name] = problem(fn, n, f"`{n.id}` is bound by code tileport does not run (only triton "
                                        "imports, tl.constexpr constants and @triton.jit functions are rebuilt)",
                                        "make it a module-level `tl.constexpr(...)` constant or a kernel argument")
    _propagate(jit_fns, problems, path)
    lines = [""] * (len(text.splitlines()) + 1)

    def keep(first: int, last: int) -> None:
        for i in range(first, last + 1):
            lines[i - 1] = source_lines[i - 1]
    for stmt in kept_stmts:
        keep(stmt.lineno, stmt.end_lineno)
    for rewrite in switches.values():
        for i, line in rewrite.items():
            lines[i - 1] = line
    defined = [name for name in jit_fns if name not in problems]
    for name in defined:
        fn = jit_fns[name]
        deco = _jit_decorator(fn, aliases)
        keep(deco.lineno, deco.end_lineno)
        keep(fn.lineno, fn.end_lineno)
    source = "\n".join(lines) + "\n"
    return TritonModule(path, source, defined, list(jit_fns), problems)


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError):
        return False


def _propagate(jit_fns: dict[str, ast.FunctionDef], problems: dict[str, Diagnostic], path: Path) -> None:
    """A jit function that calls an undefined one is undefined too (until nothing changes)."""
    changed = True
    while changed:
        changed = False
        for fn in jit_fns.values():
            if fn.name in problems:
                continue
            bad = next((n for n in _free_names(fn) if n.id in problems and n.id != fn.name), None)
            if bad is not None:
                problems[fn.name] = Diagnostic(f"calls `{bad.id}`, which cannot be rebuilt: {problems[bad.id].message}",
                                               Loc(str(path), bad.lineno, bad.col_offset + 1), "triton.jit",
                                               problems[bad.id].hint, fn.name)
                changed = True


# ------------------------------------------------------------------------------------ loading

_MODULES: dict[tuple[str, str], tuple[dict, TritonModule]] = {}


def triton_namespace(path: str | Path) -> tuple[dict, TritonModule]:
    """(namespace of the rebuilt module, what was rebuilt): the file's jit functions as Triton
    JITFunction objects, without running the file. Needs triton importable."""
    resolved = Path(path).resolve()
    text = resolved.read_text()
    key = (str(resolved), hashlib.sha256(text.encode()).hexdigest())
    if key not in _MODULES:
        module = sanitize(resolved, text)
        lines = module.source.splitlines(keepends=True)
        # Triton reads the kernel's source with `inspect`: it gets the rebuilt text (no mtime: never re-read)
        linecache.cache[str(resolved)] = (len(module.source), None, lines, str(resolved))
        namespace: dict[str, Any] = {"__name__": f"tileport_triton_{key[1][:16]}", "__file__": str(resolved),
                                     "__builtins__": restricted_builtins()}
        exec(compile(module.source, str(resolved), "exec"), namespace)  # tileport-selected lines only
        _MODULES[key] = namespace, module
    return _MODULES[key]


def source_kernel(path: str | Path, kernel: str) -> Any:
    """The JITFunction `kernel` of the file, or a ValueError with the located reason."""
    namespace, module = triton_namespace(path)
    if kernel in module.problems:
        raise ValueError(str(module.problems[kernel]))
    if kernel not in module.functions:
        raise ValueError(f"{path} has no @triton.jit function `{kernel}`")
    return namespace[kernel]


__all__ = ["TritonModule", "TritonSourceError", "sanitize", "triton_namespace", "source_kernel", "restricted_builtins"]
