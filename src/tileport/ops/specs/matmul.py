"""matmul: c[M, N] = a[M, K] @ b[K, N]; f16 / bf16 with f32 accumulation, f32 through TF32."""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_MATMUL, cdiv, dtype_name, generator, num_sms,
                      per_dtype_captures, randn, torch)

GROUP_M = 8
# CTAs per tile block (the kernels' num_ctas hint; a CPU test checks it). The persistent grid is one
# resident wave: NUM_SMS / NUM_CTAS blocks (occupancy 1), at most one per output tile.
NUM_CTAS = 2
# (TILE_M, TILE_N, TILE_K) per input dtype on sm_90, for the kernel hints num_ctas=2,
# num_worker_warps=8: a 256 x 256 tile block = 128 x 256 per CTA of the 2-CTA cluster, 64 KiB of
# operands per K step and block (TF32 halves TILE_K to keep the bytes per stage). Chosen by
# measurement on H200, see kernels/matmul.py and docs/corpus.md.
TILES = {"float16": (256, 256, 64), "bfloat16": (256, 256, 64), "float32": (256, 256, 32)}


def make_inputs(shape, dtype, device, seed=0):
    m, n, k = shape
    g = generator(device, seed)
    s = float(k) ** -0.25  # so that the outputs are O(1)
    return randn((m, k), dtype, device, g, scale=s), randn((k, n), dtype, device, g, scale=s)


def reference(a, b):
    return (a.float() @ b.float()).to(a.dtype)


def allocate(a, b):
    return torch().empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def constants(dtype: str, tiles: dict = TILES) -> dict:
    tm, tn, tk = tiles[dtype]
    return {"TILE_M": tm, "TILE_N": tn, "TILE_K": tk, "GROUP_M": GROUP_M,
            "USE_TF32": dtype == "float32"}


def persistent_mma_grid(n_tiles: int, device) -> tuple[int, int, int]:
    return (max(1, min(n_tiles, num_sms(device) // NUM_CTAS)), 1, 1)


def matmul_bytes(shape, dt):
    return (shape[0] * shape[2] + shape[2] * shape[1] + shape[0] * shape[1]) * ELEMENT_SIZE[dt]


def matmul_flops(shape):
    return 2 * shape[0] * shape[1] * shape[2]


def plan(a, b, outs):
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError("matmul takes a [M, K] and b [K, N] of one dtype")
    m, n = a.shape[0], b.shape[1]
    consts = constants(dtype_name(a))
    grid = persistent_mma_grid(cdiv(m, consts["TILE_M"]) * cdiv(n, consts["TILE_N"]), a.device)
    return [Launch("matmul_kernel", grid, {"a": a, "b": b, "c": outs, **consts})]


SPEC = OpSpec(
    name="matmul",
    kernel_file="matmul.py",
    kernels=["matmul_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1), (17, 33, 65), (129, 255, 100), (1000, 1000, 1000), (512, 768, 4096),
            (4096, 4096, 4096)],
    bench_shapes=[(4096, 4096, 4096), (8192, 8192, 8192)],
    tolerances=TOL_MATMUL,
    captures=per_dtype_captures("matmul_kernel", {"a": 2, "b": 2, "c": 2}, constants),
    bytes=matmul_bytes,
    flops=matmul_flops,
    kind="compute",
)
