"""fused_moe: a mixture-of-experts MLP: softmax top-k routing, then per token sum_j w_j * expert_j(x).

Inputs (x [T, H], logits [T, E], w13 [E, 2F, H], w2 [E, H, F], k); output [T, H] in x's dtype. Expert e
is down(silu(gate(x)) * up(x)) with gate = w13[e, :F], up = w13[e, F:], down = w2[e] (the [out, in]
layout of linear layers, as Mixtral's w1 / w3 stacked and w2). Shapes are (T, H, F, E, k).

Plan (kernels/moe_routing.py): moe_topk_kernel and the three align kernels (moe_route, BLOCK = the expert GEMMs'
row block), moe_gate_up_kernel (gate and up projections and SiLU-and-mul in one launch, rows in sorted
order: act [P, F]), moe_down_kernel (down projection times the token's routing weight, scattered to the
token's slot: y [T * k, H]) and moe_sum_kernel (out[t] = sum of its k slots). act, y and the routing
tensors are the plan's workspace. The grid of the GEMMs covers every block sorted_ids may have (it
depends on the routing, which the plan does not read); blocks past the padded total return at once.

Tolerance: two chained GEMMs in f32 with act and y rounded to the activation dtype (as serving engines
store them), against the reference's plain per-expert loop in f32: matmul's tolerances. Inputs are
scaled so that every stage is O(1).
"""

from __future__ import annotations

from tileport.capture.signature import Capture

from ..spec import Launch, OpSpec
from . import moe_route as R
from . import moe_topk_softmax as S
from ._common import ELEMENT_SIZE, TOL_MATMUL, cdiv, generator, next_pow2, randn, torch

DTYPES = ("float16", "bfloat16")
BLOCK = 64  # rows of sorted token slots per tile block of the expert GEMMs (moe_align's block size)
GATE_UP_TILES = (128, 64)  # (TILE_N, TILE_K) over (F, H)
DOWN_TILES = (128, 64)  # (TILE_N, TILE_K) over (H, F)
SUM_TILE_ELEMENTS = 4096  # BLOCK_T x k x TILE_H values per tile of the combine
SHAPES = [(1, 64, 32, 8, 2), (7, 100, 72, 8, 2), (65, 256, 200, 16, 4), (300, 512, 352, 64, 8),
          (1000, 1024, 1408, 8, 2)]
# Mixtral-8x7B-like (8 experts, top-2, d_ff 14336) and DeepSeek-like (64 / 128 experts, top-8, d_ff
# 1408 / 2048), few and many tokens.
BENCH_SHAPES = [(64, 4096, 14336, 8, 2), (4096, 4096, 14336, 8, 2), (64, 2048, 1408, 64, 8),
                (4096, 2048, 1408, 64, 8), (4096, 7168, 2048, 128, 8)]
TOLERANCES = {dt: TOL_MATMUL[dt] for dt in DTYPES}


def make_inputs(shape, dtype, device, seed=0):
    t, h, f, e, k = shape
    g = generator(device, seed)
    return (randn((t, h), dtype, device, g), randn((t, e), dtype, device, g),
            randn((e, 2 * f, h), dtype, device, g, scale=h ** -0.5),
            randn((e, h, f), dtype, device, g, scale=f ** -0.5), k)


def experts_reference(x, topk_weights, topk_ids, w13, w2):
    """The plain per-expert loop in f32: every expert's tokens through its MLP, weighted, summed."""
    t = torch()
    f = w2.shape[2]
    xf, out = x.float(), t.zeros(x.shape, dtype=t.float32, device=x.device)
    for e in range(w13.shape[0]):
        token, slot = (topk_ids == e).nonzero(as_tuple=True)
        if token.numel():
            h = xf[token] @ w13[e].float().T
            y = (t.nn.functional.silu(h[:, :f]) * h[:, f:]) @ w2[e].float().T
            out.index_add_(0, token, y * topk_weights[token, slot, None])
    return out.to(x.dtype)


def reference(x, logits, w13, w2, k):
    weights, ids = S.reference(logits, k)
    return experts_reference(x, weights, ids, w13, w2)


def allocate(x, logits, w13, w2, k):
    return torch().empty(x.shape, dtype=x.dtype, device=x.device)


def check_experts(name: str, x, w13, w2) -> None:
    if x.dim() != 2 or w13.dim() != 3 or w2.dim() != 3 or not (x.is_contiguous() and w13.is_contiguous()
                                                               and w2.is_contiguous()):
        raise ValueError(f"{name} takes contiguous x [T, H], w13 [E, 2F, H] and w2 [E, H, F]")
    e, h, f = w2.shape
    if tuple(w13.shape) != (e, 2 * f, h) or x.shape[1] != h or not x.dtype == w13.dtype == w2.dtype:
        raise ValueError(f"{name}: x [T, H], w13 [E, 2F, H], w2 [E, H, F] of one dtype, got "
                         f"{tuple(x.shape)}, {tuple(w13.shape)}, {tuple(w2.shape)}")


def sum_tiles(k: int, h: int) -> tuple[int, int]:
    """(BLOCK_T, TILE_H) of the combine: TILE_H up to 256, BLOCK_T x k x TILE_H <= SUM_TILE_ELEMENTS."""
    tile_h = min(256, next_pow2(h))
    return max(1, SUM_TILE_ELEMENTS // (k * tile_h)), tile_h


def expert_launches(x, w13, w2, weights, ids, sorted_ids, expert_ids, out) -> list[Launch]:
    """The expert GEMMs and the combine over routing outputs (sorted_ids / expert_ids of block BLOCK)."""
    t = torch()
    tokens, h = x.shape
    e, k, f = w13.shape[0], ids.shape[1], w2.shape[2]
    act = t.empty((sorted_ids.shape[0], f), dtype=x.dtype, device=x.device)
    y = t.empty((tokens * k, h), dtype=x.dtype, device=x.device)
    n_blocks = expert_ids.shape[0]
    (gn, gk), (dn, dk) = GATE_UP_TILES, DOWN_TILES
    block_t, tile_h = sum_tiles(k, h)
    return [Launch("moe_gate_up_kernel", (n_blocks, cdiv(f, gn), 1),
                   {"x": x, "w13": w13.view(e, 2, f, h), "sorted_ids": sorted_ids, "expert_ids": expert_ids,
                    "act": act, "BLOCK": BLOCK, "TILE_N": gn, "TILE_K": gk, "TOP_K": k}),
            Launch("moe_down_kernel", (n_blocks, cdiv(h, dn), 1),
                   {"act": act, "w2": w2, "sorted_ids": sorted_ids, "expert_ids": expert_ids,
                    "topk_weights": weights.view(-1), "y": y, "BLOCK": BLOCK, "TILE_N": dn, "TILE_K": dk}),
            Launch("moe_sum_kernel", (cdiv(tokens, block_t), cdiv(h, tile_h), 1),
                   {"y": y.view(tokens, k, h), "out": out, "BLOCK_T": block_t, "TOP_K": k, "TILE_H": tile_h})]


def routing_workspace(tokens: int, e: int, k: int, device):
    """(topk_weights, topk_ids, sorted_ids, expert_ids, num_post_pad) for T tokens and E experts."""
    t = torch()
    n_sorted, n_blocks = R.sizes(tokens * k, e, BLOCK)
    return (t.empty((tokens, k), dtype=t.float32, device=device), t.empty((tokens, k), dtype=t.int32, device=device),
            t.empty((n_sorted,), dtype=t.int32, device=device), t.empty((n_blocks,), dtype=t.int32, device=device),
            t.empty((1,), dtype=t.int32, device=device))


def plan(x, logits, w13, w2, k, outs):
    S.check_routing("fused_moe", logits, k)
    check_experts("fused_moe", x, w13, w2)
    if logits.shape != (x.shape[0], w13.shape[0]):
        raise ValueError(f"fused_moe: logits must be [T, E] = {(x.shape[0], w13.shape[0])}, got {tuple(logits.shape)}")
    weights, ids, sorted_ids, expert_ids, num_post_pad = routing_workspace(x.shape[0], w13.shape[0], k, x.device)
    route = R.plan(logits, k, BLOCK, (weights, ids, sorted_ids, expert_ids, num_post_pad))
    return route + expert_launches(x, w13, w2, weights, ids, sorted_ids, expert_ids, outs)


def expert_captures(shape) -> list[Capture]:
    """One capture per dtype of each expert kernel for the plan of `shape` (T, H, F, E, k)."""
    t, h, f, e, k = shape
    (gn, gk), (dn, dk) = GATE_UP_TILES, DOWN_TILES
    block_t, tile_h = sum_tiles(k, h)
    index = {"sorted_ids": ("int32", 1), "expert_ids": ("int32", 1)}
    out = []
    for dt in DTYPES:
        out += [Capture("moe_gate_up_kernel", {"x": (dt, 2), "w13": (dt, 4), **index, "act": (dt, 2)},
                        constants={"BLOCK": BLOCK, "TILE_N": gn, "TILE_K": gk, "TOP_K": k}),
                Capture("moe_down_kernel", {"act": (dt, 2), "w2": (dt, 3), **index, "topk_weights": ("float32", 1),
                                            "y": (dt, 2)},
                        constants={"BLOCK": BLOCK, "TILE_N": dn, "TILE_K": dk}),
                Capture("moe_sum_kernel", {"y": (dt, 3), "out": (dt, 2)},
                        constants={"BLOCK_T": block_t, "TOP_K": k, "TILE_H": tile_h})]
    return out


def moe_flops(shape) -> int:
    t, h, f, e, k = shape
    return 2 * t * k * 3 * h * f


def moe_bytes(shape, dt) -> int:
    """Weights of the experts that get tokens (all of them once T * k >= E), activations in and out."""
    t, h, f, e, k = shape
    return (min(e, t * k) * 3 * h * f + 2 * t * h) * ELEMENT_SIZE[dt]


def _captures(shape) -> list[Capture]:
    t, h, f, e, k = shape
    routing = [c for c in S.topk_captures((t, e, k), False) if c.arrays["logits"][0] in DTYPES]
    return routing + R.align_captures((t, e, k, BLOCK)) + expert_captures(shape)


SPEC = OpSpec(
    name="fused_moe",
    kernel_file="moe_routing.py",
    kernels=["moe_topk_kernel", *R.ALIGN_KERNELS, "moe_gate_up_kernel", "moe_down_kernel", "moe_sum_kernel"],
    dtypes=list(DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOLERANCES,
    captures=_captures(BENCH_SHAPES[3]),
    bytes=moe_bytes,
    flops=moe_flops,
    kind="compute",
)
