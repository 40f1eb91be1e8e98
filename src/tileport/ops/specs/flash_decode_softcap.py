"""flash_decode_softcap: flash_decode with Gemma-style logit soft-capping (cap an input; the tests
use _attention.SOFTCAP). Shapes (B, Hq, Hkv, S, D), head dim 128. Reference: plain f32 torch.
"""

from __future__ import annotations

import dataclasses

from . import _attention as A
from . import flash_decode

HEAD_DIMS = (128,)


def make_inputs(shape, dtype, device, seed=0):
    return (*A.decode_inputs(shape, dtype, device, seed), A.SOFTCAP)


def reference(q, k_cache, v_cache, kv_lens, softcap):
    return A.decode_reference(q, k_cache, v_cache, kv_lens, softcap=softcap)


def plan(q, k_cache, v_cache, kv_lens, softcap, outs):
    A.check_dtype(q)
    if not softcap > 0:
        raise ValueError("flash_decode_softcap takes a cap > 0")
    return A.decode_plan("flash_decode_softcap", q, k_cache, v_cache, kv_lens, outs,
                         softcap=softcap, head_dims=HEAD_DIMS)


SPEC = dataclasses.replace(
    flash_decode.SPEC,
    name="flash_decode_softcap",
    make_inputs=make_inputs,
    reference=reference,
    plan=plan,
    shapes=[(1, 1, 1, 1, 128), (2, 8, 2, 77, 128), (3, 32, 8, 1000, 128), (4, 8, 1, 4099, 128)],
    bench_shapes=[(16, 32, 8, 8192, 128)],
    captures=A.decode_captures(HEAD_DIMS, softcap=True),
)
