"""fmha_fwd and flash_decode against PyTorch's scaled_dot_product_attention backends (GPU only).

    python3 -m tileport.gpu.sdpa_compare --out FILE.json [--seqs 4096 8192 16384] [--budget 0.2]
        [--only prefill|decode|all]

Prefill (`cases`):
For each (sequence length, causal) case with bf16, head dim 128, 32 query and 8 KV heads (GQA) and
every sequence at full length: the kernel time (CUPTI, L2 flushed, median) of `fmha_fwd` on the
`cutile` and `cutile-rs` backends and of `F.scaled_dot_product_attention` under each SDPA backend
this machine runs (flash, cuDNN, memory-efficient; `enable_gqa=True`), TFLOP/s (causal counts half
the score matrix) and the share of the bf16 dense peak; outputs are checked against the first
SDPA backend that runs before timing. A backend that cannot run a case is recorded with its
error, never dropped. `kernels` holds, per column, the kernels one call runs with their launch
attributes (block size, registers, shared memory, occupancy): how cuDNN's kernel is built beside ours.

Decode (`decode_cases`): one query token per sequence against a full KV cache of batch x seq >= 64k
tokens, bf16, head dim 128, 32 query / 8 KV heads: `flash_decode` on both tile backends (at each
split setting of DECODE_SWEEP: blocks per SM the split-KV plan aims for) against SDPA (query length
1, `enable_gqa`), with the achieved bandwidth on the KV cache bytes as a share of the measured
device copy bandwidth (`copy_bandwidth`: read + write bytes of a copy of DECODE_COPY_BYTES), and
`kernels`: the kernels one call of each SDPA backend and of our plan runs, with their launch attributes.

Kernel breakdown (`kernel_breakdown`, with decode): every kernel one call of BREAKDOWN_CASES runs
on each tile backend, from the profiler trace (name, median device time, grid, block, registers,
shared memory): where t(cutile-rs) / t(cutile) of a small case comes from when both sides' SASS
is the same (flash_decode_sinks with a 128 window: 1.22 on the H200, identical sm_90 SASS).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

BATCH_TOKENS = 16384          # batch x sequence length kept constant: the same work per case
HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
BF16_DENSE_PEAK_TFLOPS = 989.4  # H100/H200 SXM bf16 dense tensor-core peak (datasheet)
SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")


def flops(batch: int, seq: int, causal: bool) -> float:
    full = 4.0 * batch * HEADS_Q * seq * seq * HEAD_DIM  # QK^T and PV, 2 flops per multiply-add
    return full / 2 if causal else full


def _inputs(seq: int):
    import torch
    batch = max(1, BATCH_TOKENS // seq)
    g = torch.Generator(device="cuda").manual_seed(seq)
    shape = lambda h: (batch, h, seq, HEAD_DIM)  # noqa: E731
    q = (torch.randn(shape(HEADS_Q), device="cuda", generator=g) * 0.5).bfloat16()
    k = (torch.randn(shape(HEADS_KV), device="cuda", generator=g) * 0.5).bfloat16()
    v = torch.randn(shape(HEADS_KV), device="cuda", generator=g).bfloat16()
    lens = torch.full((batch,), seq, dtype=torch.int32, device="cuda")
    return batch, q, k, v, lens


def _sdpa(q, k, v, causal: bool, backend: str, expand: bool) -> Callable[[], Any]:
    """SDPA under one backend: GQA natively (`enable_gqa`), or with K/V expanded to every query head
    (what a user does for a backend without GQA support; the expansion is outside the timed call)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if expand:
        k, v = (t.repeat_interleave(HEADS_Q // HEADS_KV, dim=1) for t in (k, v))

    def run():
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=not expand)
    return run


def _sdpa_runner(q, k, v, causal: bool, backend: str) -> tuple[Callable[[], Any], str]:
    try:
        fn = _sdpa(q, k, v, causal, backend, expand=False)
        fn()
        return fn, "enable_gqa"
    except RuntimeError:  # this backend has no GQA kernel for the case
        return _sdpa(q, k, v, causal, backend, expand=True), "expanded K/V"


def _ours(q, k, v, lens, causal: bool, backend: str) -> Callable[[], Any]:
    import tileport.ops as ops

    def run():
        return ops.fmha_fwd(q, k, v, lens, causal, backend=backend)[0]
    return run


def case(seq: int, causal: bool, budget_s: float, flush) -> dict:
    import torch

    from tileport.gpu.timing import gpu_time
    batch, q, k, v, lens = _inputs(seq)
    rec: dict[str, Any] = {"seq": seq, "batch": batch, "heads_q": HEADS_Q, "heads_kv": HEADS_KV,
                           "head_dim": HEAD_DIM, "dtype": "bfloat16", "causal": causal, "columns": {}}
    runners: dict[str, tuple[Callable[[], Any], str]] = {}
    for b in SDPA_BACKENDS:
        try:
            runners[f"sdpa_{b.lower()}"] = _sdpa_runner(q, k, v, causal, b)
        except RuntimeError as e:
            rec["columns"][f"sdpa_{b.lower()}"] = {"error": f"{type(e).__name__}: {e}"[:500]}
    runners.update({be: (_ours(q, k, v, lens, causal, be), "GQA in the kernel") for be in ("cutile", "cutile-rs")})
    work = flops(batch, seq, causal)
    reference, reference_name = None, None
    for name, (fn, gqa) in runners.items():
        col: dict[str, Any] = {"gqa": gqa}
        try:
            got = fn().float()
            if reference is None:  # the first SDPA backend that runs is the numerical reference
                reference, reference_name = got, name
            col["max_abs_err_vs_reference"] = float((got - reference).abs().max())
            t = gpu_time(fn, flush, budget_s=budget_s)
            col.update(t.to_dict())
            col["tflops"] = work / (t.median_us * 1e-6) / 1e12
            col["pct_bf16_peak"] = 100.0 * col["tflops"] / BF16_DENSE_PEAK_TFLOPS
        except Exception as e:  # noqa: BLE001 - a backend that cannot run the case is a result
            col["error"] = f"{type(e).__name__}: {e}"[:500]
        rec["columns"][name] = col
        torch.cuda.synchronize()
    rec["reference"] = reference_name
    rec["kernels"] = {name: profiled_kernels(fn) for name, (fn, _) in runners.items()
                      if "median_us" in rec["columns"][name]}
    sdpa = {n: c["median_us"] for n, c in rec["columns"].items() if n.startswith("sdpa_") and "median_us" in c}
    if sdpa:
        fastest = min(sdpa, key=sdpa.get)
        rec["fastest_sdpa"] = fastest
        for be in ("cutile", "cutile-rs"):
            c = rec["columns"][be]
            if "median_us" in c:
                c["t_over_fastest_sdpa"] = c["median_us"] / sdpa[fastest]
    ours = rec["columns"]
    if "median_us" in ours["cutile"] and "median_us" in ours["cutile-rs"]:
        rec["parity_rs_over_cutile"] = ours["cutile-rs"]["median_us"] / ours["cutile"]["median_us"]
    return rec


# ---- decode -------------------------------------------------------------------------------------

DECODE_CASES = ((16, 4096), (16, 8192), (64, 4096), (4, 32768), (128, 1024))  # (batch, seq)
DECODE_SWEEP = (2, 1, 4, 8)  # _attention.DECODE_BLOCKS_PER_SM values; the first is the plan's
DECODE_COPY_BYTES = 2 << 30


def kv_bytes(batch: int, seq: int) -> int:
    return 2 * batch * HEADS_KV * seq * HEAD_DIM * 2  # k and v, bf16


def copy_bandwidth(budget_s: float, flush) -> dict:
    """Device-to-device copy of DECODE_COPY_BYTES: (read + write bytes) / median time."""
    import torch

    from tileport.gpu.timing import gpu_time
    src = torch.empty(DECODE_COPY_BYTES // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = gpu_time(lambda: dst.copy_(src), flush, budget_s=budget_s)
    return {"bytes": DECODE_COPY_BYTES, **t.to_dict(),
            "gb_per_s": 2 * DECODE_COPY_BYTES / (t.median_us * 1e-6) / 1e9}


class _BlocksPerSm:
    """Sets the split-KV plan's blocks per SM for the calls inside (plans cached before are
    dropped on entry and exit, so every call plans with the setting in force)."""

    def __init__(self, value: int):
        self.value = value

    def __enter__(self):
        from tileport.ops import plan_cache
        from tileport.ops.specs import _attention
        self.saved = _attention.DECODE_BLOCKS_PER_SM
        _attention.DECODE_BLOCKS_PER_SM = self.value
        plan_cache.clear()

    def __exit__(self, *exc):
        from tileport.ops import plan_cache
        from tileport.ops.specs import _attention
        _attention.DECODE_BLOCKS_PER_SM = self.saved
        plan_cache.clear()


def _decode_inputs(batch: int, seq: int):
    import torch
    g = torch.Generator(device="cuda").manual_seed(batch * seq)
    q = (torch.randn((batch, HEADS_Q, HEAD_DIM), device="cuda", generator=g) * 0.5).bfloat16()
    k, v = ((torch.randn((batch, HEADS_KV, seq, HEAD_DIM), device="cuda", generator=g) * s).bfloat16()
            for s in (0.5, 1.0))
    lens = torch.full((batch,), seq, dtype=torch.int32, device="cuda")
    return q, k, v, lens


def _decode_sdpa(q, k, v, backend: str) -> Callable[[], Any]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q4 = q[:, :, None]

    def run():
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q4, k, v, enable_gqa=True)[:, :, 0]
    return run


def _decode_ours(q, k, v, lens, backend: str) -> Callable[[], Any]:
    import tileport.ops as ops

    def run():
        return ops.flash_decode(q, k, v, lens, backend=backend)[0]
    return run


def _timed_column(fn, reference, kv: int, copy_gbs: float, budget_s: float, flush) -> dict:
    from tileport.gpu.timing import gpu_time
    col: dict[str, Any] = {}
    got = fn().float()
    col["max_abs_err_vs_reference"] = float((got - reference).abs().max()) if reference is not None else 0.0
    t = gpu_time(fn, flush, budget_s=budget_s)
    col.update(t.to_dict())
    col["kv_gb_per_s"] = kv / (t.median_us * 1e-6) / 1e9
    col["pct_copy_bandwidth"] = 100.0 * col["kv_gb_per_s"] / copy_gbs
    return col


def decode_case(batch: int, seq: int, copy_gbs: float, budget_s: float, flush) -> dict:
    import torch

    from tileport.ops.specs import _attention
    from tileport.ops.specs._common import num_sms
    q, k, v, lens = _decode_inputs(batch, seq)
    kv = kv_bytes(batch, seq)
    rec: dict[str, Any] = {"batch": batch, "seq": seq, "tokens": batch * seq, "heads_q": HEADS_Q,
                           "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "dtype": "bfloat16",
                           "kv_bytes": kv, "columns": {}}
    reference, reference_name = None, None
    for b in SDPA_BACKENDS:
        name = f"sdpa_{b.lower()}"
        try:
            fn = _decode_sdpa(q, k, v, b)
            col = _timed_column(fn, reference, kv, copy_gbs, budget_s, flush)
            if reference is None:
                reference, reference_name = fn().float(), name
        except Exception as e:  # noqa: BLE001 - a backend that cannot run the case is a result
            col = {"error": f"{type(e).__name__}: {e}"[:500]}
        rec["columns"][name] = col
    rec["reference"] = reference_name
    for per_sm in DECODE_SWEEP:
        with _BlocksPerSm(per_sm):
            splits = _attention.decode_splits(batch, HEADS_KV, seq, num_sms(q.device))[0]
            for be in ("cutile", "cutile-rs"):
                name = f"{be}@{per_sm}"
                try:
                    col = _timed_column(_decode_ours(q, k, v, lens, be), reference, kv, copy_gbs,
                                        budget_s, flush)
                    col.update(blocks_per_sm=per_sm, splits=splits)
                except Exception as e:  # noqa: BLE001
                    col = {"error": f"{type(e).__name__}: {e}"[:500]}
                rec["columns"][name] = col
        torch.cuda.synchronize()
    rec["kernels"] = {name: profiled_kernels(_decode_sdpa(q, k, v, b), 5) for b in SDPA_BACKENDS
                      if "median_us" in rec["columns"][name := f"sdpa_{b.lower()}"]}
    rec["kernels"].update({be: profiled_kernels(_decode_ours(q, k, v, lens, be), 5) for be in ("cutile", "cutile-rs")})
    _decode_summary(rec)
    return rec


def _decode_summary(rec: dict) -> None:
    """Fastest SDPA, the plan's setting (DECODE_SWEEP[0]) against it, the best setting, parity."""
    cols = rec["columns"]
    timed = {n: c["median_us"] for n, c in cols.items() if "median_us" in c}
    sdpa = {n: t for n, t in timed.items() if n.startswith("sdpa_")}
    if sdpa:
        rec["fastest_sdpa"] = min(sdpa, key=sdpa.get)
    for be in ("cutile", "cutile-rs"):
        ours = {n: t for n, t in timed.items() if n.startswith(be + "@")}
        if ours:
            rec[f"best_{be}"] = min(ours, key=ours.get)
        plan = f"{be}@{DECODE_SWEEP[0]}"
        if plan in timed and sdpa:
            cols[plan]["t_over_fastest_sdpa"] = timed[plan] / sdpa[rec["fastest_sdpa"]]
    pairs = [timed[f"cutile-rs@{n}"] / timed[f"cutile@{n}"] for n in DECODE_SWEEP
             if f"cutile-rs@{n}" in timed and f"cutile@{n}" in timed]
    if pairs:
        rec["parity_rs_over_cutile"] = pairs
        rec["parity_rs_over_cutile_plan"] = pairs[0] if f"cutile@{DECODE_SWEEP[0]}" in timed else None


# ---- per-kernel breakdown ------------------------------------------------------------------------

BREAKDOWN_CASES = (("flash_decode_sinks", (64, 64, 8, 4096, 64, 128), "bfloat16"),
                   ("flash_decode_sinks", (16, 64, 8, 8192, 64, 0), "bfloat16"))
BREAKDOWN_REPS = 20
TRACE_ARGS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM",
              "est. achieved occupancy %")


def kernels_of_trace(events: list[dict], reps: int) -> list[dict]:
    """Kernel events of a chrome trace grouped by name (in first-seen order): calls per rep, the
    median device time and the launch attributes of the first event."""
    import statistics
    by_name: dict[str, list[dict]] = {}
    for e in events:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            by_name.setdefault(e["name"], []).append(e)
    return [{"name": name, "per_rep": len(evs) / reps,
             "median_us": statistics.median(float(e["dur"]) for e in evs),
             **{k: evs[0].get("args", {}).get(k) for k in TRACE_ARGS}}
            for name, evs in by_name.items()]


def profiled_kernels(fn: Callable[[], Any], reps: int = BREAKDOWN_REPS) -> list[dict] | dict:
    """The kernels `reps` calls of `fn` run, from the profiler trace (`kernels_of_trace`); an error is
    a result (a dict with `error`), never dropped."""
    import json as _json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile
    try:
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(trace))
            events = _json.loads(trace.read_text()).get("traceEvents", [])
        return kernels_of_trace(events, reps)
    except Exception as e:  # noqa: BLE001 - a backend that cannot run is a result
        return {"error": f"{type(e).__name__}: {e}"[:500]}


def kernel_breakdown(op: str, shape, dtype: str) -> dict:
    import tileport.ops as ops
    from tileport.ops.specs import get_spec
    inputs = get_spec(op).make_inputs(tuple(shape), dtype, "cuda", 0)
    call = lambda be: lambda: getattr(ops, op)(*inputs, backend=be)  # noqa: E731
    return {"op": op, "shape": list(shape), "dtype": dtype,
            "backends": {be: profiled_kernels(call(be)) for be in ("cutile", "cutile-rs")}}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tileport.gpu.sdpa_compare", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seqs", type=int, nargs="+", default=[4096, 8192, 16384])
    ap.add_argument("--budget", type=float, default=0.2, help="seconds of timing per column and case")
    ap.add_argument("--only", choices=("prefill", "decode", "all"), default="all")
    args = ap.parse_args(argv)
    from tileport.ops.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"{ap.prog}: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    from tileport.gpu.bench import environment
    from tileport.gpu.timing import make_flush
    import torch
    flush = make_flush(torch.device("cuda"))
    result: dict[str, Any] = {"environment": environment(), "bf16_dense_peak_tflops": BF16_DENSE_PEAK_TFLOPS,
                              "cases": [], "decode_cases": []}
    for seq in args.seqs if args.only in ("prefill", "all") else ():
        for causal in (False, True):
            rec = case(seq, causal, args.budget, flush)
            result["cases"].append(rec)
            _write(args.out, result)  # partial results survive a time limit
            cols = rec["columns"]
            print(f"seq {seq} causal {int(causal)}: " + ", ".join(
                f"{n} {c['median_us']:.0f} us ({c['tflops']:.0f} TF/s)" if "median_us" in c else f"{n} error"
                for n, c in cols.items()), flush=True)
    if args.only in ("decode", "all"):
        result["copy_bandwidth"] = copy_bandwidth(args.budget, flush)
        copy_gbs = result["copy_bandwidth"]["gb_per_s"]
        print(f"copy bandwidth {copy_gbs:.0f} GB/s", flush=True)
        for batch, seq in DECODE_CASES:
            rec = decode_case(batch, seq, copy_gbs, args.budget, flush)
            result["decode_cases"].append(rec)
            _write(args.out, result)
            print(f"decode {batch}x{seq}: " + ", ".join(
                f"{n} {c['median_us']:.0f} us ({c['pct_copy_bandwidth']:.0f} % copy bw)"
                if "median_us" in c else f"{n} error" for n, c in rec["columns"].items()), flush=True)
        result["kernel_breakdown"] = [kernel_breakdown(*c) for c in BREAKDOWN_CASES]
        _write(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
