"""GPU measurement: does the small rs/cuTile kernel-time difference of the benchmark follow the backend, the
output tensor, or the column's place in the alternating order?

    python3 eval/measure/parity_buffers.py OUT.json        (on the GPU machine)

For each case, two output tensors: o1 (allocated first) and o2. Both tile backends run into both (c@o1 is
cuTile Python writing o1, r@o2 cutile-rs writing o2, ...), the four timed side by side (gpu.timing.gpu_times,
L2 flushed) in three orders. Same tensor, different backend: the backends' difference; same backend,
different tensor: the tensors'. The benchmark used to give each backend its own tensor (c@o1 against r@o2).
"""

from __future__ import annotations

import json
import sys

from tileport.gpu.bench import case_inputs
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.api import call
from tileport.ops.specs import get_spec

CASES = [("vector_add", "float16", (16777216,)), ("vector_add", "bfloat16", (16777216,)),
         ("rms_norm", "bfloat16", (8192, 4096)), ("layer_norm", "float16", (4096, 8192)),
         ("softmax_gather", "bfloat16", (4096, 4096)), ("relu", "bfloat16", (8192, 8192)),
         ("relu", "float32", (8192, 8192)), ("gelu", "float32", (8192, 8192)),
         ("softmax_online", "float32", (1024, 16384)), ("softmax_online", "bfloat16", (4096, 4096))]


def runner(spec, inputs, backend, outs):
    return lambda: call(spec, *inputs, out=outs, backend=backend)


def main(out):
    flush = make_flush("cuda")
    res = []
    for op, dt, shape in CASES:
        spec = get_spec(op)
        inputs = case_inputs(spec, dt, shape, "randn")
        o1 = call(spec, *inputs, backend="cutile")
        o2 = call(spec, *inputs, backend="cutile-rs")
        fns = {"c@o1": runner(spec, inputs, "cutile", o1), "r@o2": runner(spec, inputs, "cutile-rs", o2),
               "c@o2": runner(spec, inputs, "cutile", o2), "r@o1": runner(spec, inputs, "cutile-rs", o1)}
        rec = {"op": op, "dtype": dt, "shape": shape, "runs": []}
        for order in (list(fns), list(fns)[::-1], ["r@o1", "c@o1", "r@o2", "c@o2"]):
            t = gpu_times({k: fns[k] for k in order}, flush, budget_s=0.25)
            med = {k: v.median_us for k, v in t.items()}
            mean_like = {k: (v.p10_us + v.p90_us) / 2 for k, v in t.items()}
            rec["runs"].append({"order": order, "median_us": med, "mid_p10_p90": mean_like})
            print(op, dt, shape, order, {k: round(v, 3) for k, v in med.items()},
                  "r/c same buf o1", round(med["r@o1"] / med["c@o1"], 4), "o2", round(med["r@o2"] / med["c@o2"], 4),
                  "as bench", round(med["r@o2"] / med["c@o1"], 4), flush=True)
        res.append(rec)
        json.dump(res, open(out, "w"), indent=1)


main(sys.argv[1])
