"""Attention forward (prefill), o = softmax(q k^T * scale) v per (batch, query head), with logsumexp,
Triton version.

Layout as torch's scaled_dot_product_attention: q, o [B, Hq, S, D]; k, v [B, Hkv, S, D] with
Hq = Hkv * group (GQA; the kv head of query head h is h // (Hq / Hkv)); lse [B, Hq, S] f32, natural
log. The head dimension has unit stride; the other strides are arguments. Semantics of
`fmha_fwd_kernel` in `ops/kernels/attention.py` without its ragged / window / sink / softcap
variants: a `CAUSAL` constexpr switch.

One program per (BLOCK_M query rows, batch x query head). The query tile stays in registers; key and
value tiles stream through a loop carrying the online-softmax state (running max m_i, running sum
l_i, f32 accumulator acc), rescaled by exp2(m_old - m_new) when the max grows. `qk_scale` is
sm_scale * log2(e), so scores are in log2 units and exp2 is used; lse is converted back to natural
log at the end. With CAUSAL the loop stops after the diagonal tile. Key columns past the sequence
and (causal) after the query get -inf. Every query row meets key 0 in its first tile, so m_i is
finite after it. Launch: grid (cdiv(S, BLOCK_M), B * Hq).
"""

import math

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                         stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                         stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                         n_heads, n_kv_heads, seq_len, qk_scale,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                         CAUSAL: tl.constexpr):
    m_block = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    kv_h = h // (n_heads // n_kv_heads)

    q_pos = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q_rows = q_ptr + b * stride_qb + h * stride_qh
    q = tl.load(q_rows + q_pos[:, None] * stride_qs + dims[None, :], mask=q_pos[:, None] < seq_len, other=0.0)
    k_rows = k_ptr + b * stride_kb + kv_h * stride_kh
    v_rows = v_ptr + b * stride_vb + kv_h * stride_vh

    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    kv_end = seq_len
    if CAUSAL:
        kv_end = tl.minimum(seq_len, (m_block + 1) * BLOCK_M)
    for start in range(0, kv_end, BLOCK_N):
        k_pos = start + tl.arange(0, BLOCK_N)
        in_seq = k_pos < seq_len
        k_t = tl.load(k_rows + k_pos[None, :] * stride_ks + dims[:, None], mask=in_seq[None, :], other=0.0)
        s = tl.dot(q, k_t) * qk_scale
        keep = in_seq[None, :]
        if CAUSAL:
            keep = keep & (k_pos[None, :] <= q_pos[:, None])
        s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_rows + k_pos[:, None] * stride_vs + dims[None, :], mask=in_seq[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new

    out = acc / l_i[:, None]
    o_rows = o_ptr + b * stride_ob + h * stride_oh
    tl.store(o_rows + q_pos[:, None] * stride_os + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=q_pos[:, None] < seq_len)
    lse_row = lse_ptr + bh * seq_len
    tl.store(lse_row + q_pos, (m_i + tl.log2(l_i)) * LN2, mask=q_pos < seq_len)


def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  sm_scale: float | None = None, block_m: int = 128, block_n: int = 64, num_warps: int = 8,
                  num_stages: int = 2):
    """Returns (o, lse); q [B, Hq, S, D], k / v [B, Hkv, S, D], D a power of two."""
    batch, n_heads, seq_len, head_dim = q.shape
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    o = torch.empty_like(q)
    lse = torch.empty((batch, n_heads, seq_len), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(seq_len, block_m), batch * n_heads)
    attention_fwd_kernel[grid](q, k, v, o, lse,
                               q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                               v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                               n_heads, k.shape[1], seq_len, scale * 1.4426950408889634,
                               BLOCK_M=block_m, BLOCK_N=block_n, HEAD_DIM=head_dim, CAUSAL=causal,
                               num_warps=num_warps, num_stages=num_stages)
    return o, lse
