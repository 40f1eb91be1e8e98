"""The layering of tileport's modules, read from the source with `ast` (nothing is imported).

- every module belongs to a unit (`tileport.<unit>`: a top-level module or package; the package module
  `tileport` itself is the unit `tileport`) and every unit has a rank in `LAYERS` (docs/design.md, "Layers"):
  an import goes to a unit of a lower rank or stays inside its own unit; a module of a unit without a rank
  fails (a new unit is given its rank here and in the design document);
- a frontend (a module or package under `tileport.frontends`) imports no other frontend;
- package mode (`tileport.packages`) is imported by the command line only;
- no import cycle among tileport modules (imports inside functions count: they only defer the cycle);
- the installed package imports nothing of the evaluation lab (`eval/` at the repository root).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "tileport"
FRONTENDS = f"{PACKAGE}.frontends"
# Modules of the frontends package that belong to no single frontend: the package, the shared interface,
# source reading and Python liveness (they import no frontend), and the registry (it imports every
# frontend, by design).
FRONTEND_SHARED = {FRONTENDS, f"{FRONTENDS}.base", f"{FRONTENDS}.source", f"{FRONTENDS}.liveness",
                   f"{FRONTENDS}.imports"}
# Package mode sits above the pipeline: only the command line (and package mode itself) imports it.
PACKAGES = f"{PACKAGE}.packages"
PACKAGES_USERS = {f"{PACKAGE}.cli"}
FRONTEND_REGISTRY = f"{FRONTENDS}.registry"
LAB = "eval"  # the evaluation lab's package at the repository root: never imported by the product

# Units by rank, lowest first (docs/design.md, "Layers"). Units of one rank do not import each other.
LAYERS: list[tuple[str, ...]] = [
    ("proc",),                            # bounded runs of external tools: imports nothing of tileport
    ("version", "dtypes", "atomic", "cache", "diagnostics", "sass", "executor"),  # import nothing above proc
    ("tileir", "model", "toolchain"),     # the Tile IR toolkit; the kernel model; tool discovery
    ("passes", "runtime"),                # model -> model; C ABI and library loading
    ("frontends", "emit"),                # source -> model; model -> Rust
    ("translate", "config", "doctor"),    # the translator's driver; --config files; `tileport doctor`
    ("capture",),                         # Tile IR of both sides, cubins, the CPU proof
    ("launches",),                        # launch specs, inference, `tileport record`
    ("ops",),                             # the operator library
    ("corpus",),                          # the reference corpus as translator input
    ("gpu",),                             # GPU check, timing, benchmarks, launch tests
    ("pipeline",),                        # stages A-F
    ("packages", "report"),               # package mode; benchmark reports
    ("cli", PACKAGE),                     # the command; the package's top-level API
    ("__main__",),                        # `python -m tileport`
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its __init__)."""
    out = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The tileport module that importing `name` runs (the longest existing prefix), None if not ours."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _runtime_nodes(tree: ast.AST):
    """Every node, except what is under `if TYPE_CHECKING:` (never imported when the program runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every tileport module `module` imports, anywhere in its body (functions included)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one, else names of `pkg`
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.add(target)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    modules = module_files(src)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def frontend_of(module: str) -> str | None:
    """The frontend a module belongs to: `tileport.frontends.<x>` (a module or a package), None outside."""
    if not inside(module, FRONTENDS) or module in FRONTEND_SHARED or module == FRONTEND_REGISTRY:
        return None
    return ".".join(module.split(".")[:3])


def unit_of(module: str) -> str:
    """`tileport.<unit>...` -> unit; the package module itself is the unit `tileport`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module in sorted(graph):
        if unit_of(module) not in RANK:
            out.append(f"{module}: unit `{unit_of(module)}` has no layer (give it a rank in LAYERS and docs/design.md)")
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = unit_of(module), unit_of(target)
            if a != b and a in RANK and b in RANK and RANK[b] >= RANK[a]:
                where = "the same layer as" if RANK[b] == RANK[a] else "a layer above"
                out.append(f"{module} imports {target} (`{b}` is in {where} `{a}`)")
            a, b = frontend_of(module), frontend_of(target)
            if a and b and a != b:
                out.append(f"{module} imports {target} (one frontend imports another)")
            if module in FRONTEND_SHARED and b:
                out.append(f"{module} imports {target} (shared frontend code imports a frontend)")
            if inside(target, PACKAGES) and not inside(module, PACKAGES) and module not in PACKAGES_USERS:
                out.append(f"{module} imports {target} (package mode sits above every layer but the CLI)")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan), as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (a few hundred)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_path(comp, graph) for comp in components]


def _cycle_path(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first module (breadth first inside the component)."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # a component of more than one module has one


def lab_imports(src: Path = SRC) -> list[str]:
    """Modules of the package that import the evaluation lab."""
    out = []
    for module, path in module_files(src).items():
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            out += [f"{module} imports {name}" for name in names if name.split(".")[0] == LAB]
    return out


def test_layers_are_respected():
    violations = layering_violations(import_graph())
    assert not violations, "\n".join(violations)


def test_the_product_imports_nothing_of_the_lab():
    found = lab_imports()
    assert not found, "\n".join(found)


def test_layers_name_each_unit_once():
    units = [u for layer in LAYERS for u in layer]
    assert len(units) == len(set(units)), units


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles (one per group of modules importing each other):\n" + "\n".join(
        " -> ".join(c) + _rest_of_group(c, graph) for c in found)


def _rest_of_group(cycle: list[str], graph: dict[str, set[str]]) -> str:
    """The other modules of the cycle's group (its strongly connected component), if any."""
    reach = lambda start: _reachable(start, graph)  # noqa: E731
    group = {m for m in reach(cycle[0]) if cycle[0] in reach(m)} - set(cycle)
    return f" (in one group with {', '.join(sorted(group))})" if group else ""


def _reachable(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


# ---- the checks themselves can fail: a small synthetic tree with each defect

def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / PACKAGE / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.fixture
def bad_tree(tmp_path):
    return _write(tmp_path, {
        "__init__.py": "",
        "model/__init__.py": "",
        "model/ir.py": "def f():\n    from tileport.emit.names import x\n",
        "model/types.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tileport.emit import names\n",
        "passes/__init__.py": "",
        "passes/p.py": "from tileport.emit import names\n",
        "emit/__init__.py": "",
        "emit/names.py": "from ..model import ir\nx = 1\n",
        "frontends/__init__.py": "",
        "frontends/base.py": "from tileport.frontends import b\n",
        "frontends/registry.py": "from tileport.frontends import a, b\n",
        "frontends/a.py": "from tileport.frontends.base import *\n",
        "frontends/b/__init__.py": "",
        "frontends/b/calls.py": "from tileport.frontends import a\n",
        "frontends/c.py": "from tileport.emit import names\n",
        "translate.py": "from tileport.frontends import registry\nimport eval.wild\n",
        "wild.py": "from tileport import translate\n",
    })


def test_checks_find_each_defect(bad_tree):
    graph = import_graph(bad_tree)
    violations = layering_violations(graph)
    assert any("tileport.model.ir imports tileport.emit.names" in v for v in violations)
    assert any("tileport.passes.p imports tileport.emit.names" in v for v in violations)
    assert any("tileport.frontends.b.calls imports tileport.frontends.a" in v for v in violations)
    assert not any("frontends.a imports tileport.frontends.base" in v for v in violations)
    assert any("tileport.frontends.base imports tileport.frontends.b (shared" in v for v in violations)
    assert not any("tileport.frontends.registry" in v for v in violations)
    assert not any("tileport.model.types" in v for v in violations)  # under TYPE_CHECKING: no import at run time
    assert "tileport.model.ir imports tileport.emit.names (`emit` is in a layer above `model`)" in violations
    assert "tileport.frontends.c imports tileport.emit.names (`emit` is in the same layer as `frontends`)" in violations
    assert not any(v.startswith("tileport.translate imports") for v in violations)  # down a layer
    assert any(v.startswith("tileport.wild: unit `wild` has no layer") for v in violations)
    assert lab_imports(bad_tree) == ["tileport.translate imports eval.wild"]
    assert cycles(graph) == [["tileport.emit.names", "tileport.model.ir", "tileport.emit.names"]]
