"""Cross-entropy of the logits hidden [N, H] @ weight[V, H]^T against int32 labels [N] (rows labelled
`ignore_index` contribute nothing), forward and backward, without the [N, V] logits in memory.

Forward (linear_ce_fwd_kernel): a block takes BLOCK_M rows and walks the vocabulary in chunks of
BLOCK_V; each chunk's logits are an f32 (BLOCK_M, BLOCK_V) accumulator of `ct.mma` over the hidden
dimension in BLOCK_K steps (weight loaded transposed through the view's order), folded into a
running max and sum of exp (online log-sum-exp, as cross_entropy.py), and the label's logit is
picked out of the chunk that holds it. Padded vocabulary columns (zero weight rows) are set to
-inf before the update. Outputs loss = lse - logit[label] (0 where ignored) and lse, both f32 [N].

Backward, per chunk of C rows of the batch (the plan's loop: C x V values of the workspace `ws`,
never N x V), with row_tile0 the chunk's first row in tiles of the kernel's row tile:
- linear_ce_dlogits_kernel: ws[r, v] = (exp(logit - lse) - onehot(label)) * dloss, recomputing the
  logits tile by MMA, rounded to the input dtype (the next MMAs' operand type); 0 for ignored rows.
- linear_ce_dh_kernel: dhidden[rows] = ws @ weight.
- linear_ce_dw_kernel: dw_acc = ws^T @ hidden[rows] (first chunk) or dw_acc += it (ACCUMULATE, the
  later chunks) in an f32 [V, H] accumulator, stored again rounded as dweight after each chunk. The
  first chunk writes the accumulator without reading it: it is scratch memory of the call, which a
  replayed plan allocates anew (ops/plan_cache.py).
Operands are zero padded along every tiled dimension (padded K columns add 0) and stores drop what lies
past the arrays. The last chunk may hold fewer rows than the workspace: its grids cover the row tiles
that hold a row of the batch (a tile wholly past an array is undefined behaviour), rows past the batch
in those tiles have hidden = 0 and dloss = 0 (ws rows of 0), and the dw loop stops at the last of them
(ws rows past it hold an earlier chunk's values).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]


def logits_tile(hidden, weight, rb, vb, BLOCK_M, BLOCK_V, BLOCK_K):
    """f32 hidden[rb] @ weight[vb]^T, a (BLOCK_M, BLOCK_V) tile, in BLOCK_K steps over H."""
    acc = ct.zeros((BLOCK_M, BLOCK_V), dtype=ct.float32)
    for k in range(ct.num_tiles(hidden, 1, shape=(BLOCK_M, BLOCK_K))):
        h = ct.load(hidden, index=(rb, k), shape=(BLOCK_M, BLOCK_K), padding_mode=ct.PaddingMode.ZERO)
        w = ct.load(weight, index=(k, vb), shape=(BLOCK_K, BLOCK_V), order=(1, 0),
                    padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(h, w, acc)
    return acc


def vocab_columns(vb, BLOCK_V):
    """The (1, BLOCK_V) vocabulary indices of chunk vb."""
    return ct.reshape(vb * BLOCK_V + ct.arange(BLOCK_V, dtype=ct.int32), (1, BLOCK_V))


def load_rows(a, rb, BLOCK_M):
    """Rows rb of a [N] array as a zero-padded (BLOCK_M, 1) column."""
    t = ct.load(a, index=(rb,), shape=(BLOCK_M,), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(t, (BLOCK_M, 1))


@ct.kernel(occupancy=2)
def linear_ce_fwd_kernel(hidden, weight, labels, loss, lse, ignore_index, BLOCK_M: ConstInt, BLOCK_V: ConstInt,
                         BLOCK_K: ConstInt):
    rb = ct.bid(0)
    n_vocab = weight.shape[0]
    label = load_rows(labels, rb, BLOCK_M)
    run_max = ct.full((BLOCK_M, 1), float("-inf"), dtype=ct.float32)
    run_sum = ct.full((BLOCK_M, 1), 0.0, dtype=ct.float32)
    target = ct.full((BLOCK_M, 1), 0.0, dtype=ct.float32)
    for vb in range(ct.cdiv(n_vocab, BLOCK_V)):
        cols = vocab_columns(vb, BLOCK_V)
        t = ct.where(cols < n_vocab, logits_tile(hidden, weight, rb, vb, BLOCK_M, BLOCK_V, BLOCK_K), float("-inf"))
        target = target + ct.sum(ct.where(cols == label, t, 0.0), 1, keepdims=True)
        new_max = ct.maximum(run_max, ct.max(t, 1, keepdims=True))
        scale = ct.exp(run_max - new_max, rounding_mode=ct.RoundingMode.APPROX)
        part = ct.sum(ct.exp(t - new_max, rounding_mode=ct.RoundingMode.APPROX), 1, keepdims=True)
        run_max, run_sum = new_max, run_sum * scale + part
    lse_rows = run_max + ct.log(run_sum)
    row_loss = ct.where(label != ignore_index, lse_rows - target, 0.0)
    ct.store(loss, index=(rb,), tile=ct.reshape(row_loss, (BLOCK_M,)))
    ct.store(lse, index=(rb,), tile=ct.reshape(lse_rows, (BLOCK_M,)))


@ct.kernel(occupancy=2)
def linear_ce_dlogits_kernel(hidden, weight, labels, lse, dloss, ws, ignore_index, row_tile0, BLOCK_M: ConstInt,
                             BLOCK_V: ConstInt, BLOCK_K: ConstInt):
    bm = ct.bid(0)
    vb = ct.bid(1)
    rb = row_tile0 + bm
    label = load_rows(labels, rb, BLOCK_M)
    grad = ct.where(label != ignore_index, load_rows(dloss, rb, BLOCK_M), 0.0)
    t = logits_tile(hidden, weight, rb, vb, BLOCK_M, BLOCK_V, BLOCK_K)
    p = ct.exp(t - load_rows(lse, rb, BLOCK_M), rounding_mode=ct.RoundingMode.APPROX)
    d = (p - ct.where(vocab_columns(vb, BLOCK_V) == label, 1.0, 0.0)) * grad
    ct.store(ws, index=(bm, vb), tile=ct.astype(d, ws.dtype))


@ct.kernel(occupancy=2)
def linear_ce_dh_kernel(ws, weight, dhidden, row_tile0, BLOCK_M: ConstInt, BLOCK_H: ConstInt, BLOCK_K: ConstInt):
    bm = ct.bid(0)
    bh = ct.bid(1)
    acc = ct.zeros((BLOCK_M, BLOCK_H), dtype=ct.float32)
    for k in range(ct.num_tiles(ws, 1, shape=(BLOCK_M, BLOCK_K))):
        g = ct.load(ws, index=(bm, k), shape=(BLOCK_M, BLOCK_K), padding_mode=ct.PaddingMode.ZERO)
        w = ct.load(weight, index=(k, bh), shape=(BLOCK_K, BLOCK_H), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(g, w, acc)
    ct.store(dhidden, index=(row_tile0 + bm, bh), tile=ct.astype(acc, dhidden.dtype))


@ct.kernel(occupancy=2)
def linear_ce_dw_kernel(ws, hidden, dw_acc, dweight, row_tile0, BLOCK_V: ConstInt, BLOCK_H: ConstInt,
                        BLOCK_K: ConstInt, ACCUMULATE: ConstBool):
    vb = ct.bid(0)
    bh = ct.bid(1)
    if ACCUMULATE:
        acc = ct.load(dw_acc, index=(vb, bh), shape=(BLOCK_V, BLOCK_H), padding_mode=ct.PaddingMode.ZERO)
    else:
        acc = ct.zeros((BLOCK_V, BLOCK_H), dtype=ct.float32)
    n_rows = min(ws.shape[0], hidden.shape[0] - row_tile0 * BLOCK_K)  # the chunk's rows in the batch
    for k in range(ct.cdiv(n_rows, BLOCK_K)):
        g = ct.load(ws, index=(vb, k), shape=(BLOCK_V, BLOCK_K), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
        h = ct.load(hidden, index=(row_tile0 + k, bh), shape=(BLOCK_K, BLOCK_H), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(g, h, acc)
    ct.store(dw_acc, index=(vb, bh), tile=acc)
    ct.store(dweight, index=(vb, bh), tile=ct.astype(acc, dweight.dtype))
