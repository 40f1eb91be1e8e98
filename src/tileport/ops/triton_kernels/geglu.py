"""GeGLU with two inputs, y = gelu_tanh(a) * b, Triton version.

Mirrors `ops/kernels/geglu.py`: flat arrays, f32 math; the gate uses
0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)), u = sqrt(2/pi) * (a + 0.044715 a^3).
Launch: grid (cdiv(n, BLOCK),).
"""

import torch
import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
GELU_CUBIC = tl.constexpr(0.044715)


@triton.jit
def geglu_kernel(a_ptr, b_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    in_bounds = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=in_bounds, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=in_bounds, other=0.0).to(tl.float32)
    neg_two_u = a * (-2.0 * SQRT_2_OVER_PI) * (1.0 + GELU_CUBIC * a * a)
    gate = a / (1.0 + tl.exp(neg_two_u))
    tl.store(y_ptr + offsets, (gate * b).to(y_ptr.dtype.element_ty), mask=in_bounds)


def geglu(a: torch.Tensor, b: torch.Tensor, block: int = 1024) -> torch.Tensor:
    y = torch.empty_like(a)
    n = a.numel()
    geglu_kernel[(triton.cdiv(n, block),)](a, b, y, n, BLOCK=block)
    return y
