"""Where our attention kernels stand against cuDNN's SDPA kernels (GPU only, bf16, head dim 128).

    python3 eval/measure/attention_space.py --out FILE.json [--budget 0.05] [--only prefill|decode|all]
        [--no-search]

The issue's goals are fmha forward at or above the fastest SDPA backend at 4k-16k tokens and flash
decode at >= 85 % of copy bandwidth and >= SDPA; cuDNN's kernels are faster than ours on the H200. This
searches each kernel's declared tuning space (`_attention.TUNE_SPACE`) plus its K/V load latency hint on
the cuTile Python side, in the same process and with the same timer as cuDNN, so that the note can say
whether a configuration closes the gap or the gap is structural.

Prefill (`prefill`), fmha_fwd_kernel:
1. BLOCK_M x BLOCK_N x PREFILL_KV_LATENCY at the kernel's own occupancy / worker warps (seq 8192,
   non-causal);
2. the best of 1 under each occupancy x num_worker_warps;
3. the default and the best configuration against cuDNN at every sequence length and both maskings,
   with `heavy_first`: the default with its query tiles taken in reverse order (under a causal mask the
   last tiles have the most key tiles, so they start first and the light ones fill the tail).

Decode (`decode`), flash_decode_partial_kernel (the combine kernel as it is), at the decode cases below
85 % of copy bandwidth: BLOCK_N x DECODE_KV_LATENCY, then the best under each occupancy x split plan
(blocks per SM), against cuDNN's decode and our default.

A candidate is a copy of our kernel module with the latency constants set (cuTile reads module constants
when the kernel is decorated), `kernel.replace_hints` for occupancy / worker warps, and the plan's own
arguments with the tile constants (and the grid or split plan) replaced. Its output is compared with
cuDNN's before it is timed; a candidate that fails or does not compile is recorded with the reason and
cannot win. Every kernel each column runs is recorded with its launch attributes (profiler). The JSON is
rewritten after every measurement.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))



def write(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


class Variants:
    """Kernel objects from copies of our attention module with module constants set (and fmha_fwd's query
    tiles optionally reversed), per hints (occupancy, worker warps)."""

    def __init__(self, workdir: Path):
        from tileport.ops.spec import KERNELS_DIR
        self.source = (Path(KERNELS_DIR) / "attention.py").read_text()
        self.workdir = workdir
        self.modules: dict[tuple, Any] = {}

    def kernel(self, name: str, constants: dict[str, int], heavy_first: bool = False, **hints):
        from tileport.capture.export import load_kernel_module
        key = (tuple(sorted(constants.items())), heavy_first)
        if key not in self.modules:
            text = self.source
            for const, value in constants.items():
                text = self._set_constant(text, const, value)
            if heavy_first:  # the first block-index line after fmha_fwd_kernel's def (mla_prefill has one too)
                head, _, body = text.partition("\ndef fmha_fwd_kernel(")
                body = body.replace("    mb = ct.bid(0)\n", "    mb = ct.num_blocks(0) - 1 - ct.bid(0)\n", 1)
                text = head + "\ndef fmha_fwd_kernel(" + body
            path = self.workdir / f"attention_{len(self.modules)}.py"
            path.write_text(text)
            self.modules[key] = load_kernel_module(path)
        kernel = getattr(self.modules[key], name)
        return kernel.replace_hints(**hints) if hints else kernel

    @staticmethod
    def _set_constant(text: str, name: str, value: int) -> str:
        lines = [line for line in text.splitlines() if line.startswith(f"{name} = ")]
        if len(lines) != 1:
            raise RuntimeError(f"attention.py no longer declares {name} once at module level")
        return text.replace(f"\n{lines[0]}\n", f"\n{name} = {value}\n")


def measure(fn, reference, flush, budget: float, tol: float) -> dict:
    from tileport.gpu.timing import gpu_time
    try:
        err = float((fn().float() - reference).abs().max())
        if not err <= tol:
            return {"error": f"max |o - cuDNN| {err:.3g} > {tol}"}
        t = gpu_time(fn, flush, budget_s=budget)
        return {"median_us": t.median_us, "max_abs_err_vs_cudnn": err, **t.to_dict()}
    except Exception as e:  # noqa: BLE001 - a candidate that cannot run is a result
        return {"error": f"{type(e).__name__}: {e}"[:400]}


def run_launches(launches, kernels) -> Callable[[], None]:
    """ct.launch of each plan launch with the given kernel object (the launch's kernel by default)."""
    import cuda.tile as ct
    import torch

    from tileport.ops.backends_cutile import positional_args
    from tileport.capture.export import kernel_parameters
    calls = [(tuple(int(g) for g in launch.grid), kernel,
              positional_args(kernel_parameters(kernel), launch)) for launch, kernel in zip(launches, kernels)]

    def run():
        stream = torch.cuda.current_stream()
        for grid, kernel, args in calls:
            ct.launch(stream, grid, kernel, args)
    return run


class Search:
    """Candidates tried on one case, recorded in `records` (and the JSON) as they are measured."""

    def __init__(self, out: Path, result: dict, key: str, budget: float):
        self.out, self.result, self.records, self.budget = out, result, result.setdefault(key, []), budget

    def best(self, candidates: Iterable[dict], attempt: Callable[[dict], dict]) -> dict | None:
        tried = []
        for cfg in candidates:
            rec = {"config": cfg, **attempt(cfg)}
            self.records.append(rec)
            write(self.out, self.result)
            print(cfg, rec.get("median_us", rec.get("error")), flush=True)
            tried.append(rec)
        ok = [r for r in tried if "median_us" in r]
        return min(ok, key=lambda r: r["median_us"]) if ok else None


def add_ratios(cols: dict, cudnn: dict, work: float | None = None, kv: int | None = None,
               copy_gbs: float | None = None) -> None:
    for c in cols.values():
        if "median_us" not in c:
            continue
        if work:
            c["tflops"] = work / (c["median_us"] * 1e-6) / 1e12
        if kv and copy_gbs:
            c["pct_copy_bandwidth"] = 100.0 * kv / (c["median_us"] * 1e-6) / 1e9 / copy_gbs
        if "median_us" in cudnn:
            c["t_over_cudnn"] = c["median_us"] / cudnn["median_us"]


# ---- prefill ------------------------------------------------------------------------------------

PREFILL_TOL = 3e-2  # bf16 output of two flash kernels with different tile orders (|o| <= ~3)


def prefill_launcher(variants: Variants, q, k, v, lens, causal: bool, cfg: dict) -> Callable[[], Any]:
    from tileport.ops.spec import Launch
    from tileport.ops.specs import get_spec
    spec = get_spec("fmha_fwd")
    outs = spec.allocate(q, k, v, lens, causal)
    [launch] = spec.plan(q, k, v, lens, causal, outs)
    grid = (-(-q.shape[2] // cfg["BLOCK_M"]), launch.grid[1], 1)
    launch = Launch(launch.kernel, grid, {**launch.args, "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"]})
    kernel = variants.kernel("fmha_fwd_kernel", {"PREFILL_KV_LATENCY": cfg["latency"]}, cfg.get("heavy_first", False),
                             occupancy=cfg["occupancy"], num_worker_warps=cfg["num_worker_warps"])
    run = run_launches([launch], [kernel])

    def call():
        run()
        return outs[0]
    return call


def prefill_case(seq: int, causal: bool, flush, budget: float):
    from tileport.gpu.sdpa_compare import _inputs, _sdpa, flops
    batch, q, k, v, lens = _inputs(seq)
    cudnn = _sdpa(q, k, v, causal, "CUDNN_ATTENTION", expand=False)
    reference = cudnn().float()
    return (q, k, v, lens), reference, measure(cudnn, reference, flush, budget, PREFILL_TOL), flops(batch, seq, causal)


def prefill(variants: Variants, result: dict, out: Path, flush, budget: float, search: bool) -> None:
    from tileport.gpu.sdpa_compare import profiled_kernels
    from tileport.ops.specs._attention import PREFILL_TILES, TUNE_SPACE
    space = TUNE_SPACE["fmha_fwd_kernel"]
    default = {"BLOCK_M": PREFILL_TILES[128][0], "BLOCK_N": PREFILL_TILES[128][1], "latency": 2,
               "occupancy": space["occupancy"][0], "num_worker_warps": space["num_worker_warps"][0]}
    sect = result.setdefault("prefill", {"default": default})
    inputs, reference, cudnn, _ = prefill_case(8192, False, flush, budget)
    sect["search_case"] = {"seq": 8192, "causal": False, "cudnn": cudnn}
    s = Search(out, sect, "search", budget)
    attempt = lambda cfg: measure(prefill_launcher(variants, *inputs, False, cfg),  # noqa: E731
                                  reference, flush, budget, PREFILL_TOL)
    best = default
    if search:
        first = s.best(({**default, "BLOCK_M": bm, "BLOCK_N": bn, "latency": lat} for bm, bn, lat in
                        itertools.product(space["BLOCK_M"], space["BLOCK_N"], (2, 3, 4))), attempt)
        base = first["config"] if first else default
        second = s.best(({**base, "occupancy": occ, "num_worker_warps": w} for occ, w in
                         itertools.product(space["occupancy"], (*space["num_worker_warps"], None))
                         if (occ, w) != (base["occupancy"], base["num_worker_warps"])), attempt)
        best = min((r for r in (first, second) if r), key=lambda r: r["median_us"])["config"] if first else default
    sect["best"] = best
    sect["cases"] = []
    for seq in (4096, 8192, 16384):
        for causal in (False, True):
            inputs, reference, cudnn, work = prefill_case(seq, causal, flush, budget)
            fns = {"default": prefill_launcher(variants, *inputs, causal, default),
                   "best": prefill_launcher(variants, *inputs, causal, best),
                   "heavy_first": prefill_launcher(variants, *inputs, causal, {**default, "heavy_first": True})}
            cols = {"sdpa_cudnn_attention": cudnn,
                    **{n: measure(fn, reference, flush, budget, PREFILL_TOL) for n, fn in fns.items()}}
            add_ratios(cols, cudnn, work=work)
            sect["cases"].append({"seq": seq, "causal": causal, "columns": cols,
                                  "kernels": {n: profiled_kernels(fn, 5) for n, fn in fns.items()}})
            write(out, result)
            print("prefill", seq, causal, {n: round(c.get("t_over_cudnn", float("nan")), 3) for n, c in cols.items()},
                  flush=True)


# ---- decode -------------------------------------------------------------------------------------

DECODE_TOL = 2e-2  # bf16 output of split-KV decode against cuDNN's (|o| <= ~1)
DECODE_SEARCH_CASES = ((16, 4096), (128, 1024))  # the decode cases below 85 % of copy bandwidth


def decode_launcher(variants: Variants, q, k, v, lens, cfg: dict) -> Callable[[], Any]:
    from tileport.ops.specs import _attention as A
    from tileport.ops.specs import get_spec
    spec = get_spec("flash_decode")
    outs = spec.allocate(q, k, v, lens)
    saved = A.DECODE_BLOCK_N, A.DECODE_BLOCKS_PER_SM
    A.DECODE_BLOCK_N, A.DECODE_BLOCKS_PER_SM = cfg["BLOCK_N"], cfg["blocks_per_sm"]
    try:  # the plan reads both when it plans (split count, tiles per split, BLOCK_N)
        partial, combine = spec.plan(q, k, v, lens, outs)
    finally:
        A.DECODE_BLOCK_N, A.DECODE_BLOCKS_PER_SM = saved
    kernel = variants.kernel("flash_decode_partial_kernel", {"DECODE_KV_LATENCY": cfg["latency"]},
                             occupancy=cfg["occupancy"])
    run = run_launches([partial, combine], [kernel, variants.kernel("flash_decode_combine_kernel", {})])

    def call():
        run()
        return outs[0]
    return call


def decode(variants: Variants, result: dict, out: Path, flush, budget: float, search: bool) -> None:
    from tileport.gpu.sdpa_compare import _decode_inputs, _decode_sdpa, copy_bandwidth, kv_bytes, profiled_kernels
    from tileport.ops.specs._attention import DECODE_BLOCK_N, DECODE_BLOCKS_PER_SM, TUNE_SPACE
    space = TUNE_SPACE["flash_decode_partial_kernel"]
    default = {"BLOCK_N": DECODE_BLOCK_N, "latency": 4, "occupancy": 2, "blocks_per_sm": DECODE_BLOCKS_PER_SM}
    sect = result.setdefault("decode", {"default": default, "cases": []})
    sect["copy_bandwidth"] = copy_bandwidth(budget, flush)
    copy_gbs = sect["copy_bandwidth"]["gb_per_s"]
    for batch, seq in DECODE_SEARCH_CASES:
        q, k, v, lens = _decode_inputs(batch, seq)
        cudnn_fn = _decode_sdpa(q, k, v, "CUDNN_ATTENTION")
        reference = cudnn_fn().float()
        cudnn = measure(cudnn_fn, reference, flush, budget, DECODE_TOL)
        case = {"batch": batch, "seq": seq, "cudnn": cudnn, "search": []}
        sect["cases"].append(case)
        s = Search(out, case, "search", budget)
        attempt = lambda cfg: measure(decode_launcher(variants, q, k, v, lens, cfg),  # noqa: E731
                                      reference, flush, budget, DECODE_TOL)
        best = s.best([default], attempt)
        if search:
            first = s.best(({**default, "BLOCK_N": bn, "latency": lat} for bn, lat in
                            itertools.product(space["BLOCK_N"], space["latency"])
                            if (bn, lat) != (default["BLOCK_N"], default["latency"])), attempt)
            base = min((r for r in (best, first) if r), key=lambda r: r["median_us"])["config"]
            second = s.best(({**base, "occupancy": occ, "blocks_per_sm": per_sm} for occ, per_sm in
                             itertools.product((1, 2, 4), space["DECODE_BLOCKS_PER_SM"])
                             if (occ, per_sm) != (base["occupancy"], base["blocks_per_sm"])), attempt)
            best = min((r for r in (best, first, second) if r), key=lambda r: r["median_us"])
        case["best"] = best
        cols = {"sdpa_cudnn_attention": cudnn, "default": case["search"][0], "best": best or {}}
        add_ratios(cols, cudnn, kv=kv_bytes(batch, seq), copy_gbs=copy_gbs)
        case["kernels"] = {"sdpa_cudnn_attention": profiled_kernels(cudnn_fn, 5)}
        if best:
            case["kernels"]["best"] = profiled_kernels(decode_launcher(variants, q, k, v, lens, best["config"]), 5)
        write(out, result)
        print("decode", batch, seq, {n: round(c.get("t_over_cudnn", float("nan")), 3) for n, c in cols.items()},
              flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--only", choices=("prefill", "decode", "all"), default="all")
    ap.add_argument("--no-search", action="store_true", help="the defaults (and heavy_first) only")
    args = ap.parse_args(argv)
    import torch

    from tileport.gpu.bench import environment
    from tileport.gpu.timing import make_flush
    flush = make_flush(torch.device("cuda"))
    result: dict[str, Any] = {"environment": environment()}
    with tempfile.TemporaryDirectory() as tmp:
        variants = Variants(Path(tmp))
        if args.only in ("decode", "all"):
            decode(variants, result, args.out, flush, args.budget, not args.no_search)
        if args.only in ("prefill", "all"):
            prefill(variants, result, args.out, flush, args.budget, not args.no_search)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
