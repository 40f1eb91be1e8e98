"""The CPU proof of a port: for every capture, reference IR vs generated IR, cubins, structural diff.

    tileport verify --corpus --out out/verify

For each (kernel, signature): cuTile Python bytecode and the cutile-rs port's bytecode are captured
on the CPU, disassembled, compiled to cubins for sm_80/sm_90/sm_100 with tileiras, and diffed with
the Tile IR toolkit. Artifacts go under --out/<kernel>/<capture>/; a summary goes to summary.json.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tileport.atomic import write_text_atomic
from tileport.cache import DiskCache
from tileport.capture.ir import (ARCHS, CaptureError, CubinResult, capture_side, diff_port, frontend_reference,
                                 generated_bytecode)
from tileport.capture.signature import Capture
from tileport.frontends.registry import frontend_for
from tileport.runtime.abi import TileportError
from tileport.runtime.library import KernelLibrary
from tileport.sass import compare as compare_sass


@dataclass
class CaptureResult:
    kernel: str
    capture: str
    verdict: str = "ERROR"  # PASS | PASS_WITH_NOTES | FAIL | ERROR
    critical: int = 0
    warn: int = 0
    info: int = 0
    findings: list[str] = field(default_factory=list)  # CRITICAL and WARN one-liners
    cubins_ref: dict[str, bool] = field(default_factory=dict)
    cubins_gen: dict[str, bool] = field(default_factory=dict)
    sass_same: dict[str, bool] = field(default_factory=dict)  # arch -> same instruction stream (tileport.sass)
    sass: dict[str, dict] = field(default_factory=dict)  # arch -> sass.compare(): counts, first difference
    error: str = ""
    seconds: float = 0.0
    artifacts: str = ""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")


def verify_capture(lib: KernelLibrary, path: Path, capture: Capture, out_dir: Path | None,
                   archs=ARCHS, cache: DiskCache | None = None) -> CaptureResult:
    res = CaptureResult(capture.kernel, capture.label)
    t0 = time.perf_counter()
    d = out_dir / capture.kernel / slug(capture.label) if out_dir else None
    try:
        ref_bc = frontend_reference(frontend_for(str(path)), str(path), capture)
        _, gen_bc = generated_bytecode(lib, capture)
        ref = capture_side(ref_bc, d, "reference", archs, cache)
        gen = capture_side(gen_bc, d, "generated", archs, cache)
        res.cubins_ref = {c.arch: c.ok for c in ref.cubins}
        res.cubins_gen = {c.arch: c.ok for c in gen.cubins}
        sass_errors = compare_machine_code(ref.cubins, gen.cubins, res)
        report = diff_port(lib, capture, ref_bc, gen_bc)
        res.verdict = report.verdict
        counts = report.counts()  # findings that are not MATCH lines
        res.critical, res.warn, res.info = counts["CRITICAL"], counts["WARN"], counts["INFO"]
        res.findings = [f"{f.severity} {f.category}: {f.message}" for f in report.sorted_findings()
                        if f.severity in ("CRITICAL", "WARN")]
        if d is not None:
            write_text_atomic(d / "irdiff.json", report.to_json() + "\n")
            write_text_atomic(d / "irdiff.md", report.to_markdown())
            res.artifacts = str(d)
        failed = port_cubin_failures(res.cubins_ref, res.cubins_gen)
        res.error = "; ".join(([f"tileiras failed: {', '.join(failed)}"] if failed else []) + sass_errors)
    except (CaptureError, TileportError) as e:
        res.error = str(e)
    res.seconds = round(time.perf_counter() - t0, 2)
    return res


def port_cubin_failures(ref: dict[str, bool], gen: dict[str, bool]) -> list[str]:
    """The architectures the port did not compile for although its reference did (an architecture the reference
    itself cannot target, e.g. fp8 MMAs on sm_80, is no failure of the port: both sides are recorded)."""
    return [f"gen {a}" for a, ok in gen.items() if not ok and ref.get(a, True)]


def compare_machine_code(ref: list[CubinResult], gen: list[CubinResult], res: CaptureResult) -> list[str]:
    """Fill `res.sass`/`res.sass_same` per architecture where both cubins compiled; return the failures.

    A side without machine code (disassembly failed or listed nothing) is a failure, never "same"."""
    errors = []
    for rc, gc in zip(ref, gen):
        if not (rc.ok and gc.ok):
            continue
        if rc.sass is None or gc.sass is None:
            why = "; ".join(f"{side}: {c.sass_error or 'not disassembled'}"
                            for side, c in (("reference", rc), ("port", gc)) if c.sass is None)
            res.sass[rc.arch] = {"error": why}
            res.sass_same[rc.arch] = False
            errors.append(f"SASS {rc.arch} not compared ({why})")
            continue
        res.sass[rc.arch] = compare_sass(rc.sass, gc.sass)
        res.sass_same[rc.arch] = res.sass[rc.arch]["same"]
    return errors


def verify_all(lib: KernelLibrary, items: list[tuple[Path, Capture]], out_dir: Path | None, jobs: int = 2,
               progress: Callable[[CaptureResult], None] | None = None,
               cache: DiskCache | None = None, archs=ARCHS) -> list[CaptureResult]:
    """Every capture on `archs`, `jobs` at a time (tileiras runs as a subprocess, so threads overlap well);
    cubins come from `cache` when it holds them (`tileport.cache`: the pipeline's captures share it)."""
    def one(item):
        r = verify_capture(lib, item[0], item[1], out_dir, archs, cache)
        if progress:
            progress(r)
        return r
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, items))


def sass_totals(results: list[CaptureResult]) -> dict:
    """Per architecture: captures whose machine code was compared, found the same, or not comparable."""
    out = {}
    for arch in ARCHS:
        stats = [r.sass[arch] for r in results if arch in r.sass]
        compared = [s for s in stats if "same" in s]
        out[arch] = {"compared": len(compared), "same": sum(s["same"] for s in compared),
                     "same_except_parameter_offsets": sum(s["same_except_parameter_offsets"] for s in compared),
                     "same_registers_and_count": sum(s["registers"][0] == s["registers"][1]
                                                     and s["instructions"][0] == s["instructions"][1]
                                                     for s in compared),
                     "not_compared": len(stats) - len(compared)}
    return out


def run_metadata(command: str) -> dict:
    """What produced a summary: command, commit, tool versions."""
    from tileport import toolchain
    from tileport.proc import run as run_tool
    git = run_tool(["git", "rev-parse", "HEAD"], 60, cwd=Path(__file__).parent)
    dirty = run_tool(["git", "status", "--porcelain", "--untracked-files=no"], 60, cwd=Path(__file__).parent)
    tools = {name: toolchain._version_of(path) if path else "missing" for name, path in (
        ("tileiras", toolchain.tileiras()), ("tileirdisasm", toolchain.tileirdisasm()),
        ("nvdisasm", toolchain.nvdisasm()), ("cuobjdump", toolchain.cuobjdump()))}
    tools["cuda-tile"] = toolchain.package_version("cuda-tile") or "missing"
    return {"command": command, "commit": git.stdout.strip(), "uncommitted_changes": bool(dirty.stdout.strip()),
            "tools": tools}


def write_summary(results: list[CaptureResult], out_dir: Path, command: str = "") -> Path:
    """summary.json (written atomically): run metadata, SASS totals, every capture."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "summary.json"
    summary = {**run_metadata(command or shlex.join(["tileport", *sys.argv[1:]])), "sass": sass_totals(results),
               "captures": [asdict(r) for r in results]}
    write_text_atomic(path, json.dumps(summary, indent=1) + "\n")
    return path
