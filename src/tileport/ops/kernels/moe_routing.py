"""MoE routing: top-k experts per token from router logits, and the token order the expert GEMMs read.

moe_topk_kernel: logits [T, E] (any float dtype) -> topk_weights [T, K] f32, topk_ids [T, K] int32. Each
of the K steps takes the largest remaining logit of every token (the lowest expert id among equal
ones, as torch.argmax) and masks it out; the weights are the chosen experts' softmax (or sigmoid)
scores renormalized to sum to 1. The selection runs on the f32 logits themselves: softmax and sigmoid
are monotonic, so the experts are those of the scores, and no tie is made by rounding the scores.

moe_align_kernel (one tile block): topk_ids [N] (flattened [T, K], N = T * K) -> the token slots grouped
by expert, each expert's group padded to a multiple of BLOCK: sorted_ids [N + E * (BLOCK - 1)] holds the
slot indices of expert 0's tokens (ascending), padding, expert 1's..., every other entry N;
expert_ids [cdiv(len(sorted_ids), BLOCK)] the expert of each BLOCK-sized block (-1 past the last);
num_post_pad [1] the padded total. Counts come from one-hot sums (no atomics, so the order within an
expert is the token order and the result is deterministic); the rank of a token within its expert is
the running count before its tile plus an exclusive cumulative sum of the tile's one-hot rows.
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


def expert_of(pos, ends):
    """The expert whose padded group holds each position: the number of groups ending at or before it."""
    return ct.sum(ct.astype(ct.reshape(ends, (1, ends.shape[0])) <= pos, ct.int32), 1)


def pick(onehot, row):
    """Per row of a one-hot (n, E_PAD) tile, the entry of `row` (E_PAD,) its one is at."""
    return ct.sum(onehot * ct.reshape(row, (1, row.shape[0])), 1)


@ct.kernel
def moe_align_kernel(topk_ids, sorted_ids, expert_ids, num_post_pad, BLOCK: ConstInt, E_PAD: ConstInt,
                     TILE: ConstInt):
    n = topk_ids.shape[0]
    experts = ct.reshape(ct.arange(E_PAD, dtype=ct.int32), (1, E_PAD))
    lanes = ct.arange(TILE, dtype=ct.int32)
    n_tiles = ct.num_tiles(topk_ids, 0, shape=(TILE,))
    counts = ct.zeros((E_PAD,), dtype=ct.int32)
    for i in range(n_tiles):
        ids = ct.reshape(ct.load(topk_ids, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO), (TILE, 1))
        valid = ct.reshape(i * TILE + lanes < n, (TILE, 1))
        counts = counts + ct.sum(ct.astype((ids == experts) & valid, ct.int32), 0)
    padded = (counts + (BLOCK - 1)) // BLOCK * BLOCK
    ends = ct.cumsum(padded, 0)
    starts = ends - padded
    total = ct.sum(padded, 0)
    ct.store(num_post_pad, index=(0,), tile=ct.reshape(total, (1,)))
    for b in range(ct.num_tiles(expert_ids, 0, shape=(TILE,))):
        first = ct.reshape((b * TILE + lanes) * BLOCK, (TILE, 1))
        owner = ct.where(ct.reshape(first, (TILE,)) < total, expert_of(first, ends), -1)
        ct.store(expert_ids, index=(b,), tile=owner)
    for q in range(ct.num_tiles(sorted_ids, 0, shape=(TILE,))):
        pos = q * TILE + lanes
        group = ct.reshape(expert_of(ct.reshape(pos, (TILE, 1)), ends), (TILE, 1)) == experts
        slot = pos - pick(ct.astype(group, ct.int32), starts)
        is_pad = (pos >= total) | (slot >= pick(ct.astype(group, ct.int32), counts))
        ct.scatter(sorted_ids, pos, ct.full((TILE,), n, dtype=ct.int32), mask=is_pad)
    running = ct.zeros((E_PAD,), dtype=ct.int32)
    for i in range(n_tiles):
        token = i * TILE + lanes
        ids = ct.reshape(ct.load(topk_ids, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO), (TILE, 1))
        onehot = ct.astype((ids == experts) & ct.reshape(token < n, (TILE, 1)), ct.int32)
        rank = ct.sum((ct.cumsum(onehot, 0) - onehot) * onehot, 1)  # earlier tokens of its expert in the tile
        ct.scatter(sorted_ids, pick(onehot, starts + running) + rank, token, mask=token < n)
        running = running + ct.sum(onehot, 0)
