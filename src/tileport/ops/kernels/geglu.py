"""GeGLU with two inputs: y = gelu_tanh(a) * b.

Same structure as swiglu.py (flattened 1-D views, f32 math, approximate exp/divide); the gate uses
the identity 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)) with u = sqrt(2/pi) * (a + 0.044715 a^3).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]

SQRT_2_OVER_PI = 0.7978845608028654
GELU_CUBIC = 0.044715


def gelu_tanh_f32(x):
    neg_two_u = x * (-2.0 * SQRT_2_OVER_PI) * (1.0 + GELU_CUBIC * x * x)
    denom = 1.0 + ct.exp(neg_two_u, rounding_mode=ct.RoundingMode.APPROX)
    return ct.truediv(x, denom, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)


@ct.kernel
def geglu_kernel(a, b, y, TILE: ConstInt):
    bid = ct.bid(0)
    ta = ct.astype(ct.load(a, index=(bid,), shape=(TILE,)), ct.float32)
    tb = ct.astype(ct.load(b, index=(bid,), shape=(TILE,)), ct.float32)
    ct.store(y, index=(bid,), tile=ct.astype(gelu_tanh_f32(ta) * tb, y.dtype))
