"""Matrix multiplication c[M, N] = a[M, K] @ b[K, N] (row-major a, b, c).

Inputs f16 / bf16 (f32 accumulation) or f32, which is multiplied as TF32 (`USE_TF32`: both operand
tiles are rounded to tfloat32 before the MMA, the accumulator stays f32). Output in the input dtype.

- Persistent: the plan launches one resident wave (NUM_SMS / 2 tile blocks, each a 2-CTA cluster)
  and each block walks the output tiles with a grid-stride loop. Per output tile: a K loop of
  `ct.mma` over (TILE_M, TILE_K) x (TILE_K, TILE_N) view loads, f32 accumulator in registers, one
  store. (H200, bf16: 4096^3 745 vs 640 TFLOP/s for one block per tile, 8192^3 808 vs 770.)
- Ragged M / N / K: operand loads are zero padded (padded K columns add 0 to the dot products) and
  the output store drops out-of-bounds rows / columns.
- The linear tile index is swizzled in groups of GROUP_M tile-rows (`group_m_swizzle`): tiles
  processed at the same time sweep GROUP_M rows of A against one column panel of B, so the panels
  they share stay in L2.
- Hints `num_ctas=2, occupancy=1, num_worker_warps=8`: a tile block runs on a 2-CTA cluster, so
  each CTA owns half of the 256 x 256 output tile (128 x 256, the classic Hopper GEMM tile), with
  two warp groups (8 worker warps) sharing its 128 x 256 f32 accumulator; one block per SM. The plan
  uses 256 x 256 x 64 tile blocks for 16-bit inputs and 256 x 256 x 32 for TF32 (same operand bytes
  per K step). Measured on H200 (CUPTI, L2 flushed, TFLOP/s), this configuration vs the next best:
  bf16 8192^3 750-771 (128x256x64 / 1 CTA / 8 warps 741-764, 128x128x64 / 1 CTA 729-753),
  bf16 4096^3 731, f16 8192^3 717, bmm bf16 4x4096^3 729; without 8 worker warps, 128 x 256 per
  CTA spills (46 TFLOP/s). TF32 4096^3: 273 (128x128x32 / 1 CTA: 257).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]


def group_m_swizzle(bid, num_bm, num_bn, GROUP_M):
    """Maps a linear block id to (block row, block column), GROUP_M block-rows at a time."""
    blocks_per_group = GROUP_M * num_bn
    group = bid // blocks_per_group
    first_bm = group * GROUP_M
    group_rows = min(num_bm - first_bm, GROUP_M)
    local = bid % blocks_per_group
    return first_bm + local % group_rows, local // group_rows


@ct.kernel(num_ctas=2, occupancy=1, num_worker_warps=8)
def matmul_kernel(a, b, c, TILE_M: ConstInt, TILE_N: ConstInt, TILE_K: ConstInt,
                  GROUP_M: ConstInt, USE_TF32: ConstBool):
    num_bm = ct.cdiv(a.shape[0], TILE_M)
    num_bn = ct.cdiv(b.shape[1], TILE_N)
    num_k = ct.num_tiles(a, 1, shape=(TILE_M, TILE_K))
    for tile in range(ct.bid(0), num_bm * num_bn, ct.num_blocks(0)):
        bm, bn = group_m_swizzle(tile, num_bm, num_bn, GROUP_M)
        acc = ct.zeros((TILE_M, TILE_N), dtype=ct.float32)
        for k in range(num_k):
            ta = ct.load(a, index=(bm, k), shape=(TILE_M, TILE_K),
                         padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(k, bn), shape=(TILE_K, TILE_N),
                         padding_mode=ct.PaddingMode.ZERO)
            if USE_TF32:
                ta = ct.astype(ta, ct.tfloat32)
                tb = ct.astype(tb, ct.tfloat32)
            acc = ct.mma(ta, tb, acc)
        ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))
