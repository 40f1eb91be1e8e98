"""fp8 block-scaled matrix multiplication (w8a8): c[M, N] = (a * a_scale) @ (b * b_scale)^T, bf16 out.

a [M, K] and b [N, K] are float8_e4m3fn (b in the [out, in] layout of a linear layer's weight);
a_scale [M, cdiv(K, 128)] f32 holds one scale per row and 128-column group of a (per token), b_scale
[cdiv(N, 128), cdiv(K, 128)] f32 one per 128 x 128 block of b: the DeepSeek-V3 w8a8 recipe. TILE_K is
the 128 of a scale group and TILE_N divides 128, so every K step of a tile has one b scale and one a
scale per row: the step's fp8 MMA (f32 accumulator) is scaled by their product and added to the f32
accumulator. Ragged M / N / K: loads are zero padded (a zero fp8 operand adds 0), the scales too.

Persistent like kernels/matmul.py: one resident wave walks the output tiles (grid-stride loop, GROUP_M
swizzle), one tile block per SM with two warp groups (8 worker warps).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]

SCALE_BLOCK = 128


def group_m_swizzle(bid, num_bm, num_bn, GROUP_M):
    """Maps a linear block id to (block row, block column), GROUP_M block-rows at a time."""
    blocks_per_group = GROUP_M * num_bn
    group = bid // blocks_per_group
    first_bm = group * GROUP_M
    group_rows = min(num_bm - first_bm, GROUP_M)
    local = bid % blocks_per_group
    return first_bm + local % group_rows, local // group_rows


@ct.kernel(occupancy=1, num_worker_warps=8)
def matmul_fp8_kernel(a, b, a_scale, b_scale, c, TILE_M: ConstInt, TILE_N: ConstInt, TILE_K: ConstInt,
                      GROUP_M: ConstInt):
    num_bm = ct.cdiv(a.shape[0], TILE_M)
    num_bn = ct.cdiv(b.shape[0], TILE_N)
    num_k = ct.num_tiles(a, 1, shape=(TILE_M, TILE_K))
    for tile in range(ct.bid(0), num_bm * num_bn, ct.num_blocks(0)):
        bm, bn = group_m_swizzle(tile, num_bm, num_bn, GROUP_M)
        acc = ct.zeros((TILE_M, TILE_N), dtype=ct.float32)
        for k in range(num_k):
            ta = ct.load(a, index=(bm, k), shape=(TILE_M, TILE_K), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(k, bn), shape=(TILE_K, TILE_N), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
            part = ct.mma(ta, tb, ct.zeros((TILE_M, TILE_N), dtype=ct.float32))
            sa = ct.load(a_scale, index=(bm, k), shape=(TILE_M, 1), padding_mode=ct.PaddingMode.ZERO)
            sb = ct.gather(b_scale, (bn * TILE_N // SCALE_BLOCK, k))
            acc = acc + part * (sa * sb)
        ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))
