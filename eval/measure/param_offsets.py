"""GPU measurement: does reading kernel parameters past the first 64 bytes of the parameter block cost time?

    python3 eval/measure/param_offsets.py OUT.json        (on the GPU machine)

softmax_gather's port compiles to cuTile Python's machine code but for parameter offsets: the launcher passes the
two row strides as extra i32 parameters (cutile 0.5.0 kernels cannot read an array's own strides). Placed after the
arrays, they were read at c[0x0][0x240] and c[0x0][0x244] on sm_90, past the 0x210-0x23f cuTile Python reads; placed
first, as the emitter does now, every parameter the port reads lies in 0x210-0x23f. This script times, side by side
(gpu.timing.gpu_times, L2 flushed, all writing the same output), three cuTile Python kernels with the same body and
the port:
  base      - the library's softmax_gather_kernel (10 parameters: 0x210-0x23f);
  trail     - the same kernel with two trailing i32 parameters that it reads (added to the loop bounds as 0);
  unused    - the same two trailing parameters, not read (the parameter block alone grows);
  cutile-rs - the port, as the library launches it.
Results: bench/results/2026-12-03-h200-param-offsets.json (before and after the strides moved first).
"""
import json
import sys

import cuda.tile as ct
import torch

from tileport.gpu.bench import case_inputs, column_runner
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.kernels.softmax import softmax_gather_kernel
from tileport.ops.specs import get_spec

ConstInt = ct.Constant[int]


def softmax_rows(x, y, start, stop, TILE):
    """softmax_gather_kernel's body over rows start, start + num_blocks, .. < stop."""
    num_blocks = ct.num_blocks(0)
    cols = ct.arange(TILE, dtype=ct.int32)
    in_row = cols < x.shape[1]
    for row in range(start, stop, num_blocks):
        t = ct.gather(x, (row, cols), mask=in_row, padding_value=float("-inf"), check_bounds=False)
        t = ct.astype(t, ct.float32)
        row_max = ct.max(t, 0, keepdims=True)
        num = ct.exp(t - row_max, rounding_mode=ct.RoundingMode.APPROX)
        den = ct.sum(num, 0, keepdims=True)
        out = ct.truediv(num, den, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
        ct.scatter(y, (row, cols), ct.astype(out, y.dtype), mask=in_row, check_bounds=False)


@ct.kernel(occupancy=4)
def gather_trailing_read(x, y, z0, z1, TILE: ConstInt):
    softmax_rows(x, y, ct.bid(0) + z0, x.shape[0] + z1, TILE)


@ct.kernel(occupancy=4)
def gather_trailing_unused(x, y, z0, z1, TILE: ConstInt):
    softmax_rows(x, y, ct.bid(0), x.shape[0], TILE)


def runs_for(dtype: str, shape: tuple) -> dict:
    spec = get_spec("softmax_gather")
    inputs = case_inputs(spec, dtype, shape, "randn")
    x = inputs[0]
    y = spec.allocate(*inputs)
    tile = 1 << (shape[1] - 1).bit_length()
    grid = (shape[0], 1, 1)

    def launch(kernel, *args):
        return lambda: ct.launch(torch.cuda.current_stream(), grid, kernel, args)

    runs = {"base": launch(softmax_gather_kernel, x, y, tile),
            "trail": launch(gather_trailing_read, x, y, 0, 0, tile),
            "unused": launch(gather_trailing_unused, x, y, 0, 0, tile),
            "cutile-rs": column_runner(spec, "cutile-rs", inputs, y)}
    ref = torch.softmax(x.float(), dim=1)
    for name, f in runs.items():
        y.fill_(float("nan"))
        f()
        torch.cuda.synchronize()
        err = (y.float() - ref).abs().max().item()
        if not err < 1e-2:
            raise SystemExit(f"{name}: max error {err}")
    return runs


def main(out_path: str) -> None:
    flush = make_flush("cuda")
    out = []
    for dtype in ("float16", "bfloat16"):
        shape = (4096, 4096)
        runs = runs_for(dtype, shape)
        times = []
        for _ in range(3):
            t = gpu_times(runs, flush, budget_s=0.5)
            times.append({c: [round(v.median_us, 3), round(v.p10_us, 3), v.reps] for c, v in t.items()})
        rec = {"op": "softmax_gather", "dtype": dtype, "shape": list(shape), "median_p10_reps": times}
        print(json.dumps(rec), flush=True)
        out.append(rec)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
