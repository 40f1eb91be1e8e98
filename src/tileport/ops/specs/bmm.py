"""bmm: c[B, M, N] = a[B, M, K] @ b[B, K, N]; f16 / bf16 with f32 accumulation, f32 through TF32."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_MATMUL, cdiv, dtype_name, generator,
                      per_dtype_captures, randn, torch)
from .matmul import constants, persistent_mma_grid

# shape = (B, M, N, K)


def make_inputs(shape, dtype, device, seed=0):
    bt, m, n, k = shape
    g = generator(device, seed)
    s = float(k) ** -0.25
    return (randn((bt, m, k), dtype, device, g, scale=s),
            randn((bt, k, n), dtype, device, g, scale=s))


def reference(a, b):
    return torch().bmm(a.float(), b.float()).to(a.dtype)


def allocate(a, b):
    return torch().empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype, device=a.device)


def plan(a, b, outs):
    if (a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]
            or a.dtype != b.dtype):
        raise ValueError("bmm takes a [B, M, K] and b [B, K, N] of one dtype")
    bt, m, n = a.shape[0], a.shape[1], b.shape[2]
    consts = constants(dtype_name(a))
    grid = persistent_mma_grid(cdiv(m, consts["TILE_M"]) * cdiv(n, consts["TILE_N"]) * bt, a.device)
    return [Launch("bmm_kernel", grid, {"a": a, "b": b, "c": outs, **consts})]


SPEC = OpSpec(
    name="bmm",
    kernel_file="bmm.py",
    kernels=["bmm_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1, 1), (3, 17, 33, 65), (2, 200, 300, 129), (8, 512, 512, 512),
            (4, 1024, 768, 2048)],
    bench_shapes=[(8, 2048, 2048, 2048), (4, 4096, 4096, 4096)],
    tolerances=TOL_MATMUL,
    captures=per_dtype_captures("bmm_kernel", {"a": 3, "b": 3, "c": 3}, constants),
    bytes=lambda shape, dt: shape[0] * (shape[1] * shape[3] + shape[3] * shape[2]
                                        + shape[1] * shape[2]) * ELEMENT_SIZE[dt],
    flops=lambda shape: 2 * shape[0] * shape[1] * shape[2] * shape[3],
    kind="compute",
)
