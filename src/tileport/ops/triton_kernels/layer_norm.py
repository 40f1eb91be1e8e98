"""LayerNorm forward over the last axis with the saved statistics, Triton version.

y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps)  (biased variance, as torch).
x, y: [M, N]; w, b: [N]; mean, rstd: [M] f32 outputs; eps a runtime f32 scalar. As in
`ops/kernels/layer_norm.py`, the variance is taken over the centered row (no E[x^2] - E[x]^2
cancellation) with the padded lanes masked out of it. One program per row, the row in one
BLOCK-wide tile. Launch: grid (M,).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_cols, stride_xm, stride_ym, eps,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    in_row = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + cols, mask=in_row, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(in_row, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    y = centered * rstd * w + b
    tl.store(y_ptr + row.to(tl.int64) * stride_ym + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = 1e-5):
    """Returns (y, mean, rstd)."""
    m, n = x.shape
    y = torch.empty_like(x)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device)
    layer_norm_fwd_kernel[(m,)](x, w, b, y, mean, rstd, n, x.stride(0), y.stride(0), eps,
                                BLOCK=triton.next_power_of_2(n))
    return y, mean, rstd
