"""silu_and_mul: x [M, 2N] -> y [M, N] = silu(x[:, :N]) * x[:, N:]; shape = (M, N)."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, generator, next_pow2,
                      per_dtype_captures, randn, torch)

# (BLOCK_M, BLOCK_N): one output row of up to 1024 columns per block, i.e. one (2, 1024) load of
# gate + up. Measured on H200 (bf16 8192 x 2*8192): 1x1024 4204 GB/s, 1x2048 4240, 2x1024 4236,
# 4x512 3940, 1x512 3613.
MAX_BLOCK_N = 1024
TILE_ELEMS = 1024


def tiles(m: int, n: int) -> tuple[int, int]:
    block_n = min(next_pow2(n), MAX_BLOCK_N)
    block_m = max(1, min(next_pow2(m), TILE_ELEMS // block_n))
    return block_m, block_n


def make_inputs(shape, dtype, device, seed=0):
    m, n = shape
    return (randn((m, 2 * n), dtype, device, generator(device, seed), scale=3.0),)


def reference(x):
    F = torch().nn.functional
    n = x.shape[1] // 2
    return (F.silu(x[:, :n].float()) * x[:, n:].float()).to(x.dtype)


def allocate(x):
    return torch().empty((x.shape[0], x.shape[1] // 2), dtype=x.dtype, device=x.device)


def plan(x, outs):
    m, n2 = x.shape
    if n2 % 2 or not x.is_contiguous():
        raise ValueError("silu_and_mul takes a contiguous [M, 2N] tensor")
    n = n2 // 2
    block_m, block_n = tiles(m, n)
    return [Launch("silu_and_mul_kernel", (cdiv(n, block_n), cdiv(m, block_m), 1),
                   {"x": x.view(2 * m, n), "y": outs, "BLOCK_M": block_m, "BLOCK_N": block_n})]


def _constants(dt):
    bm, bn = tiles(8192, 8192)
    return {"BLOCK_M": bm, "BLOCK_N": bn}


SPEC = OpSpec(
    name="silu_and_mul",
    kernel_file="silu_and_mul.py",
    kernels=["silu_and_mul_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 8), (7, 100), (300, 1000), (129, 4097), (128, 8192), (4096, 4096)],
    bench_shapes=[(8192, 8192), (4096, 14336)],
    tolerances=TOL_POINTWISE,
    captures=per_dtype_captures("silu_and_mul_kernel", {"x": 2, "y": 2}, _constants),
    bytes=lambda shape, dt: 3 * shape[0] * shape[1] * ELEMENT_SIZE[dt],
    flops=lambda shape: 5 * shape[0] * shape[1],
)
