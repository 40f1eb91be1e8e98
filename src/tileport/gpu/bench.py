"""Parity benchmark: cutile-rs vs cuTile Python vs PyTorch, side by side in one process, on identical inputs.

Columns (backends) of every case:

| column          | what runs                                                                        |
|-----------------|----------------------------------------------------------------------------------|
| `torch`         | the op's PyTorch baseline in the input dtype, eager (ops/baselines.py)          |
| `torch.compile` | the same function compiled with `torch.compile(fullgraph=True)` (attention: one  |
|                 | graph break, where the baseline reads the sequence lengths)                      |
| `cutile`        | `tileport.ops` on cuTile Python                                                  |
| `cutile-rs`     | `tileport.ops` on the generated Rust ports                                       |

For every op, dtype and benchmark shape it records each column's median kernel time (`times_us`:
L2 flushed, CUPTI kernel durations) and call-level time (`call_us`: host launch work included), the
columns' repetitions interleaved in one measurement (timing.gpu_times, timing.call_times; the two tile
columns' kernel times in a rotation of their own, the baselines' beside cutile-rs in another); each
column's error against the spec's f32 reference relative to the op's tolerance (`err_over_tol`; the
reference is used for nothing else), the ratio t(cutile-rs) /
t(cuTile Python), achieved GB/s (memory-bound ops) or TFLOP/s (GEMMs) and their share of the
ceilings measured in the same run (device copy bandwidth, cuBLAS bf16 GEMM rate). Ops with a
configuration space also record the configuration each tile column ran (`configs`: the one cached by
`python3 -m tileport.gpu.autotune` for this GPU, else the op's default).

GEMMs (kind "compute") run twice on identical inputs for every column: `inputs: "randn"` (the
spec's normal samples) in `records`, and `inputs: "rand"` (torch.rand, uniform in [0, 1)) in
`rand_input_records`: the bit activity of the data changes the clocks, so both are reported. f32
GEMMs run with TF32 allowed for torch, as the kernels use TF32 (the references never do).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from tileport.gpu.timing import call_times, gpu_time, gpu_times, host_overhead_us, make_flush
from tileport.ops.spec import OpSpec
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

COLUMNS = ("torch", "torch.compile", "cutile", "cutile-rs")
INPUT_DISTRIBUTIONS = {"memory": ("randn",), "compute": ("randn", "rand")}

H200_BF16_DATASHEET_TFLOPS = 989.0  # dense bf16, vendor datasheet (for reference next to the measured rate)


def _cmd(args: list[str]) -> str:
    try:
        return run_tool(args, 30).stdout.strip()
    except (OSError, ToolTimeout):
        return ""


def environment() -> dict:
    import torch

    from tileport import toolchain
    smi = _cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    ti = toolchain.tileiras()
    return {
        "gpu": torch.cuda.get_device_name(0),
        "nvidia_smi": smi,
        # which physical GPU: parity geomeans moved by 0.00015 between machine starts of one kind
        # (bench/results/2026-12-03-h200-parity-pooled.json)
        "gpu_uuid": _cmd(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"]),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cuda_tile": toolchain.package_version("cuda-tile"),
        "tileiras": _cmd([str(ti), "--version"]).splitlines()[-1] if ti else "",
        "python": platform.python_version(),
        "commit": os.environ.get("TILEPORT_COMMIT") or _cmd(["git", "rev-parse", "HEAD"]),
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def copy_bandwidth(flush) -> tuple[float, Any]:
    """Device copy bandwidth in GB/s (1 GiB read + 1 GiB written by `copy_`) and its timing."""
    import torch
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = gpu_time(lambda: dst.copy_(src), flush, budget_s=0.5)
    return 2 * src.numel() / (t.median_us * 1e-6) / 1e9, t


def ceilings(flush) -> dict:
    """Device copy bandwidth (1 GiB read + 1 GiB write) and the cuBLAS bf16 GEMM rate (8192^3, on randn
    and on rand inputs)."""
    import torch
    copy_gbps, t = copy_bandwidth(flush)
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t2 = gpu_time(lambda: torch.matmul(a, b), flush, budget_s=0.5)
    a.uniform_()  # torch.rand's distribution: its bit activity leaves more clock headroom than randn's
    b.uniform_()
    t3 = gpu_time(lambda: torch.matmul(a, b), flush, budget_s=0.5)
    return {"copy_gbps": copy_gbps, "copy_timing": t.to_dict(),
            "cublas_bf16_tflops": 2 * n ** 3 / (t2.median_us * 1e-6) / 1e12, "cublas_timing": t2.to_dict(),
            "cublas_bf16_tflops_rand": 2 * n ** 3 / (t3.median_us * 1e-6) / 1e12, "cublas_timing_rand": t3.to_dict(),
            "bf16_datasheet_tflops": H200_BF16_DATASHEET_TFLOPS}


def case_inputs(spec: OpSpec, dtype: str, shape: tuple, distribution: str, device: str = "cuda") -> tuple:
    """The op's inputs: the spec's ("randn"), or torch.rand samples of the same shapes ("rand"; floating-point
    tensors only: lengths and block tables stay the spec's)."""
    import torch
    inputs = spec.make_inputs(shape, dtype, device, 0)
    if distribution == "randn":
        return inputs
    if distribution != "rand":
        raise ValueError(f"unknown input distribution {distribution!r} (randn, rand)")
    gen = torch.Generator(device=device).manual_seed(0)
    return tuple(torch.rand(t.shape, generator=gen, device=device, dtype=torch.float32).to(t.dtype)
                 if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)


TILE_COLUMNS = ("cutile", "cutile-rs")


def column_runner(spec: OpSpec, column: str, inputs: tuple, outs: Any = None):
    """A no-argument callable for one column. A tile backend writes into `outs` on every call (allocated
    here when None)."""
    import torch

    from tileport.ops.api import call
    from tileport.ops.baselines import GRAPH_BREAKS, baseline
    if column == "torch":
        fn = baseline(spec)
        return lambda: fn(*inputs)
    if column == "torch.compile":
        torch._dynamo.reset()  # a fresh compilation per case: the recompile limit counts per function
        # baselines that read sizes on the host or reuse saved state: graph breaks there (GRAPH_BREAKS)
        compiled = torch.compile(baseline(spec), fullgraph=spec.name not in GRAPH_BREAKS, dynamic=False)
        own = own_copies(inputs)
        return lambda: compiled(*own)
    if outs is None:
        outs = spec.allocate(*inputs)
    return lambda: call(spec, *inputs, out=outs, backend=column)


def own_copies(inputs: tuple) -> tuple:
    """Copies of the tensor inputs (same values, other memory). Inductor's kernels load with the
    `evict_last` L2 hint, and lines so loaded outlast the L2 flush: with the inputs shared, every other
    column reading them after torch.compile ran read part of them from L2 (H200: a copy of x 8 % faster,
    bench/results/2026-12-02-h200-evict-last.json)."""
    import torch
    return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)


def poison(outs: Any) -> None:
    """Fill output tensor(s) with a value no kernel writes (NaN; the largest integer for integer outputs), so
    a column that leaves an output unwritten fails its check instead of passing on another column's result."""
    import torch
    for t in outs if isinstance(outs, (tuple, list)) else (outs,):
        t.fill_(float("nan") if t.is_floating_point() else torch.iinfo(t.dtype).max)


def tuned_config(spec: OpSpec, backend: str, inputs: tuple) -> dict:
    """The configuration the op's plan uses on `backend` for these inputs (tuned or default)."""
    from tileport.ops import autotune
    with autotune.planning_for(backend):
        return autotune.resolve(spec, inputs[0], None)


def _err_over_tol(spec: OpSpec, dtype: str, got, ref) -> float:
    from tileport.gpu.check import compare
    tol = spec.tolerances[dtype]
    return compare(got, ref, tol.rtol, tol.atol)[2]


def _reference(spec: OpSpec, inputs: tuple):
    """The spec's f32 reference, TF32 off whatever the run allows."""
    import torch
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return spec.reference(*inputs)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def bench_case(spec: OpSpec, dtype: str, shape: tuple, flush, columns: Iterable[str], ceil: dict,
               budget_s: float, distribution: str = "randn", device: str = "cuda") -> dict:
    inputs = case_inputs(spec, dtype, shape, distribution, device)
    ref = _reference(spec, inputs)
    rec: dict[str, Any] = {"op": spec.name, "dtype": dtype, "shape": list(shape), "kind": spec.kind,
                           "inputs": distribution, "times_us": {}, "call_us": {}, "timings": {},
                           "call_timings": {}, "err_over_tol": {}, "errors": {}}
    runs = {}
    # both tile backends write the same output tensors: where an output lies in memory moves a
    # memory-bound kernel's time by up to 1 % (H200, bench/results/2026-12-02-h200-parity-buffers.json)
    tile_outs = None
    for column in columns:
        try:
            if column in TILE_COLUMNS:
                if tile_outs is None:
                    tile_outs = spec.allocate(*inputs)
                if spec.tune is not None:
                    rec.setdefault("configs", {})[column] = tuned_config(spec, column, inputs)
                poison(tile_outs)
            run = column_runner(spec, column, inputs, tile_outs)
            rec["err_over_tol"][column] = _err_over_tol(spec, dtype, run(), ref)
            runs[column] = run
        except Exception as e:  # noqa: BLE001 - recorded, and the report lists it
            rec["errors"][column] = f"{type(e).__name__}: {e}"[:1000]
    if runs:
        _time_side_by_side(runs, flush, budget_s, rec, _copy_reference(spec, dtype, shape, device))
    _rates(spec, dtype, shape, rec, ceil)
    return rec


COPY_REFERENCE = "copy (same bytes)"


def _copy_reference(spec: OpSpec, dtype: str, shape: tuple, device: str):
    """For a memory-bound case, a torch copy moving the case's bytes (half read, half written), timed in the
    same rotation as the columns: a roofline of the case's own size, in the columns' conditions (the run's
    copy bandwidth is measured alone, on 1 GiB)."""
    if spec.kind != "memory" or not spec.bytes:
        return None
    import torch
    half = spec.bytes(tuple(shape), dtype) // 2
    src = torch.empty(half, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


PARITY_ANCHOR = "cutile-rs"  # the tile column timed again beside the baselines, for the ratios against them


def _time_side_by_side(runs: dict, flush, budget_s: float, rec: dict, copy=None) -> None:
    """Kernel and call times of the columns that ran, their repetitions interleaved (timing.gpu_times), with
    `copy` (a same-bytes copy, or None) in the baselines' kernel-time rotation: `copy_us`.

    With both tile columns, kernel time comes from two rotations: the tile columns alone (their times, the
    parity ratio), and the baselines with the copy and cutile-rs again (`baseline_rotation_us`: the ratios
    against torch and the copy). Timed in one rotation with torch and the copy, identical machine code
    measured rs/cuTile 1.003 (geomean of twelve cases) where the two backends alone measured 0.9994 and each
    backend against itself 0.9999 and 1.0001 (H200, bench/results/2026-12-03-h200-parity-floor.json)."""
    parity = {c: f for c, f in runs.items() if c in TILE_COLUMNS} if set(TILE_COLUMNS) <= set(runs) else {}
    others = {c: f for c, f in runs.items() if c not in parity} | ({COPY_REFERENCE: copy} if copy else {})
    baseline = ({PARITY_ANCHOR: runs[PARITY_ANCHOR]} | others) if parity and others else others
    try:
        kernel = gpu_times(parity, flush, budget_s=budget_s) if parity else {}
        beside = gpu_times(baseline, flush, budget_s=budget_s) if baseline else {}
        call = call_times(runs, flush, budget_s=budget_s)
    except Exception as e:  # noqa: BLE001 - every column timed together shares the failure
        for column in runs:
            rec["errors"][column] = f"timing: {type(e).__name__}: {e}"[:1000]
        return
    if parity and beside:
        rec["baseline_rotation_us"] = {c: t.median_us for c, t in beside.items()}
    if copy:
        rec["copy_us"] = beside[COPY_REFERENCE].median_us
    for column in runs:
        timing = kernel[column] if column in parity else beside[column]
        rec["times_us"][column] = timing.median_us
        rec["timings"][column] = timing.to_dict()
        rec["call_us"][column] = call[column].median_us
        rec["call_timings"][column] = call[column].to_dict()


def _rates(spec: OpSpec, dtype: str, shape: tuple, rec: dict, ceil: dict) -> None:
    """Ratios, GB/s, TFLOP/s and shares of the ceilings, from the record's times."""
    times, calls = rec["times_us"], rec["call_us"]
    if "cutile" in times and "cutile-rs" in times:
        rec["ratio_rs_over_cutile"] = times["cutile-rs"] / times["cutile"]
    if "cutile" in calls and "cutile-rs" in calls:
        rec["call_ratio_rs_over_cutile"] = calls["cutile-rs"] / calls["cutile"]
    beside = rec.get("baseline_rotation_us") or times  # torch and the copy beside the time they divide
    torch_best = [beside[c] for c in ("torch", "torch.compile") if c in beside]
    if torch_best and "cutile-rs" in beside:
        rec["ratio_rs_over_best_torch"] = beside["cutile-rs"] / min(torch_best)
    if spec.bytes:
        nbytes = spec.bytes(tuple(shape), dtype)
        rec["bytes"] = nbytes
        rec["gbps"] = {b: nbytes / (t * 1e-6) / 1e9 for b, t in times.items()}
        rec["pct_copy_bw"] = {b: 100 * g / ceil["copy_gbps"] for b, g in rec["gbps"].items()}
        if "copy_us" in rec:
            rec["pct_copy_side_by_side"] = {b: 100 * rec["copy_us"] / t for b, t in beside.items()
                                            if b != COPY_REFERENCE}
    if spec.flops:
        flops = spec.flops(tuple(shape))
        rec["flops"] = flops
        rec["tflops"] = {b: flops / (t * 1e-6) / 1e12 for b, t in times.items()}
        if spec.kind == "compute":
            rec["pct_cublas_bf16"] = {b: 100 * v / ceil["cublas_bf16_tflops"] for b, v in rec["tflops"].items()}
            rec["pct_bf16_datasheet"] = {b: 100 * v / ceil["bf16_datasheet_tflops"] for b, v in rec["tflops"].items()}


def launch_overhead() -> dict:
    """Host µs per launch of a one-block vector_add: C ABI (cutile-rs) vs ct.launch vs torch."""
    import torch

    from tileport.ops.api import call
    from tileport.ops.specs import get_spec
    spec = get_spec("vector_add")
    a, b = spec.make_inputs((1024,), "float32", "cuda", 0)
    out = torch.empty_like(a)
    res = {"torch_add": host_overhead_us(lambda: torch.add(a, b, out=out))}
    for backend in ("cutile", "cutile-rs"):
        res[backend] = host_overhead_us(lambda backend=backend: call(spec, a, b, out=out, backend=backend))
    launches = spec.plan(a, b, out)
    from tileport.ops.backends import run_plan
    stream = torch.cuda.current_stream()
    for backend in ("cutile", "cutile-rs"):
        res[f"{backend}_plan_only"] = host_overhead_us(lambda backend=backend: run_plan(backend, spec, launches, stream))
    return res


PARITY_BAR = 1.02  # t(cutile-rs) / t(cuTile Python) above this needs an investigation (report)


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of the positive finite values (None when there are none)."""
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def summarize(records: list[dict]) -> dict:
    """Per-op geomean / worst ratio, the overall geomean, and the ops above the parity bar (by their
    worst case, and by their geomean)."""
    per_op: dict[str, list[float]] = {}
    for r in records:
        if r.get("ratio_rs_over_cutile"):
            per_op.setdefault(r["op"], []).append(r["ratio_rs_over_cutile"])
    ops = {op: {"geomean_ratio": geomean(v), "max_ratio": max(v), "cases": len(v)} for op, v in per_op.items()}
    return {"per_op": ops,
            "overall_geomean_ratio": geomean([v for vs in per_op.values() for v in vs]),
            "overall_call_geomean_ratio": geomean(r.get("call_ratio_rs_over_cutile") for r in records),
            "geomean_rs_over_best_torch": geomean(r.get("ratio_rs_over_best_torch") for r in records),
            "ops_over_1_02": sorted(op for op, s in ops.items() if s["max_ratio"] > PARITY_BAR),
            "ops_geomean_over_1_02": sorted(op for op, s in ops.items() if (s["geomean_ratio"] or 0) > PARITY_BAR)}


def run(ops: list[str], out: Path, columns: Iterable[str] = COLUMNS, budget_s: float = 0.3,
        dtypes: Iterable[str] | None = None, max_shapes: int | None = None,
        shapes: set[tuple[int, ...]] | None = None) -> dict:
    """Benchmark `ops` (every dtype of each, or `dtypes`; the first `max_shapes` bench shapes, of
    those only `shapes` when given) and write the results to `out` after every case (partial results
    survive a timeout)."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # torch f32 GEMMs like the kernels' (TF32)
    try:
        return _run(ops, out, list(columns), budget_s, dtypes, max_shapes, shapes)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def _run(ops: list[str], out: Path, columns: list[str], budget_s: float, dtypes: Iterable[str] | None,
         max_shapes: int | None, shapes: set[tuple[int, ...]] | None) -> dict:
    from tileport.ops.specs import get_spec
    flush = make_flush("cuda")
    result: dict[str, Any] = {"environment": environment(), "ceilings": ceilings(flush), "columns": list(columns),
                              "records": [], "rand_input_records": []}
    _write(out, result)
    for op in ops:
        spec = get_spec(op)
        for dtype in dtypes or spec.dtypes:
            if dtype not in spec.dtypes:
                continue
            for shape in list(spec.bench_shapes)[:max_shapes]:
                if shapes is not None and tuple(shape) not in shapes:
                    continue
                for dist in INPUT_DISTRIBUTIONS[spec.kind]:
                    rec = bench_case(spec, dtype, tuple(shape), flush, columns, result["ceilings"], budget_s, dist)
                    result["records" if dist == "randn" else "rand_input_records"].append(rec)
                    _write(out, result)
    result["launch_overhead_us"] = launch_overhead()
    result["summary"] = summarize(result["records"])
    _write(out, result)
    return result


def parse_shapes(text: str) -> set[tuple[int, ...]] | None:
    """"1024x16384,1x16384x8x128" -> {(1024, 16384), (1, 16384, 8, 128)}; "" -> None (every shape)."""
    if not text:
        return None
    return {tuple(int(d) for d in item.split("x")) for item in text.split(",") if item}


def _write(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from tileport.ops import op_names
    ap = argparse.ArgumentParser(prog="python3 -m tileport.gpu.bench", description=__doc__.split("\n")[0])
    ap.add_argument("ops", nargs="*", help="operators (default: all)")
    ap.add_argument("--out", type=Path, default=Path("out/bench.json"))
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of repetitions per case, column and timer")
    ap.add_argument("--dtypes", default="", help="comma-separated dtypes (default: each op's)")
    ap.add_argument("--max-shapes", type=int, default=None, help="only the first N bench shapes of each op")
    ap.add_argument("--shapes", default="", help="only these bench shapes, e.g. 1024x16384,1x16384x8x128")
    ap.add_argument("--columns", default=",".join(COLUMNS), help=f"comma-separated subset of {','.join(COLUMNS)}")
    args = ap.parse_args(argv)
    from tileport.ops.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"{ap.prog}: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    columns = [c for c in args.columns.split(",") if c]
    unknown = sorted(set(columns) - set(COLUMNS)) + sorted(set(args.ops) - set(op_names()))
    if unknown:
        ap.error(f"unknown columns / ops: {', '.join(unknown)}")
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError:
        ap.error(f"--shapes: {args.shapes!r} is not a comma-separated list of AxBx... sizes")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = run(args.ops or op_names(), args.out, columns, args.budget,
                 [d for d in args.dtypes.split(",") if d] or None, args.max_shapes, shapes)
    s = result["summary"]
    print(f"geomean t(cutile-rs)/t(cuTile Python): kernel {s['overall_geomean_ratio']}, call "
          f"{s['overall_call_geomean_ratio']}; t(cutile-rs)/t(best torch) {s['geomean_rs_over_best_torch']}")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
