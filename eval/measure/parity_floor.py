"""GPU measurement: is the benchmark's small excess of rs/cuTile kernel time on kernels with the same machine code
the backends', or the timer's?

    python3 eval/measure/parity_floor.py OUT.json [OP:DTYPE:SHAPE ...]        (on the GPU machine)

Without cases it times CASES below; a case is given as op, dtype and shape, e.g. softmax_tma:float16:4096x4096.

For each case, four runners write the same output tensor: cuTile Python twice (c1, c2: two closures of the same
call) and cutile-rs twice (r1, r2), timed side by side as the benchmark times its columns (gpu.timing, L2
flushed, repetitions in the balanced order), two rounds of up to 500 repetitions. Same-backend ratios (c2/c1,
r2/r1) are the timer's floor: any excess there is the order or the timer, not a backend. Cross ratios (r/c,
both runners of each backend pooled) are the backends'. From the same profiler trace it also records, per
runner, the idle gap between the end of the L2 flush and the start of the runner's first kernel: a gap means
the host had not yet queued the kernel (the launch cost showing through), and an idle GPU may time the next
kernel differently. It changes nothing in the library.
"""
from __future__ import annotations

import json
import statistics
import sys

from tileport.gpu.bench import case_inputs, column_runner
from tileport.gpu.timing import _profile, balanced_order, flush_kernel_name, make_flush, split_repetitions
from tileport.ops.specs import get_spec

# kernels whose port compiles to cuTile Python's machine code on sm_90 (bench/results/*-cpu-verify-sass*.json),
# one or two benchmark shapes each
CASES = [("vector_add", "float16", (16777216,)), ("relu", "bfloat16", (8192, 8192)),
         ("gelu", "float32", (8192, 8192)), ("geglu", "float16", (8192, 8192)),
         ("rms_norm", "bfloat16", (8192, 4096)), ("layer_norm", "bfloat16", (8192, 4096)),
         ("layer_norm", "float32", (4096, 8192)), ("softmax_tma", "float32", (8192, 1000)),
         ("softmax_online", "float32", (4096, 4096)), ("softmax_online", "float16", (1024, 16384)),
         ("matmul_splitk", "float16", (1024, 1024, 16384)), ("rope", "bfloat16", (4, 4096, 32, 128))]
REPS = 500
ROUNDS = 2


def gaps_after_flush(events: list[tuple], flush_name: str, order: list[str]) -> dict[str, float]:
    """Median idle time (µs) between the end of each flush and the start of the next kernel, per runner."""
    gaps: dict[str, list[float]] = {name: [] for name in order}
    reps = iter(order)
    for i, (name, start, dur) in enumerate(events):
        if name == flush_name and i + 1 < len(events):
            gaps[next(reps)].append((events[i + 1][1] - (start + dur)) / 1e3)
    return {name: statistics.median(g) for name, g in gaps.items() if g}


def one_round(fns: dict, flush) -> dict:
    order = balanced_order(list(fns), REPS)
    events = _profile([fns[name] for name in order], flush)
    name = flush_kernel_name(flush)
    times = {k: statistics.median(t) for k, (t, _n) in split_repetitions(events, name, order).items()}
    return {"median_us": times, "gap_us": gaps_after_flush(events, name, order),
            "c2/c1": times["c2"] / times["c1"], "r2/r1": times["r2"] / times["r1"],
            "r/c": (times["r1"] * times["r2"] / (times["c1"] * times["c2"])) ** 0.5}


def parse_case(text: str) -> tuple:
    op, dtype, shape = text.split(":")
    return op, dtype, tuple(int(n) for n in shape.split("x"))


def main(out: str, cases: list[tuple]) -> None:
    flush = make_flush("cuda")
    results = []
    for op, dtype, shape in cases:
        spec = get_spec(op)
        inputs = case_inputs(spec, dtype, shape, "randn")
        outs = spec.allocate(*inputs)
        fns = {k: column_runner(spec, backend, inputs, outs)
               for k, backend in (("c1", "cutile"), ("r1", "cutile-rs"), ("c2", "cutile"), ("r2", "cutile-rs"))}
        for fn in fns.values():  # warm: first calls plan and compile
            fn()
        rec = {"op": op, "dtype": dtype, "shape": list(shape), "rounds": [one_round(fns, flush) for _ in range(ROUNDS)]}
        results.append(rec)
        print(op, dtype, shape, [{k: round(r[k], 4) for k in ("c2/c1", "r2/r1", "r/c")} for r in rec["rounds"]],
              [{k: round(v, 2) for k, v in r["gap_us"].items()} for r in rec["rounds"]], flush=True)
        json.dump(results, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [parse_case(c) for c in sys.argv[2:]] or CASES)
