"""The idiomatic corpus port against the faithful one, on the CPU: for every capture, the idiomatic port's Tile IR
against cuTile Python's (the structural diff of `tileport verify`) and its machine code against the faithful
port's (tileiras, then `tileport.sass.compare`: the same instruction stream). Writes
bench/results/idiomatic-vs-faithful.json.

    PYTHONPATH=src python3 eval/idiomatic_proof.py [--kernel K ...] [--arch sm_90 ...] [-j 2]

The idiomatic port is the committed crate (`rust/`); the faithful one is `tileport translate --corpus --faithful`,
written under --work (crate `tileport_faithful`) and built there. Each capture's result is appended to
--work/progress.jsonl as it comes: a run that stops resumes from there (--fresh starts over). Give it a
CARGO_TARGET_DIR no other checkout builds a `tileport_kernels` crate into: cargo puts every build of that crate
name at the same library path, and another checkout's build there would be the one compared.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "idiomatic-vs-faithful.json"
FAITHFUL_CRATE = "tileport_faithful"


@dataclass
class Comparison:
    kernel: str
    capture: str
    ir_verdict: str = "ERROR"  # the idiomatic port against cuTile Python (tileport.tileir.diff)
    critical: int = 0
    warn: int = 0
    findings: list[str] = field(default_factory=list)
    sass_equal_to_faithful: dict[str, bool] = field(default_factory=dict)  # arch -> same instruction stream
    first_difference: dict[str, dict] = field(default_factory=dict)
    error: str = ""

    @property
    def clean(self) -> bool:
        return (not self.error and self.ir_verdict in ("PASS", "PASS_WITH_NOTES") and not self.critical
                and not self.warn)


def write_faithful_crate(work: Path, files: list[str] | None = None) -> Path:
    """The faithful rendering of the corpus (or of `files`, corpus kernel files) as a crate under `work`, with
    the committed crate's Cargo.lock (the same dependency builds)."""
    from tileport import corpus
    from tileport.ops.specs import all_specs
    from tileport.translate import translate
    specs = all_specs()
    paths = [p for p in corpus.corpus_files(specs) if files is None or Path(p).name in files]
    crate = work / "faithful"
    report = translate(paths, crate, corpus.kernel_configs(specs), crate=FAITHFUL_CRATE,
                       record_path=corpus.repo_relative, force=True, faithful=True)
    if not report.ok:
        raise RuntimeError(f"the faithful translation failed: {[str(r.diagnostic) for r in report.results]}")
    lock = (REPO / "rust" / "Cargo.lock").read_text().replace('name = "tileport_kernels"',
                                                               f'name = "{FAITHFUL_CRATE}"')
    (crate / "Cargo.lock").write_text(lock)
    return crate


def compare(faithful, idiomatic, path: Path, capture, archs, cache=None) -> Comparison:
    """One capture: the idiomatic library's Tile IR against the reference, its cubins against the faithful's."""
    from tileport.capture import CaptureError, compile_cubin, diff_port, frontend_reference, generated_bytecode
    from tileport.frontends.registry import frontend_for
    from tileport.runtime.abi import TileportError
    from tileport.sass import compare as compare_sass
    out = Comparison(capture.kernel, capture.label)
    try:
        reference = frontend_reference(frontend_for(str(path)), str(path), capture)
        _, port = generated_bytecode(idiomatic, capture)
        report = diff_port(idiomatic, capture, reference, port)
        counts = report.counts()
        out.ir_verdict, out.critical, out.warn = report.verdict, counts["CRITICAL"], counts["WARN"]
        out.findings = [f"{f.severity} {f.category}: {f.message}" for f in report.sorted_findings()
                        if f.severity in ("CRITICAL", "WARN")]
        _, baseline = generated_bytecode(faithful, capture)
        for arch in archs:
            a, b = compile_cubin(baseline, arch, cache=cache), compile_cubin(port, arch, cache=cache)
            if not (a.ok and b.ok and a.sass and b.sass):
                why = a.error or a.sass_error or b.error or b.sass_error
                out.error += f"{arch}: no machine code to compare ({why}) "
                continue
            cmp = compare_sass(a.sass, b.sass)
            out.sass_equal_to_faithful[arch] = cmp["same"]
            if not cmp["same"]:
                out.first_difference[arch] = cmp.get("first_difference") or {}
    except (CaptureError, TileportError) as e:
        out.error = str(e)[:1000]
    return out


def summary(results: list[Comparison], archs) -> dict:
    return {"captures": len(results), "ir_clean": sum(r.clean for r in results),
            "sass_equal_to_faithful": {a: sum(r.sass_equal_to_faithful.get(a) is True for r in results)
                                       for a in archs},
            "errors": sum(bool(r.error) for r in results)}


def main(argv: list[str] | None = None) -> int:
    from tileport.cache import DiskCache, default_root
    from tileport.corpus import captures_by_kernel
    from tileport.ops.specs import all_specs
    from tileport.runtime.library import KernelLibrary, build, load
    from tileport.capture.verify import run_metadata
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", action="append", help="only these corpus kernels")
    ap.add_argument("--arch", action="append", help="architectures whose machine code is compared (default sm_90)")
    ap.add_argument("-j", type=int, default=2, help="captures in parallel")
    ap.add_argument("--profile", default="dev", help="cargo profile of both libraries")
    ap.add_argument("--work", type=Path, default=REPO / "out" / "idiomatic-proof", help="the faithful crate's folder")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--fresh", action="store_true", help="forget the results of a previous run")
    args = ap.parse_args(argv)
    archs = tuple(args.arch or ["sm_90"])
    by_kernel = captures_by_kernel(all_specs())
    items = [(path, c) for k, (path, caps) in by_kernel.items() if not args.kernel or k in args.kernel for c in caps]
    t0 = time.perf_counter()
    faithful_crate = write_faithful_crate(args.work)
    faithful = KernelLibrary(build(faithful_crate, args.profile), faithful_crate / "kernels.json")
    idiomatic = load(REPO / "rust", profile=args.profile)
    cache = DiskCache(default_root())
    progress = args.work / "progress.jsonl"
    if args.fresh:
        progress.unlink(missing_ok=True)
    done = {}
    for line in progress.read_text().splitlines() if progress.is_file() else []:
        r = Comparison(**json.loads(line))
        done[r.capture] = r
    lock = threading.Lock()

    def one(item) -> Comparison:
        if item[1].label in done:
            return done[item[1].label]
        r = compare(faithful, idiomatic, *item, archs, cache)
        with lock, progress.open("a") as f:
            f.write(json.dumps(asdict(r)) + "\n")
        return r
    with ThreadPoolExecutor(max(1, args.j)) as pool:
        results = list(pool.map(one, items))
    for r in results:
        if not r.clean or not all(r.sass_equal_to_faithful.get(a) for a in archs):
            print(f"{r.capture}: IR {r.ir_verdict} ({r.critical} critical, {r.warn} warn), SASS equal "
                  f"{r.sass_equal_to_faithful} {r.error}", file=sys.stderr)
    doc = {**run_metadata(" ".join(["python3", "eval/idiomatic_proof.py", *(argv or sys.argv[1:])])),
           "archs": list(archs), "seconds": round(time.perf_counter() - t0, 1),
           "summary": summary(results, archs), "captures": [asdict(r) for r in results]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["summary"]), f"-> {args.out}")
    return 0 if doc["summary"]["ir_clean"] == len(results) and all(
        n == len(results) for n in doc["summary"]["sass_equal_to_faithful"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
