"""fmha_fwd_softcap: causal prefill with Gemma-style logit soft-capping, cap * tanh(s * scale / cap).

Shapes (B, Hq, Hkv, S, D); head dim 128; the cap is an input (the tests use _attention.SOFTCAP).
Reference: plain f32 torch (_attention.attention_reference).
"""

from __future__ import annotations

import dataclasses

from . import _attention as A
from . import fmha_fwd

HEAD_DIMS = (128,)


def make_inputs(shape, dtype, device, seed=0):
    return (*A.prefill_inputs(shape, dtype, device, seed), A.SOFTCAP)


def reference(q, k, v, seq_lens, softcap):
    lens = [(n, n) for n in seq_lens.tolist()]
    return A.attention_reference(q, k, v, lens, causal=True, softcap=softcap)


def plan(q, k, v, seq_lens, softcap, outs):
    A.check_dtype(q)
    if not softcap > 0:
        raise ValueError("fmha_fwd_softcap takes a cap > 0")
    return A.prefill_plan("fmha_fwd_softcap", q, k, v, seq_lens, outs, causal=True,
                          softcap=softcap, head_dims=HEAD_DIMS)


SPEC = dataclasses.replace(
    fmha_fwd.SPEC,
    name="fmha_fwd_softcap",
    make_inputs=make_inputs,
    reference=reference,
    plan=plan,
    shapes=[(1, 1, 1, 1, 128), (2, 4, 2, 77, 128), (3, 8, 1, 200, 128), (2, 16, 8, 1000, 128)],
    bench_shapes=[(4, 16, 8, 4096, 128)],
    captures=A.prefill_captures(HEAD_DIMS, causal=True, softcap=True),
    flops=lambda shape: A.prefill_flops(shape, causal=True),
)
