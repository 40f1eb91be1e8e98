"""SwiGLU with two inputs: y = silu(a) * b, silu(a) = a / (1 + exp(-a)).

a, b and y share one shape and are processed through flattened (1-D, contiguous) views. Math in f32
with an approximate exp and an approximate divide; result cast back to the input dtype.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def silu_f32(x):
    denom = 1.0 + ct.exp(-x, rounding_mode=ct.RoundingMode.APPROX)
    return ct.truediv(x, denom, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)


@ct.kernel
def swiglu_kernel(a, b, y, TILE: ConstInt):
    bid = ct.bid(0)
    ta = ct.astype(ct.load(a, index=(bid,), shape=(TILE,)), ct.float32)
    tb = ct.astype(ct.load(b, index=(bid,), shape=(TILE,)), ct.float32)
    ct.store(y, index=(bid,), tile=ct.astype(silu_f32(ta) * tb, y.dtype))
