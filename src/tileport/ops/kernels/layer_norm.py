"""LayerNorm forward over the last axis, with the saved statistics.

y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps)  (biased variance, as torch).
x, y: [M, N]; w, b: [N]; mean, rstd: [M] f32 outputs; eps: runtime f32 scalar.
Math in f32. The variance is computed from the centered rows held in registers (two reductions, no
E[x^2] - E[x]^2 cancellation); the padded lanes are masked out of it. Persistent grid-stride loop
over row blocks of one (BLOCK_M, TILE) view load each (BLOCK_M > 1 only for short rows); w and b are
loaded once per block; mean / rstd of a row block are stored as one (BLOCK_M,) tile each.

Three entries share the row-block body: occupancy 2 (rows up to 16384 values), occupancy 4 (row
tiles up to 8192 values: twice the loads in flight per SM, for narrow rows where one block's tile
is small, e.g. 2 x 2048 f16 = 8 KiB), and occupancy 2 with the next row block loaded before this
one's math (the tiles compile to register loads: without it a persistent block waits for each
load, then computes with nothing in flight). A fourth, occupancy 2 with 8 worker warps and no TMA
(allow_tma=False on every load and store: plain vector loads and stores, as the pointer path that
is softmax's fastest at 4096^2), spreads a row block over twice the threads of the default 4 and
drops the TMA copy warps and their shared-memory staging (sm_90, 2048-wide f16 rows: no spill).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def layer_norm_row_block(t, rb, wt, bt, in_row, n_cols, y, mean, rstd, eps, BLOCK_M, TMA):
    """Normalize one loaded (BLOCK_M, TILE) row block `t` (f32) and store y, mean, rstd (TMA: the
    stores' allow_tma, None = the compiler's choice)."""
    mu = ct.sum(t, 1, keepdims=True) / n_cols
    centered = ct.where(in_row, t - mu, 0.0)
    var = ct.sum(centered * centered, 1, keepdims=True) / n_cols
    inv_std = ct.rsqrt(var + eps)
    ct.store(y, index=(rb, 0), tile=ct.astype(centered * inv_std * wt + bt, y.dtype), allow_tma=TMA)
    ct.store(mean, index=(rb,), tile=ct.reshape(mu, (BLOCK_M,)), allow_tma=TMA)
    ct.store(rstd, index=(rb,), tile=ct.reshape(inv_std, (BLOCK_M,)), allow_tma=TMA)


def layer_norm_row_blocks(x, w, b, y, mean, rstd, eps, BLOCK_M, TILE, TMA):
    """Persistent grid-stride loop over (BLOCK_M, TILE) row blocks (shared by three entries; TMA:
    allow_tma of every load and store, None = the compiler's choice)."""
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    n_cols = x.shape[1]
    in_row = ct.arange(TILE, dtype=ct.int32) < n_cols
    wt = ct.astype(ct.load(w, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO, allow_tma=TMA),
                   ct.float32)
    bt = ct.astype(ct.load(b, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO, allow_tma=TMA),
                   ct.float32)
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.load(x, index=(rb, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.ZERO, allow_tma=TMA)
        layer_norm_row_block(ct.astype(t, ct.float32), rb, wt, bt, in_row, n_cols, y, mean, rstd, eps,
                             BLOCK_M, TMA)


@ct.kernel(occupancy=2)
def layer_norm_fwd_kernel(x, w, b, y, mean, rstd, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    layer_norm_row_blocks(x, w, b, y, mean, rstd, eps, BLOCK_M, TILE, None)


@ct.kernel(occupancy=4)
def layer_norm_fwd_occ4_kernel(x, w, b, y, mean, rstd, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    layer_norm_row_blocks(x, w, b, y, mean, rstd, eps, BLOCK_M, TILE, None)


@ct.kernel(occupancy=2)
def layer_norm_fwd_prefetch_kernel(x, w, b, y, mean, rstd, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    """The persistent loop with row block i+1 loaded before the math of block i."""
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    n_cols = x.shape[1]
    in_row = ct.arange(TILE, dtype=ct.int32) < n_cols
    wt = ct.astype(ct.load(w, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO),
                   ct.float32)
    bt = ct.astype(ct.load(b, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO),
                   ct.float32)
    ahead = ct.load(x, index=(bid, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.ZERO)
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.astype(ahead, ct.float32)
        # a block's last iteration loads the final row block again (in range; the value is unused)
        nxt = min(rb + num_blocks, n_row_blocks - 1)
        ahead = ct.load(x, index=(nxt, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.ZERO)
        layer_norm_row_block(t, rb, wt, bt, in_row, n_cols, y, mean, rstd, eps, BLOCK_M, None)


@ct.kernel(occupancy=2, num_worker_warps=8)
def layer_norm_fwd_w8_kernel(x, w, b, y, mean, rstd, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    layer_norm_row_blocks(x, w, b, y, mean, rstd, eps, BLOCK_M, TILE, False)
