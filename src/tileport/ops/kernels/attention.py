"""Attention forward (prefill): o = softmax(q k^T * scale) v per (batch, query head), with logsumexp.

Layout (as torch's scaled_dot_product_attention): q, o [B, Hq, S, D]; k, v [B, Hkv, S, D] with
Hq = Hkv * QUERY_GROUP (GQA, the group read from the shapes; MQA is Hkv = 1); lse [B, Hq, S] f32 (natural log); seq_lens [B] int32,
the valid length of each sequence (ragged batches in a padded layout: positions >= seq_lens[b] are
padding, their keys are masked out and their outputs are written as 0, their lse as -inf).

- One tile block per (BLOCK_M query rows, batch x query head); grid = (cdiv(S, BLOCK_M), B * Hq).
  The query tile stays in registers; the key/value tiles stream through a loop with the online
  softmax state (running max m, running sum l, f32 accumulator acc) carried by the loop.
- exp2 instead of exp: the runtime scalar `qk_scale` is sm_scale * log2(e), so the scores come out
  in log2 units with a single multiply; lse is converted back to natural log once at the end.
- Masks are one `where(keep, s, -inf)` per key tile (key bound `seq_len`, causal diagonal,
  window); the loop bounds skip the tiles that are entirely masked (past the diagonal, before the
  window, past the sequence), and a query tile past its sequence runs no key tile. (Splitting the
  loop into unmasked interior tiles and masked edge tiles is a possible speed-up, not done.)
- Variants are `ct.Constant` switches of the same kernels, so each one is specialized at compile
  time (no runtime branches): CAUSAL, SLIDING (a window of `window` keys ending at the query, a
  runtime int; implies causal), HAS_SINKS (per-head sink logits `sinks` [Hq] f32, added to the softmax
  denominator only, as in gpt-oss), SOFTCAP (Gemma-style cap * tanh(s / cap) on the scaled logits;
  `softcap` is the runtime cap; then `qk_scale` is sm_scale / cap and the kernel multiplies the
  tanh by cap * log2(e) itself).
- Loads are TMA-friendly view loads of 4-D partition views: (1, 1, BLOCK_N, D) tiles of k and v;
  k is loaded transposed through the view's `order`, so the S = q k^T MMA needs no transpose.
- Decode (flash_decode_partial_kernel + flash_decode_combine_kernel), MLA decode
  (mla_decode_partial_kernel) and MLA prefill (mla_prefill_kernel) follow below; see
  docs/corpus.md for the design notes.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# Latency hint of fmha_fwd_kernel's K and V tile loads (how far ahead tileiras pipelines them).
PREFILL_KV_LATENCY = 2
# The same for flash_decode_partial_kernel's K and V tiles.
DECODE_KV_LATENCY = 4


def masked_scores(s, q_pos, k_pos, seq_len, window, CAUSAL, SLIDING):
    """-inf where the key is past the sequence, after the query (causal) or out of its window."""
    keep = k_pos < seq_len
    if CAUSAL:
        keep = keep & (k_pos <= q_pos)
    if SLIDING:
        keep = keep & (q_pos - k_pos < window)
    return ct.where(keep, s, -float("inf"))


def scaled_scores(s, qk_scale, softcap, SOFTCAP):
    """Scores in log2 units: s * scale * log2(e), or cap * log2(e) * tanh(s * scale / cap)."""
    if SOFTCAP:
        s = ct.tanh(s * qk_scale) * (softcap * LOG2E)
    else:
        s = s * qk_scale
    return s


def softmax_step(s, vt, m_i, l_i, acc, SLIDING):
    """One online-softmax step over a score tile s (log2 units): new running max, rescaled sum and
    accumulator. With a sliding window a row can meet a tile with no key of its window before any
    other; its max stays -inf, and the reference point 0 keeps exp2 from seeing -inf - -inf."""
    m_new = ct.maximum(m_i, ct.max(s, 1, keepdims=True))
    m_ref = m_new
    if SLIDING:
        m_ref = ct.where(m_new == -float("inf"), 0.0, m_new)
    p = ct.exp2(s - m_ref, flush_to_zero=True)
    alpha = ct.exp2(m_i - m_ref, flush_to_zero=True)
    l_i = l_i * alpha + ct.sum(p, 1, keepdims=True)
    acc = ct.mma(ct.astype(p, vt.dtype), vt, acc * alpha)
    return m_new, l_i, acc


def add_sink(sink, m_i, l_i, acc):
    """Adds a sink logit (log2 units; -inf = none) to the denominator only."""
    m_new = ct.maximum(m_i, sink)
    m_ref = ct.where(m_new == -float("inf"), 0.0, m_new)
    alpha = ct.exp2(m_i - m_ref, flush_to_zero=True)
    l_i = l_i * alpha + ct.exp2(sink - m_ref, flush_to_zero=True)
    return m_new, l_i, acc * alpha


@ct.kernel(occupancy=1, num_worker_warps=8)
def fmha_fwd_kernel(q, k, v, o, lse, seq_lens, sinks, qk_scale: float, softcap: float,
                    window: int, BLOCK_M: ConstInt, BLOCK_N: ConstInt, HEAD_DIM: ConstInt,
                    CAUSAL: ConstBool, SLIDING: ConstBool, HAS_SINKS: ConstBool,
                    SOFTCAP: ConstBool):
    mb = ct.bid(0)
    bh = ct.bid(1)
    n_heads = q.shape[1]
    b = bh // n_heads
    h = bh % n_heads
    kvh = h // (n_heads // k.shape[1])  # GQA: QUERY_GROUP = Hq / Hkv query heads per kv head
    seq_len = ct.gather(seq_lens, b)
    q_first = mb * BLOCK_M

    q_pos = ct.reshape(q_first + ct.arange(BLOCK_M, dtype=ct.int32), (BLOCK_M, 1))
    qt = ct.load(q, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, HEAD_DIM),
                 padding_mode=ct.PaddingMode.ZERO)
    qt = ct.reshape(qt, (BLOCK_M, HEAD_DIM))

    # Key tiles [lo, hi): past the sequence, past the causal diagonal and before the window are
    # skipped; a query tile entirely past the sequence gets no key tile at all.
    kv_end = seq_len
    if CAUSAL:
        kv_end = min(kv_end, q_first + BLOCK_M)
    hi = ct.where(q_first < seq_len, ct.cdiv(kv_end, BLOCK_N), 0)
    lo = 0
    if SLIDING:
        lo = max(q_first - window + 1, 0) // BLOCK_N

    m_i = ct.full((BLOCK_M, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.zeros((BLOCK_M, 1), dtype=ct.float32)
    acc = ct.zeros((BLOCK_M, HEAD_DIM), dtype=ct.float32)
    for j in range(lo, hi):
        kt = ct.load(k, index=(b, kvh, 0, j), shape=(1, 1, HEAD_DIM, BLOCK_N), order=(0, 1, 3, 2),
                     padding_mode=ct.PaddingMode.ZERO, latency=PREFILL_KV_LATENCY)
        kt = ct.reshape(kt, (HEAD_DIM, BLOCK_N))
        s = ct.mma(qt, kt, ct.zeros((BLOCK_M, BLOCK_N), dtype=ct.float32))
        s = scaled_scores(s, qk_scale, softcap, SOFTCAP)
        k_pos = ct.reshape(j * BLOCK_N + ct.arange(BLOCK_N, dtype=ct.int32), (1, BLOCK_N))
        s = masked_scores(s, q_pos, k_pos, seq_len, window, CAUSAL, SLIDING)
        vt = ct.load(v, index=(b, kvh, j, 0), shape=(1, 1, BLOCK_N, HEAD_DIM),
                     padding_mode=ct.PaddingMode.ZERO, latency=PREFILL_KV_LATENCY)
        vt = ct.reshape(vt, (BLOCK_N, HEAD_DIM))
        m_i, l_i, acc = softmax_step(s, vt, m_i, l_i, acc, SLIDING)

    if HAS_SINKS:
        m_i, l_i, acc = add_sink(ct.gather(sinks, h) * LOG2E, m_i, l_i, acc)

    valid = q_pos < seq_len
    out = ct.where(valid, ct.truediv(acc, l_i, rounding_mode=ct.RoundingMode.APPROX,
                                     flush_to_zero=True), 0.0)
    ct.store(o, index=(b, h, mb, 0), tile=ct.reshape(ct.astype(out, o.dtype),
                                                     (1, 1, BLOCK_M, HEAD_DIM)))
    row_lse = ct.where(valid, (m_i + ct.log2(l_i)) * LN2, -float("inf"))
    ct.store(lse, index=(b, h, mb), tile=ct.reshape(row_lse, (1, 1, BLOCK_M)))


# Decode: a few query tokens per sequence against a long KV cache, split over the cache length.
#
# q [B, Hkv, QUERY_GROUP, D] (the free view of [B, Hq, D]); k, v either a contiguous cache
# [B, Hkv, S, D] or, when PAGED, a page pool [P, Hkv, BLOCK_N, D] addressed through
# block_table [B, max_pages] int32 (one key tile = one page); kv_lens [B] int32 (>= 1).
# Partials o_part [B, Hkv, QUERY_GROUP, n_splits, D] f32 and lse_part [.., n_splits] f32 are the
# free views of [B, Hq, n_splits, (D)] that the combine kernel reads.


@ct.kernel(occupancy=2)
def flash_decode_partial_kernel(q, k, v, block_table, kv_lens, sinks, o_part, lse_part,
                                qk_scale: float, softcap: float, window: int,
                                tiles_per_split: int, GROUP_TILE: ConstInt, BLOCK_N: ConstInt,
                                HEAD_DIM: ConstInt, PAGED: ConstBool, SLIDING: ConstBool,
                                HAS_SINKS: ConstBool, SOFTCAP: ConstBool, FINAL: ConstBool):
    """One block per (split, batch x kv head): all QUERY_GROUP query heads of the kv head share
    each key/value tile (GROUP_TILE >= QUERY_GROUP rows of one MMA; padded rows are zeros and
    their stores are dropped). Writes the split's normalized output and its lse (log2 units).
    FINAL (a plan of one split): o_part and lse_part are the op's o and lse, so the output is
    stored in o's dtype and the lse in natural-log units, and no combine kernel runs."""
    split = ct.bid(0)
    bh = ct.bid(1)
    n_kv_heads = q.shape[1]
    b = bh // n_kv_heads
    kvh = bh % n_kv_heads
    kv_len = ct.gather(kv_lens, b)
    q_pos = kv_len - 1  # the query is the last position of the sequence

    qt = ct.load(q, index=(b, kvh, 0, 0), shape=(1, 1, GROUP_TILE, HEAD_DIM),
                 padding_mode=ct.PaddingMode.ZERO)
    qt = ct.reshape(qt, (GROUP_TILE, HEAD_DIM))

    lo = split * tiles_per_split
    hi = min(lo + tiles_per_split, ct.cdiv(kv_len, BLOCK_N))
    if SLIDING:
        lo = max(lo, max(q_pos - window + 1, 0) // BLOCK_N)

    m_i = ct.full((GROUP_TILE, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.zeros((GROUP_TILE, 1), dtype=ct.float32)
    acc = ct.zeros((GROUP_TILE, HEAD_DIM), dtype=ct.float32)
    for j in range(lo, hi):
        if PAGED:
            page = ct.gather(block_table, (b, j))
            kt = ct.load(k, index=(page, kvh, 0, 0), shape=(1, 1, HEAD_DIM, BLOCK_N),
                         order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO, latency=DECODE_KV_LATENCY)
            vt = ct.load(v, index=(page, kvh, 0, 0), shape=(1, 1, BLOCK_N, HEAD_DIM),
                         padding_mode=ct.PaddingMode.ZERO, latency=DECODE_KV_LATENCY)
        else:
            kt = ct.load(k, index=(b, kvh, 0, j), shape=(1, 1, HEAD_DIM, BLOCK_N),
                         order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO, latency=DECODE_KV_LATENCY)
            vt = ct.load(v, index=(b, kvh, j, 0), shape=(1, 1, BLOCK_N, HEAD_DIM),
                         padding_mode=ct.PaddingMode.ZERO, latency=DECODE_KV_LATENCY)
        kt = ct.reshape(kt, (HEAD_DIM, BLOCK_N))
        vt = ct.reshape(vt, (BLOCK_N, HEAD_DIM))
        s = ct.mma(qt, kt, ct.zeros((GROUP_TILE, BLOCK_N), dtype=ct.float32))
        s = scaled_scores(s, qk_scale, softcap, SOFTCAP)
        k_pos = ct.reshape(j * BLOCK_N + ct.arange(BLOCK_N, dtype=ct.int32), (1, BLOCK_N))
        s = masked_scores(s, q_pos, k_pos, kv_len, window, False, SLIDING)
        m_i, l_i, acc = softmax_step(s, vt, m_i, l_i, acc, SLIDING)

    if HAS_SINKS:
        # The sink joins the denominator once, in split 0 (the combine adds up the splits' sums).
        rows = ct.arange(GROUP_TILE, dtype=ct.int32)
        group = sinks.shape[0] // n_kv_heads
        sink = ct.gather(sinks, kvh * group + rows, mask=(rows < group) & (split == 0),
                         padding_value=-float("inf"))
        m_i, l_i, acc = add_sink(ct.reshape(sink * LOG2E, (GROUP_TILE, 1)), m_i, l_i, acc)

    # An empty split (past the cache, or before the window) leaves l = 0: output 0, lse -inf.
    nonempty = l_i > 0.0
    out = ct.where(nonempty, ct.truediv(acc, l_i, rounding_mode=ct.RoundingMode.APPROX,
                                        flush_to_zero=True), 0.0)
    ct.store(o_part, index=(b, kvh, 0, split, 0),
             tile=ct.reshape(ct.astype(out, o_part.dtype), (1, 1, GROUP_TILE, 1, HEAD_DIM)))
    part_lse = ct.where(nonempty, m_i + ct.log2(l_i), -float("inf"))
    if FINAL:
        part_lse = part_lse * LN2
    ct.store(lse_part, index=(b, kvh, 0, split), tile=ct.reshape(part_lse, (1, 1, GROUP_TILE, 1)))


@ct.kernel(occupancy=4)
def flash_decode_combine_kernel(o_part, lse_part, o, lse, n_splits: int, HEAD_DIM: ConstInt):
    """One block per (batch, query head): merges the split partials (o_part [B, Hq, n_splits, D],
    lse_part [B, Hq, n_splits] in log2 units) with a running max, writes o [B, Hq, D] and the
    natural-log lse [B, Hq]."""
    b = ct.bid(0)
    h = ct.bid(1)
    m_i = ct.full((1, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.zeros((1, 1), dtype=ct.float32)
    acc = ct.zeros((1, HEAD_DIM), dtype=ct.float32)
    for s in range(n_splits):
        part_lse = ct.reshape(ct.load(lse_part, index=(b, h, s), shape=(1, 1, 1)), (1, 1))
        part = ct.reshape(ct.load(o_part, index=(b, h, s, 0), shape=(1, 1, 1, HEAD_DIM)),
                          (1, HEAD_DIM))
        m_new = ct.maximum(m_i, part_lse)
        alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
        w = ct.exp2(part_lse - m_new, flush_to_zero=True)
        l_i = l_i * alpha + w
        acc = acc * alpha + part * w
        m_i = m_new
    out = ct.truediv(acc, l_i, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    ct.store(o, index=(b, h, 0), tile=ct.reshape(ct.astype(out, o.dtype), (1, 1, HEAD_DIM)))
    ct.store(lse, index=(b, h), tile=ct.reshape((m_i + ct.log2(l_i)) * LN2, (1, 1)))


@ct.kernel(occupancy=1)
def mla_decode_partial_kernel(q_nope, q_pe, ckv, kpe, kv_lens, o_part, lse_part, qk_scale: float,
                              tiles_per_split: int, HEAD_TILE: ConstInt, BLOCK_N: ConstInt,
                              LORA: ConstInt, ROPE: ConstInt):
    """MLA decode (DeepSeek, absorbed): every query head attends to one shared latent cache.

    q_nope [B, H, LORA] (the no-rope query already multiplied into the latent space), q_pe
    [B, H, ROPE]; ckv [B, S, LORA] the compressed KV, kpe [B, S, ROPE] the rope keys; scores are
    q_nope . ckv + q_pe . kpe and values are ckv itself. One block per (split, batch x HEAD_TILE
    heads): the heads are the rows of the MMAs, and each latent tile serves as key (loaded a second
    time, transposed through the view's `order`: transposing the loaded tile in registers spilled
    952 B of stack per thread on sm_90) and as value. Partials as flash_decode's: o_part [B, H, n_splits, LORA], lse_part
    [B, H, n_splits] (log2 units), combined by flash_decode_combine_kernel."""
    split = ct.bid(0)
    bh = ct.bid(1)
    n_head_blocks = ct.cdiv(q_nope.shape[1], HEAD_TILE)
    b = bh // n_head_blocks
    hb = bh % n_head_blocks
    kv_len = ct.gather(kv_lens, b)

    qn = ct.reshape(ct.load(q_nope, index=(b, hb, 0), shape=(1, HEAD_TILE, LORA),
                            padding_mode=ct.PaddingMode.ZERO), (HEAD_TILE, LORA))
    qp = ct.reshape(ct.load(q_pe, index=(b, hb, 0), shape=(1, HEAD_TILE, ROPE),
                            padding_mode=ct.PaddingMode.ZERO), (HEAD_TILE, ROPE))
    lo = split * tiles_per_split
    hi = min(lo + tiles_per_split, ct.cdiv(kv_len, BLOCK_N))

    m_i = ct.full((HEAD_TILE, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.zeros((HEAD_TILE, 1), dtype=ct.float32)
    acc = ct.zeros((HEAD_TILE, LORA), dtype=ct.float32)
    for j in range(lo, hi):
        cT = ct.reshape(ct.load(ckv, index=(b, 0, j), shape=(1, LORA, BLOCK_N), order=(0, 2, 1),
                                padding_mode=ct.PaddingMode.ZERO, latency=4), (LORA, BLOCK_N))
        kp = ct.load(kpe, index=(b, 0, j), shape=(1, ROPE, BLOCK_N), order=(0, 2, 1),
                     padding_mode=ct.PaddingMode.ZERO, latency=4)
        s = ct.mma(qn, cT, ct.zeros((HEAD_TILE, BLOCK_N), dtype=ct.float32))
        s = ct.mma(qp, ct.reshape(kp, (ROPE, BLOCK_N)), s) * qk_scale
        c = ct.reshape(ct.load(ckv, index=(b, j, 0), shape=(1, BLOCK_N, LORA),
                               padding_mode=ct.PaddingMode.ZERO, latency=4), (BLOCK_N, LORA))
        k_pos = ct.reshape(j * BLOCK_N + ct.arange(BLOCK_N, dtype=ct.int32), (1, BLOCK_N))
        s = ct.where(k_pos < kv_len, s, -float("inf"))
        m_i, l_i, acc = softmax_step(s, c, m_i, l_i, acc, False)

    nonempty = l_i > 0.0
    out = ct.where(nonempty, ct.truediv(acc, l_i, rounding_mode=ct.RoundingMode.APPROX,
                                        flush_to_zero=True), 0.0)
    ct.store(o_part, index=(b, hb, split, 0), tile=ct.reshape(out, (1, HEAD_TILE, 1, LORA)))
    part_lse = ct.where(nonempty, m_i + ct.log2(l_i), -float("inf"))
    ct.store(lse_part, index=(b, hb, split), tile=ct.reshape(part_lse, (1, HEAD_TILE, 1)))


@ct.kernel(occupancy=1, num_worker_warps=8)
def mla_prefill_kernel(q_nope, q_pe, ckv, kpe, seq_lens, o, lse, qk_scale: float,
                       BLOCK_M: ConstInt, BLOCK_N: ConstInt, LORA: ConstInt, ROPE: ConstInt):
    """MLA prefill (DeepSeek, absorbed), causal: every query head attends to the shared latent
    cache, as mla_decode_partial_kernel but with BLOCK_M query positions of one head per block.

    q_nope [B, H, S, LORA] (absorbed), q_pe [B, H, S, ROPE]; ckv [B, S, LORA], kpe [B, S, ROPE];
    o [B, H, S, LORA] (latent), lse [B, H, S] f32 (natural log); seq_lens [B] int32 (ragged:
    padding rows get 0 and -inf). Grid (cdiv(S, BLOCK_M), B * H). The latent tile is loaded
    twice, transposed through the view's `order` as the key and as loaded as the value, so no
    MMA operand is transposed in registers."""
    mb = ct.bid(0)
    bh = ct.bid(1)
    n_heads = q_nope.shape[1]
    b = bh // n_heads
    h = bh % n_heads
    seq_len = ct.gather(seq_lens, b)
    q_first = mb * BLOCK_M
    q_pos = ct.reshape(q_first + ct.arange(BLOCK_M, dtype=ct.int32), (BLOCK_M, 1))

    qn = ct.reshape(ct.load(q_nope, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, LORA),
                            padding_mode=ct.PaddingMode.ZERO), (BLOCK_M, LORA))
    qp = ct.reshape(ct.load(q_pe, index=(b, h, mb, 0), shape=(1, 1, BLOCK_M, ROPE),
                            padding_mode=ct.PaddingMode.ZERO), (BLOCK_M, ROPE))
    hi = ct.where(q_first < seq_len, ct.cdiv(min(seq_len, q_first + BLOCK_M), BLOCK_N), 0)

    m_i = ct.full((BLOCK_M, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.zeros((BLOCK_M, 1), dtype=ct.float32)
    acc = ct.zeros((BLOCK_M, LORA), dtype=ct.float32)
    for j in range(hi):
        cT = ct.reshape(ct.load(ckv, index=(b, 0, j), shape=(1, LORA, BLOCK_N), order=(0, 2, 1),
                                padding_mode=ct.PaddingMode.ZERO, latency=2), (LORA, BLOCK_N))
        kpT = ct.reshape(ct.load(kpe, index=(b, 0, j), shape=(1, ROPE, BLOCK_N), order=(0, 2, 1),
                                 padding_mode=ct.PaddingMode.ZERO, latency=2), (ROPE, BLOCK_N))
        s = ct.mma(qn, cT, ct.zeros((BLOCK_M, BLOCK_N), dtype=ct.float32))
        s = ct.mma(qp, kpT, s) * qk_scale
        k_pos = ct.reshape(j * BLOCK_N + ct.arange(BLOCK_N, dtype=ct.int32), (1, BLOCK_N))
        s = masked_scores(s, q_pos, k_pos, seq_len, 0, True, False)
        c = ct.reshape(ct.load(ckv, index=(b, j, 0), shape=(1, BLOCK_N, LORA),
                               padding_mode=ct.PaddingMode.ZERO, latency=2), (BLOCK_N, LORA))
        m_i, l_i, acc = softmax_step(s, c, m_i, l_i, acc, False)

    valid = q_pos < seq_len
    out = ct.where(valid, ct.truediv(acc, l_i, rounding_mode=ct.RoundingMode.APPROX,
                                     flush_to_zero=True), 0.0)
    ct.store(o, index=(b, h, mb, 0), tile=ct.reshape(ct.astype(out, o.dtype),
                                                     (1, 1, BLOCK_M, LORA)))
    row_lse = ct.where(valid, (m_i + ct.log2(l_i)) * LN2, -float("inf"))
    ct.store(lse, index=(b, h, mb), tile=ct.reshape(row_lse, (1, 1, BLOCK_M)))
