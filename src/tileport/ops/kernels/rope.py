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
table rows are the row block modulo the sequence blocks.
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


@ct.kernel
def rope_rows_kernel(x, cos, sin, y, BLOCK_S: ConstInt, BLOCK_H: ConstInt, HALF_TILE: ConstInt):
    rb = ct.bid(0)
    hb = ct.bid(1)
    sb = rb % ct.num_tiles(cos, 0, shape=(BLOCK_S, HALF_TILE))
    tile_shape = (BLOCK_S, BLOCK_H, 1, HALF_TILE)
    c = ct.load(cos, index=(sb, 0), shape=(BLOCK_S, HALF_TILE), padding_mode=ct.PaddingMode.ZERO)
    s = ct.load(sin, index=(sb, 0), shape=(BLOCK_S, HALF_TILE), padding_mode=ct.PaddingMode.ZERO)
    c = ct.reshape(ct.astype(c, ct.float32), (BLOCK_S, 1, 1, HALF_TILE))
    s = ct.reshape(ct.astype(s, ct.float32), (BLOCK_S, 1, 1, HALF_TILE))
    x1 = ct.load(x, index=(rb, hb, 0, 0), shape=tile_shape, padding_mode=ct.PaddingMode.ZERO)
    x2 = ct.load(x, index=(rb, hb, 1, 0), shape=tile_shape, padding_mode=ct.PaddingMode.ZERO)
    x1 = ct.astype(x1, ct.float32)
    x2 = ct.astype(x2, ct.float32)
    ct.store(y, index=(rb, hb, 0, 0), tile=ct.astype(x1 * c - x2 * s, y.dtype))
    ct.store(y, index=(rb, hb, 1, 0), tile=ct.astype(x2 * c + x1 * s, y.dtype))
