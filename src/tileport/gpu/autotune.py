"""Search each op's declared configuration space on the GPU, for both tile backends, and cache the winner.

    python3 -m tileport.gpu.autotune softmax_online layer_norm rope --out out/autotune.json

For every op (default: every op that declares `spec.tune`), dtype and benchmark shape, and for each
backend (`cutile`: our cuTile Python kernels through ct.launch; `cutile-rs`: the generated cdylib),
every candidate of `spec.tune.candidates(shape, dtype)` (the same list for both backends):

1. runs once into outputs poisoned with NaN and is compared with the spec's reference at the op's
   tolerance (`gpu.check.compare`); a candidate that fails, or raises (e.g. a specialization that does
   not compile), is recorded with the reason and cannot win;
2. is timed with `gpu.timing.gpu_time` (L2 flushed, CUPTI kernel time), first briefly (`--budget`),
   then the best `--finalists` again with a longer budget (`--final-budget`); the winner is the
   correct candidate with the lowest final median.

Each case also times the op as a PyTorch user runs it (`ops.baselines`, eager, same inputs, same
timer) and states its target: TARGET_PCT of the copy bandwidth or torch eager's share, whichever is
higher (torch.compile is `tileport bench`'s to measure: compiling per case would not fit a search).

The winner is written to the autotune cache (ops.autotune: one file per GPU name, atomic writes),
keyed by (GPU, op, backend, dtype, shape class, space fingerprint), so later plans on this GPU use
it (`--no-store`: search only). The JSON output (rewritten after every case, so a timeout keeps what
was measured) has every candidate's result, the default's and the winner's time, GB/s and share of
the device copy bandwidth measured in the same run, and the rs/cuTile ratio of the winners and of
the same configuration. Cases not started before `--time-limit` are listed as not run.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from tileport.gpu.bench import parse_shapes
from tileport.gpu.check import TILE_BACKENDS, compare
from tileport.gpu.timing import gpu_time, make_flush
from tileport.ops import autotune
from tileport.ops.spec import OpSpec


TARGET_PCT = 85.0  # share of the copy bandwidth a memory-bound kernel should reach (or torch's, if higher)


def tunable_ops() -> list[str]:
    from tileport.ops.specs import all_specs
    return sorted(name for name, spec in all_specs().items() if spec.tune is not None)


def _tensors(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


class Problem:
    """One (op, dtype, shape) on the GPU: inputs, reference, outputs, and a runner per config."""

    def __init__(self, spec: OpSpec, dtype: str, shape: tuple):
        import torch
        self.spec, self.dtype, self.shape = spec, dtype, tuple(shape)
        self.inputs = spec.make_inputs(self.shape, dtype, "cuda", 0)
        self.ref = spec.reference(*self.inputs)
        self.outs = spec.allocate(*self.inputs)
        self.stream = torch.cuda.current_stream()

    def runner(self, backend: str, config: dict):
        from tileport.ops.backends import run_plan
        launches = self.spec.plan(*self.inputs, self.outs, config=config)
        return lambda: run_plan(backend, self.spec, launches, self.stream)

    def torch_eager(self):
        """The op as a PyTorch user writes it, on the same inputs (its own outputs)."""
        from tileport.ops.baselines import baseline
        fn = baseline(self.spec)
        return lambda: fn(*self.inputs)

    def check(self, run) -> tuple[bool, float, str]:
        import torch
        for o in _tensors(self.outs):
            o.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        tol = self.spec.tolerances[self.dtype]
        ok, _, ratio, msg = compare(self.outs, self.ref, tol.rtol, tol.atol)
        return ok, ratio, msg


def _rate(spec: OpSpec, shape: tuple, dtype: str, us: float | None, copy_gbps: float) -> dict:
    if us is None or spec.bytes is None:
        return {}
    gbps = spec.bytes(tuple(shape), dtype) / (us * 1e-6) / 1e9
    return {"gbps": gbps, "pct_copy_bw": 100 * gbps / copy_gbps}


def search_backend(problem: Problem, backend: str, candidates: list[dict], flush, budget: float,
                   final_budget: float, finalists: int, copy_gbps: float) -> list[dict]:
    """Every candidate's correctness and time on one backend (final times for the finalists)."""
    results = []
    for cfg in candidates:
        rec: dict[str, Any] = {"config": cfg, "ok": False, "err_over_tol": None, "error": "", "us": None}
        try:
            run = problem.runner(backend, cfg)
            ok, ratio, msg = problem.check(run)
            rec.update(ok=ok, err_over_tol=ratio, error=msg)
            if ok:
                rec["us"] = gpu_time(run, flush, budget_s=budget, min_reps=5, warmup_s=0.01).median_us
        except Exception as e:  # noqa: BLE001 - a candidate that fails is recorded and cannot win
            rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:1000])
        results.append(rec)
    timed = sorted((r for r in results if r["us"] is not None), key=lambda r: r["us"])
    for rec in timed[:finalists]:
        run = problem.runner(backend, rec["config"])
        rec["screen_us"] = rec["us"]
        rec["us"] = gpu_time(run, flush, budget_s=final_budget).median_us
        rec["final"] = True
    for rec in results:
        rec.update(_rate(problem.spec, problem.shape, problem.dtype, rec["us"], copy_gbps))
    return results


def _winner(results: list[dict]) -> dict | None:
    final = [r for r in results if r.get("final")]
    return min(final, key=lambda r: r["us"]) if final else None


def _result_of(results: list[dict], config: dict) -> dict | None:
    return next((r for r in results if r["config"] == config), None)


def tune_case(spec: OpSpec, dtype: str, shape: tuple, backends: Iterable[str], flush, copy_gbps: float,
              gpu: str, store: bool, budget: float, final_budget: float, finalists: int) -> dict:
    assert spec.tune is not None
    candidates = spec.tune.candidates(tuple(shape), dtype)
    default = spec.tune.default(tuple(shape), dtype)
    case: dict[str, Any] = {"op": spec.name, "dtype": dtype, "shape": list(shape),
                            "shape_class": spec.tune.shape_class(tuple(shape)), "default": default,
                            "n_candidates": len(candidates), "backends": {}}
    problem = Problem(spec, dtype, shape)
    for backend in backends:
        results = search_backend(problem, backend, candidates, flush, budget, final_budget, finalists,
                                 copy_gbps)
        win, dflt = _winner(results), _result_of(results, default)
        b: dict[str, Any] = {"candidates": results, "chosen": win["config"] if win else None,
                             "chosen_us": win["us"] if win else None,
                             "chosen_pct_copy_bw": win.get("pct_copy_bw") if win else None,
                             "default_us": dflt["us"] if dflt else None,
                             "default_pct_copy_bw": dflt.get("pct_copy_bw") if dflt else None,
                             "failed": sum(1 for r in results if not r["ok"])}
        if win and dflt and dflt["us"]:
            b["speedup_over_default"] = dflt["us"] / win["us"]
        if win and store:
            key = autotune.entry_key(spec, backend, dtype, tuple(shape))
            entry = {"config": win["config"], "us": win["us"], "default_us": b["default_us"],
                     "shape": list(shape), "candidates": len(candidates),
                     "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            b["cache_file"] = str(autotune.store(gpu, key, entry))
            b["cache_key"] = key
        case["backends"][backend] = b
    _parity(case)
    _torch_eager(case, problem, flush, final_budget, copy_gbps)
    return case


def _torch_eager(case: dict, problem: Problem, flush, budget: float, copy_gbps: float) -> None:
    """torch eager's time and share of the copy bandwidth, and the case's target share."""
    try:
        us = gpu_time(problem.torch_eager(), flush, budget_s=budget).median_us
    except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, the search stands
        case["torch_eager"] = {"error": f"{type(e).__name__}: {e}"[:500]}
        return
    case["torch_eager"] = {"us": us, **_rate(problem.spec, problem.shape, problem.dtype, us, copy_gbps)}
    case["target_pct_copy_bw"] = max(TARGET_PCT, case["torch_eager"].get("pct_copy_bw", 0.0))


def _parity(case: dict) -> None:
    """rs/cuTile of the two winners, and of cuTile's winner run on both (same configuration)."""
    b = case["backends"]
    if "cutile" not in b or "cutile-rs" not in b:
        return
    cu, rs = b["cutile"], b["cutile-rs"]
    if cu["chosen_us"] and rs["chosen_us"]:
        case["ratio_rs_over_cutile_chosen"] = rs["chosen_us"] / cu["chosen_us"]
    if cu["chosen"] is not None:
        a, r = _result_of(cu["candidates"], cu["chosen"]), _result_of(rs["candidates"], cu["chosen"])
        if a and r and a["us"] and r["us"]:
            case["ratio_rs_over_cutile_same_config"] = r["us"] / a["us"]


def summarize(cases: list[dict]) -> dict:
    rows = []
    for c in cases:
        for backend, b in c.get("backends", {}).items():
            target = c.get("target_pct_copy_bw")
            pct = b["chosen_pct_copy_bw"]
            rows.append({"op": c["op"], "dtype": c["dtype"], "shape": c["shape"], "backend": backend,
                         "chosen": b["chosen"], "chosen_pct_copy_bw": pct,
                         "default_pct_copy_bw": b["default_pct_copy_bw"],
                         "torch_eager_pct_copy_bw": c.get("torch_eager", {}).get("pct_copy_bw"),
                         "target_pct_copy_bw": target,
                         "meets_target": None if target is None or pct is None else pct >= target,
                         "ratio_rs_over_cutile_same_config": c.get("ratio_rs_over_cutile_same_config"),
                         "speedup_over_default": b.get("speedup_over_default"), "failed": b["failed"]})
    ratios = [c["ratio_rs_over_cutile_chosen"] for c in cases if c.get("ratio_rs_over_cutile_chosen")]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    return {"per_case": rows, "geomean_ratio_rs_over_cutile_chosen": geo,
            "cases_without_winner": sum(1 for r in rows if r["chosen"] is None)}


def run(ops: list[str], out: Path, backends: list[str], dtypes: list[str] | None, max_shapes: int | None,
        store: bool, budget: float, final_budget: float, finalists: int, time_limit: float,
        shapes: set[tuple[int, ...]] | None = None) -> dict:
    import torch

    from tileport.gpu.bench import copy_bandwidth, environment
    from tileport.ops.specs import get_spec
    t0 = time.monotonic()
    flush = make_flush("cuda")
    gpu = torch.cuda.get_device_name(0)
    copy_gbps, _ = copy_bandwidth(flush)
    result: dict[str, Any] = {"environment": environment(), "gpu": gpu, "copy_gbps": copy_gbps,
                              "cache_dir": str(autotune.cache_dir()), "store": store, "backends": backends,
                              "cases": [], "not_run": []}
    _write(out, result)
    for op in ops:
        spec = get_spec(op)
        for dtype in dtypes or spec.dtypes:
            if dtype not in spec.dtypes:
                continue
            for shape in list(spec.bench_shapes)[:max_shapes]:
                if shapes is not None and tuple(shape) not in shapes:
                    continue
                if time.monotonic() - t0 > time_limit:
                    result["not_run"].append({"op": op, "dtype": dtype, "shape": list(shape),
                                              "why": f"time limit {time_limit:.0f} s reached"})
                    continue
                result["cases"].append(tune_case(spec, dtype, tuple(shape), backends, flush, copy_gbps,
                                                 gpu, store, budget, final_budget, finalists))
                _write(out, result)
    result["summary"] = summarize(result["cases"])
    result["seconds"] = round(time.monotonic() - t0, 1)
    _write(out, result)
    return result


def _write(path: Path, data: dict) -> None:
    from tileport.atomic import write_text_atomic
    write_text_atomic(path, json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python3 -m tileport.gpu.autotune", description=__doc__.split("\n")[0])
    ap.add_argument("ops", nargs="*", help="operators with a configuration space (default: all of them)")
    ap.add_argument("--out", type=Path, default=Path("out/autotune.json"))
    ap.add_argument("--backends", default=",".join(TILE_BACKENDS), help="comma-separated tile backends")
    ap.add_argument("--dtypes", default="", help="comma-separated dtypes (default: each op's)")
    ap.add_argument("--max-shapes", type=int, default=None, help="only the first N bench shapes of each op")
    ap.add_argument("--shapes", default="", help="only these bench shapes, e.g. 1024x16384,1x16384x8x128")
    ap.add_argument("--budget", type=float, default=0.02, help="seconds of repetitions per candidate (screening)")
    ap.add_argument("--final-budget", type=float, default=0.2, help="seconds of repetitions per finalist")
    ap.add_argument("--finalists", type=int, default=3, help="candidates re-timed with --final-budget")
    ap.add_argument("--time-limit", type=float, default=480.0, help="start no case after this many seconds")
    ap.add_argument("--no-store", action="store_true", help="search only; leave the autotune cache alone")
    args = ap.parse_args(argv)
    known = tunable_ops()
    unknown = sorted(set(args.ops) - set(known))
    backends = [b for b in args.backends.split(",") if b]
    if unknown or not backends or set(backends) - set(TILE_BACKENDS):
        ap.error(f"ops must be among {', '.join(known)} (got {', '.join(unknown) or '-'}); "
                 f"backends among {', '.join(TILE_BACKENDS)}")
    if args.finalists < 1:
        ap.error("--finalists must be at least 1")
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError:
        ap.error(f"--shapes: {args.shapes!r} is not a comma-separated list of AxBx... sizes")
    from tileport.ops.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"{ap.prog}: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = run(args.ops or known, args.out, backends, [d for d in args.dtypes.split(",") if d] or None,
                 args.max_shapes, not args.no_store, args.budget, args.final_budget, args.finalists,
                 args.time_limit, shapes)
    for row in result["summary"]["per_case"]:
        print(f"{row['op']:15} {row['dtype']:9} {str(row['shape']):22} {row['backend']:9} "
              f"default {_pct(row['default_pct_copy_bw'])} -> tuned {_pct(row['chosen_pct_copy_bw'])} "
              f"of copy BW (torch eager {_pct(row['torch_eager_pct_copy_bw'])}, target "
              f"{_pct(row['target_pct_copy_bw'])}) rs/cuTile {_ratio(row['ratio_rs_over_cutile_same_config'])}  "
              f"{row['chosen']}")
    print(f"not run (time limit): {len(result['not_run'])}; results: {args.out}; cache: {result['cache_dir']}")
    return 0 if result["summary"]["cases_without_winner"] == 0 else 1


def _pct(v: float | None) -> str:
    return "  -  " if v is None else f"{v:5.1f}%"


def _ratio(v: float | None) -> str:
    return "  -  " if v is None else f"{v:5.3f}"


if __name__ == "__main__":
    sys.exit(main())
