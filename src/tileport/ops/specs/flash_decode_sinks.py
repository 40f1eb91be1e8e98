"""flash_decode_sinks: flash_decode with per-head sink logits [Hq] f32 and an optional sliding
window (the last `window` positions; 0 = none). Shapes (B, Hq, Hkv, S, D, window).
Reference: plain f32 torch (_attention.attention_reference).
"""

from __future__ import annotations

import dataclasses

from . import _attention as A
from . import flash_decode

HEAD_DIMS = (64,)  # gpt-oss


def make_inputs(shape, dtype, device, seed=0):
    q, k, v, lens = A.decode_inputs(shape, dtype, device, seed)
    return q, k, v, lens, A.sinks_input(shape[1], device, seed), int(shape[5])


def reference(q, k_cache, v_cache, kv_lens, sinks, window):
    return A.decode_reference(q, k_cache, v_cache, kv_lens, window=window, sinks=sinks)


def plan(q, k_cache, v_cache, kv_lens, sinks, window, outs):
    A.check_dtype(q)
    if sinks.shape != (q.shape[1],) or window < 0:
        raise ValueError("flash_decode_sinks takes sinks [Hq] f32 and a window >= 0 (0 = none)")
    return A.decode_plan("flash_decode_sinks", q, k_cache, v_cache, kv_lens, outs,
                         window=window, sinks=sinks, head_dims=HEAD_DIMS)


SPEC = dataclasses.replace(
    flash_decode.SPEC,
    name="flash_decode_sinks",
    make_inputs=make_inputs,
    reference=reference,
    plan=plan,
    shapes=[(1, 1, 1, 1, 64, 0), (2, 8, 2, 77, 64, 35), (3, 32, 8, 1000, 64, 128),
            (4, 8, 1, 4099, 64, 0), (2, 64, 8, 16384, 64, 128)],
    bench_shapes=[(64, 64, 8, 4096, 64, 128), (16, 64, 8, 8192, 64, 0)],
    captures=A.decode_captures(HEAD_DIMS, sliding=True, sinks=True)
    + A.decode_captures(HEAD_DIMS, combine=False, sinks=True),
)
