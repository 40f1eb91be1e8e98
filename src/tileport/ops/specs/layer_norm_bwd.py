"""layer_norm_bwd: dx, dw and db of y = (x - mean) * rstd * w + b over [M, N] rows, given dy.

Inputs (dy, x, w, mean, rstd): mean and rstd are the forward's [M] f32 outputs (the test inputs'
are the f32 statistics of x). Outputs dx [M, N] (x's dtype), dw and db [N] (w's dtype). Launches as
rms_norm_bwd (kernels/norm_bwd.py): the persistent row kernel with two [G, N] f32 partial-sum arrays,
then one reduction per weight gradient. The reference is torch autograd of `F.layer_norm` in f32;
tolerances as rms_norm_bwd's.
"""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, NORM_BENCH, NORM_SHAPES, cdiv, dtype_name, generator,
                      persistent_grid, randn, torch)
from .layer_norm import EPS
from .rms_norm_bwd import (OCCUPANCY, REDUCE, TOL_NORM_BWD, check_rows, partials, reduce_captures, reduce_launch,
                           row_captures, row_tiles)


def make_inputs(shape, dtype, device, seed=0):
    m, n = shape
    g = generator(device, seed)
    x = randn((m, n), dtype, device, g, scale=2.0, shift=0.5)  # non-zero mean
    w = randn((n,), dtype, device, g, scale=0.5, shift=1.0)
    xf = x.float()
    mean = xf.mean(dim=-1)
    rstd = torch().rsqrt(xf.var(dim=-1, unbiased=False) + EPS)
    return randn((m, n), dtype, device, g), x, w, mean, rstd


def reference(dy, x, w, mean, rstd):
    t = torch()
    with t.enable_grad():
        xf = x.detach().float().requires_grad_()
        wf = w.detach().float().requires_grad_()
        bf = t.zeros_like(wf).requires_grad_()
        y = t.nn.functional.layer_norm(xf, (x.shape[1],), wf, bf, EPS)
        dx, dw, db = t.autograd.grad(y, (xf, wf, bf), dy.float())
    return dx.to(x.dtype), dw.to(w.dtype), db.to(w.dtype)


def allocate(dy, x, w, mean, rstd):
    t = torch()
    return t.empty_like(x), t.empty_like(w), t.empty_like(w)


def plan(dy, x, w, mean, rstd, outs):
    check_rows("layer_norm_bwd", dy, x, w)
    if mean.shape != (x.shape[0],) or rstd.shape != mean.shape:
        raise ValueError("layer_norm_bwd takes mean [M] and rstd [M]")
    dx, dw, db = outs
    block_m, tile = row_tiles(*x.shape, dtype_name(x))
    grid = persistent_grid(cdiv(x.shape[0], block_m), x.device, OCCUPANCY["layer_norm_bwd_kernel"])
    dw_part, db_part = partials(grid, x, 2)
    return [Launch("layer_norm_bwd_kernel", grid,
                   {"dy": dy, "x": x, "w": w, "mean": mean, "rstd": rstd, "dx": dx, "dw_part": dw_part,
                    "db_part": db_part, "BLOCK_M": block_m, "TILE": tile}),
            reduce_launch(dw_part, dw), reduce_launch(db_part, db)]


SPEC = OpSpec(
    name="layer_norm_bwd",
    kernel_file="norm_bwd.py",
    kernels=["layer_norm_bwd_kernel", REDUCE],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=NORM_SHAPES,
    bench_shapes=NORM_BENCH,
    tolerances=TOL_NORM_BWD,
    captures=(row_captures("layer_norm_bwd_kernel", {"dy": 2, "x": 2, "w": 1, "dx": 2},
                           {"mean": ("float32", 1), "rstd": ("float32", 1), "dw_part": ("float32", 2),
                            "db_part": ("float32", 2)}, {})
              + reduce_captures()),
    bytes=lambda shape, dt: (3 * shape[0] * shape[1] + 3 * shape[1]) * ELEMENT_SIZE[dt] + 8 * shape[0],
    flops=lambda shape: 12 * shape[0] * shape[1],
)
