"""moe_experts: fused_moe's expert part, given the routing: per token sum_j topk_weights[t, j] * expert_j(x[t]).

Inputs (x [T, H], w13 [E, 2F, H], w2 [E, H, F], topk_weights [T, k] f32, topk_ids [T, k] int32), as a
serving engine's fused-experts call takes them; output [T, H] in x's dtype. Shapes are fused_moe's (T, H, F,
E, k); the test inputs route by moe_topk_softmax's reference on normal logits (k distinct experts per
token). Plan: moe_route's three align kernels (block fused_moe.BLOCK), then fused_moe's expert GEMMs and combine. Reference
and tolerance: fused_moe's per-expert loop in f32.
"""

from __future__ import annotations

import dataclasses

from . import fused_moe as F
from . import moe_route as R
from . import moe_topk_softmax as S
from ._common import generator, randn


def make_inputs(shape, dtype, device, seed=0):
    t, h, f, e, k = shape
    x, logits, w13, w2, _ = F.make_inputs(shape, dtype, device, seed)
    if logits.device.type == "meta":
        weights, ids = S.allocate(logits, k)
    else:
        weights, ids = S.reference(randn((t, e), "float32", device, generator(device, seed + 1)), k)
    return x, w13, w2, weights, ids


def reference(x, w13, w2, topk_weights, topk_ids):
    return F.experts_reference(x, topk_weights, topk_ids, w13, w2)


def allocate(x, w13, w2, topk_weights, topk_ids):
    return F.allocate(x, None, w13, w2, topk_ids.shape[1])


def plan(x, w13, w2, topk_weights, topk_ids, outs):
    t = F.torch()
    F.check_experts("moe_experts", x, w13, w2)
    tokens, k = topk_ids.shape if topk_ids.dim() == 2 else (-1, -1)
    if (tokens != x.shape[0] or topk_weights.shape != topk_ids.shape or topk_ids.dtype != t.int32
            or topk_weights.dtype != t.float32 or not topk_ids.is_contiguous() or not topk_weights.is_contiguous()):
        raise ValueError("moe_experts takes contiguous topk_weights f32 and topk_ids int32 [T, k]")
    _, _, sorted_ids, expert_ids, num_post_pad = F.routing_workspace(tokens, w13.shape[0], k, x.device)
    align = R.align_launches(topk_ids.view(-1), w13.shape[0], F.BLOCK, sorted_ids, expert_ids, num_post_pad)
    return align + F.expert_launches(x, w13, w2, topk_weights, topk_ids, sorted_ids, expert_ids, outs)


def _captures(shape):
    t, h, f, e, k = shape
    return R.align_captures((t, e, k, F.BLOCK)) + F.expert_captures(shape)


SPEC = dataclasses.replace(
    F.SPEC,
    name="moe_experts",
    kernels=[*R.ALIGN_KERNELS, "moe_gate_up_kernel", "moe_down_kernel", "moe_sum_kernel"],
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    captures=_captures(F.BENCH_SHAPES[3]),
)
