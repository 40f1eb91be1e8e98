"""Split-K matrix multiplication: c[M, N] = a[M, K] @ b[K, N] in two kernels.

1. matmul_splitk_kernel: grid (output tiles, splits). Split s multiplies the K tiles
   [s * k_tiles_per_split, min((s + 1) * k_tiles_per_split, num_k_tiles)) and stores its f32 partial
   tile into the workspace ws[s] ([splits, M, N] f32). Same tile program as matmul.py otherwise
   (GROUP_M swizzle, zero padding, f16 / bf16 with f32 accumulation, f32 via TF32), but with
   128 x 128 tiles on one CTA (`num_ctas=1`): split-K problems have few output tiles, and on H200
   this beat 2-CTA clusters (bf16 1024 x 1024 x 16384: 501 vs 432 TFLOP/s; 512 x 2048 x 32768:
   548 vs 477).
2. splitk_reduce_kernel: grid over (TILE_M, TILE_N) output tiles; sums the splits in f32 and casts
   to c's dtype. Memory-bound: reads splits * M * N * 4 bytes, writes M * N elements.

Split-K pays when M * N is too small to fill the GPU with output tiles while K is long.
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


@ct.kernel(num_ctas=1, occupancy=1)
def matmul_splitk_kernel(a, b, ws, k_tiles_per_split, TILE_M: ConstInt, TILE_N: ConstInt,
                         TILE_K: ConstInt, GROUP_M: ConstInt, USE_TF32: ConstBool):
    split = ct.bid(1)
    num_bm = ct.cdiv(a.shape[0], TILE_M)
    num_bn = ct.cdiv(b.shape[1], TILE_N)
    bm, bn = group_m_swizzle(ct.bid(0), num_bm, num_bn, GROUP_M)
    num_k = ct.num_tiles(a, 1, shape=(TILE_M, TILE_K))
    k_begin = split * k_tiles_per_split
    k_end = min(k_begin + k_tiles_per_split, num_k)
    acc = ct.zeros((TILE_M, TILE_N), dtype=ct.float32)
    for k in range(k_begin, k_end):
        ta = ct.load(a, index=(bm, k), shape=(TILE_M, TILE_K), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, bn), shape=(TILE_K, TILE_N), padding_mode=ct.PaddingMode.ZERO)
        if USE_TF32:
            ta = ct.astype(ta, ct.tfloat32)
            tb = ct.astype(tb, ct.tfloat32)
        acc = ct.mma(ta, tb, acc)
    ct.store(ws, index=(split, bm, bn), tile=ct.reshape(acc, (1, TILE_M, TILE_N)))


@ct.kernel
def splitk_reduce_kernel(ws, c, TILE_M: ConstInt, TILE_N: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    n_splits = ws.shape[0]
    acc = ct.reshape(ct.load(ws, index=(0, bm, bn), shape=(1, TILE_M, TILE_N)), (TILE_M, TILE_N))
    for s in range(1, n_splits):
        part = ct.load(ws, index=(s, bm, bn), shape=(1, TILE_M, TILE_N))
        acc = acc + ct.reshape(part, (TILE_M, TILE_N))
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))
