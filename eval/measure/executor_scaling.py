"""(CPU) The pipeline's CPU stages on the local thread pool vs a local Ray cluster of the same CPUs.

    python3 eval/measure/executor_scaling.py OUT.json [--rounds N] [--modes M,M] [--corpus | KERNEL_SPEC ...]

Ports the same kernels (default: the corpus sample of tests/pipeline/test_batch.py; `--corpus`: every kernel
of the reference corpus) with `--no-gpu` (A, B: reference IR, generated IR, IR diff, cubins; D/E end
BLOCKED(env) at once) in three modes (`--modes`: some of them), side by side,
each with an empty capture cache of its own (a fresh TILEPORT_CACHE_DIR: every reference export, capture
and tileiras compile runs): `local-j1`, `local-j2` (the default executor, 2 threads) and `ray-2cpu`
(`ray.init(num_cpus=2)` in this process, started once; its start is timed apart). The order of the modes
rotates each round. The machine is shared: each run records `uptime`'s load averages before and after.
Per kernel and stage it keeps the seconds the verdicts report, and the batch crate unit's seconds: the
per-kernel costs docs/scaling.md multiplies out. Results: bench/results/2026-12-07-cpu-executor-scaling.json
(six kernels, two rounds) and 2026-12-07-cpu-stage-costs-corpus.json (`--corpus`, its local-j1 mode).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from tileport.corpus import REPO
from tileport.pipeline import Options, resolve_targets
from tileport.pipeline.batch import run_batch

KERNELS = REPO / "src" / "tileport" / "ops" / "kernels"
SAMPLE = ("vector_add.py", "softmax.py::softmax_tma_kernel", "rms_norm.py", "rope.py::rope_kernel",
          "matmul.py::matmul_kernel", "attention.py::flash_decode_combine_kernel")
MODES = {"local-j1": {"jobs": 1}, "local-j2": {"jobs": 2}, "ray-2cpu": {"executor": "ray"}}


def load() -> list[float]:
    return [float(x) for x in os.getloadavg()]


def one(mode: str, specs: list[str] | None, work: Path) -> dict:
    cache = work / f"cache-{mode}-{time.time_ns()}"
    os.environ["TILEPORT_CACHE_DIR"] = str(cache)
    out = work / f"out-{mode}-{time.time_ns()}"
    targets = resolve_targets(specs) if specs else resolve_targets(corpus=KERNELS)
    before = load()
    t0 = time.perf_counter()
    outcomes, _ = run_batch(targets, Options(out=out, native_gpu=False, **MODES[mode]),
                            Console(file=io.StringIO()), progress=False)
    wall = time.perf_counter() - t0
    costs = json.loads((cache / "costs.json").read_text())
    return {"mode": mode, "wall_s": round(wall, 2), "load_before": before, "load_after": load(),
            "terminals": {o.key: o.terminal for o in outcomes},
            "stages": {o.key: {r["stage"]: r["seconds"] for r in o.route} for o in outcomes},
            "crate_units_s": {k: v for k, v in costs.items() if k.startswith("crate:")},
            "executor": json.loads((out / "summary.json").read_text())["executor"]}


def main() -> None:
    args = sys.argv[1:]
    out_json = Path(args.pop(0))
    rounds, modes, specs = 1, list(MODES), [str(KERNELS / s) for s in SAMPLE]
    while args:
        flag = args.pop(0)
        if flag == "--rounds":
            rounds = int(args.pop(0))
        elif flag == "--modes":
            modes = args.pop(0).split(",")
        elif flag == "--corpus":
            specs = None
        else:
            specs = [str(KERNELS / flag)] + [str(KERNELS / s) for s in args]
            args = []
    import ray
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    runs = []
    with tempfile.TemporaryDirectory(prefix="tileport-scaling-") as tmp:
        for r in range(rounds):
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                runs.append({"round": r, **one(mode, specs, Path(tmp))})
                print(json.dumps({k: runs[-1][k] for k in ("round", "mode", "wall_s", "load_before", "load_after")}),
                      flush=True)
    ray.shutdown()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout
    doc = {"question": "speed-up of the pipeline's CPU stages on a 2-CPU local Ray cluster vs the local pool",
           "command": "python3 eval/measure/executor_scaling.py " + " ".join(sys.argv[1:]),
           "commit": commit.strip(), "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
           "kernels": specs or "every kernel of src/tileport/ops/kernels", "ray_start_s": round(ray_start, 2),
           "runs": runs}
    out_json.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
