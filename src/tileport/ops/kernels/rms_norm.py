"""RMSNorm over the last axis: y = x * rsqrt(mean(x^2) + eps) * w.

x, y: [M, N]; w: [N]; eps: runtime f32 scalar. Math in f32 (inputs f32 / f16 / bf16), result cast to
y's dtype. Persistent: about NUM_SMS * occupancy tile blocks walk the row blocks with a grid-stride
loop; the weight row is loaded once per block, outside the loop. A row block is one
(BLOCK_M, TILE) view load, TILE = next power of two >= N, zero padded (zeros do not change the sum
of squares; padded lanes and rows are never stored); the plan takes BLOCK_M > 1 only for short rows.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel(occupancy=2)
def rms_norm_kernel(x, w, y, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    n_cols = x.shape[1]
    wt = ct.astype(ct.load(w, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO),
                   ct.float32)
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.load(x, index=(rb, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.ZERO)
        t = ct.astype(t, ct.float32)
        mean_sq = ct.sum(t * t, 1, keepdims=True) / n_cols
        inv_rms = ct.rsqrt(mean_sq + eps)
        ct.store(y, index=(rb, 0), tile=ct.astype(t * inv_rms * wt, y.dtype))
