"""vector_add: c = a + b on 1-D arrays; ragged tails handled by the view (padding + dropped stores)."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, dtype_name, flat_tile,
                      generator, per_dtype_captures, randn, torch)


def make_inputs(shape, dtype, device, seed=0):
    g = generator(device, seed)
    return randn(shape, dtype, device, g), randn(shape, dtype, device, g)


def reference(a, b):
    return a + b


def allocate(a, b):
    return torch().empty_like(a)


def plan(a, b, outs):
    n = a.numel()
    tile = flat_tile(n, dtype_name(a))
    return [Launch("vector_add_kernel", (cdiv(n, tile), 1, 1),
                   {"a": a, "b": b, "c": outs, "TILE": tile})]


SPEC = OpSpec(
    name="vector_add",
    kernel_file="vector_add.py",
    kernels=["vector_add_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1,), (1000,), (4097,), (65536,), (1_000_003,), (1 << 24,)],
    bench_shapes=[(1 << 24,), (1 << 27,)],
    tolerances=TOL_POINTWISE,
    captures=per_dtype_captures("vector_add_kernel", {"a": 1, "b": 1, "c": 1},
                                lambda dt: {"TILE": flat_tile(1 << 24, dt)}),
    bytes=lambda shape, dt: 3 * shape[0] * ELEMENT_SIZE[dt],
    flops=lambda shape: shape[0],
)
