"""Flash decode: one query token per sequence against a long KV cache, split over the cache length
(a partial kernel per split, then a combine kernel), Triton version.

q [B, Hq, D]; k, v [B, Hkv, S, D] (head dimension unit stride, other strides as arguments, GQA with
the kv head h // (Hq / Hkv)); kv_lens [B] int32, the valid cache length of each sequence (>= 1).
Partials: o_part [B, Hq, n_splits, D] f32 (each split's normalized output) and lse_part
[B, Hq, n_splits] f32 (log2 units), contiguous. Output o [B, Hq, D], lse [B, Hq] f32 (natural log).
Semantics of the non-paged `flash_decode_partial_kernel` / `flash_decode_combine_kernel` in
`ops/kernels/attention.py` without window, sinks and softcap, one query head per program.

Partial: program (split, batch x query head) walks the keys [split * keys_per_split, ...) of its
split in BLOCK_N tiles with the online softmax; scores are q . k (an element-wise product summed
over D: one query row needs no MMA). A split past the cache end leaves l = 0 and writes o = 0,
lse = -inf. Combine: program (batch x query head) loads all split lse values at once (BLOCK_SPLITS
lanes, -inf padding), weights each split by exp2(lse - max) and normalizes.
Launch: partial grid (n_splits, B * Hq), combine grid (B * Hq,).
"""

import math

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def flash_decode_partial_kernel(q_ptr, k_ptr, v_ptr, kv_lens_ptr, o_part_ptr, lse_part_ptr,
                                stride_qb, stride_qh, stride_kb, stride_kh, stride_ks,
                                stride_vb, stride_vh, stride_vs, n_heads, n_kv_heads, n_splits,
                                keys_per_split, qk_scale, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    split = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    kv_h = h // (n_heads // n_kv_heads)
    kv_len = tl.load(kv_lens_ptr + b)
    dims = tl.arange(0, HEAD_DIM)

    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + dims).to(tl.float32)
    k_rows = k_ptr + b * stride_kb + kv_h * stride_kh
    v_rows = v_ptr + b * stride_vb + kv_h * stride_vh
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, kv_len)

    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros((HEAD_DIM,), dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        k_pos = start + tl.arange(0, BLOCK_N)
        in_split = k_pos < hi
        k = tl.load(k_rows + k_pos[:, None] * stride_ks + dims[None, :], mask=in_split[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * qk_scale
        s = tl.where(in_split, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        p = tl.exp2(s - m_new)
        alpha = tl.exp2(m_i - m_new)
        v = tl.load(v_rows + k_pos[:, None] * stride_vs + dims[None, :], mask=in_split[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new

    nonempty = l_i > 0.0
    part = bh * n_splits + split
    tl.store(o_part_ptr + part * HEAD_DIM + dims, tl.where(nonempty, acc / l_i, 0.0))
    tl.store(lse_part_ptr + part, tl.where(nonempty, m_i + tl.log2(l_i), -float("inf")))


@triton.jit
def flash_decode_combine_kernel(o_part_ptr, lse_part_ptr, o_ptr, lse_ptr, n_splits,
                                HEAD_DIM: tl.constexpr, BLOCK_SPLITS: tl.constexpr):
    bh = tl.program_id(0)
    splits = tl.arange(0, BLOCK_SPLITS)
    dims = tl.arange(0, HEAD_DIM)
    part_lse = tl.load(lse_part_ptr + bh * n_splits + splits, mask=splits < n_splits, other=-float("inf"))
    m = tl.max(part_lse, axis=0)
    weights = tl.exp2(part_lse - m)
    parts = tl.load(o_part_ptr + (bh * n_splits + splits[:, None]) * HEAD_DIM + dims[None, :],
                    mask=splits[:, None] < n_splits, other=0.0)
    total = tl.sum(weights, axis=0)
    out = tl.sum(weights[:, None] * parts, axis=0) / total
    tl.store(o_ptr + bh * HEAD_DIM + dims, out.to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + bh, (m + tl.log2(total)) * LN2)


def flash_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_lens: torch.Tensor, n_splits: int = 16,
                 sm_scale: float | None = None, block_n: int = 64):
    """Returns (o, lse); q [B, Hq, D] contiguous, k / v [B, Hkv, S, D], kv_lens [B] int32."""
    batch, n_heads, head_dim = q.shape
    seq = k.shape[2]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    keys_per_split = triton.cdiv(triton.cdiv(seq, n_splits), block_n) * block_n
    o_part = torch.empty((batch, n_heads, n_splits, head_dim), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((batch, n_heads, n_splits), dtype=torch.float32, device=q.device)
    flash_decode_partial_kernel[(n_splits, batch * n_heads)](
        q, k, v, kv_lens, o_part, lse_part, q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), n_heads, k.shape[1], n_splits, keys_per_split,
        scale * 1.4426950408889634, BLOCK_N=block_n, HEAD_DIM=head_dim)
    o = torch.empty_like(q)
    lse = torch.empty((batch, n_heads), dtype=torch.float32, device=q.device)
    flash_decode_combine_kernel[(batch * n_heads,)](o_part, lse_part, o, lse, n_splits, HEAD_DIM=head_dim,
                                                    BLOCK_SPLITS=triton.next_power_of_2(n_splits))
    return o, lse
