"""gelu: tanh-approximated GELU, element-wise (flattened contiguous view), f32 math."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, dtype_name, flat, flat_tile,
                      generator, numel, per_dtype_captures, randn, torch)


def make_inputs(shape, dtype, device, seed=0):
    # scale 3: covers the saturated tails and the curved middle of the activation
    return (randn(shape, dtype, device, generator(device, seed), scale=3.0),)


def reference(x):
    F = torch().nn.functional
    return F.gelu(x.float(), approximate="tanh").to(x.dtype)


def allocate(x):
    return torch().empty_like(x)


def plan(x, outs):
    n = x.numel()
    tile = flat_tile(n, dtype_name(x))
    return [Launch("gelu_tanh_kernel", (cdiv(n, tile), 1, 1),
                   {"x": flat(x), "y": flat(outs), "TILE": tile})]


SPEC = OpSpec(
    name="gelu",
    kernel_file="gelu.py",
    kernels=["gelu_tanh_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1), (7, 33), (1000, 1000), (4096, 4097), (8192, 8192)],
    bench_shapes=[(8192, 8192), (16384, 16384)],
    tolerances=TOL_POINTWISE,
    captures=per_dtype_captures("gelu_tanh_kernel", {"x": 1, "y": 1},
                                lambda dt: {"TILE": flat_tile(8192 * 8192, dt)}),
    bytes=lambda shape, dt: 2 * numel(shape) * ELEMENT_SIZE[dt],
    flops=lambda shape: 10 * numel(shape),
)
