"""rms_norm_bwd: dx and dw of y = x * rsqrt(mean(x^2, -1) + eps) * w over [M, N] rows, given dy.

Inputs (dy, x, w), outputs (dx [M, N] in x's dtype, dw [N] in w's dtype); rsqrt(mean(x^2) + eps) is
recomputed from x (the forward returns y only). Two launches (kernels/norm_bwd.py): the persistent
row kernel writes dx and one f32 row of weight-gradient partial sums per block ([G, N], G = its
grid), then norm_bwd_reduce_kernel sums the G rows per column tile. The reference is torch autograd
of the forward's f32 math.

Tolerance (TOL_NORM_BWD): dx is f32 math rounded once (one ulp of the dtype); dw sums M terms in f32
in another order than autograd (f32: a few ulps of |dw| ~ sqrt(M), hence 1e-4) and is rounded once;
f16 / bf16 take twice the one-ulp bound of the rounded outputs.
"""

from __future__ import annotations

from ..spec import Capture, Launch, OpSpec, Tolerance
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, NORM_BENCH, NORM_SHAPES, cdiv, dtype_name, generator,
                      next_pow2, per_dtype_captures, persistent_grid, randn, rows_per_block, torch)
from .rms_norm import EPS, MAX_TILE

OCCUPANCY = {"rms_norm_bwd_kernel": 2, "layer_norm_bwd_kernel": 2}  # must match the @ct.kernel decorators
REDUCE = "norm_bwd_reduce_kernel"
REDUCE_TILE = (32, 256)  # (TILE_G, TILE_N) of the partial-sum reduction: 8192 f32 values a tile
TOL_NORM_BWD = {
    "float32": Tolerance(rtol=1e-4, atol=1e-4),
    "float16": Tolerance(rtol=2e-3, atol=2e-3),
    "bfloat16": Tolerance(rtol=2e-2, atol=2e-2),
}
CAPTURE_ROWS = (8192, 4096)  # the [M, N] problem the captures' row tiles are planned for
# Row tiles of 8 KiB: layer_norm_bwd's (2, 4096) bf16 tile (16 KiB, the forward's ROW_TILE_BYTES) spills on
# sm_90 (88 spill instructions, 128 registers at occupancy 2), its (1, 4096) tile does not
ROW_BYTES = 8192


def row_tiles(m: int, n: int, dtype: str) -> tuple[int, int]:
    """(BLOCK_M, TILE) of a backward row kernel over [m, n] rows of `dtype` elements."""
    tile = next_pow2(n)
    if tile > MAX_TILE:
        raise ValueError(f"norm backward: rows longer than {MAX_TILE} are not supported")
    return rows_per_block(m, tile, dtype, ROW_BYTES), tile


def check_rows(name: str, dy, x, w) -> None:
    if x.dim() != 2 or x.stride(1) != 1 or dy.shape != x.shape or dy.stride(1) != 1 or w.shape != (x.shape[1],):
        raise ValueError(f"{name} takes dy, x [M, N] (unit last stride) and w [N]")


def partials(grid: tuple[int, int, int], x, count: int) -> list:
    """`count` f32 [G, N] partial-sum arrays of a row kernel launched on `grid` (G = grid blocks)."""
    t = torch()
    return [t.empty((grid[0], x.shape[1]), dtype=t.float32, device=x.device) for _ in range(count)]


def reduce_launch(part, out) -> Launch:
    """out[n] = sum_g part[g, n], rounded to out's dtype."""
    tile_g, tile_n = REDUCE_TILE
    tile_n = min(tile_n, next_pow2(part.shape[1]))
    return Launch(REDUCE, (cdiv(part.shape[1], tile_n), 1, 1),
                  {"part": part, "out": out, "TILE_G": tile_g, "TILE_N": tile_n})


def reduce_captures() -> list[Capture]:
    return per_dtype_captures(REDUCE, {"out": 1}, lambda dt: dict(zip(("TILE_G", "TILE_N"), REDUCE_TILE)),
                              fixed_arrays={"part": ("float32", 2)})


def row_captures(kernel: str, arrays: dict[str, int], fixed: dict, scalars: dict) -> list[Capture]:
    return per_dtype_captures(kernel, arrays, lambda dt: dict(zip(("BLOCK_M", "TILE"), row_tiles(*CAPTURE_ROWS, dt))),
                              fixed_arrays=fixed, scalars=scalars)


def make_inputs(shape, dtype, device, seed=0):
    m, n = shape
    g = generator(device, seed)
    x = randn((m, n), dtype, device, g, scale=2.0)
    w = randn((n,), dtype, device, g, scale=0.5, shift=1.0)
    return randn((m, n), dtype, device, g), x, w


def reference(dy, x, w):
    t = torch()
    with t.enable_grad():  # detached: .float() of an f32 input is the input, whose flag must not change
        xf = x.detach().float().requires_grad_()
        wf = w.detach().float().requires_grad_()
        y = xf * t.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * wf
        dx, dw = t.autograd.grad(y, (xf, wf), dy.float())
    return dx.to(x.dtype), dw.to(w.dtype)


def allocate(dy, x, w):
    return torch().empty_like(x), torch().empty_like(w)


def plan(dy, x, w, outs):
    check_rows("rms_norm_bwd", dy, x, w)
    dx, dw = outs
    block_m, tile = row_tiles(*x.shape, dtype_name(x))
    grid = persistent_grid(cdiv(x.shape[0], block_m), x.device, OCCUPANCY["rms_norm_bwd_kernel"])
    (dw_part,) = partials(grid, x, 1)
    return [Launch("rms_norm_bwd_kernel", grid, {"dy": dy, "x": x, "w": w, "dx": dx, "dw_part": dw_part,
                                                 "eps": EPS, "BLOCK_M": block_m, "TILE": tile}),
            reduce_launch(dw_part, dw)]


SPEC = OpSpec(
    name="rms_norm_bwd",
    kernel_file="norm_bwd.py",
    kernels=["rms_norm_bwd_kernel", REDUCE],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=NORM_SHAPES,
    bench_shapes=NORM_BENCH,
    tolerances=TOL_NORM_BWD,
    captures=(row_captures("rms_norm_bwd_kernel", {"dy": 2, "x": 2, "w": 1, "dx": 2},
                           {"dw_part": ("float32", 2)}, {"eps": "float32"})
              + reduce_captures()),
    bytes=lambda shape, dt: (3 * shape[0] * shape[1] + 2 * shape[1]) * ELEMENT_SIZE[dt],
    flops=lambda shape: 10 * shape[0] * shape[1],
)
