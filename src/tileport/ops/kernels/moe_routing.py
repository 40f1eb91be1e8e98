"""MoE: top-k experts per token from router logits, the token order the expert GEMMs read, the expert GEMMs.

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

The expert GEMMs run over that order, one BLOCK-row block of sorted_ids per tile block (row axis of the
grid), all of its rows of one expert (expert_ids; a block of -1 lies past the padded total and does
nothing). A row's token slot s is token s // TOP_K; the padding slot N is past every array, so its
gathered rows are 0 and its scattered rows are dropped (the bounds checks of gather / scatter):
- moe_gate_up_kernel: act[P, F] (P = len(sorted_ids), rows in sorted order) = silu(x[tok] @ w_gate[e]^T)
  * (x[tok] @ w_up[e]^T), with w13 [E, 2, F, H] (the [E, 2F, H] gate-and-up weights viewed per half):
  the token rows gathered, the gate and up weight tiles loaded transposed through the view's order,
  two f32 accumulators, SiLU-and-mul in f32, one store in the activation dtype.
- moe_down_kernel: y[s] = topk_weight[s] * (act[row] @ w2[e]^T), w2 [E, H, F]: act read by view loads
  (rows are sorted slots), each output row scattered to its token slot s of y [N, H].
- moe_sum_kernel: out[t] = sum over k of y[t * TOP_K + k] (y viewed [T, TOP_K, H]), in f32.
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


def silu(x):
    denom = 1.0 + ct.exp(-x, rounding_mode=ct.RoundingMode.APPROX)
    return ct.truediv(x, denom, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)


def weight_tile(w, index, shape, order):
    """A (TILE_K, TILE_N) tile of one expert's [out, in] weights, read transposed (in x out)."""
    t = ct.load(w, index=index, shape=shape, order=order, padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(t, (shape[-2], shape[-1]))


@ct.kernel
def moe_gate_up_kernel(x, w13, sorted_ids, expert_ids, act, BLOCK: ConstInt, TILE_N: ConstInt, TILE_K: ConstInt,
                       TOP_K: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    expert = ct.gather(expert_ids, bm)
    if expert >= 0:
        tokens = ct.load(sorted_ids, index=(bm,), shape=(BLOCK,)) // TOP_K
        rows = ct.reshape(tokens, (BLOCK, 1))
        lanes = ct.reshape(ct.arange(TILE_K, dtype=ct.int32), (1, TILE_K))
        gate = ct.zeros((BLOCK, TILE_N), dtype=ct.float32)
        up = ct.zeros((BLOCK, TILE_N), dtype=ct.float32)
        for k in range(ct.cdiv(x.shape[1], TILE_K)):
            a = ct.gather(x, (rows, k * TILE_K + lanes))
            gate = ct.mma(a, weight_tile(w13, (expert, 0, k, bn), (1, 1, TILE_K, TILE_N), (0, 1, 3, 2)), gate)
            up = ct.mma(a, weight_tile(w13, (expert, 1, k, bn), (1, 1, TILE_K, TILE_N), (0, 1, 3, 2)), up)
        ct.store(act, index=(bm, bn), tile=ct.astype(silu(gate) * up, act.dtype))


@ct.kernel
def moe_down_kernel(act, w2, sorted_ids, expert_ids, topk_weights, y, BLOCK: ConstInt, TILE_N: ConstInt,
                    TILE_K: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    expert = ct.gather(expert_ids, bm)
    if expert >= 0:
        slots = ct.load(sorted_ids, index=(bm,), shape=(BLOCK,))
        acc = ct.zeros((BLOCK, TILE_N), dtype=ct.float32)
        for k in range(ct.num_tiles(act, 1, shape=(BLOCK, TILE_K))):
            a = ct.load(act, index=(bm, k), shape=(BLOCK, TILE_K), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, weight_tile(w2, (expert, k, bn), (1, TILE_K, TILE_N), (0, 2, 1)), acc)
        scaled = acc * ct.reshape(ct.gather(topk_weights, slots), (BLOCK, 1))
        cols = ct.reshape(bn * TILE_N + ct.arange(TILE_N, dtype=ct.int32), (1, TILE_N))
        ct.scatter(y, (ct.reshape(slots, (BLOCK, 1)), cols), ct.astype(scaled, y.dtype))


@ct.kernel
def moe_sum_kernel(y, out, BLOCK_T: ConstInt, TOP_K: ConstInt, TILE_H: ConstInt):
    bt = ct.bid(0)
    bh = ct.bid(1)
    t = ct.load(y, index=(bt, 0, bh), shape=(BLOCK_T, TOP_K, TILE_H), padding_mode=ct.PaddingMode.ZERO)
    total = ct.sum(ct.astype(t, ct.float32), 1)
    ct.store(out, index=(bt, bh), tile=ct.astype(total, out.dtype))
