"""GPU measurement: stage E's parity benchmark of the two tile columns, repeated in several processes and pooled.

    python3 scripts/parity_pooled.py OUT_DIR [SECONDS]          (on the GPU machine)

Each process runs the cases stage E grades (`--bench-ops primary --bench-shapes 1`, budget 0.1 s) with the
columns cuTile Python and cutile-rs only, as `tileport.pipeline.evidence record` does, and writes
OUT_DIR/process-K.json. Processes start one after another until SECONDS (default 480) have passed, at least two.
OUT_DIR/pooled.json then holds, per case, rs/cuTile in every process, and overall the geomean of each process and
of all of them, with a standard error taken across processes.

Why processes: one process times each case's two kernels with their code and buffers at one set of addresses. The
same pair re-timed in a new process moved by up to 0.6 % on compute-bound attention kernels (fmha_fwd_sinks f16
0.9971 against 1.0000 in stage E), more than the standard error within one run, so a single run's geomean carries
an error its own repetitions do not show. It changes nothing in the library.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COLUMNS = ["cutile", "cutile-rs"]
BUDGET_S = 0.1
SHAPES = 1


def one_process(path: Path) -> None:
    from tileport.pipeline.evidence import _bench_records, _device_defaults, corpus_primary_ops
    _device_defaults()
    result, missing = _bench_records(corpus_primary_ops(), path, BUDGET_S, SHAPES, COLUMNS)
    result["missing_ops"] = missing
    path.write_text(json.dumps(result, indent=1))


def case_key(rec: dict) -> str:
    return f"{rec['op']}:{rec['dtype']}:{'x'.join(map(str, rec['shape']))}"


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def pool(runs: list[dict]) -> dict:
    """Per case rs/cuTile in each process, and the geomeans, over the cases every process timed."""
    ratios = [{case_key(r): r["ratio_rs_over_cutile"] for r in run["records"] if r.get("ratio_rs_over_cutile")}
              for run in runs]
    common = sorted(set.intersection(*(set(r) for r in ratios)))
    per_process = [geomean([r[k] for k in common]) for r in ratios]
    logs = [math.log(g) for g in per_process]
    return {"cases": len(common), "processes": len(runs),
            "geomean_per_process": [round(g, 5) for g in per_process],
            "pooled_geomean": round(math.exp(statistics.fmean(logs)), 5),
            "standard_error_across_processes": round(statistics.stdev(logs) / math.sqrt(len(logs)), 5),
            "per_case": {k: {"per_process": [round(r[k], 4) for r in ratios],
                             "geomean": round(geomean([r[k] for r in ratios]), 5)} for k in common}}


def main(out: Path, seconds: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    start, paths = time.monotonic(), []
    while len(paths) < 2 or time.monotonic() - start < seconds:
        path = out / f"process-{len(paths) + 1}.json"
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, __file__, "--one", str(path)])
        print(f"process {len(paths) + 1}: rc {proc.returncode}, {time.monotonic() - t0:.0f} s", flush=True)
        if proc.returncode != 0 or not path.is_file():
            break
        paths.append(path)
        per_run = time.monotonic() - t0
        if time.monotonic() - start + per_run > seconds and len(paths) >= 2:
            break
    runs = [json.loads(p.read_text()) for p in paths]
    env = runs[0]["environment"] if runs else {}
    summary = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "commit": env.get("commit"),
               "gpu": env.get("gpu"), "nvidia_smi": env.get("nvidia_smi"), "date": env.get("date"),
               "columns": COLUMNS, "budget_s": BUDGET_S, "selection": "--bench-ops primary --bench-shapes 1",
               **(pool(runs) if len(runs) >= 2 else {"error": f"{len(runs)} process(es) finished, 2 needed"})}
    (out / "pooled.json").write_text(json.dumps(summary, indent=1))
    print({k: summary.get(k) for k in ("cases", "processes", "geomean_per_process", "pooled_geomean",
                                       "standard_error_across_processes", "error")})


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        one_process(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 480.0)
