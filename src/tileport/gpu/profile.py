"""Hardware-counter profiles of operator launches (Nsight Compute), to explain a kernel's distance from
the memory roofline with measured data rather than guesses.

    python3 -m tileport.gpu.profile softmax_online/float16/256x131072/cutile layer_norm/float16/16384x2048 \
        --configs-from out/autotune.json --out out/profile.json

A case is OP/DTYPE/SHAPE[/BACKEND] (backend default: cutile; `torch` and `torch.compile` profile the
benchmark's baseline columns on the same inputs, so their kernels' counters stand next to ours). Each
case is profiled once with the plan's default configuration and, with --configs-from (a
`tileport.gpu.autotune` result), once more with that search's winner for the case and backend. For
each, `ncu` runs this module's `launch` mode in a child process: the plan (or baseline) runs twice
outside the profiled range (JIT, compilation, first-launch costs), then once inside
`cudaProfilerStart/Stop`, so only that call's kernels are profiled.
`--clock-control none` leaves the clocks as they are (the benchmark runs with them the same way).

Per kernel, the JSON keeps the sections' metrics ncu reports (speed of light, occupancy, launch
statistics, memory workload, warp states: name -> [value, unit]) and a few headline figures (DRAM
throughput % of peak, DRAM bytes, L2 hit rate, achieved / theoretical occupancy, registers, the
largest warp stall reasons). A case whose ncu run fails, or prints no kernel, is recorded as an
error: nothing is reported for it.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "WarpStateStats")
HEADLINE = {  # headline name -> (section, metric name) as ncu's details page prints them
    "duration": ("GPU Speed Of Light Throughput", "Duration"),
    "dram_throughput_pct": ("GPU Speed Of Light Throughput", "DRAM Throughput"),
    "memory_throughput_pct": ("GPU Speed Of Light Throughput", "Memory Throughput"),
    "sm_busy_pct": ("GPU Speed Of Light Throughput", "Compute (SM) Throughput"),
    "l2_hit_rate_pct": ("Memory Workload Analysis", "L2 Hit Rate"),
    "achieved_occupancy_pct": ("Occupancy", "Achieved Occupancy"),
    "theoretical_occupancy_pct": ("Occupancy", "Theoretical Occupancy"),
    "registers_per_thread": ("Launch Statistics", "Registers Per Thread"),
    "block_size": ("Launch Statistics", "Block Size"),
    "grid_size": ("Launch Statistics", "Grid Size"),
    "dynamic_smem_per_block": ("Launch Statistics", "Dynamic Shared Memory Per Block"),
    "waves_per_sm": ("Launch Statistics", "Waves Per SM"),
}
NCU_TIMEOUT_S = 240
TILE_BACKENDS = ("cutile", "cutile-rs")
BASELINES = ("torch", "torch.compile")  # the benchmark's baseline columns (gpu.bench.column_runner)


def parse_case(text: str) -> tuple[str, str, tuple[int, ...], str]:
    parts = text.split("/")
    try:
        if len(parts) not in (3, 4):
            raise ValueError
        shape = tuple(int(d) for d in parts[2].split("x"))
    except ValueError:
        raise ValueError(f"case {text!r}: expected OP/DTYPE/SHAPE[/BACKEND], e.g. softmax/float16/1024x16384") from None
    backend = parts[3] if len(parts) == 4 else "cutile"
    if backend not in TILE_BACKENDS + BASELINES:
        raise ValueError(f"case {text!r}: backend {backend!r} is none of {', '.join(TILE_BACKENDS + BASELINES)}")
    return parts[0], parts[1], shape, backend


def parse_details(text: str) -> dict[str, dict]:
    """ncu's `--csv --page details` output -> {"<id> <kernel>": {section: {metric: [value, unit]}}}."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # ncu's own log lines start with ==
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if not row.get("Kernel Name") or not row.get("Metric Name"):
            continue
        k = kernels.setdefault(f"{row['ID']} {row['Kernel Name']}", {})
        k.setdefault(row["Section Name"], {})[row["Metric Name"]] = [row["Metric Value"], row["Metric Unit"]]
    return kernels


def headline(sections: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (section, metric) in HEADLINE.items():
        v = sections.get(section, {}).get(metric)
        if v is not None:
            out[name] = v[0] if not v[1] else f"{v[0]} {v[1]}"
    stalls = {m: v for m, v in sections.get("Warp State Statistics", {}).items() if m.startswith("Stall")}
    if stalls:
        out["warp_states"] = stalls
    return out


def profile_case(case: str, config: dict | None, ncu: str) -> dict[str, Any]:
    """One ncu run of the case (its default plan, or `config`)."""
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "details"]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += [sys.executable, "-m", "tileport.gpu.profile", "launch", case]
    if config is not None:
        cmd += ["--config", json.dumps(config)]
    rec: dict[str, Any] = {"case": case, "config": config if config is not None else "default", "command": cmd}
    try:
        proc = run_tool(cmd, NCU_TIMEOUT_S)
    except ToolTimeout:
        rec["error"] = f"ncu did not finish in {NCU_TIMEOUT_S} s"
        return rec
    kernels = parse_details(proc.stdout)
    if proc.returncode != 0 or not kernels:
        rec["error"] = (f"ncu exit {proc.returncode}, {len(kernels)} kernel(s) profiled: "
                        f"{(proc.stderr or proc.stdout)[-1500:]}")
        return rec
    rec["kernels"] = {name: {"headline": headline(s), "sections": s} for name, s in kernels.items()}
    return rec


def winners(path: Path) -> dict[tuple, dict]:
    """{(op, dtype, shape, backend): the winning config} of an autotune result."""
    data = json.loads(path.read_text())
    found = {}
    for c in data.get("cases", []):
        for backend, b in c.get("backends", {}).items():
            if b.get("chosen") is not None:
                found[(c["op"], c["dtype"], tuple(c["shape"]), backend)] = b["chosen"]
    return found


def launch(case: str, config: dict | None) -> None:
    """The child ncu profiles: plan (or baseline), two unprofiled runs, one profiled run."""
    import torch

    from tileport.gpu.bench import column_runner
    from tileport.ops.specs import get_spec
    op, dtype, shape, backend = parse_case(case)
    spec = get_spec(op)
    inputs = spec.make_inputs(shape, dtype, "cuda", 0)
    # a baseline column's first call compiles it (torch.compile), outside the profiled range
    run = column_runner(spec, backend, inputs) if backend in BASELINES else _plan_run(spec, backend, inputs, config)
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def _plan_run(spec, backend: str, inputs: tuple, config: dict | None):
    """The op's plan (default, or `config`) on a tile backend, as one callable."""
    import torch

    from tileport.ops.backends import run_plan
    outs = spec.allocate(*inputs)
    launches = spec.plan(*inputs, outs, config=config) if config is not None else spec.plan(*inputs, outs)
    stream = torch.cuda.current_stream()
    return lambda: run_plan(backend, spec, launches, stream)


def run(cases: list[str], out: Path, configs_from: Path | None) -> int:
    from tileport.atomic import write_text_atomic
    from tileport.gpu.bench import environment
    ncu = shutil.which("ncu")
    result: dict[str, Any] = {"environment": environment(), "ncu": ncu, "sections": list(SECTIONS), "runs": []}
    if ncu is None:
        result["error"] = "ncu is not on PATH"
        write_text_atomic(out, json.dumps(result, indent=1))
        print(result["error"], file=sys.stderr)
        return 1
    won = winners(configs_from) if configs_from else {}
    t0 = time.monotonic()
    for case in cases:
        op, dtype, shape, backend = parse_case(case)
        configs: list[dict | None] = [None]
        if (op, dtype, shape, backend) in won:
            configs.append(won[(op, dtype, shape, backend)])
        for cfg in configs:
            rec = profile_case(case, cfg, ncu)
            result["runs"].append(rec)
            write_text_atomic(out, json.dumps(result, indent=1))  # a time limit keeps what finished
            status = rec.get("error", "ok")[:200]
            print(f"[{time.monotonic() - t0:6.1f}s] {case} {json.dumps(cfg) if cfg else 'default'}: {status}",
                  flush=True)
    return 1 if any("error" in r for r in result["runs"]) else 0


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python3 -m tileport.gpu.profile", description=__doc__.split("\n\n")[0])
    one = argparse.ArgumentParser(prog="python3 -m tileport.gpu.profile launch", description="the profiled child")
    one.add_argument("case")
    one.add_argument("--config", default=None)
    ap.add_argument("cases", nargs="*", help="OP/DTYPE/SHAPE[/BACKEND]")
    ap.add_argument("--out", type=Path, default=Path("out/profile.json"))
    ap.add_argument("--configs-from", type=Path, default=None, help="an autotune result: profile its winners too")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["launch"]:
        args = one.parse_args(argv[1:])
        launch(args.case, json.loads(args.config) if args.config else None)
        return 0
    args = ap.parse_args(argv)
    if not args.cases:
        ap.error("give at least one case")
    try:
        for case in args.cases:
            parse_case(case)
    except ValueError as e:
        ap.error(str(e))
    from tileport.ops.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"{ap.prog}: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    return run(args.cases, args.out, args.configs_from)


if __name__ == "__main__":
    sys.exit(main())
