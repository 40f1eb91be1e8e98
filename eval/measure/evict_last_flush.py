"""GPU measurement: do lines a kernel loads with the `evict_last` L2 hint outlast the benchmark's L2 flush?

    python3 eval/measure/evict_last_flush.py OUT.json        (on the GPU machine; needs triton)

rope f16 [1, 16384, 8, 128]: a torch copy of x and cutile-rs's rope timed side by side (gpu.timing.gpu_times, L2
flushed before every repetition) with nothing else, with a Triton kernel reading x without a hint, with the same
kernel reading x with `evict_last`, and with nothing else again; twice. Then the loads of Inductor's kernel for the
op's torch.compile baseline (do they ask for evict_last?). It changes nothing in the library.
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

from rope_rotation import rope_case, time_rotations
from tileport.gpu.bench import column_runner
from tileport.gpu.timing import make_flush
from tileport.ops.baselines import baseline


@triton.jit
def read_x(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if EVICT == 1:
        v = tl.load(x_ptr + offs, mask=m, eviction_policy="evict_last")
    else:
        v = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, v * 2, mask=m)


flush = make_flush("cuda")
spec, inputs, x, y = rope_case()
z = torch.empty_like(x)
n = x.numel()


def reader(evict):
    return lambda: read_x[(triton.cdiv(n, 4096),)](x, z, n, BLOCK=4096, EVICT=evict)


base = {"copy_x": lambda: y.copy_(x), "cutile-rs": column_runner(spec, "cutile-rs", inputs)}
res = time_rotations(base, {"none": {}, "triton_normal": {"reader": reader(0)},
                            "triton_evict_last": {"reader": reader(1)}, "none_after": {}}, flush)
# Inductor's code for the rope baseline: does it ask for evict_last?
from torch._inductor.utils import run_and_get_code
torch._dynamo.reset()
fn = torch.compile(baseline(spec), fullgraph=True, dynamic=False)
_, codes = run_and_get_code(fn, *inputs)
code = "\n".join(codes)
lines = [l.strip() for l in code.splitlines() if "tl.load" in l]
print("inductor loads:", json.dumps(lines[:12], indent=0))
json.dump({"runs": res, "inductor_loads": lines}, open(sys.argv[1], "w"), indent=1)
