"""GPU measurement: does rs/cuTile kernel time depend on how soon the kernel starts after the L2 flush?

    python3 scripts/parity_launch_gap.py OUT.json OP:DTYPE:SHAPE ...      (on the GPU machine)

cutile-rs queues its kernel sooner after a call than cuTile Python, so in the benchmark's timing (flush, then the
call, no wait between) its kernel may start while the flush's writes still drain. Per case, the two tile columns
alone write one output and are timed in two modes, alternating, ROUNDS of each (the first column swapped every
round):
  queued:  flush(); fn()                      (the benchmark's timing)
  drained: flush(); synchronize(); fn()       (the GPU idle for the whole launch before the kernel)
with each mode's median idle gap between the flush and the kernel per column. Equal ratios in both modes mean
the start does not matter. It changes nothing in the library.
"""
import json
import statistics
import sys

import torch

from tileport.gpu.bench import case_inputs, column_runner
from tileport.gpu.timing import _cuda_kernels, balanced_order, flush_kernel_name, make_flush, split_repetitions
from tileport.ops.specs import get_spec

REPS = 600
ROUNDS = 3


def profile(fns, flush, drained):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for fn in fns:
            flush()
            if drained:
                torch.cuda.synchronize()
            fn()
        torch.cuda.synchronize()
    return _cuda_kernels(prof)


def gaps(events, flush_name, order):
    out = {n: [] for n in set(order)}
    reps = iter(order)
    for i, (name, start, dur) in enumerate(events):
        if name == flush_name and i + 1 < len(events):
            out[next(reps)].append((events[i + 1][1] - (start + dur)) / 1e3)
    return {n: statistics.median(g) for n, g in out.items()}


def one(fns, flush, drained, first):
    names = [first] + [n for n in fns if n != first]
    order = balanced_order(names, REPS)
    ev = profile([fns[n] for n in order], flush, drained)
    fname = flush_kernel_name(flush)
    split = split_repetitions(ev, fname, order)
    med = {k: statistics.median(t) for k, (t, _) in split.items()}
    mean = {k: statistics.fmean(sorted(t)[len(t) // 10: -len(t) // 10]) for k, (t, _) in split.items()}
    return {"drained": drained, "first": first, "median_us": med, "trimmed_mean_us": mean,
            "gap_us": gaps(ev, fname, order), "r/c": med["cutile-rs"] / med["cutile"],
            "r/c_trimmed": mean["cutile-rs"] / mean["cutile"]}


def main(out, cases):
    flush = make_flush("cuda")
    results = []
    for text in cases:
        op, dtype, shape = text.split(":")
        shape = tuple(int(n) for n in shape.split("x"))
        spec = get_spec(op)
        inputs = case_inputs(spec, dtype, shape, "randn")
        outs = spec.allocate(*inputs)
        fns = {b: column_runner(spec, b, inputs, outs) for b in ("cutile", "cutile-rs")}
        for fn in fns.values():
            for _ in range(20):
                fn()
        torch.cuda.synchronize()
        rounds = []
        for i in range(ROUNDS):
            for drained in (False, True):
                rounds.append(one(fns, flush, drained, ("cutile", "cutile-rs")[i % 2]))
        rec = {"case": text, "rounds": rounds}
        for d in (False, True):
            rs = [r for r in rounds if r["drained"] == d]
            rec["drained" if d else "queued"] = {
                "r/c": statistics.fmean(r["r/c"] for r in rs),
                "r/c_trimmed": statistics.fmean(r["r/c_trimmed"] for r in rs),
                "gap_c": statistics.fmean(r["gap_us"]["cutile"] for r in rs),
                "gap_r": statistics.fmean(r["gap_us"]["cutile-rs"] for r in rs)}
        results.append(rec)
        print(text, {k: {a: round(b, 4) for a, b in rec[k].items()} for k in ("queued", "drained")}, flush=True)
        json.dump(results, open(out, "w"), indent=1)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2:])
