"""moe_route: softmax top-k routing, then moe_align_block_size: what a fused-MoE expert GEMM reads.

Inputs (logits, k, block_size), shapes (T, E, k, block_size); outputs topk_weights [T, k] f32, topk_ids
[T, k] int32 (moe_topk_softmax), then over the N = T * k token slots (the flattened topk_ids):
sorted_ids [N + E * (block_size - 1)] int32: expert 0's slots ascending, padding to a multiple of
block_size, expert 1's, ...; every entry that holds no slot is N. expert_ids [cdiv(len(sorted_ids),
block_size)] int32: the expert of each block, -1 past the padded total. num_post_pad [1] int32: the
padded total. block_size is a power of two. Everything but the weights is exact (integers).

The align runs as three kernels (kernels/moe_routing.py): per-chunk expert counts over up to
ALIGN_BLOCKS blocks, one block of per-expert totals and chunk offsets, then the scatter over the same
blocks. The single-block align it replaces did O(N * E) one-hot work on one SM (42 ms at T=4096, E=256,
top-8 on an H100); here the work is O(N * TILE) spread over the blocks, plus O(C * E_PAD) in one block.

Bytes moved, N = T * k slots, S = len(sorted_ids), C = chunks: the ids read twice (8N), sorted_ids written
twice (the fill with N, then the slots: 8S), expert_ids (4 cdiv(S, block_size)), and the counts / offsets
[C, E_PAD] written, read twice and updated (about 20 C E_PAD bytes, C <= 128, mostly in L2). DeepSeek-like
(T=16384, E=256, top-8, block 64): N = 131072, S = 147200, C = 128: about 2.9 MB, 1 us at an H100's ~3 TB/s
copy bandwidth. The op cannot reach 85 % of that: it is bound by launch and latency (three launches; the
offsets kernel's 2 C / ROWS serial row tiles, 16 at E=256; the scatter's STEPS serial tiles per block, 16
at that shape, each waiting on its block's offsets row). Expected (not yet measured): some 20-40 us at
that shape (about 10 % of copy bandwidth), ~10-20 us at (4096, 256, 8, 64), ~5-10 us at (4096, 8, 2, 64):
well under the torch reference's 270 / 172 us (sort, bincount, cumsums and a host sync) at every bench shape.
"""

from __future__ import annotations

from tileport.capture.signature import Capture

from ..spec import Launch, OpSpec
from . import moe_topk_softmax as S
from ._common import cdiv, next_pow2, torch

ALIGN_KERNELS = ("moe_align_count_kernel", "moe_align_offsets_kernel", "moe_align_scatter_kernel")
ALIGN_TILE = 64  # slots ranked together by the scatter kernel: a TILE x TILE comparison
ALIGN_BLOCKS = 128  # blocks of the count and scatter kernels at most: rows of the per-chunk counts
ALIGN_ROW_ELEMENTS = 4096  # entries of the (rows x E_PAD) and (expert ids x E_PAD) tiles
ALIGN_ID_TILE = 64  # expert ids per tile at most (a longer tile over few experts spills registers)
SHAPES = [(1, 8, 2, 16), (7, 8, 2, 16), (100, 60, 4, 64), (1000, 64, 8, 64), (4097, 128, 8, 128),
          (3000, 256, 8, 64)]
BENCH_SHAPES = [(4096, 8, 2, 64), (4096, 256, 8, 64), (16384, 256, 8, 64)]


def align_config(n: int, e: int) -> dict[str, int]:
    """Chunks and tile sizes of the align kernels over n token slots and e experts: chunks of TILE * STEPS
    slots, at most ALIGN_BLOCKS of them (a longer chunk per block beyond that)."""
    e_pad = next_pow2(e)
    tile = min(ALIGN_TILE, next_pow2(n))
    steps = next_pow2(cdiv(n, tile * ALIGN_BLOCKS))
    chunks = cdiv(n, tile * steps)
    width = max(1, ALIGN_ROW_ELEMENTS // e_pad)
    return {"E_PAD": e_pad, "TILE": tile, "STEPS": steps, "chunks": chunks,
            "ROWS": min(width, next_pow2(chunks)), "ID_TILE": min(width, ALIGN_ID_TILE)}


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
            *align_launches(ids.view(-1), logits.shape[1], block_size, sorted_ids, expert_ids, num_post_pad)]


def align_launches(ids, e: int, block: int, sorted_ids, expert_ids, num_post_pad) -> list[Launch]:
    """Count, offsets, scatter over the flat topk_ids; the per-chunk counts, offsets and expert ends are
    the plan's workspace."""
    t = torch()
    c = align_config(ids.numel(), e)
    chunks, e_pad = c["chunks"], c["E_PAD"]
    counts, offsets = (t.empty((chunks, e_pad), dtype=t.int32, device=ids.device) for _ in range(2))
    ends = t.empty((e_pad,), dtype=t.int32, device=ids.device)
    return [Launch("moe_align_count_kernel", (chunks, 1, 1),
                   {"topk_ids": ids, "counts": counts, "sorted_ids": sorted_ids,
                    "SLOTS": c["TILE"] * c["STEPS"], "E_PAD": e_pad}),
            Launch("moe_align_offsets_kernel", (1, 1, 1),
                   {"counts": counts, "offsets": offsets, "expert_ends": ends, "num_post_pad": num_post_pad,
                    "BLOCK": block, "E_PAD": e_pad, "ROWS": c["ROWS"]}),
            Launch("moe_align_scatter_kernel", (chunks, 1, 1),
                   {"topk_ids": ids, "offsets": offsets, "expert_ends": ends, "sorted_ids": sorted_ids,
                    "expert_ids": expert_ids, "BLOCK": block, "E_PAD": e_pad, "TILE": c["TILE"],
                    "STEPS": c["STEPS"], "ID_TILE": c["ID_TILE"]})]


def align_captures(shape) -> list[Capture]:
    t, e, k, block = shape
    c = align_config(t * k, e)
    flat = ("int32", 1)
    table = ("int32", 2)
    return [Capture(kernel="moe_align_count_kernel",
                    arrays={"topk_ids": flat, "counts": table, "sorted_ids": flat},
                    constants={"SLOTS": c["TILE"] * c["STEPS"], "E_PAD": c["E_PAD"]}),
            Capture(kernel="moe_align_offsets_kernel",
                    arrays={"counts": table, "offsets": table, "expert_ends": flat, "num_post_pad": flat},
                    constants={"BLOCK": block, "E_PAD": c["E_PAD"], "ROWS": c["ROWS"]}),
            Capture(kernel="moe_align_scatter_kernel",
                    arrays={"topk_ids": flat, "offsets": table, "expert_ends": flat, "sorted_ids": flat,
                            "expert_ids": flat},
                    constants={"BLOCK": block, "E_PAD": c["E_PAD"], "TILE": c["TILE"], "STEPS": c["STEPS"],
                               "ID_TILE": c["ID_TILE"]})]


SPEC = OpSpec(
    name="moe_route",
    kernel_file="moe_routing.py",
    kernels=["moe_topk_kernel", *ALIGN_KERNELS],
    dtypes=S.SPEC.dtypes,
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=S.TOL_ROUTING,
    captures=S.topk_captures(BENCH_SHAPES[1][:3], False) + align_captures(BENCH_SHAPES[2]),
    bytes=lambda shape, dt: S.routing_bytes(shape[:3], dt) + 4 * sum(sizes(shape[0] * shape[2], shape[1], shape[3])),
    flops=lambda shape: 3 * shape[0] * shape[1] * shape[2],
)
