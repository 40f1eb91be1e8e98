"""Package mode on the training libraries: how many of their kernels translate, package by package.

    python3 eval/packages.py [--work DIR] [--archives DIR] [-j N] [--only NAME ...]
        [--out bench/results/packages]

Each library is taken from its pinned PyPI requirement the way `tileport translate <spec>` takes it (pip
downloads the wheel, never installs it; an sdist-only release comes from the index's listing), or from an
archive of that name and version already in `--archives`. Its kernels are translated twice, with no
configuration and no edits: each file on its own, as a single-file run in place reads it (relative
imports only), and in package mode (every module of the package readable). Nothing of the libraries runs,
and none of their code is copied here: only the table is written (OUT.md and OUT.json), with the failure
causes of package mode (the construct of each kernel's diagnostic).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tileport.frontends.imports import FILES
from tileport.packages.fetch import REQUIREMENT, normalize, open_package
from tileport.packages.index import build_index
from tileport.packages.library import build_crate, library_of, lower_package
from tileport.packages.report import causes, totals

# (requirement, the folder of the package to index: None for all of it)
LIBRARIES = (
    ("liger-kernel==0.8.5", None),
    ("fla-core==0.6.0", None),
    ("sglang==0.5.23", "sglang/srt/layers"),
    ("gemlite==0.6.0.post2", None),
    ("bastile==0.1.3", None),
    ("cutile-gpt==0.2.1", None),
    ("cutile-stencil==0.3.0", None),
)
TOP_CAUSES = 6


def cpu_seconds() -> float:
    """This process's and its finished children's CPU time (worker processes included)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def archive_for(spec: str, archives: Path | None) -> str:
    """A wheel or sdist of the requirement's name and pinned version in `archives`, else the requirement."""
    m = REQUIREMENT.match(spec)
    if archives is None or not m or not m.group("spec").startswith("=="):
        return spec
    stem = normalize(f"{m.group('name')}-{m.group('spec')[2:].strip()}") + "-"
    found = sorted(p for p in archives.iterdir() if p.is_file() and normalize(p.name).startswith(stem))
    return str(found[0]) if found else spec


def measure(spec: str, subtree: str | None, work: Path, archives: Path | None, jobs: int) -> dict:
    source = open_package(archive_for(spec, archives), work / normalize(spec.split("=")[0]))
    root = source.root / subtree if subtree else source.root
    index = build_index(root)
    row = {"spec": spec, "input": source.kind, "archive": source.archive.name if source.archive else None,
           "tree": subtree or ".", "modules": len(index.modules)}
    for mode, resolver in (("one_file", FILES), ("package", None)):
        t0, c0 = time.perf_counter(), cpu_seconds()
        outcomes = lower_package(index, jobs, None, resolver)
        build_crate(index, outcomes, None, "tileport_kernels", False)  # the emitter's refusals count too
        lib = library_of(spec, source.kind, index, outcomes, 0.0, None, {})
        row[mode] = {**totals(lib.rows), "seconds": round(time.perf_counter() - t0, 1),
                     "cpu_seconds": round(cpu_seconds() - c0, 1)}
        if mode == "package":
            row["skipped"] = lib.skipped
            row["problems"] = len(lib.problems)
            row["causes"] = causes(lib.rows, TOP_CAUSES)
            row["per_construct"] = dict(Counter(r.diagnostic["construct"] for r in lib.rows if r.diagnostic))
    print(f"{spec}: {row['package']['translated']}/{row['package']['found']} in package mode, "
          f"{row['one_file']['translated']}/{row['one_file']['found']} one file at a time; "
          f"{len(row['skipped'])} vendor files skipped; {row['package']['seconds']} s", file=sys.stderr, flush=True)
    return row


def _rate(t: dict) -> str:
    return f"{100 * t['rate']:.1f} %" if t["rate"] is not None else "-"


def markdown(doc: dict) -> str:
    lines = [f"# Package mode on the training libraries ({doc['date'][:10]})", "",
             f"`python3 eval/packages.py` at `{doc['commit']}`, {doc['jobs']} worker processes on "
             f"{doc['cpus']} CPUs; no configuration, no edits. *one file* translates each kernel file on its own "
             "(relative imports only, as a single-file run in place); *package* reads every module of the "
             "package (`tileport translate <spec>`). Kernels of other vendors' back ends are skipped and counted "
             "apart. Causes: the construct of package mode's diagnostics (kernels).", "",
             "| library | tree | kernels found | translated (package) | rate | one file | rate | vendor files "
             "skipped | top failure causes | s (CPU s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["libraries"]:
        if "error" in r:
            lines.append(f"| `{r['spec']}` | | | | | | | | {r['error']} | |")
            continue
        p, o = r["package"], r["one_file"]
        top = ", ".join(f"{c['construct']} {c['kernels']}" for c in r["causes"]) or "-"
        lines.append(f"| `{r['spec']}` | `{r['tree']}` | {p['found']} | {p['translated']} | {_rate(p)} | "
                     f"{o['translated']} | {_rate(o)} | {len(r['skipped'])} | {top} | "
                     f"{p['seconds']} ({p['cpu_seconds']}) |")
    found = sum(r["package"]["found"] for r in doc["libraries"] if "package" in r)
    ok = sum(r["package"]["translated"] for r in doc["libraries"] if "package" in r)
    one = sum(r["one_file"]["translated"] for r in doc["libraries"] if "one_file" in r)
    lines += ["", f"All libraries: {ok}/{found} kernels translate in package mode ({100 * ok / max(1, found):.1f} %), "
              f"{one}/{found} one file at a time ({100 * one / max(1, found):.1f} %).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/tileport-packages"),
                    help="downloads and unpacked archives (one folder per library)")
    ap.add_argument("--archives", type=Path, help="take wheels/sdists of the pinned versions from this folder")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="distribution names (liger-kernel, ...)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/packages"), help="OUT.md and OUT.json")
    args = ap.parse_args(argv)
    rows = []
    for spec, subtree in LIBRARIES:
        if args.only and normalize(spec.split("=")[0]) not in {normalize(n) for n in args.only}:
            continue
        try:
            rows.append(measure(spec, subtree, args.work, args.archives, args.jobs))
        except (OSError, ValueError) as e:  # a download or an archive that fails: its row says why
            rows.append({"spec": spec, "error": str(e)})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "jobs": args.jobs,
           "cpus": os.cpu_count(), "libraries": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
