"""fmha_fwd: attention prefill, causal or not, GQA / MQA, ragged lengths; returns (o, lse).

Shapes (B, Hq, Hkv, S, D, causal). Reference: torch scaled_dot_product_attention in f32 per
sequence (o) and the f32 logsumexp of the masked scores (lse); see _attention.py.
"""

from __future__ import annotations

from ..spec import OpSpec
from . import _attention as A


def make_inputs(shape, dtype, device, seed=0):
    return (*A.prefill_inputs(shape, dtype, device, seed), bool(shape[5]))


def reference(q, k, v, seq_lens, causal):
    lens = [(n, n) for n in seq_lens.tolist()]
    return A.attention_reference(q, k, v, lens, causal=causal, use_sdpa=True)


def plan(q, k, v, seq_lens, causal, outs):
    A.check_dtype(q)
    return A.prefill_plan("fmha_fwd", q, k, v, seq_lens, outs, causal=causal)


SPEC = OpSpec(
    name="fmha_fwd",
    kernel_file="attention.py",
    kernels=["fmha_fwd_kernel"],
    dtypes=list(A.ATTN_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=A.prefill_allocate,
    plan=plan,
    shapes=[(1, 1, 1, 1, 64, 0), (1, 1, 1, 1, 128, 1), (2, 4, 2, 77, 64, 1), (3, 8, 1, 200, 128, 0),
            (2, 8, 8, 513, 128, 1), (1, 32, 8, 1000, 64, 1), (2, 16, 4, 2048, 128, 1),
            (2, 16, 4, 2048, 128, 0)],
    bench_shapes=[(4, 32, 8, 4096, 128, 1), (4, 32, 8, 4096, 128, 0), (2, 32, 8, 8192, 128, 1),
                  (1, 32, 8, 16384, 128, 1)],
    tolerances=A.TOL_ATTENTION,
    captures=A.prefill_captures(causal=False) + A.prefill_captures(causal=True),
    bytes=A.prefill_bytes,
    flops=lambda shape: A.prefill_flops(shape, causal=bool(shape[5])),
    kind="compute",
)
