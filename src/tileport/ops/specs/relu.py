"""relu: y = max(x, 0), element-wise over a tensor of any shape (flattened contiguous view)."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, dtype_name, flat, flat_tile,
                      generator, numel, per_dtype_captures, randn, torch)


def make_inputs(shape, dtype, device, seed=0):
    return (randn(shape, dtype, device, generator(device, seed)),)


def reference(x):
    return torch().relu(x)


def allocate(x):
    return torch().empty_like(x)


def plan(x, outs):
    n = x.numel()
    tile = flat_tile(n, dtype_name(x))
    return [Launch("relu_kernel", (cdiv(n, tile), 1, 1), {"x": flat(x), "y": flat(outs), "TILE": tile})]


SPEC = OpSpec(
    name="relu",
    kernel_file="relu.py",
    kernels=["relu_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1), (7, 33), (1000, 1000), (4096, 4097), (8192, 8192)],
    bench_shapes=[(8192, 8192), (16384, 16384)],
    tolerances=TOL_POINTWISE,
    captures=per_dtype_captures("relu_kernel", {"x": 1, "y": 1},
                                lambda dt: {"TILE": flat_tile(8192 * 8192, dt)}),
    bytes=lambda shape, dt: 2 * numel(shape) * ELEMENT_SIZE[dt],
    flops=lambda shape: numel(shape),
)
