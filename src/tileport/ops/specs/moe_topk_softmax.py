"""moe_topk_softmax: the k experts of each token from router logits [T, E], weights renormalized.

Inputs (logits, k); outputs topk_weights [T, k] f32 (the chosen experts' softmax probabilities divided by
their sum) and topk_ids [T, k] int32 (in decreasing logit order, the lowest id first among equal logits:
torch.argmax's rule; kernels/moe_routing.py). k is a power of two up to 16 and at most E. Shapes are
(T, E, k). The reference selects with repeated argmax on the f32 logits, like the kernel, so the ids
are exact; the weights are f32 math on both sides (exp, one division): rtol / atol 1e-5 in every dtype.
"""

from __future__ import annotations

from tileport.capture.signature import Capture

from ..spec import Launch, OpSpec, Tolerance
from ._common import ELEMENT_SIZE, FLOAT_DTYPES, cdiv, generator, next_pow2, randn, torch

MAX_K = 16
TILE_ELEMENTS = 4096  # BLOCK_T x E_PAD f32 scores per tile
TOL_ROUTING = {dt: Tolerance(rtol=1e-5, atol=1e-5) for dt in FLOAT_DTYPES}
SHAPES = [(1, 8, 2), (7, 8, 2), (100, 60, 4), (1000, 64, 8), (4097, 128, 8), (3, 256, 16)]
BENCH_SHAPES = [(4096, 8, 2), (4096, 256, 8)]


def routing_tiles(t: int, e: int) -> tuple[int, int]:
    """(BLOCK_T, E_PAD): the experts padded to a power of two, BLOCK_T x E_PAD <= TILE_ELEMENTS."""
    e_pad = next_pow2(e)
    return max(1, min(TILE_ELEMENTS // e_pad, next_pow2(t))), e_pad


def make_inputs(shape, dtype, device, seed=0):
    t, e, k = shape
    return randn((t, e), dtype, device, generator(device, seed)), k


def select(logits, k: int):
    """(chosen f32 logits [T, k], ids [T, k] int64): k times the first largest remaining logit."""
    t = torch()
    x = logits.float().clone()
    values, ids = [], []
    for _ in range(k):
        i = x.argmax(dim=1, keepdim=True)
        values.append(x.gather(1, i))
        ids.append(i)
        x.scatter_(1, i, float("-inf"))
    return t.cat(values, dim=1), t.cat(ids, dim=1)


def topk_reference(logits, k: int, sigmoid: bool):
    t = torch()
    chosen, ids = select(logits, k)
    w = t.sigmoid(chosen) if sigmoid else t.softmax(logits.float(), dim=1).gather(1, ids)
    return w / w.sum(dim=1, keepdim=True), ids.to(t.int32)


def reference(logits, k):
    return topk_reference(logits, k, False)


def allocate(logits, k):
    t = torch()
    rows = logits.shape[0]
    return (t.empty((rows, k), dtype=t.float32, device=logits.device),
            t.empty((rows, k), dtype=t.int32, device=logits.device))


def check_routing(name: str, logits, k: int) -> None:
    if logits.dim() != 2 or logits.stride(1) != 1:
        raise ValueError(f"{name} takes logits [T, E] (unit last stride)")
    if not 1 <= k <= min(MAX_K, logits.shape[1]) or k & (k - 1):
        raise ValueError(f"{name}: k must be a power of two <= {MAX_K} and <= the number of experts, got {k}")


def topk_launch(logits, k: int, sigmoid: bool, weights, ids) -> Launch:
    block_t, e_pad = routing_tiles(*logits.shape)
    return Launch("moe_topk_kernel", (cdiv(logits.shape[0], block_t), 1, 1),
                  {"logits": logits, "topk_weights": weights, "topk_ids": ids,
                   "BLOCK_T": block_t, "E_PAD": e_pad, "K": k, "SIGMOID": sigmoid})


def plan(logits, k, outs):
    check_routing("moe_topk_softmax", logits, k)
    return [topk_launch(logits, k, False, *outs)]


def topk_captures(shape: tuple[int, int, int], sigmoid: bool) -> list[Capture]:
    """One capture per dtype of the plan of `shape` (T, E, k)."""
    block_t, e_pad = routing_tiles(shape[0], shape[1])
    return [Capture(kernel="moe_topk_kernel",
                    arrays={"logits": (dt, 2), "topk_weights": ("float32", 2), "topk_ids": ("int32", 2)},
                    constants={"BLOCK_T": block_t, "E_PAD": e_pad, "K": shape[2], "SIGMOID": sigmoid})
            for dt in FLOAT_DTYPES]


def routing_bytes(shape, dt) -> int:
    t, e, k = shape
    return t * e * ELEMENT_SIZE[dt] + 8 * t * k


SPEC = OpSpec(
    name="moe_topk_softmax",
    kernel_file="moe_routing.py",
    kernels=["moe_topk_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOL_ROUTING,
    captures=topk_captures(BENCH_SHAPES[0], False),
    bytes=routing_bytes,
    flops=lambda shape: 3 * shape[0] * shape[1] * shape[2],
)
