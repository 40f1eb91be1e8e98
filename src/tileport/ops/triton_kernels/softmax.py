"""Row softmax over the last axis of a 2-D tensor, y = softmax(x, dim=-1), Triton version.

One program per row; the whole row is one BLOCK-wide tile (BLOCK = next power of two >= n_cols).
Columns past the row end load -inf, which exp() turns into 0, so they drop out of the max and the
sum. Math in f32 with the row max subtracted before the exponential, as `ops/kernels/softmax.py`.
Launch: grid (M,).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_xm, stride_ym, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    in_row = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols, mask=in_row, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * stride_ym + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y
