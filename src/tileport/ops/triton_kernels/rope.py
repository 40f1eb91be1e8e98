"""Rotary position embedding (rotate-half / GPT-NeoX convention), out of place, Triton version.

x, y [batch, seq, heads, head_dim] (head_dim unit stride); cos, sin [seq, head_dim / 2] f32 tables.
With x1 = x[..., :D/2], x2 = x[..., D/2:]:  y1 = x1 * cos - x2 * sin,  y2 = x2 * cos + x1 * sin
(the semantics of `ops/kernels/rope.py`). One program per (position, batch) rotates all heads of
that position: a (BLOCK_H, BLOCK_HALF) tile of each half, the cos/sin row broadcast over heads.
Math in f32. Launch: grid (seq, batch).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, n_heads, half_dim,
                stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh, stride_cs,
                BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    pos = tl.program_id(0)
    batch = tl.program_id(1)
    heads = tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (heads < n_heads) & (cols < half_dim)
    c = tl.load(cos_ptr + pos * stride_cs + cols, mask=cols < half_dim, other=0.0)
    s = tl.load(sin_ptr + pos * stride_cs + cols, mask=cols < half_dim, other=0.0)
    x_base = x_ptr + batch * stride_xb + pos * stride_xs + heads * stride_xh + cols
    x1 = tl.load(x_base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_base + half_dim, mask=mask, other=0.0).to(tl.float32)
    y_base = y_ptr + batch * stride_yb + pos * stride_ys + heads * stride_yh + cols
    tl.store(y_base, (x1 * c - x2 * s).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_base + half_dim, (x2 * c + x1 * s).to(y_ptr.dtype.element_ty), mask=mask)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    b, s, h, d = x.shape
    y = torch.empty_like(x)
    rope_kernel[(s, b)](x, cos, sin, y, h, d // 2,
                        x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2), cos.stride(0),
                        BLOCK_H=triton.next_power_of_2(h), BLOCK_HALF=triton.next_power_of_2(d // 2))
    return y
