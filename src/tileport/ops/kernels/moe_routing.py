"""MoE routing: top-k experts per token from router logits, and the token order the expert GEMMs read.

moe_topk_kernel: logits [T, E] (any float dtype) -> topk_weights [T, K] f32, topk_ids [T, K] int32. Each
of the K steps takes the largest remaining logit of every token (the lowest expert id among equal
ones, as torch.argmax) and masks it out; the weights are the chosen experts' softmax (or sigmoid)
scores renormalized to sum to 1. The selection runs on the f32 logits themselves: softmax and sigmoid
are monotonic, so the experts are those of the scores, and no tie is made by rounding the scores.

moe_align_block_size, in three kernels over the N = T * K token slots (the flattened topk_ids [N]): the
token slots grouped by expert, each expert's group padded to a multiple of BLOCK: sorted_ids [N + E *
(BLOCK - 1)] holds the slot indices of expert 0's tokens (ascending), padding, expert 1's..., every other
entry N; expert_ids [cdiv(len(sorted_ids), BLOCK)] the expert of each BLOCK-sized block (-1 past the
last); num_post_pad [1] the padded total. The slots are cut into chunks of TILE * STEPS, one per block:
1. moe_align_count_kernel: each chunk's tokens per expert (counts [chunks, E_PAD], atomic adds into the
   block's own row), and sorted_ids filled with N;
2. moe_align_offsets_kernel (one block): the experts' totals, padded groups and ends (expert_ends
   [E_PAD]), num_post_pad, and where each chunk's tokens of each expert start (offsets [chunks, E_PAD]:
   the group's start plus the earlier chunks' tokens of the expert: an exclusive cumulative sum);
3. moe_align_scatter_kernel: each slot's place is its chunk's offset of its expert plus its rank among
   the earlier slots of its TILE with the same expert (a TILE x TILE comparison); the block keeps its
   offsets row current from tile to tile. The blocks also share the expert_ids.
Every count is exact and the order within an expert is the token order: the result is deterministic.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]


@ct.kernel
def moe_topk_kernel(logits, topk_weights, topk_ids, BLOCK_T: ConstInt, E_PAD: ConstInt, K: ConstInt,
                    SIGMOID: ConstBool):
    bid = ct.bid(0)
    t = ct.load(logits, index=(bid, 0), shape=(BLOCK_T, E_PAD), padding_mode=ct.PaddingMode.NEG_INF)
    scores = ct.astype(t, ct.float32)
    experts = ct.reshape(ct.arange(E_PAD, dtype=ct.int32), (1, E_PAD))
    slots = ct.reshape(ct.arange(K, dtype=ct.int32), (1, K))
    top = ct.max(scores, 1, keepdims=True)
    chosen = ct.full((BLOCK_T, K), 0.0, dtype=ct.float32)
    ids = ct.full((BLOCK_T, K), 0, dtype=ct.int32)
    for j in range(K):
        best = ct.max(scores, 1, keepdims=True)
        idx = ct.min(ct.where(scores == best, experts, E_PAD), 1, keepdims=True)
        chosen = ct.where(slots == j, best, chosen)
        ids = ct.where(slots == j, idx, ids)
        scores = ct.where(experts == idx, float("-inf"), scores)
    if SIGMOID:
        w = 1.0 / (1.0 + ct.exp(-chosen))
    else:
        w = ct.exp(chosen - top)
    ct.store(topk_weights, index=(bid, 0), tile=w / ct.sum(w, 1, keepdims=True))
    ct.store(topk_ids, index=(bid, 0), tile=ids)


@ct.kernel
def moe_align_count_kernel(topk_ids, counts, sorted_ids, SLOTS: ConstInt, E_PAD: ConstInt):
    bid = ct.bid(0)
    n = topk_ids.shape[0]
    slot = bid * SLOTS + ct.arange(SLOTS, dtype=ct.int32)
    ids = ct.load(topk_ids, index=(bid,), shape=(SLOTS,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(counts, index=(bid, 0), tile=ct.zeros((1, E_PAD), dtype=ct.int32))
    # E_PAD: out of bounds, skipped. Relaxed, block scope: only this block touches its row in this kernel
    ct.atomic_add(counts, (bid, ct.where(slot < n, ids, E_PAD)), 1, memory_order=ct.MemoryOrder.RELAXED,
                  memory_scope=ct.MemoryScope.BLOCK)
    fill = ct.full((SLOTS,), n, dtype=ct.int32)
    for q in range(bid, ct.num_tiles(sorted_ids, 0, shape=(SLOTS,)), ct.num_blocks(0)):
        ct.store(sorted_ids, index=(q,), tile=fill)


@ct.kernel
def moe_align_offsets_kernel(counts, offsets, expert_ends, num_post_pad, BLOCK: ConstInt, E_PAD: ConstInt,
                             ROWS: ConstInt):
    n_row_tiles = ct.num_tiles(counts, 0, shape=(ROWS, E_PAD))
    totals = ct.zeros((E_PAD,), dtype=ct.int32)
    for r in range(n_row_tiles):
        rows = ct.load(counts, index=(r, 0), shape=(ROWS, E_PAD), padding_mode=ct.PaddingMode.ZERO)
        totals = totals + ct.sum(rows, 0)
    padded = (totals + (BLOCK - 1)) // BLOCK * BLOCK
    ends = ct.cumsum(padded, 0)
    ct.store(expert_ends, index=(0,), tile=ends)
    ct.store(num_post_pad, index=(0,), tile=ct.reshape(ct.sum(padded, 0), (1,)))
    running = ct.reshape(ends - padded, (1, E_PAD))
    for r in range(n_row_tiles):
        rows = ct.load(counts, index=(r, 0), shape=(ROWS, E_PAD), padding_mode=ct.PaddingMode.ZERO)
        ct.store(offsets, index=(r, 0), tile=running + ct.cumsum(rows, 0) - rows)
        running = running + ct.sum(rows, 0, keepdims=True)


@ct.kernel
def moe_align_scatter_kernel(topk_ids, offsets, expert_ends, sorted_ids, expert_ids, BLOCK: ConstInt,
                             E_PAD: ConstInt, TILE: ConstInt, STEPS: ConstInt, ID_TILE: ConstInt):
    bid = ct.bid(0)
    n = topk_ids.shape[0]
    lanes = ct.arange(TILE, dtype=ct.int32)
    earlier = ct.reshape(lanes, (1, TILE)) < ct.reshape(lanes, (TILE, 1))  # [i, j]: slot j comes before slot i
    for s in range(STEPS):
        slot = (bid * STEPS + s) * TILE + lanes
        valid = slot < n
        ids = ct.load(topk_ids, index=(bid * STEPS + s,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        ids = ct.where(valid, ids, E_PAD)
        same = ct.reshape(ids, (TILE, 1)) == ct.reshape(ids, (1, TILE))
        rank = ct.sum(ct.astype(same & earlier, ct.int32), 1)
        last = rank + 1 == ct.sum(ct.astype(same, ct.int32), 1)
        place = ct.gather(offsets, (bid, ids)) + rank
        ct.scatter(sorted_ids, place, slot, mask=valid)
        ct.scatter(offsets, (bid, ids), place + 1, mask=valid & last)  # the next tile's start of the expert
    ends = ct.load(expert_ends, index=(0,), shape=(E_PAD,))
    total = ct.max(ends, 0)
    id_lanes = ct.arange(ID_TILE, dtype=ct.int32)
    for q in range(bid, ct.num_tiles(expert_ids, 0, shape=(ID_TILE,)), ct.num_blocks(0)):
        first = (q * ID_TILE + id_lanes) * BLOCK
        owner = ct.sum(ct.astype(ct.reshape(ends, (1, E_PAD)) <= ct.reshape(first, (ID_TILE, 1)), ct.int32), 1)
        ct.store(expert_ids, index=(q,), tile=ct.where(first < total, owner, -1))
