"""GPU measurement: rope's pair entry on [1, 16384, 8, 128] under compiler hints and without TMA, side by side.

    python3 scripts/rope_pair_hints.py OUT.json [DTYPE]        (on the GPU machine; DTYPE default float16)

`rope_rows_pair_kernel` (ops/kernels/rope.py) at 1, 2 and 4 positions per block, each as it is, with an
occupancy hint of 8, 12 or 16 blocks per SM, with 8 worker warps, and with x and y accessed without TMA;
next to the op's default plan on both tile backends and its torch.compile baseline. Every variant's output
is checked against the op's reference first (a wrong or failing variant is printed and left out). All are
timed together, their repetitions alternating (gpu.timing.gpu_times, L2 flushed), twice; the JSON gives each
one's share of the copy bandwidth measured in the same run. It measures where the op's default stands; it
changes nothing in the library.
"""

from __future__ import annotations

import json
import sys

import cuda.tile as ct
import torch

from tileport.gpu.bench import column_runner, copy_bandwidth
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.kernels import rope as kernels
from tileport.ops.specs import get_spec

SHAPE = (1, 16384, 8, 128)
HINTS = ({}, {"occupancy": 8}, {"occupancy": 12}, {"occupancy": 16}, {"num_worker_warps": 8})
ConstInt = ct.Constant[int]


@ct.kernel
def pair_notma(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    """rope_rows_pair_kernel with x and y loaded and stored without TMA."""
    rb = ct.bid(0)
    hb = ct.bid(1)
    c, s = kernels.rows_tables(cos, sin, rb, BLOCK_S, HALF_TILE)
    half_shape = (BLOCK_S, BLOCK_H, 1, HALF_TILE)
    pair = ct.load(x, index=(rb, hb, 0, 0), shape=(BLOCK_S, BLOCK_H, 2, HALF_TILE),
                   padding_mode=ct.PaddingMode.ZERO, allow_tma=False)
    x1 = ct.astype(ct.extract(pair, index=(0, 0, 0, 0), shape=half_shape), ct.float32)
    x2 = ct.astype(ct.extract(pair, index=(0, 0, 1, 0), shape=half_shape), ct.float32)
    rotated = ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), 2)
    ct.store(y, index=(rb, hb, 0, 0), tile=ct.astype(rotated, y.dtype), allow_tma=False)


def variants() -> dict:
    """{name: (kernel, positions per block)}."""
    found = {}
    for block_s in (1, 2, 4):
        for hints in HINTS:
            kernel = kernels.rope_rows_pair_kernel.replace_hints(**hints) if hints else kernels.rope_rows_pair_kernel
            found[f"pair{block_s} {json.dumps(hints)}"] = (kernel, block_s)
        found[f"pair{block_s} notma"] = (pair_notma, block_s)
    return found


def main(out: str, dtype: str) -> None:
    spec = get_spec("rope")
    x, cos, sin = spec.make_inputs(SHAPE, dtype, "cuda", 0)
    y = torch.empty_like(x)
    rows, heads, half = SHAPE[0] * SHAPE[1], SHAPE[2], SHAPE[3] // 2
    xv, yv = x.view(rows, heads, 2, half), y.view(rows, heads, 2, half)
    stream = torch.cuda.current_stream()
    ref = spec.reference(x, cos, sin).float()
    runs, rejected = {}, {}
    for name, (kernel, block_s) in variants().items():
        def run(kernel=kernel, block_s=block_s):
            ct.launch(stream, (rows // block_s, 1, 1), kernel, (xv, cos, sin, yv, block_s, heads, half))
        try:
            y.zero_()
            run()
            err = (y.float() - ref).abs().max().item()
        except Exception as e:  # noqa: BLE001 - reported and left out
            rejected[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        if err > 0.05:
            rejected[name] = f"max |error| {err}"
            continue
        runs[name] = run
    for column in ("cutile", "cutile-rs", "torch.compile"):
        runs[column] = column_runner(spec, column, (x, cos, sin))
    flush = make_flush("cuda")
    gbps, _ = copy_bandwidth(flush)
    nbytes = spec.bytes(SHAPE, dtype)
    shares: dict[str, list[float]] = {}
    for _ in range(2):
        for name, t in gpu_times(runs, flush, budget_s=0.15).items():
            shares.setdefault(name, []).append(round(100 * nbytes / (t.median_us * 1e-6) / 1e9 / gbps, 2))
    for name, pct in sorted(shares.items(), key=lambda kv: -max(kv[1])):
        print(f"{name:40s} % of copy bandwidth {pct}")
    for name, why in rejected.items():
        print(f"{name:40s} left out: {why}")
    with open(out, "w") as f:
        json.dump({"shape": list(SHAPE), "dtype": dtype, "copy_gbps": gbps, "pct_copy": shares,
                   "left_out": rejected}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "float16")
