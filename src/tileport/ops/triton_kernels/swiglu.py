"""SwiGLU with two inputs, y = silu(a) * b with silu(a) = a / (1 + exp(-a)), Triton version.

Mirrors `ops/kernels/swiglu.py`: a, b, y share one shape and are processed as flat arrays; math in
f32, result cast to the output dtype. Launch: grid (cdiv(n, BLOCK),).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(a_ptr, b_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    in_bounds = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=in_bounds, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=in_bounds, other=0.0).to(tl.float32)
    silu_a = a / (1.0 + tl.exp(-a))
    tl.store(y_ptr + offsets, (silu_a * b).to(y_ptr.dtype.element_ty), mask=in_bounds)


def swiglu(a: torch.Tensor, b: torch.Tensor, block: int = 1024) -> torch.Tensor:
    y = torch.empty_like(a)
    n = a.numel()
    swiglu_kernel[(triton.cdiv(n, block),)](a, b, y, n, BLOCK=block)
    return y
