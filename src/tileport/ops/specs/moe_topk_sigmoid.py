"""moe_topk_sigmoid: moe_topk_softmax with sigmoid scores (DeepSeek-V3-style routing): the k largest logits'
sigmoids, renormalized to sum to 1. Same kernel (SIGMOID = True), ids and tolerances as moe_topk_softmax."""

from __future__ import annotations

import dataclasses

from . import moe_topk_softmax as S


def reference(logits, k):
    return S.topk_reference(logits, k, True)


def allocate(logits, k):
    return S.allocate(logits, k)


def plan(logits, k, outs):
    S.check_routing("moe_topk_sigmoid", logits, k)
    return [S.topk_launch(logits, k, True, *outs)]


SPEC = dataclasses.replace(
    S.SPEC,
    name="moe_topk_sigmoid",
    reference=reference,
    allocate=allocate,
    plan=plan,
    bench_shapes=[(4096, 256, 8), (64, 256, 8)],
    captures=S.topk_captures((4096, 256, 8), True),
)
