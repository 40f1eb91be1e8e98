"""ReLU, y = max(x, 0), over a flattened (1-D, contiguous) view of the input (f32 / f16 / bf16).

ReLU is exact in every dtype, so it is computed in the input dtype (no f32 round trip).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def relu_kernel(x, y, TILE: ConstInt):
    bid = ct.bid(0)
    tx = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=ct.maximum(tx, 0.0))
