"""layer_norm: forward with weight and bias over [M, N] rows, plus mean / rstd ([M] f32) outputs."""

from __future__ import annotations

from .. import autotune
from ..spec import ConfigSpace, Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, NORM_BENCH, NORM_SHAPES, TOL_POINTWISE, cdiv,
                      generator, next_pow2, num_sms, per_dtype_captures, randn, rows_per_block, torch)
from ._tune import BLOCK_MS, GRIDS, row_candidates, row_grid, rows_class

OCCUPANCY = {"layer_norm_fwd_kernel": 2, "layer_norm_fwd_occ4_kernel": 4,
             "layer_norm_fwd_prefetch_kernel": 2, "layer_norm_fwd_w8_kernel": 2}  # as the @ct.kernel decorators
PREFETCH = "layer_norm_fwd_prefetch_kernel"
W8 = "layer_norm_fwd_w8_kernel"
W8_MAX_ELEMS = 8192  # its row block: up to (4, 2048) compiled without spills (sm_90, 96 registers)
MAX_TILE = 16384
EPS = 1e-5
# Row tiles of about 8 KiB (H200, bf16: 16384x2048 2794 GB/s with 2 rows vs 2485 with 4;
# 8192x4096 3528 with 1 row vs 3423 with 2).
ROW_BYTES = 8192
OCC4_MAX_TILE = 2048


def make_inputs(shape, dtype, device, seed=0):
    m, n = shape
    g = generator(device, seed)
    x = randn((m, n), dtype, device, g, scale=2.0, shift=0.5)  # non-zero mean
    w = randn((n,), dtype, device, g, scale=0.5, shift=1.0)
    b = randn((n,), dtype, device, g, scale=0.1)
    return x, w, b


def reference(x, w, b):
    xf = x.float()
    mean = xf.mean(dim=-1)
    var = xf.var(dim=-1, unbiased=False)
    rstd = torch().rsqrt(var + EPS)
    y = (xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()
    return y.to(x.dtype), mean, rstd


def allocate(x, w, b):
    t = torch()
    m = x.shape[0]
    return (t.empty_like(x), t.empty((m,), dtype=t.float32, device=x.device),
            t.empty((m,), dtype=t.float32, device=x.device))


def prefetch_fits(block_m: int, tile: int, dtype: str) -> bool:
    """The prefetch entry holds the next tile beside the f32 working tile: at most a (2, 2048) f16
    block's worth (sm_90, 128 registers: no spill; a (1, 8192) f16 block spills)."""
    return block_m * tile * (4 + ELEMENT_SIZE[dtype]) <= 4096 * (4 + 2)


def fits(config: dict, tile: int, dtype: str) -> bool:
    """The prefetch entry persistent, within its register budget and in one-row blocks; the 8-warp
    entry within its budget. Two-row blocks of the prefetch entry gave wrong results on H200 (f16
    16384x2048, cuTile Python: max |error| 17.3) although the interpreter runs its bytecode
    correctly, so the search leaves them out."""
    if config["kernel"] == PREFETCH:
        return (prefetch_fits(config["BLOCK_M"], tile, dtype) and config["grid"] == "persistent"
                and config["BLOCK_M"] == 1)
    if config["kernel"] == W8:
        return config["BLOCK_M"] * tile <= W8_MAX_ELEMS
    return True


def candidates(shape, dtype) -> list[dict]:
    """Row blocks of the four entries (specs/_tune.py), each within its register budget."""
    tile = next_pow2(shape[1])
    if tile > MAX_TILE:
        return []
    keep = rows_per_block(shape[0], tile, dtype, ROW_BYTES)
    return [c for c in row_candidates(shape[0], tile, OCCUPANCY, keep) if fits(c, tile, dtype)]


def default(shape, dtype) -> dict:
    """Narrow rows (up to OCC4_MAX_TILE values): one row per block at occupancy 4 (H200, f16
    16384x2048: 82.6 % of the copy bandwidth vs 66.9 % with two rows at occupancy 2); wider rows
    ROW_BYTES per block at occupancy 2 (also where the search does not offer one-row blocks: rows
    short enough that its largest row blocks leave BLOCK_M = 1 out)."""
    tile = next_pow2(shape[1])
    narrow = {"kernel": "layer_norm_fwd_occ4_kernel", "BLOCK_M": 1, "grid": "persistent"}
    if tile <= OCC4_MAX_TILE and narrow in candidates(shape, dtype):
        return narrow
    return {"kernel": "layer_norm_fwd_kernel", "BLOCK_M": rows_per_block(shape[0], tile, dtype, ROW_BYTES),
            "grid": "persistent"}


def plan(x, w, b, outs, config=None):
    if x.dim() != 2 or x.stride(1) != 1 or w.shape != (x.shape[1],) or b.shape != w.shape:
        raise ValueError("layer_norm takes x [M, N] (unit last stride), w [N] and b [N]")
    tile = next_pow2(x.shape[1])
    if tile > MAX_TILE:
        raise ValueError(f"layer_norm: rows longer than {MAX_TILE} are not supported")
    cfg = autotune.resolve(SPEC, x, config)
    k, block_m = cfg["kernel"], cfg["BLOCK_M"]
    grid = row_grid(cfg, cdiv(x.shape[0], block_m), num_sms(x.device), OCCUPANCY[k])
    y, mean, rstd = outs
    return [Launch(k, grid, {"x": x, "w": w, "b": b, "y": y, "mean": mean, "rstd": rstd,
                             "eps": EPS,
                             "BLOCK_M": block_m, "TILE": tile})]


def _captures(kernel: str, block_m_of) -> list:
    return per_dtype_captures(kernel, {"x": 2, "w": 1, "b": 1, "y": 2},
                              lambda dt: {"BLOCK_M": block_m_of(dt), "TILE": 4096},
                              fixed_arrays={"mean": ("float32", 1), "rstd": ("float32", 1)},
                              scalars={"eps": "float32"})


SPEC = OpSpec(
    name="layer_norm",
    kernel_file="layer_norm.py",
    kernels=list(OCCUPANCY),
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=NORM_SHAPES,
    bench_shapes=NORM_BENCH,
    tolerances=TOL_POINTWISE,
    captures=(_captures("layer_norm_fwd_kernel", lambda dt: rows_per_block(8192, 4096, dt, ROW_BYTES))
              + _captures("layer_norm_fwd_occ4_kernel", lambda dt: 2)
              + _captures(PREFETCH, lambda dt: 1)
              + _captures(W8, lambda dt: 2)),
    bytes=lambda shape, dt: ((2 * shape[0] * shape[1] + 2 * shape[1]) * ELEMENT_SIZE[dt]
                             + 8 * shape[0]),
    flops=lambda shape: 7 * shape[0] * shape[1],
    tune=ConfigSpace(axes={"kernel": tuple(OCCUPANCY), "BLOCK_M": BLOCK_MS, "grid": GRIDS},
                     candidates=candidates, default=default, shape_class=rows_class),
)
