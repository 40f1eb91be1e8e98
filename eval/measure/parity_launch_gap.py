"""GPU measurement: does rs/cuTile kernel time depend on how soon the kernel starts after the L2 flush?

    python3 eval/measure/parity_launch_gap.py OUT.json OP:DTYPE:SHAPE ...      (on the GPU machine)

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

from parity_floor import gaps_after_flush, parse_case
from tileport.gpu.bench import case_inputs, column_runner
from tileport.gpu.timing import _profile, balanced_order, flush_kernel_name, make_flush, split_repetitions
from tileport.ops.specs import get_spec

REPS = 600
ROUNDS = 3


def drained(flush):
    """The flush, then a wait until the GPU has finished it: the call that follows starts on an idle GPU."""
    def flush_and_wait():
        flush()
        torch.cuda.synchronize()
    return flush_and_wait


def one(fns, flush, drain, first):
    names = [first] + [n for n in fns if n != first]
    order = balanced_order(names, REPS)
    ev = _profile([fns[n] for n in order], drained(flush) if drain else flush)
    fname = flush_kernel_name(flush)
    split = split_repetitions(ev, fname, order)
    med = {k: statistics.median(t) for k, (t, _) in split.items()}
    mean = {k: statistics.fmean(sorted(t)[len(t) // 10: -len(t) // 10]) for k, (t, _) in split.items()}
    return {"drained": drain, "first": first, "median_us": med, "trimmed_mean_us": mean,
            "gap_us": gaps_after_flush(ev, fname, order), "r/c": med["cutile-rs"] / med["cutile"],
            "r/c_trimmed": mean["cutile-rs"] / mean["cutile"]}


def main(out, cases):
    flush = make_flush("cuda")
    results = []
    for text in cases:
        op, dtype, shape = parse_case(text)
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
            for drain in (False, True):
                rounds.append(one(fns, flush, drain, ("cutile", "cutile-rs")[i % 2]))
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
