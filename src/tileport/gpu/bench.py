"""Parity benchmark: cutile-rs vs cuTile Python vs torch, side by side in one process.

For every op, dtype and benchmark shape it records each backend's median GPU kernel time (L2 flushed,
profiler events), the ratio t(cutile-rs) / t(cuTile Python), achieved GB/s (memory-bound ops) or
TFLOP/s (GEMMs) and their share of the ceilings measured in the same run (device copy bandwidth,
cuBLAS bf16 GEMM rate). It also measures the host cost of one launch through the C ABI vs ct.launch.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from tileport.gpu.timing import gpu_time, host_overhead_us, make_flush
from tileport.ops.backends import BACKENDS
from tileport.ops.spec import OpSpec

H200_BF16_DATASHEET_TFLOPS = 989.0  # dense bf16, vendor datasheet (for reference next to the measured rate)


def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def environment() -> dict:
    import torch

    from tileport import toolchain
    smi = _cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    ti = toolchain.tileiras()
    return {
        "gpu": torch.cuda.get_device_name(0),
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cuda_tile": toolchain._pkg_version("cuda-tile"),
        "tileiras": _cmd([str(ti), "--version"]).splitlines()[-1] if ti else "",
        "python": platform.python_version(),
        "commit": os.environ.get("TILEPORT_COMMIT") or _cmd(["git", "rev-parse", "HEAD"]),
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def ceilings(flush) -> dict:
    """Device copy bandwidth (1 GiB read + 1 GiB write) and the cuBLAS bf16 GEMM rate (8192^3)."""
    import torch
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = gpu_time(lambda: dst.copy_(src), flush, budget_s=0.5)
    copy_gbps = 2 * src.numel() / (t.median_us * 1e-6) / 1e9
    del src, dst
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t2 = gpu_time(lambda: torch.matmul(a, b), flush, budget_s=0.5)
    return {"copy_gbps": copy_gbps, "copy_timing": t.to_dict(),
            "cublas_bf16_tflops": 2 * n ** 3 / (t2.median_us * 1e-6) / 1e12, "cublas_timing": t2.to_dict(),
            "bf16_datasheet_tflops": H200_BF16_DATASHEET_TFLOPS}


def bench_case(spec: OpSpec, dtype: str, shape: tuple, flush, backends: Iterable[str], ceil: dict,
               budget_s: float) -> dict:
    import torch

    from tileport.ops.api import call
    inputs = spec.make_inputs(shape, dtype, "cuda", 0)
    rec: dict[str, Any] = {"op": spec.name, "dtype": dtype, "shape": list(shape), "kind": spec.kind,
                           "times_us": {}, "timings": {}, "errors": {}}
    for backend in backends:
        try:
            outs = call(spec, *inputs, backend=backend) if backend != "torch" else None

            def run(backend=backend, outs=outs):
                if backend == "torch":
                    spec.reference(*inputs)
                else:
                    call(spec, *inputs, out=outs, backend=backend)
            t = gpu_time(run, flush, budget_s=budget_s)
            rec["times_us"][backend] = t.median_us
            rec["timings"][backend] = t.to_dict()
        except Exception as e:  # noqa: BLE001 - recorded, and the report lists it
            rec["errors"][backend] = f"{type(e).__name__}: {e}"[:1000]
    torch.cuda.synchronize()
    times = rec["times_us"]
    if "cutile" in times and "cutile-rs" in times:
        rec["ratio_rs_over_cutile"] = times["cutile-rs"] / times["cutile"]
    if spec.bytes:
        nbytes = spec.bytes(tuple(shape), dtype)
        rec["bytes"] = nbytes
        rec["gbps"] = {b: nbytes / (t * 1e-6) / 1e9 for b, t in times.items()}
        rec["pct_copy_bw"] = {b: 100 * g / ceil["copy_gbps"] for b, g in rec["gbps"].items()}
    if spec.flops:
        flops = spec.flops(tuple(shape))
        rec["flops"] = flops
        rec["tflops"] = {b: flops / (t * 1e-6) / 1e12 for b, t in times.items()}
        if spec.kind == "compute":
            rec["pct_cublas_bf16"] = {b: 100 * v / ceil["cublas_bf16_tflops"] for b, v in rec["tflops"].items()}
            rec["pct_bf16_datasheet"] = {b: 100 * v / ceil["bf16_datasheet_tflops"] for b, v in rec["tflops"].items()}
    return rec


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
            "ops_over_1_02": sorted(op for op, s in ops.items() if s["max_ratio"] > PARITY_BAR),
            "ops_geomean_over_1_02": sorted(op for op, s in ops.items() if (s["geomean_ratio"] or 0) > PARITY_BAR)}


def run(ops: list[str], out: Path, backends: Iterable[str] = BACKENDS, budget_s: float = 0.3,
        dtypes: Iterable[str] | None = None) -> dict:
    import torch

    from tileport.ops.specs import get_spec
    torch.backends.cuda.matmul.allow_tf32 = False
    flush = make_flush("cuda")
    result: dict[str, Any] = {"environment": environment(), "ceilings": ceilings(flush), "records": []}
    out.write_text(json.dumps(result, indent=1))
    for op in ops:
        spec = get_spec(op)
        for dtype in dtypes or spec.dtypes:
            if dtype not in spec.dtypes:
                continue
            for shape in spec.bench_shapes:
                result["records"].append(bench_case(spec, dtype, tuple(shape), flush, backends, result["ceilings"],
                                                    budget_s))
                out.write_text(json.dumps(result, indent=1))  # partial results survive a timeout
    result["launch_overhead_us"] = launch_overhead()
    result["summary"] = summarize(result["records"])
    out.write_text(json.dumps(result, indent=1))
    return result
