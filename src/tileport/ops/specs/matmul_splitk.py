"""matmul_splitk: c = a @ b with K split across tile blocks (f32 workspace) and a reduce kernel.

Plan: output tiles T = ceil(M / TILE_M) * ceil(N / TILE_N); splits S = min(ceil(NUM_SMS / T),
num_k_tiles / MIN_K_TILES_PER_SPLIT), then k_tiles_per_split = ceil(num_k_tiles / S) and S is
recomputed so that no split is empty. The workspace [S, M, N] f32 is allocated by the plan.
"""

from __future__ import annotations

from ..spec import Capture, Launch, OpSpec
from . import matmul
from ._common import FLOAT_DTYPES, TOL_MATMUL, cdiv, dtype_name, num_sms, torch
from .matmul import allocate, make_inputs, matmul_bytes, matmul_flops, reference  # same operator contract

TILES = {"float16": (128, 128, 64), "bfloat16": (128, 128, 64), "float32": (128, 128, 32)}
REDUCE_TILE = (64, 128)
MIN_K_TILES_PER_SPLIT = 4


def constants(dtype: str) -> dict:
    return matmul.constants(dtype, TILES)


def split_plan(m: int, n: int, k: int, dtype: str, sms: int) -> tuple[int, int]:
    """(splits, k_tiles_per_split) for an M x N x K problem."""
    tm, tn, tk = TILES[dtype]
    tiles = cdiv(m, tm) * cdiv(n, tn)
    num_k = max(1, cdiv(k, tk))
    splits = max(1, min(cdiv(sms, tiles), num_k // MIN_K_TILES_PER_SPLIT))
    per_split = cdiv(num_k, splits)
    return cdiv(num_k, per_split), per_split


def plan(a, b, outs):
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError("matmul_splitk takes a [M, K] and b [K, N] of one dtype")
    (m, k), n = a.shape, b.shape[1]
    dt = dtype_name(a)
    consts = constants(dt)
    splits, per_split = split_plan(m, n, k, dt, num_sms(a.device))
    ws = torch().empty((splits, m, n), dtype=torch().float32, device=a.device)
    tiles = cdiv(m, consts["TILE_M"]) * cdiv(n, consts["TILE_N"])
    rm, rn = REDUCE_TILE
    return [
        Launch("matmul_splitk_kernel", (tiles, splits, 1),
               {"a": a, "b": b, "ws": ws, "k_tiles_per_split": per_split, **consts}),
        Launch("splitk_reduce_kernel", (cdiv(m, rm), cdiv(n, rn), 1),
               {"ws": ws, "c": outs, "TILE_M": rm, "TILE_N": rn}),
    ]


def _captures():
    out = []
    for dt in FLOAT_DTYPES:
        out.append(Capture("matmul_splitk_kernel",
                           {"a": (dt, 2), "b": (dt, 2), "ws": ("float32", 3)},
                           {"k_tiles_per_split": "int32"}, constants(dt)))
    for dt in FLOAT_DTYPES:
        out.append(Capture("splitk_reduce_kernel", {"ws": ("float32", 3), "c": (dt, 2)}, {},
                           {"TILE_M": REDUCE_TILE[0], "TILE_N": REDUCE_TILE[1]}))
    return out


SPEC = OpSpec(
    name="matmul_splitk",
    kernel_file="matmul_splitk.py",
    kernels=["matmul_splitk_kernel", "splitk_reduce_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1), (17, 33, 1000), (100, 300, 5000), (128, 256, 8192), (256, 512, 16384)],
    bench_shapes=[(1024, 1024, 16384), (512, 2048, 32768)],
    tolerances=TOL_MATMUL,
    captures=_captures(),
    bytes=matmul_bytes,
    flops=matmul_flops,
    kind="compute",
)
