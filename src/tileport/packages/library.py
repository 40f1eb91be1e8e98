"""Package mode: every kernel of every module of a package, translated into one crate.

The package's files are indexed (`index`), the files that name triton or cuda.tile are lowered in worker
processes (`-j N`), each with the package's resolver, so that names a kernel imports from other modules
of the package (helpers, constants, aliases, modules wrapping triton.language / cuda.tile) are read from
their files. One Rust module per source module; kernels with a diagnostic are left out of the crate and
reported. A `@triton.jit` function that another module's jit function calls and that nothing in the
package launches (`f[grid](...)`) is a helper there, not a kernel of its own module.
"""

from __future__ import annotations

import ast
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tileport.diagnostics import Diagnostic
from tileport.emit.rust.names import module_name as rust_module_name
from tileport.frontends.imports import Resolver
from tileport.frontends.registry import FRONTENDS
from tileport.frontends.source import parse_source, read_source
from tileport.model.ir import Kernel, Loc
from tileport.translate import KernelResult, Lowered, TranslateReport, assemble, lower

from .index import Module, PackageIndex, PackageResolver


@dataclass
class KernelRow:
    """One kernel of the package and what became of it."""

    module: str  # dotted module name
    file: str  # relative to the package root
    line: int
    kernel: str
    frontend: str  # "triton" | "cutile"
    translated: bool
    entries: int = 0  # specialized Rust entries
    diagnostic: dict | None = None  # Diagnostic.to_dict(), file relative to the package root
    notes: list[str] = field(default_factory=list)
    # from the pipeline (`tileport port`); None where the stage did not run
    terminal: str | None = None
    ir_critical: int | None = None
    gpu_correct: bool | None = None
    parity: float | None = None


@dataclass
class Library:
    """Package mode's result: the report's data (`report.write_library`)."""

    label: str  # what was given (folder, archive, requirement)
    kind: str  # "folder" | "wheel" | "sdist" | "pip"
    root: str  # the folder indexed
    rows: list[KernelRow] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # other vendors' files: {module, file, why}
    problems: list[dict] = field(default_factory=list)  # files that cannot be read: {module, file, diagnostic}
    modules: int = 0  # modules indexed
    scanned: int = 0  # modules that name triton or cuda.tile
    seconds: float = 0.0
    crate: str | None = None  # the crate folder written
    rust_modules: dict[str, str] = field(default_factory=dict)  # dotted module -> Rust module
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage (`STAGES`; workers' summed)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FileOutcome:
    """What a worker returns for one file."""

    module: str
    path: str
    frontend: str | None  # None: no frontend's file (or no kernel in it)
    kernels: list[Kernel] = field(default_factory=list)
    results: list[KernelResult] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # kernel -> line of its `def`
    calls: set[tuple[str, str]] = field(default_factory=set)  # (file, jit function) of other modules called
    launched: set[str] = field(default_factory=set)  # names launched here (`f[grid](...)`)
    problem: Diagnostic | None = None  # the file cannot be read or parsed
    seconds: dict[str, float] = field(default_factory=dict)  # "resolve" (the scans), "lower"


@dataclass
class Tally:
    """How far `lower_package` is: what a progress callback is given after each file, and while it waits."""

    files: int  # kernel files to lower
    size: int  # their bytes
    files_done: int = 0
    size_done: int = 0
    found: int = 0  # kernels found in the files done
    translated: int = 0
    last: str = ""  # the file done last and its kernels ("ops/x.py: 9 kernels, 8 translated"); "" while waiting


Progress = Callable[[Tally], None]
HEARTBEAT_S = 10.0  # with worker processes: progress is called at least this often while files are lowered


def lower_package(index: PackageIndex, jobs: int = 1, progress: Progress | None = None,
                  resolver: Resolver | None = None) -> list[FileOutcome]:
    """Every kernel file of the package lowered (largest first, `jobs` processes), in module order, with the
    package's resolver (another `resolver`: e.g. `frontends.imports.FILES`, each file on its own)."""
    resolver = resolver or PackageResolver(index)
    sizes = {m.name: _size(m.path) for m in index.kernel_candidates()}
    modules = sorted((index.modules[name] for name in sizes), key=lambda m: -sizes[m.name])
    outcomes: dict[str, FileOutcome] = {}
    tally = Tally(len(modules), sum(sizes.values()))

    def done(o: FileOutcome) -> None:
        outcomes[o.module] = o
        ok = sum(r.ok for r in o.results)
        tally.files_done, tally.size_done = len(outcomes), tally.size_done + sizes[o.module]
        tally.found, tally.translated = tally.found + len(o.results), tally.translated + ok
        tally.last = f"{index.modules[o.module].rel}: " + (f"{len(o.results)} kernels, {ok} translated" if o.results
                                                           else "no kernels")
        if progress:
            progress(tally)
    if jobs <= 1:
        for m in modules:
            done(lower_module(m, resolver))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(lower_module, m, resolver): m for m in modules}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, HEARTBEAT_S, FIRST_COMPLETED)
                if not finished and progress:
                    tally.last = ""
                    progress(tally)
                for fut in sorted(finished, key=lambda f: futures[f].name):
                    m = futures[fut]
                    try:
                        done(fut.result())
                    except Exception as e:  # noqa: BLE001 - a worker that died (memory, a signal): its file's problem
                        done(FileOutcome(m.name, m.path, None, problem=_internal(m, e)))
    _calls_are_helpers(outcomes)
    return [outcomes[name] for name in sorted(outcomes)]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def lower_module(m: Module, resolver: Resolver) -> FileOutcome:
    """One module: its frontend (by its own imports: nothing runs), its kernels lowered with the package's
    resolver; never raises (a translator bug is the kernel's diagnostic)."""
    try:
        tree = parse_source(m.path, read_source(m.path))
    except Diagnostic as d:
        return FileOutcome(m.name, m.path, None, problem=d)
    frontend = next((f for f in FRONTENDS if f.accepts(m.path, tree)), None)
    if frontend is None:
        return FileOutcome(m.name, m.path, None)
    t0 = time.perf_counter()
    try:
        sites = _kernel_sites(m, frontend.name, resolver)
    except Diagnostic as d:
        return FileOutcome(m.name, m.path, frontend.name, problem=d)
    except Exception as e:  # noqa: BLE001 - a scan bug is the file's diagnostic, the package goes on
        return FileOutcome(m.name, m.path, frontend.name, problem=_internal(m, e))
    t1 = time.perf_counter()
    if sites.lines:
        sites.kernels, sites.results = lower(m.path, None, list(sites.lines), resolver)
    sites.seconds = {"resolve": t1 - t0, "lower": time.perf_counter() - t1}
    return sites


def _internal(m: Module, e: BaseException) -> Diagnostic:
    return Diagnostic(f"internal error while reading the module: {type(e).__name__}: {e}", Loc(m.path, 1, 1),
                      "internal", "please report this file")


def _kernel_sites(m: Module, frontend: str, resolver: Resolver) -> FileOutcome:
    """The kernels of a file (name -> line), and for Triton, the jit functions of other modules its jit
    functions call and the names it launches."""
    if frontend == "cutile":
        from tileport.frontends.cutile.scan import scan_module
        sm = scan_module(m.path, resolver=resolver)
        return FileOutcome(m.name, m.path, frontend, lines={k: fn.lineno for k, fn in sm.kernels.items()})
    from tileport.frontends.triton.scan import helper_of, imported_module, scan
    tm = imported_module(m.path, resolver) or scan(m.path, resolver=resolver)  # the scan lowering reuses
    out = FileOutcome(m.name, m.path, frontend, lines={k: fn.lineno for k, fn in tm.kernels.items()})
    for fn in [*tm.kernels.values(), *tm.helpers.values()]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and not isinstance(node.func, ast.Subscript):
                found = helper_of(tm, node.func)
                if found is not None and found[0].path != m.path:
                    out.calls.add((found[0].path, found[1].name))
    for node in ast.walk(tm.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):
            out.launched.add(node.value.id if isinstance(node.value, ast.Name) else node.value.attr)
    return out


def _calls_are_helpers(outcomes: dict[str, FileOutcome]) -> None:
    """Drop the kernels that are helpers of other modules (see the module docstring)."""
    called = set().union(*(o.calls for o in outcomes.values()))
    launched = set().union(*(o.launched for o in outcomes.values()))
    for o in outcomes.values():
        helpers = {name for name in o.lines if (o.path, name) in called and name not in launched}
        if helpers:
            o.lines = {k: v for k, v in o.lines.items() if k not in helpers}
            o.results = [r for r in o.results if r.kernel not in helpers]
            o.kernels = [k for k in o.kernels if (k.base_name or k.name) not in helpers]


# ---------------------------------------------------------------- the crate

def rust_module_names(modules: list[str]) -> dict[str, str]:
    """Dotted module -> Rust module: the path below the package (the one top package is the crate),
    `.` -> `_`; deterministic (sorted) and collision-free (`emit.names.module_name` numbers repeats)."""
    tops = {m.split(".")[0] for m in modules}
    taken: set[str] = set()
    out = {}
    for m in sorted(modules):
        parts = m.split(".")
        inner = parts[1:] if len(tops) == 1 and len(parts) > 1 else parts
        out[m] = rust_module_name("_".join(inner), taken)
    return out


def build_crate(index: PackageIndex, outcomes: list[FileOutcome], out_dir: Path | None, crate: str,
                force: bool, stages: dict[str, float] | None = None, faithful: bool = False
                ) -> tuple[TranslateReport, dict[str, str]]:
    """One crate for the package (None: rendered only): one Rust module per module with translated kernels.
    `stages`: seconds of rendering, rustfmt and writing are added there; `faithful` as in `translate`."""
    names = rust_module_names([o.module for o in outcomes if o.kernels])
    files = [Lowered(index.modules[o.module].path, o.kernels, o.results, names.get(o.module, ""),
                     index.modules[o.module].rel) for o in outcomes]
    return assemble(files, out_dir, crate, force, faithful, stages), names


def library_of(label: str, kind: str, index: PackageIndex, outcomes: list[FileOutcome], seconds: float,
               crate: Path | None, names: dict[str, str]) -> Library:
    lib = Library(label, kind, str(index.root), modules=len(index.modules), scanned=len(outcomes),
                  seconds=round(seconds, 2), crate=str(crate) if crate else None, rust_modules=names)
    lib.skipped = [{"module": m.name, "file": m.rel, "why": index.vendor[m.name]}
                   for m in sorted(index.kernel_candidates(vendor=True), key=lambda m: m.name)]
    for o in outcomes:
        m = index.modules[o.module]
        if o.problem is not None:
            lib.problems.append({"module": o.module, "file": m.rel, "diagnostic": _relative(o.problem, index)})
        for r in o.results:
            if r.kernel not in o.lines:  # a file-level diagnostic (`<file>`)
                if r.diagnostic is not None:
                    lib.problems.append({"module": o.module, "file": m.rel,
                                         "diagnostic": _relative(r.diagnostic, index)})
                continue
            lib.rows.append(KernelRow(o.module, m.rel, o.lines[r.kernel], r.kernel, o.frontend or "", r.ok,
                                      len(r.entries), _relative(r.diagnostic, index) if r.diagnostic else None,
                                      list(r.notes)))
    return lib


def _relative(d: Diagnostic, index: PackageIndex) -> dict:
    """The diagnostic as a dict, its file named by its path in the package."""
    out = d.to_dict()
    if out["file"]:
        found = index.by_path.get(str(Path(out["file"]).resolve()))
        out["file"] = found.rel if found else out["file"]
    return out


# Stages of package mode's translation, as `Library.stages` times them: reading the package's files, the
# module scans with their imports, lowering the kernels (worker processes' times summed), rendering the
# crate's files, formatting them, writing them.
STAGES = ("index", "resolve", "lower", "render", "rustfmt", "write")


def translate_package(index: PackageIndex, label: str, kind: str, out_dir: Path | None, crate: str, jobs: int,
                      force: bool, progress: Progress | None = None,
                      stages: dict[str, float] | None = None, faithful: bool = False
                      ) -> tuple[Library, TranslateReport]:
    """Package mode's translation: lowered in `jobs` processes, one crate under `out_dir` (None: none).
    `stages`: seconds of stages timed before (the index), completed here (`STAGES`); `faithful` as in
    `translate`."""
    t0 = time.perf_counter()
    stages = dict.fromkeys(STAGES, 0.0) | (stages or {})
    outcomes = lower_package(index, jobs, progress)
    for o in outcomes:
        for stage, seconds in o.seconds.items():
            stages[stage] += seconds
    report, names = build_crate(index, outcomes, out_dir, crate, force, stages, faithful)
    crate_dir = out_dir if report.written else None
    lib = library_of(label, kind, index, outcomes, time.perf_counter() - t0, crate_dir, names)
    lib.stages = {stage: round(seconds, 2) for stage, seconds in stages.items()}
    return lib, report
