"""How long package mode takes: `tileport translate DIR -o OUT -j N` on a synthetic 1,000-kernel library
(`eval/synthetic_library.py`) and on real ones, wall and CPU time, per stage.

    python3 eval/package_speed.py [--kernels 1000] [--package /tmp/pkgs/x/fla_core ...] [-j 2]
        [--work /tmp/tileport-speed] [--out bench/results/package-speed]

Each package is translated by the command line in a child process (as a user runs it); its wall time, its
CPU time (the worker processes' included), the stages `library.json` times (`packages.library.STAGES`:
the workers' seconds summed), the progress lines it printed, and a digest of the crate it wrote (two runs,
two commits, compared byte for byte). The machine's load (`/proc/loadavg`) before and after each run is
recorded with the numbers: other processes share the cores. Writes OUT.json and OUT.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_library  # noqa: E402 - the generator beside this script

REPO = Path(__file__).resolve().parents[1]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def crate_digest(crate: Path) -> str:
    """sha256 over the crate's files (relative path and bytes, sorted): equal digests, identical crates."""
    h = hashlib.sha256()
    for path in sorted(p for p in crate.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(crate)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def translate(package: Path, out: Path, jobs: int) -> dict:
    """One run of `tileport translate` on the package (OUT replaced): times, stages, progress, digest."""
    shutil.rmtree(out, ignore_errors=True)
    before, cpu0, t0 = load(), children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "translate", str(package), "-o", str(out),
                           "-j", str(jobs)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    doc = json.loads((out / "library.json").read_text()) if (out / "library.json").is_file() else {}
    progress = [line for line in proc.stderr.splitlines() if line.startswith("tileport: ")]
    crate = out / "crate"
    return {"package": str(package), "exit": proc.returncode, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_before": before, "load_after": load(), "jobs": jobs,
            "found": doc.get("totals", {}).get("found"), "translated": doc.get("totals", {}).get("translated"),
            "modules": doc.get("modules"), "scanned": doc.get("scanned"), "stages": doc.get("stages", {}),
            "progress_lines": len(progress), "progress_last": progress[-1] if progress else None,
            "crate_digest": crate_digest(crate) if crate.is_dir() else None,
            "crate_bytes": sum(p.stat().st_size for p in crate.rglob("*") if p.is_file()) if crate.is_dir() else 0,
            "output_tail": (proc.stdout + proc.stderr)[-600:] if proc.returncode not in (0, 1) else ""}


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True, cwd=REPO).stdout.strip())
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit + ("+" if dirty else ""),
            "cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


def markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = [f"# Package mode's speed ({m['date'][:10]})", "",
             f"`python3 eval/package_speed.py {doc['args']}` at `{m['commit']}`, {m['cpus']} CPUs ({m['cpu']}), "
             f"Python {m['python']}. Each row is one `tileport translate DIR -o OUT -j N` in a child process: wall "
             "and CPU seconds (worker processes included), the machine's 1-minute load before/after (other "
             "processes share the cores), and the stages `library.json` times (seconds; lowering's are the "
             "workers' summed, so they may exceed the wall time with -j 2).", "",
             "| package | kernels (translated) | modules | -j | wall s | CPU s | load before/after | "
             + " | ".join(doc["stages"]) + " | progress lines | crate sha256 |",
             "|---" * (9 + len(doc["stages"])) + "|"]
    for r in doc["runs"]:
        stages = " | ".join(str(r["stages"].get(s, "-")) for s in doc["stages"])
        lines.append(f"| `{r['label']}` | {r['found']} ({r['translated']}) | {r['scanned']} | {r['jobs']} | "
                     f"{r['wall_s']} | {r['cpu_s']} | {r['load_before'][0]} / {r['load_after'][0]} | {stages} | "
                     f"{r['progress_lines']} | `{(r['crate_digest'] or '-')[:12]}` |")
    lines += [""] + [f"- {note}" for note in doc.get("notes", [])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=1000, help="kernels of the synthetic library (0: none)")
    ap.add_argument("--package", type=Path, action="append", default=[], help="another package folder to time")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/tileport-speed"))
    ap.add_argument("--out", type=Path, help="OUT.json and OUT.md (default: print the JSON)")
    ap.add_argument("--note", action="append", default=[], help="a line for the notes under the table")
    args = ap.parse_args(argv)
    targets = []
    if args.kernels:
        targets.append((f"synlib ({args.kernels} kernels)",
                        synthetic_library.write(args.work / f"synlib-{args.kernels}", args.kernels)))
    targets += [(p.name, p) for p in args.package]
    runs = []
    for label, package in targets:
        run = {"label": label, **translate(package, args.work / f"out-{package.parent.name}-{package.name}",
                                           args.jobs)}
        print(f"{label}: {run['translated']}/{run['found']} kernels, {run['wall_s']} s wall, {run['cpu_s']} s CPU, "
              f"load {run['load_before'][0]} -> {run['load_after'][0]}; stages {run['stages']}", file=sys.stderr,
              flush=True)
        runs.append(run)
    from tileport.packages.library import STAGES
    given = argv if argv is not None else sys.argv[1:]
    shown = " ".join(a for i, a in enumerate(given) if a not in ("--out", "--note")
                     and (i == 0 or given[i - 1] not in ("--out", "--note")))
    doc = {"machine": machine(), "args": shown, "stages": list(STAGES), "runs": runs, "notes": args.note}
    if args.out is None:
        print(json.dumps(doc, indent=1))
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
