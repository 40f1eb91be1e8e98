"""Package mode of `tileport port`: the pipeline (stages A-F, `pipeline.batch.run_batch`) over every kernel of
the package that translates, with the package's resolver active (the frontends and the reference capture
read the package's other modules), and its outcomes in the library report.

A kernel's folder under OUT is `<rust module>.<kernel>`: unique in the package, and never one of the
folders package mode writes itself (source/, download/).
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from tileport.frontends.imports import resolving
from tileport.pipeline import Options, Target
from tileport.pipeline.batch import run_batch
from tileport.pipeline.report import facts_of
from tileport.pipeline.targets import TargetError, file_targets, load_launches

from .index import PackageIndex, PackageResolver
from .library import Library, Progress, build_crate, library_of, lower_package


def port_package(index: PackageIndex, label: str, kind: str, options: Options, launches: Path | None,
                 console: Console, progress: Progress | None = None) -> tuple[Library, list, object]:
    """Translate the package (no crate written: the pipeline builds its own), then port what translated."""
    t0 = time.perf_counter()
    outcomes = lower_package(index, options.jobs, progress)
    _, names = build_crate(index, outcomes, None, "tileport_kernels", False)
    lib = library_of(label, kind, index, outcomes, 0.0, None, names)
    with resolving(PackageResolver(index)):
        targets = package_targets(index, lib, names, launches)
        ported, session = run_batch(targets, options, console) if targets else ([], None)
    by_key = {t.key: (t, o) for t, o in zip(targets, ported)}
    for row in lib.rows:
        found = by_key.get(_key(names, row.module, row.kernel))
        if found is not None:
            _fill(row, found[1], options.out)
    lib.seconds = round(time.perf_counter() - t0, 2)
    return lib, ported, session


def _key(names: dict[str, str], module: str, kernel: str) -> str:
    return f"{names.get(module, module.replace('.', '_'))}.{kernel}"


def package_targets(index: PackageIndex, lib: Library, names: dict[str, str], launches: Path | None) -> list[Target]:
    """Pipeline targets of the kernels that translated, one file at a time (its launches: the spec's, else
    those its host code fixes)."""
    records = load_launches(launches)
    wanted: dict[str, set[str]] = {}
    for row in lib.rows:
        if row.translated:
            wanted.setdefault(row.module, set()).add(row.kernel)
    targets = []
    for module, kernels in sorted(wanted.items()):
        try:
            found = file_targets(Path(index.modules[module].path), launches=launches, spec_records=records)
        except TargetError as e:
            lib.problems.append({"module": module, "file": index.modules[module].rel,
                                 "diagnostic": {"message": str(e), "construct": "port", "hint": "", "kernel": "",
                                                "file": index.modules[module].rel, "line": None, "col": None}})
            continue
        for t in found:
            if t.kernel in kernels:
                t.key = _key(names, module, t.kernel)
                targets.append(t)
    return targets


def _fill(row, outcome, out: Path) -> None:
    """The pipeline's columns of one kernel: its terminal state, the IR diff's CRITICAL count, GPU
    correctness (stage D) and parity (stage E), each None where its stage did not run."""
    facts = facts_of(outcome, out)
    row.terminal = outcome.terminal
    b = _latest(facts["verdicts"], "B")
    if b and b["verdict"] == "COMPILED" and not b["details"].get("reference"):
        row.ir_critical = b["details"]["counts"]["CRITICAL"]
    d = _latest(facts["verdicts"], "D")
    if d and d["verdict"] in ("ALL_PASS", "FAIL"):
        row.gpu_correct = d["verdict"] == "ALL_PASS"
    parity = facts.get("parity")
    if parity and parity.get("fresh"):
        row.parity = parity["ratio"]


def _latest(verdicts: dict[str, dict], stage: str) -> dict | None:
    runs = sorted((k for k in verdicts if k.rstrip("0123456789") == stage), key=lambda k: (len(k), k))
    return verdicts[runs[-1]] if runs else None
