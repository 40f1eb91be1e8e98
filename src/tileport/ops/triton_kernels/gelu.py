"""GELU, tanh approximation, over a flat view of a contiguous tensor, Triton version.

gelu(x) = 0.5 * x * (1 + tanh(u)),  u = sqrt(2/pi) * (x + 0.044715 * x^3).

As in `ops/kernels/gelu.py`, the kernel uses 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)) and computes
x / (1 + exp(-2u)) in f32 (one exp and one divide per element), then casts to the output dtype.
Launch: grid (cdiv(n, BLOCK),).
"""

import torch
import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
GELU_CUBIC = tl.constexpr(0.044715)


@triton.jit
def gelu_tanh_f32(x):
    neg_two_u = x * (-2.0 * SQRT_2_OVER_PI) * (1.0 + GELU_CUBIC * x * x)
    return x / (1.0 + tl.exp(neg_two_u))


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds, other=0.0).to(tl.float32)
    y = gelu_tanh_f32(x)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=in_bounds)


def gelu(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    gelu_tanh_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
    return y
