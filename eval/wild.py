"""The wild corpus: cuTile Python kernels of public PyPI packages, ported unattended.

Downloads pinned wheels with pip (no dependencies, a throw-away cache), extracts their Python files,
finds every `@ct.kernel` with `ast` (module level, or built inside a factory function), then runs
`translate` and, optionally, `tileport port` on each kernel with no configuration and no edits. The
third-party code is never imported or run, and never copied into the repository: only the table of
results is committed (bench/results/wild.json and .md).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tileport.frontends.cutile.lowerer import FMA_PER_DTYPE
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

# (distribution, version): pinned so the table is reproducible.
PACKAGES = (("bastile", "0.1.3"), ("cutile-gpt", "0.2.1"), ("cutile-stencil", "0.3.0"))
# Wheels are pure Python; the tag only selects a release whose Requires-Python admits it.
PYTHON_TAGS = ("3.12", "3.13")
# Why a package yields no kernel to port (checked by reading its source; shown in the table).
PACKAGE_NOTES = {
    "cutile-stencil": "a stencil compiler: its `@ct.kernel` functions exist only as text it generates at run time "
                      "(cutile/lowering/target_to_python.py emits them line by line from an xDSL IR, with tile "
                      "sizes its passes choose), so its source holds no kernel and no factory function to read. "
                      "Its own compile path runs on the CPU (numpy and xdsl; cupy and a GPU only to launch): "
                      "the opt-in step `--stencil-gen` runs it and ports the files it writes (section below).",
}
CT_MODULE = "cuda.tile"


class WildError(RuntimeError):
    """A download or extraction failed (the message says which package and why)."""


# ---------------------------------------------------------------- download and extract

def download(package: str, version: str, dest: Path, cache: Path) -> Path:
    """`pip download --no-deps` of one pinned wheel into `dest` (pip's cache kept in `cache`)."""
    dest.mkdir(parents=True, exist_ok=True)
    errors = []
    for tag in PYTHON_TAGS:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", tag,
               "--cache-dir", str(cache), "--disable-pip-version-check", "--retries", "1", "--timeout", "20",
               "-q", "-d", str(dest),
               f"{package}=={version}"]
        try:
            r = run_tool(cmd, 300)
        except ToolTimeout:
            raise WildError(f"pip download {package}=={version}: timed out") from None
        stem = package.replace("-", "_")
        wheels = sorted(dest.glob(f"{stem}-{version}-*.whl"))
        if r.returncode == 0 and wheels:
            return wheels[0]
        lines = (r.stderr or r.stdout).strip().splitlines()
        errors.append(f"python {tag}: {lines[-1] if lines else 'no output'}")
    raise WildError(f"pip download {package}=={version} failed: {'; '.join(errors)}")


def extract(wheel: Path, dest: Path) -> Path:
    """The wheel's .py files under dest/<distribution>/ (members escaping `dest` are refused)."""
    root = (dest / wheel.name.split("-")[0]).resolve()
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if not member.endswith(".py"):
                continue
            target = (root / member).resolve()
            if root not in target.parents:
                raise WildError(f"{wheel.name}: member {member!r} escapes the extraction directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(member))
    return root


def fetch_all(work: Path, cache: Path | None = None) -> list[tuple[str, str, Path]]:
    """Download and extract every pinned package: (package, version, extracted root)."""
    own_cache = cache is None
    cache_dir = Path(tempfile.mkdtemp(prefix="tileport-wild-pip-")) if own_cache else cache
    try:
        out = []
        for pkg, ver in PACKAGES:
            wheel = download(pkg, ver, work / "wheels", cache_dir)
            out.append((pkg, ver, extract(wheel, work / "src")))
        return out
    finally:
        if own_cache:
            shutil.rmtree(cache_dir, ignore_errors=True)


# ---------------------------------------------------------------- cutile-stencil's generated kernels (opt-in)

STENCIL = ("cutile-stencil", "0.3.0")
GENERATED = "cutile-stencil (generated)"  # the package name of the generated kernels' rows
STENCIL_MANIFEST = "stencils.json"  # beside the generated files: per file, its compile metadata and benchmark domains
# cutile.compile options per generated file: the default pipeline (temporal blocking) without the autotuner
# (it times candidates on a GPU), the same without temporal blocking, and the bricked memory layout.
STENCIL_MODES = {"tb": {"autotune": False}, "flat": {"autotune": False, "temporal_blocking": False},
                 "bricked": {"autotune": False, "layout": "bricked"}}
# Run by the package's own interpreter (a venv under the work directory), never imported by tileport: for
# every @stencil of the package's own benchmark set and every mode, compile and emit_to_file, and keep the
# compile result's metadata and the benchmark domains of its rank (what the package's own benchmark launches:
# the GPU driver eval/wild_drivers/stencil_driver.py reads them from STENCIL_MANIFEST).
STENCIL_DRIVER = """
import json, sys
import cutile
from cutile.benchmarks import stencils
out, modes, done = sys.argv[1], json.loads(sys.argv[2]), []
domains = getattr(stencils, "BENCHMARK_DOMAINS", {})
for name in sorted(n for n in dir(stencils) if hasattr(getattr(stencils, n), "_ir")):
    for mode, options in modes.items():
        try:
            r = cutile.compile(getattr(stencils, name), **options)
            r.emit_to_file(f"{out}/{name}_{mode}.py")
            done.append({"stencil": name, "mode": mode, "ok": True, "file": f"{name}_{mode}.py", "name": r.name,
                         "ndim": r.ndim, "halo_widths": list(r.halo_widths), "tile_sizes": list(r.tile_sizes),
                         "temporal_steps": r.temporal_steps, "options": options,
                         "benchmark_domains": [list(d) for d in domains.get(r.ndim, [])]})
        except Exception as e:
            done.append({"stencil": name, "mode": mode, "ok": False, "error": f"{type(e).__name__}: {e}"[:300]})
print(json.dumps(done))
"""


def generate_stencils(work: Path) -> tuple[Path, list[dict], str]:
    """Install the pinned cutile-stencil (and its dependencies) in a venv under `work` and run its compile
    path on its own benchmark stencils: (directory of the generated files, per-file outcome, versions)."""
    venv, gen = work.resolve() / "stencil-venv", work.resolve() / "stencil-gen"
    python = venv / "bin" / "python"
    steps = ([sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{STENCIL[0]}=={STENCIL[1]}"])
    for cmd in steps if not python.exists() else steps[1:]:
        r = run_tool(cmd, 900)
        if r.returncode != 0:
            raise WildError(f"{' '.join(cmd[-2:])}: {(r.stderr or r.stdout).strip()[-400:]}")
    shutil.rmtree(gen, ignore_errors=True)
    gen.mkdir(parents=True)
    r = run_tool([str(python), "-c", STENCIL_DRIVER, str(gen), json.dumps(STENCIL_MODES)], 900, cwd=gen)
    try:
        outcome = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise WildError(f"cutile-stencil's compile path failed: {(r.stderr or r.stdout).strip()[-400:]}") from None
    freeze = run_tool([str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                      120).stdout.split()
    versions = ", ".join(f"`{x}`" for x in freeze if x.split("==")[0].lower() in ("cutile-stencil", "xdsl", "numpy"))
    write_atomic(gen / STENCIL_MANIFEST, json.dumps({"package": STENCIL[0], "version": STENCIL[1], "versions": versions,
                                                     "files": outcome}, indent=1) + "\n")
    return gen, outcome, versions


# ---------------------------------------------------------------- kernel discovery (ast only)

@dataclass
class KernelSite:
    package: str
    file: str  # path relative to the extracted package root
    kernel: str
    line: int
    factory: str | None = None  # the enclosing function when the kernel is built inside one


def _ct_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to the cuda.tile module, and names bound to cuda.tile.kernel itself."""
    modules, kernel_names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == CT_MODULE and a.asname)
        elif isinstance(node, ast.ImportFrom):
            if node.module == "cuda":
                modules.update(a.asname or a.name for a in node.names if a.name == "tile")
            elif node.module == CT_MODULE:
                kernel_names.update(a.asname or a.name for a in node.names if a.name == "kernel")
    return modules, kernel_names


def _is_kernel_decorator(node: ast.AST, modules: set[str], kernel_names: set[str]) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id in modules and node.attr == "kernel":
            return True
        return ast.unparse(node) == "cuda.tile.kernel"
    return isinstance(node, ast.Name) and node.id in kernel_names


def find_kernels(path: Path, package: str, root: Path) -> list[KernelSite]:
    """Every `@ct.kernel` function of one file, including kernels defined inside another function
    and functions wrapped by a call `ct.kernel(fn)` / `ct.kernel(**opts)(fn)`."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    except SyntaxError:
        return []
    modules, kernel_names = _ct_aliases(tree)
    if not modules and not kernel_names:
        return []
    wrapped = {node.args[0].id for node in ast.walk(tree)  # ct.kernel(fn), ct.kernel(**opts)(fn)
               if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
               and _is_kernel_decorator(node.func, modules, kernel_names)}
    return collect_kernels(tree, package, str(path.relative_to(root)), lambda fn: any(
        _is_kernel_decorator(d, modules, kernel_names) for d in fn.decorator_list) or fn.name in wrapped)


def collect_kernels(tree: ast.Module, package: str, rel: str,
                    is_kernel: Callable[[ast.FunctionDef | ast.AsyncFunctionDef], bool]) -> list[KernelSite]:
    """The functions `is_kernel` accepts, at module level or inside classes, control flow and other
    functions (the enclosing function is the kernel's factory); a kernel's own body is not searched."""
    sites: list[KernelSite] = []

    def visit(body: Sequence[ast.stmt], factory: str | None) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if is_kernel(node):
                    sites.append(KernelSite(package, rel, node.name, node.lineno, factory))
                else:
                    visit(node.body, node.name)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, factory)
            elif isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [], factory)
                for h in getattr(node, "handlers", []):
                    visit(h.body, factory)
    visit(tree.body, None)
    return sites


def discover(roots: Sequence[tuple[str, str, Path]]) -> list[KernelSite]:
    sites = []
    for pkg, _ver, root in roots:
        for f in sorted(root.rglob("*.py")):
            sites += find_kernels(f, pkg, root)
    return sites


# ---------------------------------------------------------------- translate and port, unattended

@dataclass
class Row:
    package: str
    file: str
    kernel: str
    line: int
    factory: str | None
    translate_ok: bool = False
    translate_diagnostic: dict | None = None
    translate_notes: list[str] = field(default_factory=list)  # assumptions made without a configuration
    # a translate failure checked against cuTile Python's own compiler: {"verdict": INVALID_SOURCE | ...,
    # "error": its message, "line": where it points}; empty when the kernel translates
    cutile_check: dict[str, Any] = field(default_factory=dict)
    port: dict[str, Any] = field(default_factory=dict)  # stage reached, verdicts, CRITICAL count
    port_config: dict[str, Any] = field(default_factory=dict)  # the same with --config (values given by hand)


def translate_step(sites: Sequence[KernelSite], roots: dict[str, Path]) -> list[Row]:
    """`translate` (render only, nothing written) of every kernel, without any configuration."""
    from tileport.translate import translate
    rows = [Row(s.package, s.file, s.kernel, s.line, s.factory) for s in sites]
    by_file: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by_file.setdefault((r.package, r.file), []).append(r)
    for (pkg, rel), file_rows in by_file.items():
        path = str(roots[pkg] / rel)
        report = translate([path], None)
        results = {r.kernel: r for r in report.results}
        file_diag = results.get("<file>")
        for row in file_rows:
            res = results.get(row.kernel)
            if res is not None and res.ok:
                row.translate_ok, row.translate_notes = True, list(res.notes)
                continue
            d = res.diagnostic if res is not None else (file_diag.diagnostic if file_diag else None)
            if d is None:  # the translator did not see the kernel at all: say so, never count it as done
                row.translate_diagnostic = {"message": "the translator did not report this kernel",
                                            "construct": "kernel", "file": path, "line": row.line, "col": 1}
            else:
                row.translate_diagnostic = _relative(d.to_dict(), roots[pkg])
                row.cutile_check = cutile_check(Path(path), row.kernel, d.loc.line if d.loc else None)
    return rows


# What cuTile Python's own compiler says of a kernel tileport cannot translate.
INVALID_SOURCE = "invalid source (cuTile rejects it too)"  # every probe rejected, at the diagnostic's line
CUTILE_ACCEPTS = "cuTile accepts it (a tileport gap)"  # a probe compiles: the failure is tileport's
CUTILE_REJECTS_ELSEWHERE = "cuTile rejects it elsewhere"  # rejected, but not at the construct tileport names
NOT_CHECKED = "not checked"  # cuTile Python is not installed, or the kernel cannot be rebuilt for it


def cutile_check(path: Path, kernel: str, line: int | None) -> dict[str, Any]:
    """Compile the reference with cuTile Python (on the CPU, from the module rebuilt from the file's AST:
    nothing of the file runs) on every synthesized probe. The source is invalid, for cuTile too, when it
    rejects every probe and its first error points at the line of tileport's diagnostic."""
    from tileport.capture import CaptureError, reference_bytecode
    from tileport.frontends.cutile.lowerer import KernelConfig, classify_params
    from tileport.frontends.cutile.scan import scan_module
    from tileport.pipeline import probe
    try:
        sm = scan_module(str(path))
    except Exception:  # noqa: BLE001 - unreadable or not Python: the translator's diagnostic says so
        return {}
    if kernel not in sm.kernels:
        return {}  # not a cuTile kernel (a Triton set shares this step): nothing to ask cuTile Python
    try:
        fn = sm.kernels[kernel]
        plan = probe.plan(sm, fn, classify_params(sm, fn, KernelConfig()))
    except Exception as e:  # noqa: BLE001 - the check is evidence only; its failure is reported as such
        return {"verdict": NOT_CHECKED, "error": f"no probe for the kernel: {type(e).__name__}: {e}"}
    first: dict[str, Any] | None = None
    for alt in (a for p in plan.probes for a in p.alternatives):
        try:
            reference_bytecode(path, alt)
        except CaptureError as e:
            first = first or _tile_error(e)
            continue
        except ImportError as e:
            return {"verdict": NOT_CHECKED, "error": f"cuTile Python is not installed: {e}"}
        return {"verdict": CUTILE_ACCEPTS, "error": "", "probe": alt.label}
    if first is None or first.get("line") is None:  # no probe, or an error that names no line of the kernel
        return {"verdict": NOT_CHECKED, **(first or {"error": "no probe"})}
    at_construct = line is not None and first["line"] <= line <= first.get("last_line", first["line"])
    return {"verdict": INVALID_SOURCE if at_construct else CUTILE_REJECTS_ELSEWHERE, **first}


def _tile_error(e: Exception) -> dict[str, Any]:
    """cuTile's own message and location (its TileError is the CaptureError's cause)."""
    cause = e.__cause__
    loc = getattr(cause, "loc", None)
    message = getattr(cause, "message", None) or str(cause or e)
    out: dict[str, Any] = {"error": " ".join(str(message).split())}
    if loc is not None and getattr(loc, "line", 0):
        out["line"] = loc.line
        out["last_line"] = getattr(loc, "last_line", None) or loc.line
    return out


def _relative(d: dict, root: Path) -> dict:
    if d.get("file"):
        try:
            d["file"] = str(Path(d["file"]).resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return d


STAGE_ORDER = "ABCDEF"


def port_step(rows: Sequence[Row], roots: dict[str, Path], out: Path, timeout: float = 900.0,
              config: Path | None = None) -> None:
    """`tileport port FILE::kernel --no-gpu` per kernel; fills `row.port` (no config) or, with `config`,
    `row.port_config`."""
    for row in rows:
        kdir = out / row.package / Path(row.file).with_suffix("").as_posix().replace("/", ".")
        target = f"{roots[row.package] / row.file}::{row.kernel}"
        cmd = [sys.executable, "-m", "tileport.cli", "port", target, "--no-gpu", "--out", str(kdir)]
        cmd += ["--config", str(config)] if config else []
        t0 = time.perf_counter()
        try:
            r = run_tool(cmd, timeout)
            tail = (r.stdout + r.stderr)[-400:]
        except ToolTimeout:
            result = {"stage": None, "error": f"port timed out after {timeout:.0f} s"}
        else:
            result = read_port(kdir, row.kernel, tail) | {"seconds": round(time.perf_counter() - t0, 1)}
        for key in ("reason", "error"):  # paths inside the work directory, relative to it
            if key in result:
                for prefix in (roots[row.package].resolve(), roots[row.package], out.resolve(), Path.cwd()):
                    result[key] = result[key].replace(f"{prefix}/", "")
                result[key] = result[key][:1000]  # cut after the paths are shortened (a cut path stays absolute)
        if config:
            row.port_config = result
        else:
            row.port = result


def read_port(kdir: Path, kernel: str, tail: str) -> dict[str, Any]:
    """Stage reached, each stage's verdict and B's CRITICAL count, from the run's summary."""
    try:
        summary = json.loads((kdir / "summary.json").read_text())
        rec = next(k for k in summary["kernels"] if k["kernel"] == kernel)
    except (OSError, ValueError, StopIteration, KeyError):
        return {"stage": None, "error": f"no summary for the kernel; port output: {tail}"}
    route = rec.get("route", [])
    verdicts = {f"{s['stage']}{s['attempt']}": s["verdict"] for s in route}
    out: dict[str, Any] = {"terminal": rec.get("terminal"), "verdicts": verdicts,
                           "stage": route[-1]["stage"] if route else None,
                           "reason": route[-1].get("reason", "") if route else ""}
    a = _latest_verdict(kdir / rec["key"], "A")
    out["specialization"] = _specialization((a or {}).get("details", {}).get("config_source", ""))
    b = _latest_verdict(kdir / rec["key"], "B")
    details = (b or {}).get("details") or {}
    if "counts" in details:  # the IR diff ran (B COMPILED, or stopped by its layout gate)
        out["critical"] = details["counts"]["CRITICAL"]
        out["ir_diff_configs"] = len(details.get("ir_diff", {}))
    if out.get("critical"):
        out["first_critical"] = _first_critical(kdir / rec["key"] / "B" / "findings.json")
    return out


def _first_critical(findings: Path) -> str:
    """The first CRITICAL IR-diff finding, located in the kernel's source: `file:line:col [category/rule] what`."""
    try:
        f = next(x for x in json.loads(findings.read_text()) if x.get("severity") == "CRITICAL")
    except (OSError, ValueError, StopIteration):
        return "CRITICAL IR-diff finding(s) (findings.json unreadable)"
    return f"{f.get('ref_source') or f.get('gen_source') or '?'} [{f['category']}/{f['rule']}] {f['message']}"


SYNTHESIZED_COLUMN = "probe (synthesized)"


def _specialization(config_source: str) -> str:
    """Where the values of the IR diff came from: a synthesized probe, real launches, a --config, defaults."""
    from tileport.pipeline.probe import SYNTHESIZED
    if config_source == SYNTHESIZED:
        return SYNTHESIZED_COLUMN
    return config_source.split(":")[0] if config_source else "-"


def _latest_verdict(kdir: Path, stage: str) -> dict | None:
    paths = sorted(kdir.glob(f"{stage}*/verdict.json"), key=lambda p: (len(p.parent.name), p.parent.name))
    try:
        return json.loads(paths[-1].read_text()) if paths else None
    except (OSError, ValueError):
        return None


def clean_diff(port: dict[str, Any]) -> bool:
    """The IR diff ran on every configuration (B COMPILED) with 0 CRITICAL findings."""
    return port.get("critical") == 0


# ---------------------------------------------------------------- the table

def summarize(rows: Sequence[Row], ported: bool) -> dict[str, Any]:
    n = len(rows)
    ok = sum(r.translate_ok for r in rows)
    located = sum(1 for r in rows if r.translate_ok or _is_located(r.translate_diagnostic))
    invalid = sum(r.cutile_check.get("verdict") == INVALID_SOURCE for r in rows)
    accepted = n - invalid  # kernels cuTile Python does not reject at the construct tileport names
    s = {"kernels": n, "translate_ok": ok, "translate_rate": round(ok / n, 4) if n else 0.0,
         "failures_located": located - ok, "invalid_source": invalid,
         "translate_rate_cutile_accepts": round(ok / accepted, 4) if accepted else 0.0}
    if ported:
        clean = sum(clean_diff(r.port) for r in rows)
        s |= {"ir_diff_clean": clean, "ir_diff_clean_rate": round(clean / n, 4) if n else 0.0,
              "ir_diff_clean_synthesized": sum(clean_diff(r.port) and r.port.get("specialization") == SYNTHESIZED_COLUMN
                                               for r in rows)}
    if any(r.port_config for r in rows):
        clean = sum(clean_diff(r.port_config) for r in rows)
        s |= {"with_config_ir_diff_clean": clean}
    return s


def _is_located(d: dict | None) -> bool:
    return bool(d and d.get("construct") and d.get("file") and d.get("line"))


def first_diagnostic(row: Row) -> str:
    """tileport's located diagnostic, then what cuTile Python's own compiler says of the kernel."""
    if row.translate_ok:
        return ""
    d = row.translate_diagnostic or {}
    text = f"{d.get('file')}:{d.get('line')}:{d.get('col')} [{d.get('construct')}] {d.get('message')}"
    check = row.cutile_check
    if check.get("verdict") in (INVALID_SOURCE, CUTILE_REJECTS_ELSEWHERE):
        text += f"; cuTile Python's own error (line {check.get('line')}): {check.get('error')}"
    elif check.get("verdict"):
        text += f"; cuTile Python: {check['verdict']}" + (f" ({check['error']})" if check.get("error") else "")
    return text


def render_markdown(table: dict[str, Any]) -> str:
    s = table["summary"]
    lines = [f"# Wild corpus: unattended port ({table['date']})", "",
             "Packages (PyPI, pinned): " + ", ".join(f"`{p['package']}=={p['version']}` ({p['kernels']} kernels)"
                                                     for p in table["packages"]), "",
             _translate_rate_line(s)]
    lines += _port_rate_lines(s, table.get("config", ""))
    with_config = "with_config_ir_diff_clean" in s
    lines += ["", "Stage: the last stage `tileport port` ran; CRIT: CRITICAL IR-diff findings (B's diff, "
              "stage C's input; `-` when no diff ran).", "",
              "Values: where the IR diff's dtypes and constants came from (`probe (synthesized)`: made up from "
              "the kernel's text by tileport, not a real launch).", ""]
    lines += _kernel_rows(table["kernels"], with_config)
    for p in table["packages"]:
        if p["kernels"] == 0 and p["package"] in PACKAGE_NOTES:
            lines += ["", f"`{p['package']}=={p['version']}` has no kernel to port: {PACKAGE_NOTES[p['package']]}"]
    lines += ["", "Causes, by weight:", ""] + [f"- {n} × {cause}" for cause, n in failure_causes(table["kernels"])]
    if table.get("generated"):
        lines += _generated_section(table["generated"])
        lines += ["", "## All wild kernels (the packages' and the generated ones)", "",
                  *combined_rate_lines(s, table["generated"]["summary"])]
    lines += ["", "Reproduce: `bash eval/wild.sh` (add `--no-port` for the translate step only; "
              "`--config bench/results/wild-config.json` for the second column; `--stencil-gen` for the kernels "
              "cutile-stencil generates)."]
    return "\n".join(lines) + "\n"


def combined_rate_lines(packages: dict[str, Any], generated: dict[str, Any]) -> list[str]:
    """The rates over every wild kernel: the downloaded sources' and the ones cutile-stencil generates."""
    kernels = packages["kernels"] + generated["kernels"]
    invalid = packages["invalid_source"] + generated["invalid_source"]
    ok = packages["translate_ok"] + generated["translate_ok"]
    lines = [f"- translate (no config, no edits): **{ok}/{kernels}** ({100 * ok / kernels:.1f} %); of the kernels "
             f"cuTile Python accepts: **{ok}/{kernels - invalid}** ({100 * ok / max(1, kernels - invalid):.1f} %)"]
    if "ir_diff_clean" in packages and "ir_diff_clean" in generated:
        clean = packages["ir_diff_clean"] + generated["ir_diff_clean"]
        lines.append(f"- `tileport port --no-gpu` (no config): IR diff ran with 0 CRITICAL (reach stage C): "
                     f"**{clean}/{kernels}** ({100 * clean / kernels:.1f} %)")
    return lines


def _translate_rate_line(s: dict[str, Any]) -> str:
    return (f"- translate (no config, no edits): **{s['translate_ok']}/{s['kernels']}** "
            f"({100 * s['translate_rate']:.1f} %) of all kernels; "
            f"**{s['translate_ok']}/{s['kernels'] - s['invalid_source']}** "
            f"({100 * s['translate_rate_cutile_accepts']:.1f} %) of the kernels cuTile Python accepts "
            f"({s['invalid_source']} {INVALID_SOURCE}, counted as failures in the first rate); "
            f"failures with a located diagnostic naming the construct: "
            f"{s['failures_located']}/{s['kernels'] - s['translate_ok']}")


def _port_rate_lines(s: dict[str, Any], config: str) -> list[str]:
    lines = []
    if "ir_diff_clean" in s:
        lines.append(f"- `tileport port --no-gpu` (no config): IR diff ran with 0 CRITICAL (reach stage C): "
                     f"**{s['ir_diff_clean']}/{s['kernels']}** ({100 * s['ir_diff_clean_rate']:.1f} %); of these, "
                     f"{s.get('ir_diff_clean_synthesized', 0)} on SYNTHESIZED probe values (no launch, no config: "
                     "the diff proves the port for those values only; D and E need real launches)")
    if "with_config_ir_diff_clean" in s:
        lines.append(f"- the same with `--config` {config} (dtypes and constant values given by "
                     f"hand; not unattended): IR diff ran with 0 CRITICAL: **{s['with_config_ir_diff_clean']}/"
                     f"{s['kernels']}**")
    return lines


def _kernel_rows(kernels: Sequence[dict], with_config: bool) -> list[str]:
    lines = ["| package | file | kernel | translate | values | stage (verdict) | CRIT | first diagnostic |"
             + (" with --config: stage, CRIT, why |" if with_config else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if with_config else "")]
    for r in kernels:
        port = r.get("port") or {}
        crit = port.get("critical", "-")
        diag = r["first_diagnostic"] or port.get("first_critical") or (port.get("reason", "") if port and crit != 0
                                                                         else "")
        why_per_dtype = next((n for n in r.get("translate_notes", []) if n.startswith(FMA_PER_DTYPE)), None)
        if crit not in (0, "-") and why_per_dtype:  # the translator's own account of these findings
            diag = f"{diag}; translator note: {why_per_dtype.split('): ')[0]})"
        name = r["kernel"] + (f" (in `{r['factory']}`)" if r.get("factory") else "")
        line = (f"| {r['package']} | {r['file']} | `{name}` | {_translate_cell(r)} | "
                f"{port.get('specialization', '-')} | {_stage(port)} | {crit} | "
                f"{_cell(diag, 360)} |")
        if with_config:
            pc = r.get("port_config") or {}
            why = (pc.get("first_critical") or pc.get("reason", "")) if pc.get("critical") != 0 else ""
            line += f" {_stage(pc)}, {pc.get('critical', '-')}{', ' + _cell(why, 160) if why else ''} |"
        lines.append(line)
    return lines


def _generated_section(gen: dict[str, Any]) -> list[str]:
    """The kernels cutile-stencil writes when its own compile path runs (opt-in; apart from the rates above,
    which count the downloaded sources only, as the CI check does)."""
    s = gen["summary"]
    lines = ["", f"## Kernels generated by `cutile-stencil=={gen['version']}` (opt-in step `--stencil-gen`)", "",
             f"How: {gen['how']}", "", _translate_rate_line(s)] + _port_rate_lines(s, "")
    lines += [""] + _kernel_rows(gen["kernels"], False)
    causes = failure_causes(gen["kernels"])
    return lines + ["", "Causes, by weight:", ""] + [f"- {n} × {cause}" for cause, n in causes]


def _translate_cell(r: dict) -> str:
    if r["translate_ok"]:
        return "ok"
    check = r.get("cutile_check") or {}
    return f"FAIL: {check['verdict']}" if check.get("verdict") in (INVALID_SOURCE, CUTILE_REJECTS_ELSEWHERE) else "FAIL"


def failure_causes(kernels: Sequence[dict]) -> list[tuple[str, int]]:
    """What stops the kernels, most frequent first: the translate construct, else the port's first clause."""
    causes: dict[str, int] = {}

    def count(cause: str) -> None:
        causes[cause] = causes.get(cause, 0) + 1
    for r in kernels:
        if not r["translate_ok"]:
            verdict = (r.get("cutile_check") or {}).get("verdict")
            what = f", {verdict}" if verdict == INVALID_SOURCE else ""
            count(f"translate [{(r['translate_diagnostic'] or {}).get('construct')}]{what}")
            continue
        for key, rec in (("", r.get("port") or {}), ("with --config: ", r.get("port_config") or {})):
            if rec and rec.get("critical"):  # the diff ran: its first CRITICAL finding's kind is the cause
                count(f"{key}IR diff CRITICAL: {_finding_kind(rec.get('first_critical', ''))}")
            elif rec and rec.get("critical") != 0:
                count(f"{key}port stops at {rec.get('stage')}: {_reason_kind(rec.get('reason') or rec.get('error') or '')}")
    return sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))


def _finding_kind(first: str) -> str:
    """`rope.py:31:14 [index/differs] load_view_tko: ...` -> `[index/differs] load_view_tko`."""
    m = re.search(r"(\[[^\]]+\]) ([\w.]+)", first)
    return f"{m.group(1)} {m.group(2)}" if m else first[:80]


def _reason_kind(reason: str) -> str:
    """A reason without its kernel-specific parts: its first clause and, if several, its last (the cause)."""
    line = (reason.splitlines() or [""])[0]
    parts = line.split(": ")
    first = re.sub(r"configuration \S+\[[^\]]*\]\([^)]*\)", "configuration", parts[0])
    if "--config" in line or len(parts) < 3:
        return first
    return f"{first} … {parts[-1]}"


def _stage(port: dict[str, Any]) -> str:
    stage = port.get("stage") or "-"
    verdict = list(port.get("verdicts", {}).values())[-1:] if port else []
    return f"{stage} ({verdict[0]})" if verdict else stage


def _cell(text: str, width: int = 200) -> str:
    """One table cell: whitespace collapsed; a long text keeps its start and its end (where the cause is)."""
    text = " ".join(text.split()).replace("|", "/")
    if len(text) <= width:
        return text
    tail = min(70, width // 2)
    return f"{text[:width - tail - 3]} … {text[len(text) - tail:]}"


def build_table(rows: Sequence[Row], roots: Sequence[tuple[str, str, Path]], ported: bool) -> dict[str, Any]:
    kernels = []
    for r in rows:
        rec = asdict(r)
        rec["first_diagnostic"] = first_diagnostic(r)
        if not ported:
            rec.pop("port")
        if not r.port_config:
            rec.pop("port_config")
        kernels.append(rec)
    return {"date": time.strftime("%Y-%m-%d", time.gmtime()),
            "packages": [{"package": p, "version": v, "kernels": sum(r.package == p for r in rows)}
                         for p, v, _ in roots],
            "summary": summarize(rows, ported), "kernels": kernels}


def generated_table(work: Path, ported: bool) -> dict[str, Any]:
    """The section of the kernels cutile-stencil generates: translated and ported like the others."""
    gen, outcome, versions = generate_stencils(work)
    roots = {GENERATED: gen}
    rows = translate_step(discover([(GENERATED, STENCIL[1], gen)]), roots)
    if ported:
        port_step(rows, roots, work / "port-generated")
    failed = [f"{o['stencil']} ({o['mode']}): {o['error']}" for o in outcome if not o["ok"]]
    how = (f"{versions} installed in a venv under the work directory; its `cutile.compile` (modes: "
           + "; ".join(f"`{m}` {o}" for m, o in STENCIL_MODES.items())
           + f") run on the CPU on every stencil of its own `cutile.benchmarks.stencils`, each result written with "
           f"`CompileResult.emit_to_file`: {sum(o['ok'] for o in outcome)}/{len(outcome)} files"
           + (f"; not generated: {'; '.join(failed)}" if failed else ""))
    table = build_table(rows, [(GENERATED, STENCIL[1], gen)], ported)
    return {"version": STENCIL[1], "how": how, "outcome": outcome, "summary": table["summary"],
            "kernels": table["kernels"]}


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("out/wild"), help="downloads, sources and port runs")
    ap.add_argument("--results", type=Path, default=Path("bench/results"), help="where wild.json/.md go")
    ap.add_argument("--no-port", action="store_true", help="translate step only (fast; table in --work)")
    ap.add_argument("--config", type=Path, help="also port with these values (a second, not unattended, column)")
    ap.add_argument("--stencil-gen", action="store_true",
                    help="also run cutile-stencil's own compile path (a venv under --work) and port what it writes")
    args = ap.parse_args(argv)
    try:
        roots = fetch_all(args.work)
    except WildError as e:
        print(f"wild: {e}", file=sys.stderr)
        return 2
    sites = discover(roots)
    by_pkg = {p: r for p, _, r in roots}
    rows = translate_step(sites, by_pkg)
    if not args.no_port:
        port_step(rows, by_pkg, args.work / "port")
        if args.config:
            port_step(rows, by_pkg, args.work / "port-config", config=args.config.resolve())
    table = build_table(rows, roots, not args.no_port)
    if args.stencil_gen:
        try:
            table["generated"] = generated_table(args.work, not args.no_port)
        except WildError as e:
            print(f"wild: --stencil-gen: {e}", file=sys.stderr)
            return 2
    if args.config:
        table["config"] = str(args.config)
    where = args.work if args.no_port else args.results  # the committed table always has the port step
    name = "wild-translate" if args.no_port else "wild"
    write_atomic(where / f"{name}.json", json.dumps(table, indent=1) + "\n")
    write_atomic(where / f"{name}.md", render_markdown(table))
    s = table["summary"]
    print(f"wild: {s['translate_ok']}/{s['kernels']} kernels translate"
          + (f"; {s['ir_diff_clean']}/{s['kernels']} reach a clean IR diff" if "ir_diff_clean" in s else "")
          + f"; table: {where / (name + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
