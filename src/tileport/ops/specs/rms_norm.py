"""rms_norm: y = x * rsqrt(mean(x^2, -1) + eps) * w over [M, N] rows (f32 math, persistent rows)."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, NORM_BENCH, NORM_SHAPES, TOL_POINTWISE, generator,
                      per_dtype_captures, randn, row_geometry, rows_per_block, torch)

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


def plan(x, w, outs):
    if x.dim() != 2 or x.stride(1) != 1 or w.shape != (x.shape[1],):
        raise ValueError("rms_norm takes x [M, N] (unit last stride) and w [N]")
    k = "rms_norm_kernel"
    tile, block_m, grid = row_geometry("rms_norm", x, MAX_TILE, OCCUPANCY[k])
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
)
