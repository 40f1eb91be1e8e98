"""GPU measurement: stage E's parity benchmark of the two tile columns, repeated in several processes and pooled.

    python3 eval/measure/parity_pooled.py run OUT_DIR [SECONDS]      (on the GPU machine)
    python3 eval/measure/parity_pooled.py pool OUT.json DIR [DIR ...]  (anywhere: pools the process files of DIRs)

Each process runs the cases stage E grades (`--bench-ops primary --bench-shapes 1`, budget 0.1 s) with the
columns cuTile Python and cutile-rs only, as `tileport.pipeline.evidence record` does, and writes
OUT_DIR/process-K.json. Processes start one after another until SECONDS (default 480) have passed, at least two.
OUT_DIR/pooled.json then holds, per case, rs/cuTile in every process, and overall the geomean of each process
(with its standard error over cases) and of all of them (with a standard error across processes), for all cases
and for two groups: the kernels whose port compiles to cuTile Python's machine code on sm_90 and the others.

Why: a single run's geomean carries an error its own repetitions do not show. Re-timed on another machine start,
single cases moved by more than their in-run standard error (fmha_fwd_sinks f16 0.9971 in one run, 0.9984-1.0002
in seven others) and the 89-case geomean by 0.00015, while two processes on one machine start agreed to 0.0001
(bench/results/2026-12-03-h200-parity-pooled.json). So the processes of one call measure the error of a run on
that machine, and `pool` over the directories of several calls (one machine start each) measures the rest. It
changes nothing in the library.
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

from tileport.gpu.bench import geomean

COLUMNS = ["cutile", "cutile-rs"]
# (op, dtype) whose kernels' ports compile to cuTile Python's sm_90 machine code, or to it but for the offsets of
# the parameters (bench/results/2026-12-01-cpu-verify-sass.json; softmax_online's default last-first kernel,
# README); None: every dtype. The other cases' machine code differs where cutile 0.5.0 assumes bounds cuTile
# Python does not (bench/results/2026-12-03-cpu-verify-sass-attention.json for the attention kernels).
SAME_MACHINE_CODE = {"vector_add": None, "relu": None, "gelu": None, "silu_and_mul": None, "swiglu": None,
                     "geglu": None, "softmax_gather": None, "softmax_tma": None, "softmax_online": None,
                     "rms_norm": None, "layer_norm": None, "rope": None, "matmul_splitk": None, "bmm": {"float32"}}
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


def same_machine_code(key: str) -> bool:
    op, dtype, _shape = key.split(":")
    return op in SAME_MACHINE_CODE and (SAME_MACHINE_CODE[op] is None or dtype in SAME_MACHINE_CODE[op])


def standard_error(values: list[float]) -> float | None:
    """Of the mean of `values`; None for fewer than two."""
    return round(statistics.stdev(values) / math.sqrt(len(values)), 5) if len(values) > 1 else None


def summarize(ratios: list[dict], keys: list[str]) -> dict:
    """Geomean of rs/cuTile over `keys` in each process (with the standard error of its mean log over the
    cases) and over all processes (with the standard error of the processes' mean logs)."""
    if not keys:
        return {"cases": 0}
    logs = [[math.log(r[k]) for k in keys] for r in ratios]
    means = [statistics.fmean(x) for x in logs]
    return {"cases": len(keys),
            "geomean_per_process": [round(math.exp(m), 5) for m in means],
            "standard_error_per_process": [standard_error(x) for x in logs],
            "pooled_geomean": round(math.exp(statistics.fmean(means)), 5),
            "standard_error_across_processes": standard_error(means)}


def pool(runs: list[dict]) -> dict:
    """Per case rs/cuTile in each process, and the geomeans, over the cases every process timed."""
    ratios = [{case_key(r): r["ratio_rs_over_cutile"] for r in run["records"] if r.get("ratio_rs_over_cutile")}
              for run in runs]
    common = sorted(set.intersection(*(set(r) for r in ratios)))
    same = [k for k in common if same_machine_code(k)]
    return {"processes": len(runs), "all": summarize(ratios, common),
            "same_machine_code": summarize(ratios, same),
            "other_machine_code": summarize(ratios, [k for k in common if k not in same]),
            "per_case": {k: {"per_process": [round(r[k], 4) for r in ratios],
                             "geomean": round(geomean([r[k] for r in ratios]), 5)} for k in common}}


def summary_of(paths: list[Path], command: str) -> dict:
    runs = [json.loads(p.read_text()) for p in paths]
    env = runs[0]["environment"] if runs else {}
    return {"command": command, "commit": env.get("commit"), "gpu": env.get("gpu"),
            "nvidia_smi": env.get("nvidia_smi"), "dates": [r["environment"].get("date") for r in runs],
            "gpu_uuids": [r["environment"].get("gpu_uuid") for r in runs],
            "columns": COLUMNS, "budget_s": BUDGET_S, "selection": "--bench-ops primary --bench-shapes 1",
            "process_files": [str(p) for p in paths],
            **(pool(runs) if len(runs) >= 2 else {"error": f"{len(runs)} process(es) finished, 2 needed"})}


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
    write_summary(out / "pooled.json", paths)


def write_summary(out: Path, paths: list[Path]) -> None:
    summary = summary_of(paths, " ".join([os.path.basename(sys.executable)] + sys.argv))
    out.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary.get("all") or summary.get("error")))


def pool_dirs(out: Path, dirs: list[str]) -> None:
    write_summary(out, sorted((p for d in dirs for p in Path(d).glob("process-*.json")),
                              key=lambda p: (str(p.parent), int(p.stem.split("-")[1]))))


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--one":
        one_process(Path(args[1]))
    elif len(args) >= 3 and args[0] == "pool":
        pool_dirs(Path(args[1]), args[2:])
    elif len(args) in (2, 3) and args[0] == "run":
        main(Path(args[1]), float(args[2]) if len(args) == 3 else 480.0)
    else:
        sys.exit(__doc__.split("\n\n")[1])
