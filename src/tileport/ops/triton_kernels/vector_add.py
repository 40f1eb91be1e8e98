"""Element-wise vector addition c = a + b over 1-D arrays (f32 / f16 / bf16), Triton version.

Same semantics as the cuTile kernel `ops/kernels/vector_add.py`: one program adds one BLOCK-sized
slice; the ragged last slice is handled by a bounds mask (masked lanes load 0 and are not stored).
Launch: grid (cdiv(n, BLOCK),).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def vector_add_kernel(a_ptr, b_ptr, c_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    in_bounds = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=in_bounds, other=0.0)
    b = tl.load(b_ptr + offsets, mask=in_bounds, other=0.0)
    tl.store(c_ptr + offsets, a + b, mask=in_bounds)


def vector_add(a: torch.Tensor, b: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """c = a + b for same-shaped contiguous tensors (treated as flat arrays)."""
    c = torch.empty_like(a)
    n = a.numel()
    vector_add_kernel[(triton.cdiv(n, block),)](a, b, c, n, BLOCK=block)
    return c
