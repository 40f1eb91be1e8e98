"""The Triton wild set: the `@triton.jit` kernels of a public PyPI package (Liger-Kernel), translated
unattended.

Downloads the pinned wheel with pip (no dependencies; or takes it from `--wheel-dir`), extracts its
Python files, finds every `@triton.jit` function with `ast` (module level, in classes or factory
functions, under `@triton.autotune` / `@triton.heuristics`), then runs `tileport translate` on every
file holding some, with no configuration and no edits, and records per function whether it
translated or the located diagnostic that stopped it. A jit function is a *helper* when a jit function
of the package calls it and nothing launches it (`name[grid](...)`), else a *kernel*; helpers are
translated as part of the kernels that call them, and the rate is over kernels. The third-party code is
never imported or run, and never copied into the repository: only the table is committed
(bench/results/wild-triton.json and .md). Shared steps (download, extraction, translation, table
cells) are eval.wild's.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from eval.wild import (KernelSite, Row, WildError, _cell, _is_located, _relative, build_table, collect_kernels,
                           download, extract, translate_step, write_atomic)

PACKAGES = (("liger-kernel", "0.8.5"),)


# ---------------------------------------------------------------- download

def fetch(work: Path, wheel_dir: Path | None = None) -> list[tuple[str, str, Path]]:
    """(package, version, extracted root) of every pinned package; a matching wheel in `wheel_dir` is
    used as it is (no network)."""
    import shutil
    import tempfile
    out = []
    for pkg, ver in PACKAGES:
        stem = pkg.replace("-", "_")
        local = sorted(wheel_dir.glob(f"{stem}-{ver}-*.whl")) if wheel_dir else []
        if local:
            wheel = local[0]
        else:
            cache = Path(tempfile.mkdtemp(prefix="tileport-wild-pip-"))
            try:
                wheel = download(pkg, ver, work / "wheels", cache)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        out.append((pkg, ver, extract(wheel, work / "src")))
    return out


# ---------------------------------------------------------------- discovery (ast only)

def _triton_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to the triton module, and names bound to triton.jit itself."""
    modules, jit_names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname or "triton" for a in node.names if a.name == "triton")
        elif isinstance(node, ast.ImportFrom) and node.module in ("triton", "triton.runtime", "triton.runtime.jit"):
            jit_names.update(a.asname or a.name for a in node.names if a.name == "jit")
    return modules, jit_names


def _is_jit(decorator: ast.expr, modules: set[str], jit_names: set[str]) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(node, ast.Attribute):
        return node.attr == "jit" and isinstance(node.value, ast.Name) and node.value.id in modules
    return isinstance(node, ast.Name) and node.id in jit_names


def find_triton_kernels(path: Path, package: str, root: Path) -> list[KernelSite]:
    """Every `@triton.jit` function of one file (other decorators stacked above it included)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    except SyntaxError:
        return []
    modules, jit_names = _triton_names(tree)
    if not modules and not jit_names:
        return []
    return collect_kernels(tree, package, str(path.relative_to(root)),
                           lambda fn: any(_is_jit(d, modules, jit_names) for d in fn.decorator_list))


def discover(roots: Sequence[tuple[str, str, Path]]) -> list[KernelSite]:
    return [s for pkg, _ver, root in roots for f in sorted(root.rglob("*.py"))
            for s in find_triton_kernels(f, pkg, root)]


def _callee(node: ast.AST) -> str | None:
    """`f(...)` / `module.f(...)` -> f."""
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def roles(sites: Sequence[KernelSite], roots: dict[str, Path]) -> dict[tuple[str, str, str], str]:
    """(package, file, function) -> "kernel" | "helper": a helper is used by a jit function of the
    package (called by name, imported or not, or passed, e.g. as a `tl.reduce` combine function) and
    launched (`name[grid]`) nowhere in it."""
    launched: dict[str, set[str]] = {p: set() for p in roots}
    called: dict[str, set[str]] = {p: set() for p in roots}
    for pkg, root in roots.items():
        names = {s.kernel for s in sites if s.package == pkg}
        for f in sorted(root.rglob("*.py")):
            try:
                tree = ast.parse(f.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            rel = str(f.relative_to(root))
            jit_here = {s.kernel for s in sites if s.package == pkg and s.file == rel}
            for node in ast.walk(tree):
                if isinstance(node, ast.Subscript):
                    base = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", None)
                    if base in names:
                        launched[pkg].add(base)
                elif isinstance(node, ast.FunctionDef) and node.name in jit_here:  # called, or passed (combine_fn)
                    used = {_callee(n) for n in ast.walk(node)} | {n.id for n in ast.walk(node)
                                                                   if isinstance(n, ast.Name)}
                    called[pkg] |= (used & names) - {node.name}
    return {(s.package, s.file, s.kernel): "helper" if s.kernel in called[s.package] - launched[s.package]
            else "kernel" for s in sites}


# ---------------------------------------------------------------- the table

NOT_REPORTED = "the translator did not report this kernel"  # eval.wild's text for a function it did not see


def status(rec: dict) -> str:
    """ok | FAIL | inlined (a helper the translator reports nothing about: it is translated inside the
    kernels that use it, not as an entry)."""
    if rec["translate_ok"]:
        return "ok"
    d = rec["translate_diagnostic"] or {}
    return "inlined" if rec["role"] == "helper" and d.get("message") == NOT_REPORTED else "FAIL"


def summarize(kernels: Sequence[dict]) -> dict[str, Any]:
    rows = [r for r in kernels if r["role"] == "kernel"]
    n, ok = len(rows), sum(r["translate_ok"] for r in rows)
    located = sum(1 for r in rows if not r["translate_ok"] and _is_located(r["translate_diagnostic"]))
    helpers = [r for r in kernels if r["role"] == "helper"]
    return {"kernels": {"functions": n, "translate_ok": ok, "translate_rate": round(ok / n, 4) if n else 0.0,
                        "failures": n - ok, "failures_located": located},
            "helpers": {"functions": len(helpers), "inlined": sum(r["status"] == "inlined" for r in helpers),
                        "diagnosed": sum(r["status"] == "FAIL" for r in helpers)}}


def make_table(rows: Sequence[Row], roots: Sequence[tuple[str, str, Path]], role: dict) -> dict[str, Any]:
    table = build_table(rows, roots, ported=False)
    by_pkg = {p: r for p, _, r in roots}
    for rec in table["kernels"]:
        rec["role"] = role[(rec["package"], rec["file"], rec["kernel"])]
        rec["status"] = status(rec)
        if rec["translate_diagnostic"]:  # paths relative to the package, as eval.wild's own diagnostics
            rec["translate_diagnostic"] = _relative(rec["translate_diagnostic"], by_pkg[rec["package"]])
            rec["first_diagnostic"] = "" if rec["status"] == "inlined" else _first(rec["translate_diagnostic"])
    table["summary"] = summarize(table["kernels"])
    table["frontend"] = "triton"
    return table


def _first(d: dict) -> str:
    return f"{d.get('file')}:{d.get('line')}:{d.get('col')} [{d.get('construct')}] {d.get('message')}"


def failure_causes(kernels: Sequence[dict]) -> list[tuple[str, int]]:
    causes: dict[str, int] = {}
    for r in kernels:
        if r["status"] == "FAIL":
            d = r["translate_diagnostic"] or {}
            cause = f"[{d.get('construct')}] {' '.join(str(d.get('message', '')).split())[:90]}"
            causes[cause] = causes.get(cause, 0) + 1
    return sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))


def render_markdown(table: dict[str, Any]) -> str:
    s = table["summary"]
    k, h = s["kernels"], s["helpers"]
    lines = [f"# Triton wild set: unattended translation ({table['date']})", "",
             "Packages (PyPI, pinned): " + ", ".join(f"`{p['package']}=={p['version']}` ({p['kernels']} @triton.jit "
                                                     "functions)" for p in table["packages"]), "",
             f"- kernels (launched, or called by no jit function): translate with no configuration "
             f"and no edits **{k['translate_ok']}/{k['functions']}** ({100 * k['translate_rate']:.0f} %); failures "
             f"with a located diagnostic naming the construct: {k['failures_located']}/{k['failures']}",
             f"- helpers (jit functions other jit functions use, launched nowhere): {h['functions']}; translated "
             f"inside the kernels that use them ({h['inlined']} with no diagnostic of their own, {h['diagnosed']} "
             "with a construct their callers fail on)",
             "- GPU verification of these ports (against the Triton kernels on recorded launches) is not part of "
             "this table.", "",
             "| package | file | function | role | translate | first diagnostic |", "|---|---|---|---|---|---|"]
    for r in table["kernels"]:
        name = r["kernel"] + (f" (in `{r['factory']}`)" if r.get("factory") else "")
        lines.append(f"| {r['package']} | {r['file']} | `{name}` | {r['role']} | "
                     f"{r['status']} | {_cell(r['first_diagnostic'])} |")
    lines += ["", "Causes, by weight:", ""] + [f"- {n} × {c}" for c, n in failure_causes(table["kernels"])]
    lines += ["", "Reproduce: `bash eval/wild.sh --triton` (`--wheel-dir DIR` to use a downloaded wheel)."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("out/wild-triton"), help="downloads and sources")
    ap.add_argument("--results", type=Path, default=Path("bench/results"), help="where wild-triton.json/.md go")
    ap.add_argument("--wheel-dir", type=Path, help="take the pinned wheel from here instead of downloading it")
    args = ap.parse_args(argv)
    try:
        roots = fetch(args.work, args.wheel_dir)
    except WildError as e:
        print(f"wild-triton: {e}", file=sys.stderr)
        return 2
    sites = discover(roots)
    by_pkg = {p: r for p, _, r in roots}
    t0 = time.perf_counter()
    rows = translate_step(sites, by_pkg)
    table = make_table(rows, roots, roles(sites, by_pkg))
    table["translate_seconds"] = round(time.perf_counter() - t0, 1)
    write_atomic(args.results / "wild-triton.json", json.dumps(table, indent=1) + "\n")
    write_atomic(args.results / "wild-triton.md", render_markdown(table))
    k = table["summary"]["kernels"]
    print(f"wild-triton: {k['translate_ok']}/{k['functions']} kernels translate "
          f"({k['failures_located']}/{k['failures']} failures located); table: {args.results / 'wild-triton.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
