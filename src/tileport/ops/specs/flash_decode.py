"""flash_decode: one query token per sequence against its KV cache [B, Hkv, S, D], split-KV.

Shapes (B, Hq, Hkv, S, D); kv_lens are ragged (_attention.seq_lens_of). Two kernels: the split
partials and their combination. Reference: torch scaled_dot_product_attention in f32 (o) and the
f32 logsumexp (lse).
"""

from __future__ import annotations

from ..spec import OpSpec
from . import _attention as A

SHAPES = [(1, 1, 1, 1, 64), (2, 8, 2, 77, 64), (3, 32, 8, 1000, 128), (4, 8, 1, 4099, 128),
          (2, 64, 8, 16384, 128), (1, 16, 16, 300, 64)]
BENCH = [(16, 32, 8, 8192, 128), (64, 32, 8, 4096, 128), (4, 64, 8, 32768, 128)]


def reference(q, k_cache, v_cache, kv_lens):
    return A.decode_reference(q, k_cache, v_cache, kv_lens, use_sdpa=True)


def plan(q, k_cache, v_cache, kv_lens, outs):
    A.check_dtype(q)
    return A.decode_plan("flash_decode", q, k_cache, v_cache, kv_lens, outs)


SPEC = OpSpec(
    name="flash_decode",
    kernel_file="attention.py",
    kernels=["flash_decode_partial_kernel", "flash_decode_combine_kernel"],
    dtypes=list(A.ATTN_DTYPES),
    make_inputs=lambda shape, dtype, device, seed=0: A.decode_inputs(shape, dtype, device, seed),
    reference=reference,
    allocate=A.decode_allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH,
    tolerances=A.TOL_ATTENTION,
    captures=A.decode_captures(),
    bytes=A.decode_bytes,
    flops=A.decode_flops,
)
