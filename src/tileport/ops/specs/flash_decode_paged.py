"""flash_decode_paged: flash_decode with the KV cache in pages of PAGE_SIZE positions.

Inputs q [B, Hq, D], k_pages / v_pages [P, Hkv, PAGE_SIZE, D], block_table [B, pages] int32 (page
of each (sequence, position / PAGE_SIZE); the tests shuffle the pages), kv_lens [B].
Reference: the contiguous cache rebuilt from the pages, then flash_decode's reference.
"""

from __future__ import annotations

import dataclasses

from . import _attention as A
from . import flash_decode


def reference(q, k_pages, v_pages, block_table, kv_lens):
    k, v = A.from_pages(k_pages, block_table), A.from_pages(v_pages, block_table)
    return A.decode_reference(q, k, v, kv_lens, use_sdpa=True)


def plan(q, k_pages, v_pages, block_table, kv_lens, outs):
    A.check_dtype(q)
    return A.decode_plan("flash_decode_paged", q, k_pages, v_pages, kv_lens, outs,
                         block_table=block_table)


SPEC = dataclasses.replace(
    flash_decode.SPEC,
    name="flash_decode_paged",
    make_inputs=lambda shape, dtype, device, seed=0: A.paged_inputs(shape, dtype, device, seed),
    reference=reference,
    plan=plan,
    captures=A.decode_captures(paged=True),
)
