"""rms_norm: y = x * rsqrt(mean(x^2, -1) + eps) * w over [M, N] rows (f32 math, persistent rows)."""

from __future__ import annotations

from .. import autotune
from ..spec import ConfigSpace, Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, NORM_BENCH, NORM_SHAPES, TOL_POINTWISE, cdiv,
                      generator, next_pow2, num_sms, per_dtype_captures, randn, rows_per_block, torch)
from ._tune import BLOCK_MS, GRIDS, row_candidates, row_grid, rows_class

OCCUPANCY = {"rms_norm_kernel": 2}  # must match the @ct.kernel decorator
MAX_TILE = 16384  # longest row (as a power-of-two tile) held in one tile
EPS = 1e-6


def make_inputs(shape, dtype, device, seed=0):
    m, n = shape
    g = generator(device, seed)
    x = randn((m, n), dtype, device, g, scale=2.0)
    w = randn((n,), dtype, device, g, scale=0.5, shift=1.0)
    return x, w


def reference(x, w):
    xf = x.float()
    inv_rms = torch().rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xf * inv_rms * w.float()).to(x.dtype)


def allocate(x, w):
    return torch().empty_like(x)


def candidates(shape, dtype) -> list[dict]:
    tile = next_pow2(shape[1])
    return row_candidates(shape[0], tile, OCCUPANCY, rows_per_block(shape[0], tile, dtype)) if tile <= MAX_TILE else []


def default(shape, dtype) -> dict:
    tile = next_pow2(shape[1])
    return {"kernel": "rms_norm_kernel", "BLOCK_M": rows_per_block(shape[0], tile, dtype), "grid": "persistent"}


def plan(x, w, outs, config=None):
    if x.dim() != 2 or x.stride(1) != 1 or w.shape != (x.shape[1],):
        raise ValueError("rms_norm takes x [M, N] (unit last stride) and w [N]")
    tile = next_pow2(x.shape[1])
    if tile > MAX_TILE:
        raise ValueError(f"rms_norm: rows longer than {MAX_TILE} are not supported")
    cfg = autotune.resolve(SPEC, x, config)
    k, block_m = cfg["kernel"], cfg["BLOCK_M"]
    grid = row_grid(cfg, cdiv(x.shape[0], block_m), num_sms(x.device), OCCUPANCY[k])
    return [Launch(k, grid, {"x": x, "w": w, "y": outs, "eps": EPS,
                             "BLOCK_M": block_m, "TILE": tile})]


SPEC = OpSpec(
    name="rms_norm",
    kernel_file="rms_norm.py",
    kernels=["rms_norm_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=NORM_SHAPES,
    bench_shapes=NORM_BENCH,
    tolerances=TOL_POINTWISE,
    captures=per_dtype_captures("rms_norm_kernel", {"x": 2, "w": 1, "y": 2},
                                lambda dt: {"BLOCK_M": rows_per_block(8192, 4096, dt),
                                            "TILE": 4096},
                                scalars={"eps": "float32"}),
    bytes=lambda shape, dt: (2 * shape[0] * shape[1] + shape[1]) * ELEMENT_SIZE[dt],
    flops=lambda shape: 4 * shape[0] * shape[1],
    tune=ConfigSpace(axes={"kernel": tuple(OCCUPANCY), "BLOCK_M": BLOCK_MS, "grid": GRIDS},
                     candidates=candidates, default=default, shape_class=rows_class),
)
