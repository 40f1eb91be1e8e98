"""silu_and_mul: x [M, 2N] -> y [M, N], y = silu(x[:, :N]) * x[:, N:], Triton version.

Mirrors `ops/kernels/silu_and_mul.py` (gate = first half of each row, up = second half). One program
handles BLOCK_N columns of one row: the gate and up values are two masked loads at column offsets
`cols` and `N + cols` of the row. Math in f32. Launch: grid (cdiv(N, BLOCK_N), M).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def silu_and_mul_kernel(x_ptr, y_ptr, n_cols, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    col_block = tl.program_id(0)
    row = tl.program_id(1)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    in_row = cols < n_cols
    x_row = x_ptr + row * stride_xm
    gate = tl.load(x_row + cols, mask=in_row, other=0.0).to(tl.float32)
    up = tl.load(x_row + n_cols + cols, mask=in_row, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(y_ptr + row * stride_ym + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def silu_and_mul(x: torch.Tensor, block_n: int = 1024) -> torch.Tensor:
    m, two_n = x.shape
    n = two_n // 2
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(n, block_n), m)
    silu_and_mul_kernel[grid](x, y, n, x.stride(0), y.stride(0), BLOCK_N=block_n)
    return y
