"""ReLU, y = max(x, 0), over a flat view of a contiguous tensor (f32 / f16 / bf16), Triton version.

Mirrors `ops/kernels/relu.py`: ReLU is exact in every dtype, so it is computed in the input dtype.
Launch: grid (cdiv(n, BLOCK),).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds, other=0.0)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=in_bounds)


def relu(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
    return y
