"""moe_route: softmax top-k routing, then moe_align_block_size: what a fused-MoE expert GEMM reads.

Inputs (logits, k, block_size), shapes (T, E, k, block_size); outputs topk_weights [T, k] f32, topk_ids
[T, k] int32 (moe_topk_softmax), then over the N = T * k token slots (the flattened topk_ids):
sorted_ids [N + E * (block_size - 1)] int32: expert 0's slots ascending, padding to a multiple of
block_size, expert 1's, ...; every entry that holds no slot is N. expert_ids [cdiv(len(sorted_ids),
block_size)] int32: the expert of each block, -1 past the padded total. num_post_pad [1] int32: the
padded total. block_size is a power of two. Everything but the weights is exact (integers).
"""

from __future__ import annotations

from tileport.capture.signature import Capture

from ..spec import Launch, OpSpec
from . import moe_topk_softmax as S
from ._common import cdiv, next_pow2, torch

ALIGN_TILE_ELEMENTS = 8192  # TILE x E_PAD one-hot entries per tile
SHAPES = [(1, 8, 2, 16), (7, 8, 2, 16), (100, 60, 4, 64), (1000, 64, 8, 64), (4097, 128, 8, 128)]
BENCH_SHAPES = [(4096, 8, 2, 64), (4096, 256, 8, 64)]


def align_tiles(n: int, e: int) -> tuple[int, int]:
    """(TILE, E_PAD) of the align kernel over n token slots and e experts."""
    e_pad = next_pow2(e)
    return max(1, min(ALIGN_TILE_ELEMENTS // e_pad, next_pow2(n))), e_pad


def sizes(n: int, e: int, block: int) -> tuple[int, int]:
    """(len(sorted_ids), len(expert_ids)): every expert's group may need block - 1 padding slots."""
    padded = n + e * (block - 1)
    return padded, cdiv(padded, block)


def make_inputs(shape, dtype, device, seed=0):
    t, e, k, block = shape
    return (*S.make_inputs((t, e, k), dtype, device, seed), block)


def align_reference(ids, e: int, block: int):
    t = torch()
    flat = ids.flatten().long()
    n = flat.numel()
    counts = t.bincount(flat, minlength=e)
    padded = (counts + block - 1) // block * block
    ends = t.cumsum(padded, 0)
    starts = ends - padded
    order = t.sort(flat, stable=True).indices
    expert = flat[order]
    rank = t.arange(n, device=ids.device) - (t.cumsum(counts, 0) - counts)[expert]
    n_sorted, n_blocks = sizes(n, e, block)
    sorted_ids = t.full((n_sorted,), n, dtype=t.int32, device=ids.device)
    sorted_ids[starts[expert] + rank] = order.to(t.int32)
    first = t.arange(n_blocks, device=ids.device) * block
    total = int(ends[-1])
    owner = t.searchsorted(ends, first, right=True)
    expert_ids = t.where(first < total, owner, -1).to(t.int32)
    return sorted_ids, expert_ids, t.tensor([total], dtype=t.int32, device=ids.device)


def reference(logits, k, block_size):
    weights, ids = S.reference(logits, k)
    return (weights, ids, *align_reference(ids, logits.shape[1], block_size))


def allocate(logits, k, block_size):
    t = torch()
    n_sorted, n_blocks = sizes(logits.shape[0] * k, logits.shape[1], block_size)
    dev = logits.device
    return (*S.allocate(logits, k), t.empty((n_sorted,), dtype=t.int32, device=dev),
            t.empty((n_blocks,), dtype=t.int32, device=dev), t.empty((1,), dtype=t.int32, device=dev))


def plan(logits, k, block_size, outs):
    S.check_routing("moe_route", logits, k)
    if block_size < 1 or block_size & (block_size - 1):
        raise ValueError(f"moe_route: block_size must be a power of two, got {block_size}")
    weights, ids, sorted_ids, expert_ids, num_post_pad = outs
    return [S.topk_launch(logits, k, False, weights, ids),
            align_launch(ids, logits.shape[1], block_size, sorted_ids, expert_ids, num_post_pad)]


def align_launch(ids, e: int, block_size: int, sorted_ids, expert_ids, num_post_pad) -> Launch:
    """moe_align_block_size of topk_ids [T, k] over e experts (one tile block)."""
    tile, e_pad = align_tiles(ids.numel(), e)
    return Launch("moe_align_kernel", (1, 1, 1),
                  {"topk_ids": ids.view(-1), "sorted_ids": sorted_ids, "expert_ids": expert_ids,
                   "num_post_pad": num_post_pad, "BLOCK": block_size, "E_PAD": e_pad, "TILE": tile})


def align_captures(shape) -> list[Capture]:
    t, e, k, block = shape
    tile, e_pad = align_tiles(t * k, e)
    return [Capture(kernel="moe_align_kernel",
                    arrays={name: ("int32", 1) for name in ("topk_ids", "sorted_ids", "expert_ids", "num_post_pad")},
                    constants={"BLOCK": block, "E_PAD": e_pad, "TILE": tile})]


SPEC = OpSpec(
    name="moe_route",
    kernel_file="moe_routing.py",
    kernels=["moe_topk_kernel", "moe_align_kernel"],
    dtypes=S.SPEC.dtypes,
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=S.TOL_ROUTING,
    captures=S.topk_captures(BENCH_SHAPES[1][:3], False) + align_captures(BENCH_SHAPES[1]),
    bytes=lambda shape, dt: S.routing_bytes(shape[:3], dt) + 4 * sum(sizes(shape[0] * shape[2], shape[1], shape[3])),
    flops=lambda shape: 3 * shape[0] * shape[1] * shape[2],
)
