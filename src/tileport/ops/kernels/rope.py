"""Rotary position embedding (rotate-half / GPT-NeoX convention), out of place.

Layout: x, y [batch, seq, heads, head_dim] contiguous; cos, sin [seq, head_dim / 2] f32 tables
(angle = position * inv_freq[i], position = sequence index). With x1 = x[..., :D/2] and
x2 = x[..., D/2:]:  y1 = x1 * cos - x2 * sin,  y2 = x2 * cos + x1 * sin.

The kernel receives x and y as the free [B, S, H, 2, D/2] views of the contiguous tensors (the plan
makes them), so each half is one view load of a (1, BLOCK_S, BLOCK_H, 1, HALF_TILE) tile at index
0 / 1 of the split axis; HALF_TILE = next power of two >= D/2, zero padded, so head sizes that are
not powers of two (e.g. 80, 96) work. The cos/sin block (BLOCK_S, HALF_TILE) is loaded once and
broadcast over heads. Math in f32.

Two entries share the tile body: `rope_kernel`, grid (seq blocks, head blocks, batch), one tile per
block; `rope_persistent_kernel`, fewer blocks along the sequence, each looping over sequence blocks
with a grid stride (more work per block for small tiles, e.g. 8 heads x 64 f16 = 1 KiB per half;
its loop is software-pipelined by the compiler, which about doubles the registers per thread, so
it is a separate entry rather than the only kernel).

`rope_rows_kernel` takes x and y as [B * S, H, 2, D/2] (batch and sequence merged), grid (row
blocks, head blocks): no batch axis, so a batch of 1 is no size-1 axis either (the cuTile launcher
specializes a size-1 axis as a static shape, the cutile-rs launcher does not: 34 vs 32 registers and
an rs/cuTile time ratio of 1.11 on [1, 16384, 8, 128] f16 with the 5-D entries). A row block of
BLOCK_S rows never straddles two sequences (the plan offers it only when BLOCK_S divides S), so its
table rows are the row block modulo the sequence blocks. Two more entries over the same view move more
bytes per block for the batch-of-one / few-heads case (one (1, 8, 1, 64) f16 half is 1 KiB):
`rope_rows_pair_kernel` loads both halves of its rows as one (BLOCK_S, BLOCK_H, 2, HALF_TILE) tile
(one load of twice the bytes), splits it with extract and writes the rotated pair back as one tile
(cat); `rope_rows_persistent_kernel` loops over row blocks with a grid stride, so the compiler
software-pipelines its loads (the next block's loads in flight during this block's math and stores);
`rope_rows_notma_kernel` is `rope_rows_kernel` with x and y accessed without TMA (vector loads and
stores straight between global memory and registers, no shared-memory staging);
`rope_rows_pair_persistent_kernel` loops the pair tile over row blocks with a grid stride, 4 blocks per SM (occupancy
hint), the pair's load and store hinted at the highest DRAM latency, so the next row blocks' loads stay in flight: on
[1, 16384, 8, 128] f16, 4 positions per block, 0.953x the time of the pair entry on 4 positions and 8 blocks per SM
side by side (H200, bench/results/2026-12-02-h200-rope-latency.json), and 80.7 % of the copy bandwidth, 91 % of a
same-bytes copy timed beside it (bench/results/2026-12-02-h200-bench-weak-copy-nocompile.json).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def rope_block(x, cos, sin, y, sb, BLOCK_S, BLOCK_H, HALF_TILE):
    """One (sequence block sb, head block bid(1), batch bid(2)) tile: both halves, rotated."""
    hb = ct.bid(1)
    batch = ct.bid(2)
    tile_shape = (1, BLOCK_S, BLOCK_H, 1, HALF_TILE)
    c = ct.load(cos, index=(sb, 0), shape=(BLOCK_S, HALF_TILE), padding_mode=ct.PaddingMode.ZERO)
    s = ct.load(sin, index=(sb, 0), shape=(BLOCK_S, HALF_TILE), padding_mode=ct.PaddingMode.ZERO)
    c = ct.reshape(ct.astype(c, ct.float32), (1, BLOCK_S, 1, 1, HALF_TILE))
    s = ct.reshape(ct.astype(s, ct.float32), (1, BLOCK_S, 1, 1, HALF_TILE))
    x1 = ct.load(x, index=(batch, sb, hb, 0, 0), shape=tile_shape, padding_mode=ct.PaddingMode.ZERO)
    x2 = ct.load(x, index=(batch, sb, hb, 1, 0), shape=tile_shape, padding_mode=ct.PaddingMode.ZERO)
    x1 = ct.astype(x1, ct.float32)
    x2 = ct.astype(x2, ct.float32)
    ct.store(y, index=(batch, sb, hb, 0, 0), tile=ct.astype(x1 * c - x2 * s, y.dtype))
    ct.store(y, index=(batch, sb, hb, 1, 0), tile=ct.astype(x2 * c + x1 * s, y.dtype))


@ct.kernel
def rope_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    rope_block(x, cos, sin, y, ct.bid(0), BLOCK_S, BLOCK_H, HALF_TILE)


@ct.kernel
def rope_persistent_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    n_seq_blocks = ct.num_tiles(cos, 0, shape=(BLOCK_S, HALF_TILE))
    for sb in range(ct.bid(0), n_seq_blocks, ct.num_blocks(0)):
        rope_block(x, cos, sin, y, sb, BLOCK_S, BLOCK_H, HALF_TILE)


def rows_tables(cos, sin, rb, BLOCK_S, HALF_TILE):
    """The (BLOCK_S, 1, 1, HALF_TILE) f32 cos / sin rows of row block rb (a row block never straddles
    two sequences, so its table block is rb modulo the sequence blocks)."""
    sb = rb % ct.num_tiles(cos, 0, shape=(BLOCK_S, HALF_TILE))
    c = ct.load(cos, index=(sb, 0), shape=(BLOCK_S, HALF_TILE), padding_mode=ct.PaddingMode.ZERO)
    s = ct.load(sin, index=(sb, 0), shape=(BLOCK_S, HALF_TILE), padding_mode=ct.PaddingMode.ZERO)
    c = ct.reshape(ct.astype(c, ct.float32), (BLOCK_S, 1, 1, HALF_TILE))
    s = ct.reshape(ct.astype(s, ct.float32), (BLOCK_S, 1, 1, HALF_TILE))
    return c, s


def rows_block(x, cos, sin, y, rb, BLOCK_S, BLOCK_H, HALF_TILE, ALLOW_TMA):
    """One (row block rb, head block bid(1)) tile of the [B * S, H, 2, D/2] views, one load per half;
    ALLOW_TMA for x and y: None (the compiler's choice) or False (no TMA); the tables keep None."""
    hb = ct.bid(1)
    c, s = rows_tables(cos, sin, rb, BLOCK_S, HALF_TILE)
    tile_shape = (BLOCK_S, BLOCK_H, 1, HALF_TILE)
    x1 = ct.load(x, index=(rb, hb, 0, 0), shape=tile_shape, padding_mode=ct.PaddingMode.ZERO, allow_tma=ALLOW_TMA)
    x2 = ct.load(x, index=(rb, hb, 1, 0), shape=tile_shape, padding_mode=ct.PaddingMode.ZERO, allow_tma=ALLOW_TMA)
    x1 = ct.astype(x1, ct.float32)
    x2 = ct.astype(x2, ct.float32)
    ct.store(y, index=(rb, hb, 0, 0), tile=ct.astype(x1 * c - x2 * s, y.dtype), allow_tma=ALLOW_TMA)
    ct.store(y, index=(rb, hb, 1, 0), tile=ct.astype(x2 * c + x1 * s, y.dtype), allow_tma=ALLOW_TMA)


@ct.kernel
def rope_rows_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    rows_block(x, cos, sin, y, ct.bid(0), BLOCK_S, BLOCK_H, HALF_TILE, None)


@ct.kernel
def rope_rows_notma_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    rows_block(x, cos, sin, y, ct.bid(0), BLOCK_S, BLOCK_H, HALF_TILE, False)


@ct.kernel
def rope_rows_persistent_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_S, BLOCK_H, 1, HALF_TILE))
    for rb in range(ct.bid(0), n_row_blocks, ct.num_blocks(0)):
        rows_block(x, cos, sin, y, rb, BLOCK_S, BLOCK_H, HALF_TILE, None)


# The DRAM-latency hint (1 low .. 10 high) of the persistent pair entry's load and store.
PAIR_PERSISTENT_LATENCY = 10


def pair_block(x, cos, sin, y, rb, BLOCK_S, BLOCK_H, HALF_TILE, LATENCY):
    """One (row block rb, head block bid(1)) tile of the [B * S, H, 2, D/2] views, both halves in one load;
    LATENCY: the load's and store's DRAM-latency hint (None: the compiler's inference)."""
    hb = ct.bid(1)
    c, s = rows_tables(cos, sin, rb, BLOCK_S, HALF_TILE)
    half_shape = (BLOCK_S, BLOCK_H, 1, HALF_TILE)
    pair = ct.load(x, index=(rb, hb, 0, 0), shape=(BLOCK_S, BLOCK_H, 2, HALF_TILE), padding_mode=ct.PaddingMode.ZERO,
                   latency=LATENCY)
    x1 = ct.astype(ct.extract(pair, index=(0, 0, 0, 0), shape=half_shape), ct.float32)
    x2 = ct.astype(ct.extract(pair, index=(0, 0, 1, 0), shape=half_shape), ct.float32)
    rotated = ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), 2)
    ct.store(y, index=(rb, hb, 0, 0), tile=ct.astype(rotated, y.dtype), latency=LATENCY)


@ct.kernel
def rope_rows_pair_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    pair_block(x, cos, sin, y, ct.bid(0), BLOCK_S, BLOCK_H, HALF_TILE, None)


@ct.kernel(occupancy=4)
def rope_rows_pair_persistent_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_S, BLOCK_H, 2, HALF_TILE))
    for rb in range(ct.bid(0), n_row_blocks, ct.num_blocks(0)):
        pair_block(x, cos, sin, y, rb, BLOCK_S, BLOCK_H, HALF_TILE, PAIR_PERSISTENT_LATENCY)
