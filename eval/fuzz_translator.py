#!/usr/bin/env python3
"""Long fuzz run of the translator: generated kernel files (valid, mutated, deeply nested, huge constants, bad
encodings, garbage) through `translate()` in process and through the CLI, and the corpus kernels under randomly
broken configurations; writes its figures as JSON.

    python3 eval/fuzz_translator.py --n 5000 --out bench/results/<date>-fuzz-translator.json

Exit status 0 when no input produced a traceback, an internal error, an unlocated diagnostic, a hang or a write
outside the output folder; 1 otherwise (the JSON lists the first problems with the index that reproduces them:
`tests/fuzz/fuzz_generator.py: generate(seed, index)`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests" / "fuzz")]

from fuzz_harness import fuzz, fuzz_configs  # noqa: E402


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty-src" if dirty else "")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000, help="number of generated inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--write-every", type=int, default=5, help="also write the crate (rustfmt) every k-th input")
    ap.add_argument("--cli-every", type=int, default=25, help="also run the CLI every k-th input")
    ap.add_argument("--config-runs", type=int, default=1000, help="corpus translations under broken configurations")
    ap.add_argument("--out", type=Path, help="figures JSON (default: print only)")
    args = ap.parse_args()

    def progress(index, figures):
        if (index + 1) % 500 == 0:
            print(f"{index + 1} inputs, problems {figures.counts}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="tileport-fuzz-") as work:
        figures = fuzz(args.n, args.seed, Path(work), args.timeout, args.write_every, args.cli_every,
                       progress=progress)
        configs = fuzz_configs(args.config_runs, args.seed, Path(work), args.timeout)
    result = {"what": "translator fuzz run (tests/fuzz/fuzz_generator.py, tests/fuzz/fuzz_harness.py)",
              "command": " ".join(["python3", "eval/fuzz_translator.py", *sys.argv[1:]]),
              "commit": commit(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "python": platform.python_version(), "timeout_s": args.timeout,
              "clean": figures.clean and configs.clean, **figures.to_dict(), "configs": configs.to_dict()}
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        write_atomic(args.out, text)
    summary = {k: result[k] for k in ("inputs", "counts", "cli_runs", "written_runs", "seconds", "clean")}
    summary["configs"] = {k: result["configs"][k] for k in ("inputs", "counts", "seconds")}
    print(json.dumps(summary))
    return 0 if result["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())
