"""GPU measurement: both tile backends' launch configurations and kernel times on cases whose kernels compile to
the same machine code (but for parameter offsets) and measured rs/cuTile > 1 in the benchmark.

    python3 scripts/launch_configs.py OUT.json        (on the GPU machine)

For each case, one launch per backend under the profiler (its trace gives grid, block, registers per thread,
shared memory, blocks and warps per SM), then both backends timed side by side (gpu.timing.gpu_times, L2 flushed,
both writing the same output tensors) three times. It changes nothing in the library.
"""
import json
import sys

import torch

from tileport.gpu.bench import case_inputs, column_runner
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.specs import get_spec

CASES = [("softmax_gather", "float16", (4096, 4096)), ("softmax_gather", "bfloat16", (4096, 4096)),
         ("softmax_tma", "bfloat16", (8192, 1000)), ("vector_add", "float32", (16777216,)),
         ("vector_add", "float16", (16777216,))]
SKIP = {"correlation", "External id", "device", "context", "stream", "queued"}
flush = make_flush("cuda")
out = []
for op, dt, shape in CASES:
    spec = get_spec(op)
    inputs = case_inputs(spec, dt, shape, "randn")
    outs = spec.allocate(*inputs)
    runs = {c: column_runner(spec, c, inputs, outs) for c in ("cutile", "cutile-rs")}
    for f in runs.values():
        f()
    torch.cuda.synchronize()
    cfg = {}
    for c, f in runs.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            f()
            torch.cuda.synchronize()
        path = f"/tmp/trace-{c}.json"
        prof.export_chrome_trace(path)
        ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
        cfg[c] = [{"name": e["name"][:70], **{k: v for k, v in e.get("args", {}).items() if k not in SKIP}} for e in ev]
    times = []
    for rep in range(3):
        t = gpu_times(runs, flush, budget_s=0.5)
        times.append({c: [round(v.median_us, 3), round(v.p10_us, 3), v.reps] for c, v in t.items()})
    rec = {"op": op, "dtype": dt, "shape": list(shape), "launch": cfg, "median_p10_reps": times}
    print(json.dumps(rec), flush=True)
    out.append(rec)
json.dump(out, open(sys.argv[1], "w"), indent=1)
