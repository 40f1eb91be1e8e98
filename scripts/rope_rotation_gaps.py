"""GPU measurement: what in a rotation with a torch.compile column makes every kernel faster?

    python3 scripts/rope_rotation_gaps.py OUT.json        (on the GPU machine)

rope f16 [1, 16384, 8, 128] on both tile backends and a torch copy of x, timed side by side (gpu.timing.gpu_times,
L2 flushed) with one more function in the rotation: none; the op's torch.compile baseline; a host busy-wait of 20,
60 or 150 µs before a one-element kernel (the GPU idles while the host waits); a GPU sleep of about 60 µs
(torch.cuda._sleep). Twice. It changes nothing in the library.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from rope_rotation import rope_case, time_rotations
from tileport.gpu.bench import column_runner, copy_bandwidth
from tileport.gpu.timing import make_flush

flush = make_flush("cuda")
spec, inputs, x, y = rope_case()
tiny = torch.empty(1, device="cuda")
base = {"copy_x": lambda: y.copy_(x), "cutile": column_runner(spec, "cutile", inputs),
        "cutile-rs": column_runner(spec, "cutile-rs", inputs)}


def host_gap(us):
    def fn():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < us * 1e-6:
            pass
        tiny.zero_()
    return fn


def gpu_sleep(cycles):
    return lambda: torch.cuda._sleep(cycles)


extra = {"none": {}, "torch.compile": {"torch.compile": column_runner(spec, "torch.compile", inputs)},
         "host_gap_20us": {"host_gap": host_gap(20)}, "host_gap_60us": {"host_gap": host_gap(60)},
         "host_gap_150us": {"host_gap": host_gap(150)}, "gpu_sleep_60us": {"gpu_sleep": gpu_sleep(120000)}}
res = time_rotations(base, extra, flush)
g, _ = copy_bandwidth(flush)
json.dump({"copy_gbps": g, "runs": res}, open(sys.argv[1], "w"), indent=1)
