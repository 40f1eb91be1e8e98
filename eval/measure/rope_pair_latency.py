"""GPU measurement: rope's pair tile on [1, 16384, 8, 128] under DRAM-latency and occupancy hints, one tile per
block and in a grid-stride loop, side by side.

    python3 eval/measure/rope_pair_latency.py OUT.json [DTYPE]        (on the GPU machine; DTYPE default float16)

The pair tile of ops/kernels/rope.py (both halves of BLOCK_S positions in one load, rotated, one store), with
the load's and store's latency hint at 1, 3, 6 or 10: one tile per block (`pair_lat`) at 2, 4 or 8 positions
per block, as it is or with an occupancy hint of 8 or 16 blocks per SM; and looping over row blocks
(`pair_persistent`) on 4, 8 or 16 blocks per SM with the same occupancy hint. Next to the op's default plan
on both tile backends and its torch.compile baseline. Every variant's output is checked against the op's
reference first (a wrong or failing variant is printed and left out). Variants are timed in groups of 12
beside the three references, their repetitions alternating (gpu.timing.gpu_times, L2 flushed), twice; the
JSON gives each one's share of the copy bandwidth measured in the same run. It changes nothing in the library.
"""

from __future__ import annotations

import json
import sys

import cuda.tile as ct
import torch

from tileport.gpu.bench import column_runner, copy_bandwidth
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.kernels import rope as K
from tileport.ops.specs import get_spec

ConstInt = ct.Constant[int]


@ct.kernel
def pair_lat(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt, LAT: ConstInt):
    K.pair_block(x, cos, sin, y, ct.bid(0), BLOCK_S, BLOCK_H, HALF_TILE, LAT)


@ct.kernel
def pair_persistent(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt, LAT: ConstInt):
    n = ct.num_tiles(x, 0, shape=(BLOCK_S, BLOCK_H, 2, HALF_TILE))
    for rb in range(ct.bid(0), n, ct.num_blocks(0)):
        K.pair_block(x, cos, sin, y, rb, BLOCK_S, BLOCK_H, HALF_TILE, LAT)


def main(out):
    spec = get_spec("rope")
    dt = sys.argv[2] if len(sys.argv) > 2 else "float16"
    x, cos, sin = spec.make_inputs((1, 16384, 8, 128), dt, "cuda", 0)
    y = torch.empty_like(x)
    xv, yv = x.view(16384, 8, 2, 64), y.view(16384, 8, 2, 64)
    stream = torch.cuda.current_stream()
    ref = spec.reference(x, cos, sin)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    variants = {}
    for bs in (2, 4, 8):
        for lat in (1, 3, 6, 10):
            for occ in (None, 8, 16):
                k = pair_lat.replace_hints(occupancy=occ) if occ else pair_lat
                variants[f"pair{bs} lat{lat} occ{occ}"] = (k, bs, lat, 16384 // bs)
        for lat in (3, 10):
            for per_sm in (4, 8, 16):
                k = pair_persistent.replace_hints(occupancy=per_sm)
                variants[f"persist{bs} lat{lat} occ{per_sm}"] = (k, bs, lat, min(16384 // bs, sms * per_sm))
    runs = {}
    for name, (k, bs, lat, grid) in variants.items():
        def run(k=k, bs=bs, lat=lat, grid=grid):
            ct.launch(stream, (grid, 1, 1), k, (xv, cos, sin, yv, bs, 8, 64, lat))
        try:
            y.zero_()
            run()
            torch.cuda.synchronize()
            err = (y.float() - ref.float()).abs().max().item()
            if err > 0.05:
                print(name, "WRONG", err)
                continue
            runs[name] = run
        except Exception as e:  # noqa: BLE001 - a variant that fails to compile is reported and left out
            print(name, "failed", type(e).__name__, str(e)[:300], flush=True)
    for col in ("cutile", "cutile-rs", "torch.compile"):
        runs[col] = column_runner(spec, col, (x, cos, sin))
    flush = make_flush("cuda")
    gbps, _ = copy_bandwidth(flush)
    nbytes = spec.bytes((1, 16384, 8, 128), dt)
    res = {}
    names = list(runs)
    for rep in range(2):
        # groups of at most 12 beside the three references, so each measurement stays short
        base = ["cutile", "cutile-rs", "torch.compile"]
        cand = [n for n in names if n not in base]
        for i in range(0, len(cand), 12):
            group = base + cand[i:i + 12]
            t = gpu_times({n: runs[n] for n in group}, flush, budget_s=0.1)
            for n, v in t.items():
                res.setdefault(n, []).append(round(100 * nbytes / (v.median_us * 1e-6) / 1e9 / gbps, 2))
        json.dump({"copy_gbps": gbps, "pct_copy": res, "dtype": dt}, open(out, "w"), indent=1)
    for n, v in sorted(res.items(), key=lambda kv: -max(kv[1]))[:25]:
        print(f"{n:32s} % copy bw {v}")


main(sys.argv[1])
