"""silu_and_mul: x [M, 2N] -> y [M, N], y = silu(x[:, :N]) * x[:, N:].

The kernel receives x as the free [2M, N] view of the contiguous [M, 2N] input (the plan makes it):
row 2i of the view is the gate half of input row i, row 2i + 1 its up half. One (2 * BLOCK_M,
BLOCK_N) view load therefore brings the gate and the up values of BLOCK_M output rows at once; the
tile is split with reshape + extract. Every access is a view (TMA-capable) access and any N works:
the column tail is padded by the view, never read from the other half. Grid: axis 0 = column blocks,
axis 1 = row blocks. Math in f32, approximate exp and divide.

(Measured on H200, bf16 8192 x 2*8192: 4204 GB/s, against 3767 GB/s for two separate
(BLOCK_M, 1, BLOCK_N) loads from an [M, 2, N] view.)
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def silu_f32(x):
    denom = 1.0 + ct.exp(-x, rounding_mode=ct.RoundingMode.APPROX)
    return ct.truediv(x, denom, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)


@ct.kernel
def silu_and_mul_kernel(x, y, BLOCK_M: ConstInt, BLOCK_N: ConstInt):
    bn = ct.bid(0)
    bm = ct.bid(1)
    pair = ct.load(x, index=(bm, bn), shape=(2 * BLOCK_M, BLOCK_N))
    pair = ct.reshape(pair, (BLOCK_M, 2, BLOCK_N))
    gate = ct.extract(pair, index=(0, 0, 0), shape=(BLOCK_M, 1, BLOCK_N))
    up = ct.extract(pair, index=(0, 1, 0), shape=(BLOCK_M, 1, BLOCK_N))
    gate = ct.astype(ct.reshape(gate, (BLOCK_M, BLOCK_N)), ct.float32)
    up = ct.astype(ct.reshape(up, (BLOCK_M, BLOCK_N)), ct.float32)
    ct.store(y, index=(bm, bn), tile=ct.astype(silu_f32(gate) * up, y.dtype))
