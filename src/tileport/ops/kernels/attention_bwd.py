"""Attention backward (prefill): dq, dk, dv of o = softmax(q k^T * scale) v and of its logsumexp.

Layouts as attention.py's forward: q, o, do, dq [B, Hq, S, D]; k, v, dk, dv [B, Hkv, S, D] with
Hq a multiple of Hkv (GQA); lse, dlse, delta [B, Hq, S] f32 (natural log); seq_lens [B] int32.
Padding positions (>= seq_lens[b]) take no part: their gradients are written as 0.

With p = exp(s * scale - lse) (recomputed from the forward's lse, never stored), dp = do v^T and
ds = p * (dp - delta), where delta = rowsum(do * o) - dlse (the preprocess kernel; dlse carries a
gradient of the logsumexp output, d lse / d s = p):
    dv = p^T do,  dk = ds^T q * scale,  dq = ds k * scale.
Three kernels, as FlashAttention-2: the preprocess, one over key tiles (dk, dv: each key tile's
block runs over every query tile of every query head of its kv head, so GQA needs no atomics),
one over query tiles (dq). The key-tile kernel works on transposed scores s^T = k q^T, so every
MMA takes its operands as loaded (q and do are loaded a second time transposed through the view's
`order` instead of transposing in registers). exp2 with log2(e) folded into `qk_scale`.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]

LOG2E = 1.4426950408889634


@ct.kernel(occupancy=2)
def fmha_bwd_preprocess_kernel(o, do, dlse, delta, BLOCK_M: ConstInt, HEAD_DIM: ConstInt):
    """delta = rowsum(do * o) - dlse over BLOCK_M rows per block; grid (cdiv(S, BLOCK_M), B * Hq)."""
    mb = ct.bid(0)
    bh = ct.bid(1)
    b = bh // o.shape[1]
    h = bh % o.shape[1]
    ot = ct.load(o, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                 padding_mode=ct.PaddingMode.ZERO)
    dot = ct.load(do, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                  padding_mode=ct.PaddingMode.ZERO)
    prod = ct.astype(ct.reshape(ot, (BLOCK_M, HEAD_DIM)), ct.float32) \
        * ct.astype(ct.reshape(dot, (BLOCK_M, HEAD_DIM)), ct.float32)
    g = ct.reshape(ct.load(dlse, index=(b, h, mb), shape=(1, 1, BLOCK_M),
                           padding_mode=ct.PaddingMode.ZERO), (BLOCK_M,))
    ct.store(delta, index=(b, h, mb), tile=ct.reshape(ct.sum(prod, 1) - g, (1, 1, BLOCK_M)))


def kept(q_pos, k_pos, seq_len, CAUSAL):
    """True where the (query, key) pair is inside the sequence and, if causal, not in the future."""
    keep = (k_pos < seq_len) & (q_pos < seq_len)
    if CAUSAL:
        keep = keep & (k_pos <= q_pos)
    return keep


@ct.kernel(occupancy=1, num_worker_warps=8)
def fmha_bwd_dkdv_kernel(q, k, v, do, lse, delta, seq_lens, dk, dv, qk_scale: float,
                         sm_scale: float, BLOCK_M: ConstInt, BLOCK_N: ConstInt,
                         HEAD_DIM: ConstInt, CAUSAL: ConstBool):
    """One block per (BLOCK_N keys, batch x kv head); grid (cdiv(S, BLOCK_N), B * Hkv)."""
    nb = ct.bid(0)
    bh = ct.bid(1)
    n_kv_heads = k.shape[1]
    b = bh // n_kv_heads
    kvh = bh % n_kv_heads
    group = q.shape[1] // n_kv_heads
    seq_len = ct.gather(seq_lens, b)
    k_first = nb * BLOCK_N
    k_pos = ct.reshape(k_first + ct.arange(BLOCK_N, dtype=ct.int32), (BLOCK_N, 1))

    kt = ct.reshape(ct.load(k, index=(b, kvh, nb, 0), shape=(1, 1, BLOCK_N, HEAD_DIM),
                            padding_mode=ct.PaddingMode.ZERO), (BLOCK_N, HEAD_DIM))
    vt = ct.reshape(ct.load(v, index=(b, kvh, nb, 0), shape=(1, 1, BLOCK_N, HEAD_DIM),
                            padding_mode=ct.PaddingMode.ZERO), (BLOCK_N, HEAD_DIM))

    # Query tiles [lo, hi): none for a key tile past the sequence; causal skips those before it.
    hi = ct.where(k_first < seq_len, ct.cdiv(seq_len, BLOCK_M), 0)
    lo = 0
    if CAUSAL:
        lo = k_first // BLOCK_M

    dk_acc = ct.zeros((BLOCK_N, HEAD_DIM), dtype=ct.float32)
    dv_acc = ct.zeros((BLOCK_N, HEAD_DIM), dtype=ct.float32)
    for g in range(group):
        h = kvh * group + g
        for i in range(lo, hi):
            q_pos = ct.reshape(i * BLOCK_M + ct.arange(BLOCK_M, dtype=ct.int32), (1, BLOCK_M))
            qT = ct.reshape(ct.load(q, index=(b, h, 0, i), shape=(1, 1, HEAD_DIM, BLOCK_M),
                                    order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO,
                                    latency=2), (HEAD_DIM, BLOCK_M))
            sT = ct.mma(kt, qT, ct.zeros((BLOCK_N, BLOCK_M), dtype=ct.float32))
            lse_i = ct.reshape(ct.load(lse, index=(b, h, i), shape=(1, 1, BLOCK_M),
                                       padding_mode=ct.PaddingMode.ZERO), (1, BLOCK_M))
            # padded rows have lse -inf: exp2 gives inf there, and the mask replaces it by 0
            pT = ct.where(kept(q_pos, k_pos, seq_len, CAUSAL),
                          ct.exp2(sT * qk_scale - lse_i * LOG2E, flush_to_zero=True), 0.0)
            dot = ct.reshape(ct.load(do, index=(b, h, i, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                                     padding_mode=ct.PaddingMode.ZERO, latency=2),
                             (BLOCK_M, HEAD_DIM))
            dv_acc = ct.mma(ct.astype(pT, do.dtype), dot, dv_acc)
            doT = ct.reshape(ct.load(do, index=(b, h, 0, i), shape=(1, 1, HEAD_DIM, BLOCK_M),
                                     order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO,
                                     latency=2), (HEAD_DIM, BLOCK_M))
            dpT = ct.mma(vt, doT, ct.zeros((BLOCK_N, BLOCK_M), dtype=ct.float32))
            delta_i = ct.reshape(ct.load(delta, index=(b, h, i), shape=(1, 1, BLOCK_M),
                                         padding_mode=ct.PaddingMode.ZERO), (1, BLOCK_M))
            dsT = pT * (dpT - delta_i)
            qt = ct.reshape(ct.load(q, index=(b, h, i, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                                    padding_mode=ct.PaddingMode.ZERO, latency=2),
                            (BLOCK_M, HEAD_DIM))
            dk_acc = ct.mma(ct.astype(dsT, q.dtype), qt, dk_acc)

    ct.store(dk, index=(b, kvh, nb, 0),
             tile=ct.reshape(ct.astype(dk_acc * sm_scale, dk.dtype), (1, 1, BLOCK_N, HEAD_DIM)))
    ct.store(dv, index=(b, kvh, nb, 0),
             tile=ct.reshape(ct.astype(dv_acc, dv.dtype), (1, 1, BLOCK_N, HEAD_DIM)))


@ct.kernel(occupancy=1, num_worker_warps=8)
def fmha_bwd_dq_kernel(q, k, v, do, lse, delta, seq_lens, dq, qk_scale: float, sm_scale: float,
                       BLOCK_M: ConstInt, BLOCK_N: ConstInt, HEAD_DIM: ConstInt,
                       CAUSAL: ConstBool):
    """One block per (BLOCK_M queries, batch x query head); grid (cdiv(S, BLOCK_M), B * Hq)."""
    mb = ct.bid(0)
    bh = ct.bid(1)
    n_heads = q.shape[1]
    b = bh // n_heads
    h = bh % n_heads
    kvh = h // (n_heads // k.shape[1])
    seq_len = ct.gather(seq_lens, b)
    q_first = mb * BLOCK_M
    q_pos = ct.reshape(q_first + ct.arange(BLOCK_M, dtype=ct.int32), (BLOCK_M, 1))

    qt = ct.reshape(ct.load(q, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                            padding_mode=ct.PaddingMode.ZERO), (BLOCK_M, HEAD_DIM))
    dot = ct.reshape(ct.load(do, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                             padding_mode=ct.PaddingMode.ZERO), (BLOCK_M, HEAD_DIM))
    lse_i = ct.reshape(ct.load(lse, index=(b, h, mb), shape=(1, 1, BLOCK_M),
                               padding_mode=ct.PaddingMode.ZERO), (BLOCK_M, 1)) * LOG2E
    delta_i = ct.reshape(ct.load(delta, index=(b, h, mb), shape=(1, 1, BLOCK_M),
                                 padding_mode=ct.PaddingMode.ZERO), (BLOCK_M, 1))

    kv_end = seq_len
    if CAUSAL:
        kv_end = min(kv_end, q_first + BLOCK_M)
    hi = ct.where(q_first < seq_len, ct.cdiv(kv_end, BLOCK_N), 0)

    dq_acc = ct.zeros((BLOCK_M, HEAD_DIM), dtype=ct.float32)
    for j in range(hi):
        kT = ct.reshape(ct.load(k, index=(b, kvh, 0, j), shape=(1, 1, HEAD_DIM, BLOCK_N),
                                order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO,
                                latency=2), (HEAD_DIM, BLOCK_N))
        s = ct.mma(qt, kT, ct.zeros((BLOCK_M, BLOCK_N), dtype=ct.float32))
        k_pos = ct.reshape(j * BLOCK_N + ct.arange(BLOCK_N, dtype=ct.int32), (1, BLOCK_N))
        p = ct.where(kept(q_pos, k_pos, seq_len, CAUSAL),
                     ct.exp2(s * qk_scale - lse_i, flush_to_zero=True), 0.0)
        vT = ct.reshape(ct.load(v, index=(b, kvh, 0, j), shape=(1, 1, HEAD_DIM, BLOCK_N),
                                order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO,
                                latency=2), (HEAD_DIM, BLOCK_N))
        dp = ct.mma(dot, vT, ct.zeros((BLOCK_M, BLOCK_N), dtype=ct.float32))
        ds = p * (dp - delta_i)
        kt = ct.reshape(ct.load(k, index=(b, kvh, j, 0), shape=(1, 1, BLOCK_N, HEAD_DIM),
                                padding_mode=ct.PaddingMode.ZERO, latency=2),
                        (BLOCK_N, HEAD_DIM))
        dq_acc = ct.mma(ct.astype(ds, k.dtype), kt, dq_acc)

    ct.store(dq, index=(b, h, mb, 0),
             tile=ct.reshape(ct.astype(dq_acc * sm_scale, dq.dtype), (1, 1, BLOCK_M, HEAD_DIM)))
