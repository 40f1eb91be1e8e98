"""Grouped GEMM: G problems C_g[M_g, N_g] = A_g[M_g, K_g] @ B_g[K_g, N_g] of different sizes, one persistent launch.

The problems live in three packed arrays and a table of sizes in device memory: sizes [G, 3] int32 holds
(M_g, N_g, K_g); a [RA, KA] holds A_g in rows [ra_g, ra_g + M_g), columns [0, K_g); b [RB, NB] holds B_g
in rows [rb_g, rb_g + K_g), columns [0, N_g); c [RA, NB] receives C_g in a's rows, padded with zeros to
rows [ra_g, ra_g + ceil8(M_g)) and every column. ra_g / rb_g: the problems before g, each M_h / K_h
rounded up to ROW_ALIGN rows (so every problem's view is 16-byte aligned for 16-bit elements).

Each tile block computes the problems' row offsets and tile counts from the table (cumulative sums over
G_PAD lanes), then walks the tiles of all problems with a grid-stride loop: a tile's problem is the
number of problems whose tiles end at or before it. The operands are `Array.slice` views of exactly
A_g and B_g, so their loads are zero padded at the problem's bounds (ragged M, N, K) and nothing of a
neighbouring problem is read; c's view spans the problem's padded rows and every column, so every
element of c is written once.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]

ROW_ALIGN = 8


def pick(onehot, values):
    """The entry of the (G_PAD,) `values` where the (G_PAD,) boolean `onehot` holds."""
    return ct.sum(ct.where(onehot, values, 0), 0)


@ct.kernel(occupancy=1, num_worker_warps=8)
def grouped_gemm_kernel(a, b, c, sizes, G_PAD: ConstInt, TILE_M: ConstInt, TILE_N: ConstInt, TILE_K: ConstInt):
    lanes = ct.arange(G_PAD, dtype=ct.int32)
    m = ct.gather(sizes, (lanes, 0))
    n = ct.gather(sizes, (lanes, 1))
    k = ct.gather(sizes, (lanes, 2))
    m_blocks = (m + (ROW_ALIGN - 1)) // ROW_ALIGN
    k_blocks = (k + (ROW_ALIGN - 1)) // ROW_ALIGN
    a_rows = ct.cumsum(m_blocks, 0) - m_blocks
    b_rows = ct.cumsum(k_blocks, 0) - k_blocks
    num_bn = ct.cdiv(c.shape[1], TILE_N)
    tiles = (m_blocks * ROW_ALIGN + (TILE_M - 1)) // TILE_M * num_bn
    ends = ct.cumsum(tiles, 0)
    for tile in range(ct.bid(0), ct.sum(tiles, 0), ct.num_blocks(0)):
        owner = lanes == ct.sum(ct.astype(ends <= tile, ct.int32), 0)
        local = tile - pick(owner, ends - tiles)
        bm = local // num_bn
        bn = local % num_bn
        mg, kg = pick(owner, m), pick(owner, k)
        ra, rb = pick(owner, a_rows) * ROW_ALIGN, pick(owner, b_rows) * ROW_ALIGN
        av = a.slice(0, ra, ra + mg).slice(1, 0, kg)
        bv = b.slice(0, rb, rb + kg).slice(1, 0, pick(owner, n))
        cv = c.slice(0, ra, ra + pick(owner, m_blocks) * ROW_ALIGN)
        acc = ct.zeros((TILE_M, TILE_N), dtype=ct.float32)
        for kk in range(ct.cdiv(kg, TILE_K)):
            ta = ct.load(av, index=(bm, kk), shape=(TILE_M, TILE_K), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(bv, index=(kk, bn), shape=(TILE_K, TILE_N), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(ta, tb, acc)
        ct.store(cv, index=(bm, bn), tile=ct.astype(acc, c.dtype))
