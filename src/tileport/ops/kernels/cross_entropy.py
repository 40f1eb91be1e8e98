"""Cross-entropy over the rows of logits [M, V] with int32 labels [M] (rows labelled `ignore_index`
contribute nothing), forward and backward.

Forward: one pass over each row's column chunks with an online log-sum-exp (running max, sum rescaled
by exp(old max - new max)), then lse = max + log(sum) and loss = lse - logits[row, label] (the label's
logit gathered by pointer); loss and lse are f32 [M]. Backward: dlogits = (exp(x - lse) - onehot(label))
* dloss per row, rounded once to the logits' dtype; ignored rows get zeros. Persistent: about
NUM_SMS * occupancy blocks walk the row blocks of BLOCK_M rows with a grid stride; chunks of CHUNK
columns are padded with -inf (exp gives 0; padded columns and rows are never stored).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def online_update(t, run_max, run_sum):
    """One f32 chunk into the running max and sum of exp(x - max) of each row."""
    new_max = ct.maximum(run_max, ct.max(t, 1, keepdims=True))
    scale = ct.exp(run_max - new_max, rounding_mode=ct.RoundingMode.APPROX)
    part = ct.sum(ct.exp(t - new_max, rounding_mode=ct.RoundingMode.APPROX), 1, keepdims=True)
    return new_max, run_sum * scale + part


def row_lse(logits, rb, n_chunks, BLOCK_M, CHUNK):
    """log(sum(exp(x))) of each row of row block rb: (BLOCK_M, 1) f32. The running max starts at -inf
    (exp(-inf - max) = 0 drops the empty sum); chunk 0 always holds a real column."""
    run_max = ct.full((BLOCK_M, 1), float("-inf"), dtype=ct.float32)
    run_sum = ct.full((BLOCK_M, 1), 0.0, dtype=ct.float32)
    for c in range(n_chunks):
        t = ct.load(logits, index=(rb, c), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
        run_max, run_sum = online_update(ct.astype(t, ct.float32), run_max, run_sum)
    return run_max + ct.log(run_sum)


@ct.kernel(occupancy=4)
def cross_entropy_fwd_kernel(logits, labels, loss, lse, ignore_index, BLOCK_M: ConstInt, CHUNK: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(logits, 0, shape=(BLOCK_M, CHUNK))
    n_chunks = ct.num_tiles(logits, 1, shape=(BLOCK_M, CHUNK))
    for rb in range(bid, n_row_blocks, num_blocks):
        lse_rows = ct.reshape(row_lse(logits, rb, n_chunks, BLOCK_M, CHUNK), (BLOCK_M,))
        label = ct.load(labels, index=(rb,), shape=(BLOCK_M,), padding_mode=ct.PaddingMode.ZERO)
        valid = label != ignore_index
        rows = rb * BLOCK_M + ct.arange(BLOCK_M, dtype=ct.int32)
        target = ct.gather(logits, (rows, ct.where(valid, label, 0)))
        row_loss = ct.where(valid, lse_rows - ct.astype(target, ct.float32), 0.0)
        ct.store(loss, index=(rb,), tile=row_loss)
        ct.store(lse, index=(rb,), tile=lse_rows)


@ct.kernel(occupancy=4)
def cross_entropy_bwd_kernel(logits, labels, lse, dloss, dlogits, ignore_index, BLOCK_M: ConstInt,
                             CHUNK: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(logits, 0, shape=(BLOCK_M, CHUNK))
    n_chunks = ct.num_tiles(logits, 1, shape=(BLOCK_M, CHUNK))
    for rb in range(bid, n_row_blocks, num_blocks):
        label = ct.load(labels, index=(rb,), shape=(BLOCK_M,), padding_mode=ct.PaddingMode.ZERO)
        grad = ct.load(dloss, index=(rb,), shape=(BLOCK_M,), padding_mode=ct.PaddingMode.ZERO)
        grad = ct.reshape(ct.where(label != ignore_index, grad, 0.0), (BLOCK_M, 1))
        lse_rows = ct.reshape(ct.load(lse, index=(rb,), shape=(BLOCK_M,), padding_mode=ct.PaddingMode.ZERO),
                              (BLOCK_M, 1))
        label_col = ct.reshape(label, (BLOCK_M, 1))
        for c in range(n_chunks):
            t = ct.load(logits, index=(rb, c), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
            p = ct.exp(ct.astype(t, ct.float32) - lse_rows, rounding_mode=ct.RoundingMode.APPROX)
            cols = ct.reshape(c * CHUNK + ct.arange(CHUNK, dtype=ct.int32), (1, CHUNK))
            d = (p - ct.where(cols == label_col, 1.0, 0.0)) * grad
            ct.store(dlogits, index=(rb, c), tile=ct.astype(d, dlogits.dtype))
