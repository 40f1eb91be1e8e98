"""What a kernel file takes from other modules of its package, read from their files (nothing is imported).

A `Resolver` says which file an import statement names: a module of the package being translated, or
nothing (triton, torch, a module outside the package). The default, `FileResolver`, knows only what the
importing file's location says (relative imports); package mode (`tileport.packages`) gives one that
knows every module of the package, absolute imports included. The frontends call `read_imports` in their
module scans and then look the imported names up in the other modules' scans (helper functions, constants,
aliases, modules that wrap triton.language / cuda.tile), with those modules' own file:line:col locations.

Module-level statements under a guard (`try: import triton` / `except ImportError: ...`,
`if HAS_TRITON:`) are read as the guarded code intends (`module_statements`): the `try` body, and the
branch of an `if` that holds when the test can be decided statically (an environment variable read with
a default is taken as unset), else the branch for CUDA (a test naming another vendor's back end takes the
other branch; one naming an NVIDIA GPU generation, the branch for Hopper, where ports are proven), else
the body. Each guard read so is noted.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Hashable, Iterator, Protocol

# Back ends of other vendors, as they appear in module, folder and variable names (`torch_npu`,
# `backends/_ascend`, `is_hip`, `xpu_ops.py`): split into words, one of these is a whole word.
VENDOR_WORDS = {
    "npu": "Ascend NPU", "ascend": "Ascend NPU", "hip": "AMD ROCm/HIP", "rocm": "AMD ROCm/HIP", "amd": "AMD ROCm/HIP",
    "xpu": "Intel XPU", "ipex": "Intel XPU", "habana": "Intel Gaudi (HPU)", "hpu": "Intel Gaudi (HPU)",
    "musa": "Moore Threads MUSA", "mlu": "Cambricon MLU", "cambricon": "Cambricon MLU", "gcu": "Enflame GCU",
    "maca": "MetaX MACA", "metax": "MetaX MACA", "corex": "Iluvatar CoreX", "iluvatar": "Iluvatar CoreX",
    "kunlun": "Kunlunxin XPU", "mthreads": "Moore Threads MUSA", "tpu": "Google TPU", "mps": "Apple MPS",
}
CUDA_WORDS = {"cuda", "nvidia", "cutlass", "sm90", "sm100", "hopper", "blackwell"}
# NVIDIA GPU generations, as whole words of a guard's names (`IS_NVIDIA_BLACKWELL`, `is_hopper()`): a test of
# one takes the branch that holds on PROVEN_ON, the generation the ports are proven on.
GENERATION_WORDS = {"volta", "turing", "ampere", "ada", "hopper", "blackwell", "rubin"}
PROVEN_ON = "hopper"  # sm_90 (H100 / H200)


def words(name: str) -> list[str]:
    """`backends/_ascend`, `is_hip()`, `torchNpu` -> lower-case words (split at non-letters and case changes)."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z]+", spaced.lower()) if w]


def vendor_of(name: str) -> str | None:
    """The other vendor's back end a name (module, folder, variable) belongs to, None for none."""
    return next((VENDOR_WORDS[w] for w in words(name) if w in VENDOR_WORDS), None)


# ---------------------------------------------------------------- resolvers

class Resolver(Protocol):
    """Where the modules an import statement names lie."""

    key: Hashable  # identifies the resolver in caches of module scans

    def module_file(self, importer: str, module: str, level: int) -> str | None:
        """The file of `module` (dotted; "" for the package itself) as imported by the file `importer` with
        `level` leading dots (0: absolute); None when it is no module tileport reads."""


def _module_at(base: Path, module: str) -> str | None:
    target = base.joinpath(*module.split(".")) if module else base
    if (target / "__init__.py").is_file():
        return str(target / "__init__.py")
    py = target.with_suffix(".py") if module else None
    return str(py) if py is not None and py.is_file() else None


def relative_base(importer: str, level: int) -> Path:
    """The folder `from .{level - 1 dots}` names in the file `importer`."""
    base = Path(importer).resolve().parent
    for _ in range(level - 1):
        base = base.parent
    return base


class FileResolver:
    """Relative imports, by the importing file's location; absolute ones are not read."""

    key = "files"

    def module_file(self, importer: str, module: str, level: int) -> str | None:
        return _module_at(relative_base(importer, level), module) if level > 0 else None


FILES = FileResolver()
_ACTIVE: list[Resolver] = []


@contextlib.contextmanager
def resolving(resolver: Resolver):
    """Within the block, frontends asked for no resolver of their own use `resolver` (the pipeline and the
    reference capture run inside it when a package is ported)."""
    _ACTIVE.append(resolver)
    try:
        yield resolver
    finally:
        _ACTIVE.remove(resolver)


def resolver_for(resolver: Resolver | None) -> Resolver:
    """The resolver a scan uses: the one given, else the active one, else `FILES`."""
    return resolver or (_ACTIVE[-1] if _ACTIVE else FILES)


# ---------------------------------------------------------------- guards

@dataclass
class Guards:
    notes: list[str] = field(default_factory=list)


def module_statements(body: list[ast.stmt], path: str, guards: Guards | None = None) -> Iterator[ast.stmt]:
    """Module-level statements as the module's guards intend them (see the module docstring)."""
    for node in body:
        if isinstance(node, ast.Try):
            _note(guards, path, node, "read the `try` body as the intended code")
            yield from module_statements(node.body + node.orelse + node.finalbody, path, guards)
        elif isinstance(node, ast.If):
            taken, why = branch(node.test)
            _note(guards, path, node, f"took the {'first' if taken else 'other'} branch ({why})")
            yield from module_statements(node.body if taken else node.orelse, path, guards)
        else:
            yield node


def _note(guards: Guards | None, path: str, node: ast.stmt, what: str) -> None:
    if guards is not None:
        guards.notes.append(f"{Path(path).name}:{node.lineno}: module-level `{_head(node)}`: {what}")


def _head(node: ast.stmt) -> str:
    if isinstance(node, ast.If):
        text = ast.unparse(node.test)
        return f"if {text if len(text) <= 60 else text[:57] + '...'}"
    return "try"


def branch(test: ast.expr) -> tuple[bool, str]:
    """Whether a module-level `if` takes its first branch, and why."""
    value = static_truth(test)
    if value is not None:
        return bool(value), "decided statically; environment variables taken as unset"
    names = {w for n in ast.walk(test) for w in words(n.id if isinstance(n, ast.Name) else
                                                        n.attr if isinstance(n, ast.Attribute) else
                                                        n.value if isinstance(n, ast.Constant) and
                                                        isinstance(n.value, str) else "")}
    if names & VENDOR_WORDS.keys():
        return _negated(test), "the test names another vendor's back end: the CUDA branch"
    if names & GENERATION_WORDS:
        holds = PROVEN_ON in names
        return holds != _negated(test), f"the test names a GPU generation: the branch for {PROVEN_ON} (sm_90), " \
            "where ports are proven"
    if names & CUDA_WORDS:
        return not _negated(test), "the test names CUDA"
    return True, "undecided: the guarded code is taken as intended"


def _negated(test: ast.expr) -> bool:
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)


_NOT_STATIC = object()


def static_truth(test: ast.expr) -> bool | None:
    """The value of a test that needs nothing of the running program (literals, `TYPE_CHECKING`, `__name__`
    of an imported module, environment variables read with a default: taken as unset), else None."""
    v = _static(test)
    return None if v is _NOT_STATIC else bool(v)


def _static(node: ast.expr):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id == "TYPE_CHECKING":
        return False
    if isinstance(node, ast.Name) and node.id == "__name__":
        return "<module>"  # read as imported, never run as a script
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _static(node.operand)
        return v if v is _NOT_STATIC else not v
    if isinstance(node, ast.BoolOp):
        values = [_static(v) for v in node.values]
        if _NOT_STATIC in values:
            return _NOT_STATIC
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _static(node.left), _static(node.comparators[0])
        if _NOT_STATIC in (a, b):
            return _NOT_STATIC
        op = type(node.ops[0])
        compare = {ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b, ast.Is: lambda: a is b,
                   ast.IsNot: lambda: a is not b, ast.In: lambda: a in b, ast.NotIn: lambda: a not in b,
                   ast.Lt: lambda: a < b, ast.LtE: lambda: a <= b, ast.Gt: lambda: a > b, ast.GtE: lambda: a >= b}
        try:
            return compare[op]() if op in compare else _NOT_STATIC
        except TypeError:
            return _NOT_STATIC
    if isinstance(node, ast.Call):
        return _static_call(node)
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [_static(e) for e in node.elts]
        return _NOT_STATIC if _NOT_STATIC in values else tuple(values)
    return _NOT_STATIC


def _static_call(node: ast.Call):
    """`os.environ.get(K, D)`, `os.getenv(K, D)` -> D; `int(..)`, `bool(..)`, `str(..).lower()` of static values."""
    func = ast.unparse(node.func)
    args = [_static(a) for a in node.args]
    if func in ("os.environ.get", "os.getenv", "environ.get", "getenv") and node.args and not node.keywords:
        return args[1] if len(args) > 1 else None
    if _NOT_STATIC in args or node.keywords:
        return _NOT_STATIC
    if func in ("int", "bool", "str", "float") and len(args) == 1:
        try:
            return {"int": int, "bool": bool, "str": str, "float": float}[func](args[0])
        except (TypeError, ValueError):
            return _NOT_STATIC
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("lower", "upper", "strip") and not args:
        inner = _static(node.func.value)
        return getattr(inner, node.func.attr)() if isinstance(inner, str) else _NOT_STATIC
    return _NOT_STATIC


# ---------------------------------------------------------------- import statements

@dataclass(frozen=True)
class FromModule:
    """`from M import attr as local`: the name `attr` of the package module in `file`."""

    file: str
    attr: str


@dataclass(frozen=True)
class WholeModule:
    """`import M as local`, `from P import M as local`: a module of the package itself."""

    file: str


@dataclass(frozen=True)
class Outside:
    """A name imported from a module tileport does not read (outside the package, or not found)."""

    module: str
    line: int


Binding = FromModule | WholeModule | Outside


@dataclass
class Imports:
    names: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # files of `from M import *`, in order

    def describe(self, name: str) -> str:
        b = self.names[name]
        where = b.module if isinstance(b, Outside) else Path(b.file).name
        return f"`{name}` is imported from `{where}`"


def outside_hint(resolver: Resolver, binding: Outside) -> str:
    """What to do about a name imported from a module tileport does not read."""
    if binding.module.startswith("."):
        return "no such module beside the file: check the import"
    if resolver is FILES:
        return "translate the package the file belongs to (`tileport translate PACKAGE_DIR`): its modules are read then"
    return "a module outside the package: give the value as a module constant or a kernel parameter"


def read_imports(path: str, statements: list[ast.stmt], resolver: Resolver) -> Imports:
    """The names `statements` (module-level, guards read) bind to modules, as the resolver finds them."""
    out = Imports()
    for node in statements:
        if isinstance(node, ast.Import):
            for a in node.names:
                target = a.name if a.asname else a.name.split(".")[0]
                file = resolver.module_file(path, target, 0)
                out.names[a.asname or target] = WholeModule(file) if file else Outside(target, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            shown = "." * node.level + module
            file = resolver.module_file(path, module, node.level)
            for a in node.names:
                if a.name == "*":
                    if file:
                        out.stars.append(file)
                    continue
                sub = resolver.module_file(path, f"{module}.{a.name}" if module else a.name, node.level)
                local = a.asname or a.name
                out.names[local] = WholeModule(sub) if sub else FromModule(file, a.name) if file else \
                    Outside(shown, node.lineno)
    return out


def submodule(resolver: Resolver, file: str, name: str) -> str | None:
    """The module `name` inside the package whose `__init__.py` is `file` (None for a plain module)."""
    return resolver.module_file(file, name, 1) if os.path.basename(file) == "__init__.py" else None


def star_names(tree: ast.Module) -> set[str] | None:
    """The literal `__all__` of a module (what `from M import *` takes), None when it has none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
            return {v for v in value if isinstance(v, str)} if isinstance(value, (list, tuple)) else None
    return None


def star_exports(tree: ast.Module, name: str) -> bool:
    """Whether `from M import *` brings `name` from the module `tree` (its `__all__`, else public names)."""
    listed = star_names(tree)
    return name in listed if listed is not None else not name.startswith("_")
