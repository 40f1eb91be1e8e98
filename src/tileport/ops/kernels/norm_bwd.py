"""Backward of RMSNorm and LayerNorm over the last axis, f32 math from f32 / f16 / bf16 inputs.

rms_norm_bwd: y = x * r * w with r = rsqrt(mean(x^2) + eps) (recomputed from x: the forward saves
nothing). dx = r * (dy * w - x * r^2 * mean(dy * w * x)); dw = sum over rows of dy * x * r.
layer_norm_bwd: y = xhat * w + b with xhat = (x - mean) * rstd (mean, rstd: the forward's [M] f32
outputs). dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w; dw = sum of dy * xhat,
db = sum of dy.

The row kernels are persistent: about NUM_SMS * occupancy blocks walk the row blocks of
(BLOCK_M, TILE) tiles (TILE = next power of two >= N, zero padded: padded lanes and rows carry
dy = 0, so they add nothing to the row sums or the weight gradients, and are never stored) with a
grid-stride loop. Each block sums its rows' weight-gradient terms in f32 registers, one (1, TILE)
row per gradient, and stores it as row `bid` of a [G, N] f32 partial array (G = the grid);
norm_bwd_reduce_kernel then sums the G rows of each column tile and rounds once to w's dtype.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def load_f32(a, rb, BLOCK_M, TILE):
    """Row block rb of a [M, N] array as a zero-padded f32 (BLOCK_M, TILE) tile."""
    t = ct.load(a, index=(rb, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.ZERO)
    return ct.astype(t, ct.float32)


def load_row_f32(a, rb, BLOCK_M):
    """Row block rb of a [M] f32 array as a (BLOCK_M, 1) column."""
    t = ct.load(a, index=(rb,), shape=(BLOCK_M,), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(t, (BLOCK_M, 1))


def load_weight_f32(w, TILE):
    """w [N] as a zero-padded f32 (1, TILE) row."""
    t = ct.load(w, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(ct.astype(t, ct.float32), (1, TILE))


@ct.kernel(occupancy=2)
def rms_norm_bwd_kernel(dy, x, w, dx, dw_part, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    n_cols = x.shape[1]
    wt = load_weight_f32(w, TILE)
    dw_acc = ct.full((1, TILE), 0.0, dtype=ct.float32)
    for rb in range(bid, n_row_blocks, num_blocks):
        t = load_f32(x, rb, BLOCK_M, TILE)
        g = load_f32(dy, rb, BLOCK_M, TILE)
        inv_rms = ct.rsqrt(ct.sum(t * t, 1, keepdims=True) / n_cols + eps)
        gw = g * wt
        dot = ct.sum(gw * t, 1, keepdims=True) / n_cols
        d = (gw - t * (inv_rms * inv_rms * dot)) * inv_rms
        ct.store(dx, index=(rb, 0), tile=ct.astype(d, dx.dtype))
        dw_acc = dw_acc + ct.sum(g * t * inv_rms, 0, keepdims=True)
    ct.store(dw_part, index=(bid, 0), tile=dw_acc)


@ct.kernel(occupancy=2)
def layer_norm_bwd_kernel(dy, x, w, mean, rstd, dx, dw_part, db_part, BLOCK_M: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    n_cols = x.shape[1]
    wt = load_weight_f32(w, TILE)
    dw_acc = ct.full((1, TILE), 0.0, dtype=ct.float32)
    db_acc = ct.full((1, TILE), 0.0, dtype=ct.float32)
    for rb in range(bid, n_row_blocks, num_blocks):
        g = load_f32(dy, rb, BLOCK_M, TILE)
        inv_std = load_row_f32(rstd, rb, BLOCK_M)
        xhat = (load_f32(x, rb, BLOCK_M, TILE) - load_row_f32(mean, rb, BLOCK_M)) * inv_std
        gw = g * wt
        mean_g = ct.sum(gw, 1, keepdims=True) / n_cols
        mean_gx = ct.sum(gw * xhat, 1, keepdims=True) / n_cols
        d = (gw - mean_g - xhat * mean_gx) * inv_std
        ct.store(dx, index=(rb, 0), tile=ct.astype(d, dx.dtype))
        dw_acc = dw_acc + ct.sum(g * xhat, 0, keepdims=True)
        db_acc = db_acc + ct.sum(g, 0, keepdims=True)
    ct.store(dw_part, index=(bid, 0), tile=dw_acc)
    ct.store(db_part, index=(bid, 0), tile=db_acc)


@ct.kernel
def norm_bwd_reduce_kernel(part, out, TILE_G: ConstInt, TILE_N: ConstInt):
    """out[n] = sum over g of part[g, n], one TILE_N column tile per block, rounded once to out's dtype."""
    bn = ct.bid(0)
    n_row_tiles = ct.num_tiles(part, 0, shape=(TILE_G, TILE_N))
    acc = ct.full((1, TILE_N), 0.0, dtype=ct.float32)
    for i in range(n_row_tiles):
        t = ct.load(part, index=(i, bn), shape=(TILE_G, TILE_N), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.sum(t, 0, keepdims=True)
    ct.store(out, index=(bn,), tile=ct.astype(ct.reshape(acc, (TILE_N,)), out.dtype))
