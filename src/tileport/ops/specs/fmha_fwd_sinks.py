"""fmha_fwd_sinks: causal prefill with per-head sink logits [Hq] f32 (added to the softmax
denominator only) and an optional sliding window (window > 0 keys ending at the query).

Shapes (B, Hq, Hkv, S, D, window). Reference: plain f32 torch (_attention.attention_reference).
"""

from __future__ import annotations

import dataclasses

from . import _attention as A
from . import fmha_fwd

HEAD_DIMS = (64,)  # gpt-oss


def make_inputs(shape, dtype, device, seed=0):
    q, k, v, lens = A.prefill_inputs(shape, dtype, device, seed)
    return q, k, v, lens, A.sinks_input(shape[1], device, seed), int(shape[5])


def reference(q, k, v, seq_lens, sinks, window):
    lens = [(n, n) for n in seq_lens.tolist()]
    return A.attention_reference(q, k, v, lens, causal=True, window=window, sinks=sinks)


def plan(q, k, v, seq_lens, sinks, window, outs):
    A.check_dtype(q)
    if sinks.shape != (q.shape[1],) or window < 0:
        raise ValueError("fmha_fwd_sinks takes sinks [Hq] f32 and a window >= 0 (0 = none)")
    return A.prefill_plan("fmha_fwd_sinks", q, k, v, seq_lens, outs, causal=True, window=window,
                          sinks=sinks, head_dims=HEAD_DIMS)


SPEC = dataclasses.replace(
    fmha_fwd.SPEC,
    name="fmha_fwd_sinks",
    make_inputs=make_inputs,
    reference=reference,
    plan=plan,
    # window edges: shorter than a key tile, one key more than a tile, longer than the sequence
    shapes=[(1, 1, 1, 1, 64, 0), (2, 4, 2, 77, 64, 0), (2, 4, 2, 300, 64, 35),
            (3, 8, 1, 513, 64, 129), (2, 16, 4, 1000, 64, 128), (1, 8, 8, 200, 64, 4096)],
    bench_shapes=[(4, 64, 8, 4096, 64, 128), (4, 64, 8, 4096, 64, 0)],
    captures=A.prefill_captures(HEAD_DIMS, causal=True, sinks=True)
    + A.prefill_captures(HEAD_DIMS, causal=True, sliding=True, sinks=True),
    flops=lambda shape: A.prefill_flops(shape, causal=True, window=shape[5]),
)
