"""matmul_fp8: w8a8 block-scaled GEMM on sm_90: float8_e4m3fn a [M, K] and b [N, K], f32 scales per 128, bf16 out.

Inputs (a, b, a_scale, b_scale): a_scale [M, cdiv(K, 128)] (per row and 128-column group), b_scale
[cdiv(N, 128), cdiv(K, 128)] (per 128 x 128 block), as DeepSeek-V3's fp8 linear layers; c = (a * a_scale)
@ (b * b_scale)^T in bfloat16 (the op's dtype). make_inputs quantizes normal samples: each group's scale
is its largest magnitude / 448 (e4m3's largest finite value). The reference dequantizes in f32 and
multiplies in f32; the kernel's products of fp8 values are exact and each 128-deep K step is
accumulated by the tensor cores, then scaled and added in f32: bf16 matmul's tolerance.
"""

from __future__ import annotations

from ..spec import Capture, Launch, OpSpec
from . import matmul
from ._common import TOL_MATMUL, cdiv, generator, num_sms, randn, torch

SCALE_BLOCK = 128  # kernels/matmul_fp8.py's SCALE_BLOCK
E4M3_MAX = 448.0
TILES = (128, 128, 128)  # (TILE_M, TILE_N, TILE_K): TILE_K is one scale group, TILE_N divides it
GROUP_M = 8
FP8 = "float8_e4m3fn"
SHAPES = [(1, 1, 1), (17, 33, 65), (129, 255, 300), (1000, 1000, 1000), (512, 768, 4096)]
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 7168, 2048)]
TOLERANCES = {"bfloat16": TOL_MATMUL["bfloat16"]}


def _quantize(x, rows_per_scale: int):
    """(fp8 x, f32 scales [cdiv(R, rows_per_scale), cdiv(K, 128)]) of an f32 matrix [R, K]."""
    t = torch()
    r, k = x.shape
    pr, pk = cdiv(r, rows_per_scale) * rows_per_scale, cdiv(k, SCALE_BLOCK) * SCALE_BLOCK
    padded = t.zeros((pr, pk), dtype=t.float32, device=x.device)
    padded[:r, :k] = x
    blocks = padded.view(pr // rows_per_scale, rows_per_scale, pk // SCALE_BLOCK, SCALE_BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / E4M3_MAX
    q = (blocks / scale[:, None, :, None]).view(pr, pk)[:r, :k]
    return q.to(getattr(t, FP8)).contiguous(), scale.contiguous()


def dequantize(q, scale, rows_per_scale: int):
    s = scale.repeat_interleave(rows_per_scale, 0).repeat_interleave(SCALE_BLOCK, 1)
    return q.float() * s[:q.shape[0], :q.shape[1]]


def make_inputs(shape, dtype, device, seed=0):
    m, n, k = shape
    g = generator(device, seed)
    s = float(k) ** -0.25  # so that the outputs are O(1)
    a, a_scale = _quantize(randn((m, k), "float32", device, g, scale=s), 1)
    b, b_scale = _quantize(randn((n, k), "float32", device, g, scale=s), SCALE_BLOCK)
    return a, b, a_scale, b_scale


def reference(a, b, a_scale, b_scale):
    t = torch()
    return (dequantize(a, a_scale, 1) @ dequantize(b, b_scale, SCALE_BLOCK).T).to(t.bfloat16)


def allocate(a, b, a_scale, b_scale):
    t = torch()
    return t.empty((a.shape[0], b.shape[0]), dtype=t.bfloat16, device=a.device)


def constants() -> dict:
    tm, tn, tk = TILES
    return {"TILE_M": tm, "TILE_N": tn, "TILE_K": tk, "GROUP_M": GROUP_M}


def plan(a, b, a_scale, b_scale, outs):
    t = torch()
    fp8 = getattr(t, FP8)
    (m, k), n = a.shape, b.shape[0]
    if a.dtype != fp8 or b.dtype != fp8 or b.dim() != 2 or b.shape[1] != k:
        raise ValueError("matmul_fp8 takes float8_e4m3fn a [M, K] and b [N, K]")
    kb = cdiv(k, SCALE_BLOCK)
    if tuple(a_scale.shape) != (m, kb) or tuple(b_scale.shape) != (cdiv(n, SCALE_BLOCK), kb) \
            or a_scale.dtype != t.float32 or b_scale.dtype != t.float32:
        raise ValueError(f"matmul_fp8 takes f32 a_scale [{m}, {kb}] and b_scale [{cdiv(n, SCALE_BLOCK)}, {kb}]")
    tm, tn, _ = TILES
    grid = (max(1, min(cdiv(m, tm) * cdiv(n, tn), num_sms(a.device))), 1, 1)
    return [Launch("matmul_fp8_kernel", grid,
                   {"a": a, "b": b, "a_scale": a_scale, "b_scale": b_scale, "c": outs, **constants()})]


def fp8_bytes(shape, dt) -> int:
    m, n, k = shape
    return m * k + n * k + 2 * m * n + 4 * (m + cdiv(n, SCALE_BLOCK)) * cdiv(k, SCALE_BLOCK)


SPEC = OpSpec(
    name="matmul_fp8",
    kernel_file="matmul_fp8.py",
    kernels=["matmul_fp8_kernel"],
    dtypes=["bfloat16"],
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOLERANCES,
    captures=[Capture("matmul_fp8_kernel", {"a": (FP8, 2), "b": (FP8, 2), "a_scale": ("float32", 2),
                                            "b_scale": ("float32", 2), "c": ("bfloat16", 2)},
                      constants=constants())],
    bytes=fp8_bytes,
    flops=matmul.matmul_flops,
    kind="compute",
)
