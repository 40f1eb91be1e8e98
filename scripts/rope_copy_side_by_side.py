"""GPU measurement: rope on [1, 16384, 8, 128] beside a torch copy, side by side, before and after torch.compile.

    python3 scripts/rope_copy_side_by_side.py OUT.json DTYPE        (on the GPU machine)

Both tile backends' default plans and `y.copy_(x)` (x's bytes read and written once) are timed side by side
(gpu.timing.gpu_times, L2 flushed), the run's copy bandwidth measured again before each measurement: twice
before any torch.compile, after one call of the op's torch.compile baseline, with that baseline as one more
function in the rotation, and with it removed again. It asks whether what else runs in a measurement moves the
kernels' times, and the copy's with them. It changes nothing in the library.
"""

from __future__ import annotations

import json
import sys

import torch

from tileport.gpu.bench import case_inputs, column_runner, copy_bandwidth
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.specs import get_spec

spec = get_spec("rope")
shape, dt = (1, 16384, 8, 128), sys.argv[2]
flush = make_flush("cuda")
inputs = case_inputs(spec, dt, shape, "randn")
nbytes = spec.bytes(shape, dt)
x = inputs[0]
y = torch.empty_like(x)
cols = {"copy_same_bytes": lambda: y.copy_(x), "cutile": column_runner(spec, "cutile", inputs),
        "cutile-rs": column_runner(spec, "cutile-rs", inputs)}
res = []


def measure(tag):
    g, _ = copy_bandwidth(flush)
    t = gpu_times(cols, flush, budget_s=0.1)
    rec = {"tag": tag, "copy_gbps": g, "median_us": {k: v.median_us for k, v in t.items()},
           "rs_pct_of_ceiling": 100 * nbytes / (t["cutile-rs"].median_us * 1e-6) / 1e9 / g,
           "rs_over_copy_same_bytes": t["cutile-rs"].median_us / t["copy_same_bytes"].median_us}
    res.append(rec)
    print(json.dumps(rec), flush=True)


measure("before torch.compile")
measure("before torch.compile, again")
tc = column_runner(spec, "torch.compile", inputs)
tc()
torch.cuda.synchronize()
measure("after torch.compile ran (not a column)")
cols["torch.compile"] = tc
measure("with a torch.compile column")
del cols["torch.compile"]
measure("torch.compile column removed")
json.dump(res, open(sys.argv[1], "w"), indent=1)
