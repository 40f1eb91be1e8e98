"""GPU evidence for stages D and E: recorded on a GPU machine, imported anywhere, graded, and checked
for staleness.

Stages D (correctness) and E (parity benchmark) need an NVIDIA GPU with PyTorch. On a machine
without one they read evidence recorded on a GPU machine (`tileport port --gpu-results DIR`):

- `python -m tileport.pipeline.evidence record --out DIR [OPS]`, run on the GPU machine, runs the
  correctness check (`tileport.gpu.check`) and the parity benchmark (`tileport.gpu.bench`) of the ops
  and writes `DIR/gpu-evidence.json` with its provenance: commit, whether the tree was dirty, and a
  fingerprint per op of everything the results depend on (the generated Rust module of the op's
  kernel file, support.rs, the crate's dependencies, the cuTile Python kernels, the op spec and the
  host-side Python of the operator library). `--bench-ops primary --bench-shapes N` benchmarks only the
  ops that grade the corpus kernels' stage E, on their first N benchmark shapes (`scripts/h200.sh
  evidence`); what ran is in `provenance.selection`, what a time limit cut short in `incomplete`.
- Files written by `tileport gpu-check` (a list of records, or {"environment", "records"}) and by
  `tileport bench` ({"environment", "records"} or several runs in {"runs", "records"}) are read too.

Evidence is *fresh* for a kernel when its op's fingerprint equals the fingerprint of what stage B
built now. Records that carry only a commit are compared file by file with that commit (git); records
without a commit cannot be attributed and are stale. Stale evidence is reported (with what changed)
but never graded ALL_PASS / DONE: the stage ends BLOCKED with class env.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

from tileport.atomic import write_text_atomic
from tileport.cache import sha256
from tileport.corpus import REPO
from tileport.gpu.bench import geomean
from tileport.gpu.provenance import EVIDENCE_KIND, current_commit, git


THRESHOLD = 1.05  # E: DONE when geomean t(cutile-rs) / t(faster reference) <= THRESHOLD
REFERENCE_BACKENDS = ("cutile", "torch", "triton")  # triton: the source of a Triton port (its only reference)
HOST_FILES = ("src/tileport/ops/api.py", "src/tileport/ops/backends.py", "src/tileport/runtime/abi.py",
              "src/tileport/runtime/tensors.py")


# ------------------------------------------------------------------------------------ fingerprints

@lru_cache(maxsize=1)
def spec_modules() -> dict[str, str]:
    """op name -> the spec module (file stem) that defines it."""
    import importlib

    from tileport.ops.specs import SPEC_MODULES
    return {importlib.import_module(f"tileport.ops.specs.{m}").SPEC.name: m for m in SPEC_MODULES}


def _spec_files(module: str) -> list[str]:
    """The spec module and the sibling spec modules it imports (plans shared between specs)."""
    base = REPO / "src" / "tileport" / "ops" / "specs"
    seen, todo = [], [module, "_common"]
    while todo:
        m = todo.pop()
        if m in seen or not (base / f"{m}.py").is_file():
            continue
        seen.append(m)
        tree = ast.parse((base / f"{m}.py").read_text())
        todo += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module]
    return sorted(f"src/tileport/ops/specs/{m}.py" for m in seen)


def op_components(op: str) -> list[str]:
    """Repository-relative paths whose content GPU results of `op` depend on."""
    from tileport.ops.specs import get_spec
    spec = get_spec(op)
    stem = Path(spec.kernel_file).stem
    return sorted({f"rust/src/{stem}.rs", "rust/src/support.rs", "rust/Cargo.toml",
                   f"src/tileport/ops/kernels/{spec.kernel_file}", *_spec_files(spec_modules()[op]), *HOST_FILES})


Reader = Callable[[str], "str | None"]


def worktree_reader(crate_dir: Path | None = None) -> Reader:
    """Files of the working tree, with `rust/...` read from `crate_dir` (the crate stage B built)."""
    crate = Path(crate_dir) if crate_dir else REPO / "rust"

    def read(rel: str) -> str | None:
        p = crate / rel.removeprefix("rust/") if rel.startswith("rust/") else REPO / rel
        try:
            return p.read_text()
        except OSError:
            return None
    return read


@lru_cache(maxsize=64)
def commit_exists(commit: str) -> bool:
    proc = git("cat-file", "-e", f"{commit}^{{commit}}")
    return bool(proc and proc.returncode == 0)


@lru_cache(maxsize=4096)
def _git_show(commit: str, rel: str) -> str | None:
    proc = git("show", f"{commit}:{rel}")
    return proc.stdout if proc and proc.returncode == 0 else None


def commit_reader(commit: str) -> Reader:
    return lambda rel: _git_show(commit, rel)


def _component_hash(rel: str, text: str | None) -> str | None:
    if text is None:
        return None
    if rel.endswith("Cargo.toml"):
        from tileport.runtime.library import cargo_dependencies
        text = cargo_dependencies(text)
    return sha256(text)[:16]


def components(op: str, read: Reader) -> dict[str, str | None]:
    return {rel: _component_hash(rel, read(rel)) for rel in op_components(op)}


def fingerprint(op: str, read: Reader) -> tuple[str, dict[str, str | None]]:
    comps = components(op, read)
    return sha256(op, comps)[:24], comps


def fingerprints(ops: Iterable[str], read: Reader) -> tuple[dict[str, str], dict[str, dict[str, str | None]]]:
    """({op: fingerprint}, {op: components}) of `ops` for the files `read` returns."""
    fps, comps = {}, {}
    for op in ops:
        fps[op], comps[op] = fingerprint(op, read)
    return fps, comps


# ------------------------------------------------------------------------------------ the store

@dataclass
class Provenance:
    source: str
    commit: str | None = None
    fingerprints: dict[str, str] | None = None
    components: dict[str, dict] | None = None
    date: str = ""
    synthetic: bool = False
    note: str = ""
    gpu: str = ""
    dirty: bool | None = None

    def describe(self) -> dict:
        return {"source": self.source, "commit": self.commit, "date": self.date, "gpu": self.gpu,
                "synthetic": self.synthetic, "note": self.note, "dirty": self.dirty,
                "has_fingerprints": self.fingerprints is not None}


@dataclass
class Assessment:
    """The evidence for one op and kind (check / bench), and whether it describes the current build."""

    status: str  # fresh | stale | none
    records: list[dict] = field(default_factory=list)
    provenance: Provenance | None = None
    reason: str = ""
    changed: list[str] = field(default_factory=list)

    def describe(self) -> dict:
        return {"status": self.status, "reason": self.reason, "changed": self.changed,
                "provenance": self.provenance.describe() if self.provenance else None,
                "records": len(self.records)}


def evidence_lines(evidence: dict) -> list[str]:
    """Markdown lines of a stage's `evidence` ({op: Assessment.describe()}, other keys skipped)."""
    return [f"- `{op}`: {e['status']}: {e['reason']}" for op, e in evidence.items()
            if isinstance(e, dict) and "status" in e]


def _is_check(r: Any) -> bool:
    return isinstance(r, dict) and "op" in r and "backend" in r and "ok" in r


def _is_bench(r: Any) -> bool:
    return isinstance(r, dict) and "op" in r and "times_us" in r


class EvidenceStore:
    """Every GPU record found in the --gpu-results files, grouped by provenance."""

    def __init__(self) -> None:
        self.groups: list[tuple[Provenance, list[dict], list[dict]]] = []  # (provenance, check, bench)
        self.files: list[str] = []
        self.errors: list[str] = []
        self.content_hash = sha256("no evidence")

    @classmethod
    def load(cls, paths: Iterable[Path]) -> "EvidenceStore":
        store = cls()
        files: list[Path] = []
        for p in paths or []:
            p = Path(p)
            if p.is_dir():
                files += sorted(f for f in p.rglob("*.json") if f.is_file() and not f.name.endswith(".raw.json"))
            elif p.is_file():
                files.append(p)
            else:
                store.errors.append(f"{p}: no such file or directory")
        blobs = []
        for f in files:
            try:
                raw = f.read_bytes()
                data = json.loads(raw)
            except (OSError, json.JSONDecodeError) as e:
                store.errors.append(f"{f}: not JSON ({e})")
                continue
            n = store.add(data, str(f), f)
            if n:
                store.files.append(str(f))
                blobs.append((str(f), raw))
        store.content_hash = sha256("evidence", blobs, store.errors)
        return store

    def add(self, data: Any, source: str, path: Path | None = None) -> int:
        """Add the records of one parsed file; returns how many records it contributed."""
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime)) if path else ""
        if isinstance(data, list):
            recs = [r for r in data if _is_check(r) or _is_bench(r)]
            by_commit: dict[str | None, list[dict]] = {}
            for r in recs:
                by_commit.setdefault(r.get("commit"), []).append(r)
            for commit, rs in by_commit.items():
                self._group(Provenance(source, commit, date=date), rs)
            return len(recs)
        if not isinstance(data, dict):
            return 0
        if data.get("kind") == EVIDENCE_KIND:
            pv = data.get("provenance", {})
            prov = Provenance(source, pv.get("commit"), pv.get("fingerprints"), pv.get("components"),
                              pv.get("date", date), bool(pv.get("synthetic")), pv.get("note", ""),
                              pv.get("gpu", ""), pv.get("dirty"))
            check = [r for r in data.get("check", []) if _is_check(r)]
            bench = [r for r in (data.get("bench") or {}).get("records", []) if _is_bench(r)]
            self.groups.append((prov, check, bench))
            return len(check) + len(bench)
        records = [r for r in data.get("records", []) if _is_check(r) or _is_bench(r)]
        env = data.get("environment") or {}
        runs = data.get("runs") or {}
        by_run: dict[str | None, list[dict]] = {}
        for r in records:
            by_run.setdefault(r.get("run") if r.get("run") in runs else None, []).append(r)
        for run, rs in by_run.items():
            e = (runs[run].get("environment") or {}) if run else env
            prov = Provenance(source + (f"#{run}" if run else ""), e.get("commit") or None,
                              date=e.get("date", date), note=data.get("note", "") if isinstance(data.get("note"), str) else "",
                              gpu=e.get("gpu", ""))
            self._group(prov, rs)
        return len(records)

    def _group(self, prov: Provenance, records: list[dict]) -> None:
        self.groups.append((prov, [r for r in records if _is_check(r)], [r for r in records if _is_bench(r)]))

    def __bool__(self) -> bool:
        return bool(self.groups)

    def assess(self, op: str, kind: str, current: tuple[str, dict] | None) -> Assessment:
        """The best evidence of `kind` for `op` against the current build's fingerprint."""
        candidates = []
        for prov, check, bench in self.groups:
            recs = [r for r in (check if kind == "check" else bench) if r.get("op") == op]
            if recs:
                candidates.append(self._judge(op, prov, recs, current))
        if not candidates:
            return Assessment("none", reason=f"no recorded GPU {kind} results for op `{op}`")
        fresh = [a for a in candidates if a.status == "fresh"]
        pool = fresh or candidates
        return max(pool, key=lambda a: (a.provenance.date if a.provenance else "", len(a.records)))

    def _judge(self, op: str, prov: Provenance, recs: list[dict], current: tuple[str, dict] | None) -> Assessment:
        where = f"{prov.source}" + (f" (commit {prov.commit[:10]})" if prov.commit else "")
        if current is None:
            return Assessment("stale", recs, prov, f"{where}: the current build has no fingerprint to compare")
        fp_now, comps_now = current
        if fp_now is None or not comps_now:
            return Assessment("stale", recs, prov, f"{where}: the current build of `{op}` has no fingerprint")
        if prov.fingerprints is not None:
            fp = prov.fingerprints.get(op)
            if fp == fp_now:
                return Assessment("fresh", recs, prov, f"{where}: recorded for this exact build (fingerprint {fp})")
            recorded = (prov.components or {}).get(op) or {}
            changed = sorted(k for k in comps_now if recorded.get(k) != comps_now[k]) if recorded else []
            return Assessment("stale", recs, prov, f"{where}: recorded for another build of `{op}` "
                              f"(fingerprint {fp} vs {fp_now} now)", changed)
        if not prov.commit:
            return Assessment("stale", recs, prov, f"{where}: the records carry no commit, so they cannot be "
                              "attributed to a build (re-record them with `python -m tileport.pipeline.evidence record`)")
        if not commit_exists(prov.commit):
            return Assessment("stale", recs, prov, f"{where}: commit {prov.commit} is not in this repository")
        then = components(op, commit_reader(prov.commit))
        changed = sorted(k for k in comps_now if then.get(k) != comps_now[k])
        if changed:
            return Assessment("stale", recs, prov, f"{where}: changed since that commit: {', '.join(changed)}", changed)
        return Assessment("fresh", recs, prov, f"{where}: nothing it depends on changed since that commit")


# ------------------------------------------------------------------------------------ grading

HOST_ERRORS = re.compile(r"^(FFIError|NullTensorError|DTypeError|RankError|ShapeError|DeviceError|WrongDeviceError|"
                         r"InvalidArgumentError|LayoutError|BackendUnavailable|PlanError|TypeError|ValueError|"
                         r"KeyError|AttributeError|checker process failed)")
KERNEL_ERRORS = re.compile(r"max \|error\||NaN where|outputs, reference has|partition grid|InternalError|"
                           r"KernelLaunchError|illegal|misaligned|CUDA error")


def classify_failure(record: dict) -> str:
    """host or kernel, like TileGym's agent D: the launcher/binding/plan vs the device program."""
    err = str(record.get("error") or "")
    if KERNEL_ERRORS.search(err):
        return "kernel"
    if HOST_ERRORS.search(err):
        return "host"
    return "kernel"


def grade_correctness(records: list[dict]) -> dict:
    """D's grade of check records: {verdict, fail_class, passed, failed, cases, failures, reason}."""
    rs = [r for r in records if r.get("backend") == "cutile-rs"]
    ref = {(r.get("dtype"), tuple(r.get("shape") or ())): r for r in records if r.get("backend") == "cutile"}
    if not rs:
        return {"verdict": "BLOCKED", "fail_class": "env", "passed": 0, "failed": 0, "cases": 0, "failures": [],
                "reason": "the records have no cutile-rs cases"}
    failed = [r for r in rs if not r.get("ok")]
    failures = []
    for r in failed:
        twin = ref.get((r.get("dtype"), tuple(r.get("shape") or ())))
        failures.append({"op": r.get("op"), "dtype": r.get("dtype"), "shape": r.get("shape"),
                         "error": str(r.get("error") or "")[:500], "class": classify_failure(r),
                         "reference_ok": None if twin is None else bool(twin.get("ok"))})
    out = {"passed": len(rs) - len(failed), "failed": len(failed), "cases": len(rs), "failures": failures,
           "reference_cases": len(ref), "reference_failed": sum(1 for r in ref.values() if not r.get("ok"))}
    if not failed:
        return {**out, "verdict": "ALL_PASS", "fail_class": None,
                "reason": f"{len(rs)}/{len(rs)} cutile-rs cases within tolerance"}
    cls = "kernel" if any(f["class"] == "kernel" for f in failures) else "host"
    first = failures[0]
    return {**out, "verdict": "FAIL", "fail_class": cls,
            "reason": f"{len(failed)}/{len(rs)} cutile-rs cases failed ({cls}); first: {first['op']} "
                      f"{first['dtype']} {first['shape']}: {first['error'][:200]}"}


def grade_performance(records: list[dict], threshold: float = THRESHOLD) -> dict:
    """E's grade of bench records: geomean t(cutile-rs) / t(faster reference) over the op's cases.

    The faster reference is the reference backend (cuTile Python or PyTorch) with the lower geomean
    time over the cases where every backend was timed; the ratio against cuTile Python (the port's
    source, the parity bar of the mission) is reported next to it."""
    timed = [r for r in records if "cutile-rs" in (r.get("times_us") or {})]
    errors = [r for r in records if "cutile-rs" in (r.get("errors") or {})]
    if not timed:
        why = f"; cutile-rs errors: {errors[0]['errors']['cutile-rs'][:200]}" if errors else ""
        return {"verdict": "BLOCKED", "fail_class": "kernel" if errors else "env",
                "reason": "no benchmark case timed cutile-rs" + why, "cases": []}
    refs = [b for b in REFERENCE_BACKENDS if all(b in r["times_us"] for r in timed)]
    if not refs:
        return {"verdict": "BLOCKED", "fail_class": "env", "reason": "no reference backend timed on every case",
                "cases": []}
    ref_geo = {b: geomean(r["times_us"][b] for r in timed) for b in refs}
    faster = min(refs, key=lambda b: ref_geo[b])
    cases = []
    for r in timed:
        t = r["times_us"]
        cases.append({"op": r.get("op"), "dtype": r.get("dtype"), "shape": r.get("shape"), "times_us": t,
                      "ratio": t["cutile-rs"] / t[faster],
                      "ratio_vs_cutile": t["cutile-rs"] / t["cutile"] if "cutile" in t else None})
    ratio = geomean(c["ratio"] for c in cases)
    vs_cutile = geomean(c["ratio_vs_cutile"] for c in cases if c["ratio_vs_cutile"])
    verdict = "DONE" if ratio is not None and ratio <= threshold and not errors else "INVESTIGATE"
    reason = (f"geomean t(cutile-rs)/t({faster}) = {ratio:.4f} over {len(cases)} cases "
              f"({'<=' if ratio <= threshold else '>'} {threshold})")
    if errors:
        reason += f"; {len(errors)} case(s) failed to run cutile-rs"
    return {"verdict": verdict, "fail_class": None, "geomean_ratio": round(ratio, 6), "reference_backend": faster,
            "reference_geomean_us": {b: round(v, 3) for b, v in ref_geo.items()},
            "geomean_ratio_vs_cutile": round(vs_cutile, 6) if vs_cutile else None,
            "worst_case_ratio": round(max(c["ratio"] for c in cases), 6), "threshold": threshold,
            "cases": cases, "errors": len(errors), "reason": reason}


# ------------------------------------------------------------------------------------ recording

def _device_defaults() -> None:
    """On a GPU machine set up by `.device/enter.sh`: the bundled library and the bundle's commit."""
    extra = os.environ.get("TILEPORT_DEVICE_EXTRA")
    if extra and not os.environ.get("TILEPORT_LIB"):
        so = Path(extra) / "libtileport_kernels.so"
        if so.is_file():
            os.environ["TILEPORT_LIB"] = str(so)
    if not os.environ.get("TILEPORT_COMMIT"):
        f = REPO / ".device" / "COMMIT"
        if f.is_file():
            os.environ["TILEPORT_COMMIT"] = f.read_text().strip()


BENCH_COLUMNS = ("cutile", "cutile-rs", "torch")  # what E grades: the port, its source and PyTorch


def corpus_primary_ops() -> list[str]:
    """The ops whose benchmark grades stage E of a corpus kernel (each kernel's primary op), in op order."""
    from tileport.ops import op_names
    from tileport.ops.spec import KERNELS_DIR

    from .targets import corpus_targets
    primary = {t.primary_op for t in corpus_targets(KERNELS_DIR)}
    return [op for op in op_names() if op in primary]


def _check_records(ops: list[str], jobs: int) -> tuple[list[dict], list[str]]:
    """(records, ops without results) of `tileport.gpu.check` for `ops`, one process per op. When the
    run is interrupted (SIGTERM from a time limit, Ctrl-C) the ops that finished keep their records and
    the others are listed as missing: an unfinished op is no evidence, neither a pass nor a failure."""
    import tempfile

    from tileport.gpu.check import run_parallel
    with tempfile.TemporaryDirectory(prefix="tileport-check-") as tmp:  # per-op files stay out of out_dir
        try:
            return run_parallel(ops, jobs, Path(tmp)), []
        except KeyboardInterrupt:
            records, missing = [], []
            for op in ops:
                try:
                    records += json.loads((Path(tmp) / f"check-{op}.json").read_text())
                except (OSError, json.JSONDecodeError):
                    missing.append(op)
            return records, missing


def bench_shapes_of(spec, max_shapes: int | None) -> list[tuple]:
    """The benchmark shapes recorded for `spec`: the first `max_shapes` (None: all), but all of them
    for an op that launches several kernels (the shape decides which kernel runs, and each kernel's E
    must be graded on cases that launch it: softmax_tma's wide kernel runs on its last shape only)."""
    shapes = [tuple(s) for s in spec.bench_shapes]
    return shapes if max_shapes is None or len(spec.kernels) > 1 else shapes[:max_shapes]


def _bench_records(ops: list[str], raw: Path, budget_s: float, max_shapes: int | None,
                   columns: Iterable[str]) -> tuple[dict, list[str]]:
    """The parity benchmark (`tileport.gpu.bench.bench_case`, every dtype, `bench_shapes_of` each op) as {"environment", "ceilings", "records"}, and the ops without
    results. Written to `raw` after every case. An interrupted run drops the op it was in (a partial
    op would be graded on the cases that happened to finish) and lists it, with the ops not reached."""
    import torch

    from tileport.gpu import bench
    from tileport.ops.specs import get_spec
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        flush = bench.make_flush("cuda")
        result: dict[str, Any] = {"environment": bench.environment(), "ceilings": bench.ceilings(flush),
                                  "columns": list(columns), "records": []}
        done: list[str] = []
        try:
            for op in ops:
                spec = get_spec(op)
                shapes = bench_shapes_of(spec, max_shapes)
                recs = []
                for dtype in spec.dtypes:
                    for shape in shapes:
                        recs.append(bench.bench_case(spec, dtype, tuple(shape), flush, list(columns),
                                                     result["ceilings"], budget_s))
                        write_text_atomic(raw, json.dumps({**result, "records": result["records"] + recs}, indent=1))
                result["records"] += recs
                done.append(op)
        except KeyboardInterrupt:
            pass
        return result, [op for op in ops if op not in done]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


def record(ops: list[str], out_dir: Path, jobs: int = 4, budget_s: float = 0.25, bench: bool = True,
           check: bool = True, bench_ops: list[str] | None = None, bench_shapes: int | None = None,
           columns: Iterable[str] = BENCH_COLUMNS) -> Path:
    """Run the GPU correctness check (every shape of each op spec) and/or the parity benchmark of `ops`
    (`bench_ops` if given; the first `bench_shapes` benchmark shapes of each, default all) here and
    write `gpu-evidence.json` (`gpu-evidence-check.json` / `-bench.json` when only one part runs) into
    `out_dir`, plus the benchmark's raw output `bench.raw.json` (written as it goes, for inspection
    when a time limit cuts the run short; *.raw.json files are not read as evidence). What was run is
    in `provenance.selection`. Interrupted (KeyboardInterrupt, SIGTERM under `main`), it writes what
    finished, with the ops it could not finish in `provenance.incomplete` (they get no evidence from
    this file), and raises KeyboardInterrupt again."""
    import hashlib

    _device_defaults()
    out_dir.mkdir(parents=True, exist_ok=True)
    commit, dirty = current_commit()
    bench_ops = list(ops if bench_ops is None else bench_ops)
    fps, comps = fingerprints(sorted(set(ops) | set(bench_ops)), worktree_reader())
    lib = os.environ.get("TILEPORT_LIB")
    selection: dict[str, Any] = {}
    if check:
        selection["check"] = {"ops": list(ops), "shapes": "every shape of each op spec", "jobs": jobs}
    if bench:
        selection["bench"] = {"ops": bench_ops, "shapes": f"the first {bench_shapes} benchmark shape(s) of each "
                              "op launching one kernel, every one of the others" if bench_shapes else
                              "every benchmark shape of each op", "budget_s": budget_s,
                              "columns": list(columns)}
    doc: dict[str, Any] = {
        "kind": EVIDENCE_KIND,
        "provenance": {"commit": commit, "dirty": dirty, "fingerprints": fps, "components": comps,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "library": lib, "library_sha256": hashlib.sha256(Path(lib).read_bytes()).hexdigest()
                       if lib and Path(lib).is_file() else None,
                       "command": " ".join(sys.argv), "synthetic": False, "selection": selection},
        "check": [], "bench": None}
    path = evidence_path(out_dir, check, bench)
    incomplete: dict[str, list[str]] = {}
    if check:
        doc["check"], missing = _check_records(list(ops), jobs)
        if missing:
            incomplete["check"] = missing
        doc["provenance"]["incomplete"] = incomplete
        write_text_atomic(path, json.dumps(doc, indent=1))
    if bench and "check" not in incomplete:
        doc["bench"], missing = _bench_records(bench_ops, out_dir / "bench.raw.json", budget_s, bench_shapes, columns)
        doc["provenance"]["gpu"] = doc["bench"]["environment"].get("gpu", "")
        if missing:
            incomplete["bench"] = missing
    elif bench:
        incomplete["bench"] = bench_ops
    doc["provenance"]["incomplete"] = incomplete
    write_text_atomic(path, json.dumps(doc, indent=1))
    if incomplete:
        raise KeyboardInterrupt
    return path


def evidence_path(out_dir: Path, check: bool, bench: bool) -> Path:
    return out_dir / f"gpu-evidence{'' if (check and bench) else '-check' if check else '-bench'}.json"


def _interrupt(signum, frame) -> None:
    """SIGTERM (a time limit) ends a recording like Ctrl-C: what finished is written."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    import argparse

    from tileport.ops import op_names
    ap = argparse.ArgumentParser(prog="python -m tileport.pipeline.evidence",
                                 description="Record GPU evidence (correctness + parity) for `tileport port --gpu-results`.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run tileport.gpu.check and tileport.gpu.bench here (needs a GPU)")
    rec.add_argument("ops", nargs="*")
    rec.add_argument("--out", required=True, type=Path)
    rec.add_argument("-j", type=int, default=4)
    rec.add_argument("--budget", type=float, default=0.25)
    rec.add_argument("--no-bench", action="store_true")
    rec.add_argument("--no-check", action="store_true")
    rec.add_argument("--bench-ops", default="", help="comma-separated ops to benchmark (default: the ops "
                     "recorded), or `primary`: the op grading each corpus kernel's stage E")
    rec.add_argument("--bench-shapes", type=int, default=0, help="benchmark only the first N benchmark shapes of "
                     "each op (default: all)")
    fp = sub.add_parser("fingerprint", help="print the fingerprint of each op for the working tree")
    fp.add_argument("ops", nargs="*")
    args = ap.parse_args(argv)
    if args.cmd == "fingerprint":
        for op in args.ops or op_names():
            print(op, fingerprint(op, worktree_reader())[0])
        return 0
    import signal
    signal.signal(signal.SIGTERM, _interrupt)
    bench_ops = (corpus_primary_ops() if args.bench_ops == "primary" else
                 [o for o in args.bench_ops.split(",") if o] or None)
    try:
        path = record(args.ops or op_names(), args.out, args.j, args.budget, not args.no_bench, not args.no_check,
                      bench_ops, args.bench_shapes or None)
    except KeyboardInterrupt:
        path = evidence_path(args.out, not args.no_check, not args.no_bench)
        incomplete = json.loads(path.read_text())["provenance"]["incomplete"] if path.is_file() else "everything"
        print(f"interrupted: wrote {path}; no results for: {incomplete}")
        return 3
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
