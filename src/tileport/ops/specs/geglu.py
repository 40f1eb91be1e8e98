"""geglu: y = gelu_tanh(a) * b for two same-shaped inputs (flattened contiguous views), f32 math."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, dtype_name, flat, flat_tile,
                      generator, numel, per_dtype_captures, randn, torch)


def make_inputs(shape, dtype, device, seed=0):
    g = generator(device, seed)
    return randn(shape, dtype, device, g, scale=3.0), randn(shape, dtype, device, g)


def reference(a, b):
    F = torch().nn.functional
    return (F.gelu(a.float(), approximate="tanh") * b.float()).to(a.dtype)


def allocate(a, b):
    return torch().empty_like(a)


def plan(a, b, outs):
    if a.shape != b.shape:
        raise ValueError(f"geglu: a {tuple(a.shape)} and b {tuple(b.shape)} differ")
    n = a.numel()
    tile = flat_tile(n, dtype_name(a))
    return [Launch("geglu_kernel", (cdiv(n, tile), 1, 1),
                   {"a": flat(a), "b": flat(b), "y": flat(outs), "TILE": tile})]


SPEC = OpSpec(
    name="geglu",
    kernel_file="geglu.py",
    kernels=["geglu_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1), (7, 33), (1000, 1000), (4096, 4097), (8192, 8192)],
    bench_shapes=[(8192, 8192), (8192, 14336)],
    tolerances=TOL_POINTWISE,
    captures=per_dtype_captures("geglu_kernel", {"a": 1, "b": 1, "y": 1},
                                lambda dt: {"TILE": flat_tile(8192 * 8192, dt)}),
    bytes=lambda shape, dt: 3 * numel(shape) * ELEMENT_SIZE[dt],
    flops=lambda shape: 12 * numel(shape),
)
