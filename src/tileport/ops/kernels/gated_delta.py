"""Gated delta rule, recurrent form: per (batch, head) an f32 state S [Dk, Dv] and for each token t

    S = exp(g_t) * S
    S = S + k_t (beta_t * (v_t - k_t^T S))      (the delta rule: k_t's row of S moved towards v_t)
    o_t = scale * q_t^T S

q, k [B, T, H, Dk] and v, o [B, T, H, Dv] in the input dtype; g (log decay) and beta [B, T, H] f32;
state (in) and new_state (out) [B, H, Dk, Dv] f32. T = 1 is a decode step. gated_delta_chunk_kernel
computes the same CHUNK tokens at a time with MMAs (its docstring), with 8 worker warps: its f32 MMA
operands take registers that 4 warps do not have.

One block per (Dv tile, head, batch): the columns of S are independent, so a block keeps its
(BLOCK_K, BLOCK_V) slice of the state in f32 registers across the token loop and writes it once.
BLOCK_K = next power of two >= Dk; padded rows of k and q are zero (they neither read nor change
S), padded columns of v are zero and never stored.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def token_column(a, b, t, h, BLOCK):
    """a[b, t, h, :] as a zero-padded f32 (BLOCK, 1) column."""
    x = ct.load(a, index=(b, t, h, 0), shape=(1, 1, 1, BLOCK), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(ct.astype(x, ct.float32), (BLOCK, 1))


def token_scalar(a, b, t, h):
    """a[b, t, h] as an f32 (1, 1) tile."""
    return ct.reshape(ct.load(a, index=(b, t, h), shape=(1, 1, 1)), (1, 1))


@ct.kernel
def gated_delta_rule_kernel(q, k, v, g, beta, state, o, new_state, scale, BLOCK_K: ConstInt, BLOCK_V: ConstInt):
    vb = ct.bid(0)
    h = ct.bid(1)
    b = ct.bid(2)
    s = ct.load(state, index=(b, h, 0, vb), shape=(1, 1, BLOCK_K, BLOCK_V), padding_mode=ct.PaddingMode.ZERO)
    s = ct.reshape(s, (BLOCK_K, BLOCK_V))
    for t in range(q.shape[1]):
        kt = token_column(k, b, t, h, BLOCK_K)
        vt = ct.load(v, index=(b, t, h, vb), shape=(1, 1, 1, BLOCK_V), padding_mode=ct.PaddingMode.ZERO)
        vt = ct.reshape(ct.astype(vt, ct.float32), (1, BLOCK_V))
        s = s * ct.exp(token_scalar(g, b, t, h))
        delta = (vt - ct.sum(s * kt, 0, keepdims=True)) * token_scalar(beta, b, t, h)
        s = s + kt * delta
        ot = ct.sum(s * token_column(q, b, t, h, BLOCK_K), 0, keepdims=True) * scale
        ct.store(o, index=(b, t, h, vb), tile=ct.reshape(ct.astype(ot, o.dtype), (1, 1, 1, BLOCK_V)))
    ct.store(new_state, index=(b, h, 0, vb), tile=ct.reshape(s, (1, 1, BLOCK_K, BLOCK_V)))


def chunk_rows(a, b, c, h, col, CHUNK, BLOCK):
    """a[b, c * CHUNK : (c + 1) * CHUNK, h, col * BLOCK : (col + 1) * BLOCK] as a zero-padded f32 (CHUNK, BLOCK)
    tile."""
    x = ct.load(a, index=(b, c, h, col), shape=(1, CHUNK, 1, BLOCK), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(ct.astype(x, ct.float32), (CHUNK, BLOCK))


def chunk_column(a, b, c, h, CHUNK):
    """a[b, c * CHUNK : (c + 1) * CHUNK, h] as a zero-padded f32 (CHUNK, 1) column."""
    x = ct.load(a, index=(b, c, h), shape=(1, CHUNK, 1), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(x, (CHUNK, 1))


def unit_lower_inverse(lower, eye, zero, LOG2_CHUNK):
    """(I + L)^-1 of a strictly lower triangular (CHUNK, CHUNK) L: L is nilpotent (L^CHUNK = 0), so the inverse
    is sum_i (-L)^i = prod_k (I + (-L)^(2^k)), k < log2(CHUNK): LOG2_CHUNK - 1 squarings, as many products."""
    p = -lower
    inv = eye + p
    for _ in range(LOG2_CHUNK - 1):
        p = ct.mma(p, p, zero)
        inv = ct.mma(inv, p, inv)
    return inv


@ct.kernel(num_worker_warps=8)
def gated_delta_chunk_kernel(q, k, v, g, beta, state, o, new_state, scale, CHUNK: ConstInt, LOG2_CHUNK: ConstInt,
                             BLOCK_K: ConstInt, BLOCK_V: ConstInt):
    """The rule of gated_delta_rule_kernel, CHUNK tokens at a time (the WY form of the delta rule). Within a
    chunk, with G the cumulative log decay from its start and S0 the state before it:
        u = (I + L)^-1 (beta v - beta exp(G) k S0),  L[i, j] = beta_i exp(G_i - G_j) k_i . k_j (i > j)
        o = scale (exp(G) q S0 + (M * (q k^T)) u),  M[i, j] = exp(G_i - G_j) (i >= j)
        S = exp(G_last) S0 + (exp(G_last - G) k)^T u
    u are the values the tokens add to the state in turn. Padded tokens (past T) have k = v = q = 0, beta = 0
    and g = 0: they add nothing and decay nothing."""
    vb = ct.bid(0)
    h = ct.bid(1)
    b = ct.bid(2)
    s = ct.load(state, index=(b, h, 0, vb), shape=(1, 1, BLOCK_K, BLOCK_V), padding_mode=ct.PaddingMode.ZERO)
    s = ct.reshape(s, (BLOCK_K, BLOCK_V))
    rows = ct.reshape(ct.arange(CHUNK, dtype=ct.int32), (CHUNK, 1))
    cols = ct.reshape(ct.arange(CHUNK, dtype=ct.int32), (1, CHUNK))
    eye = ct.where(rows == cols, 1.0, 0.0)
    zero = ct.zeros((CHUNK, CHUNK), dtype=ct.float32)
    for c in range(ct.cdiv(q.shape[1], CHUNK)):
        kc = chunk_rows(k, b, c, h, 0, CHUNK, BLOCK_K)
        qc = chunk_rows(q, b, c, h, 0, CHUNK, BLOCK_K)
        vc = chunk_rows(v, b, c, h, vb, CHUNK, BLOCK_V)
        bc = chunk_column(beta, b, c, h, CHUNK)
        g_step = chunk_column(g, b, c, h, CHUNK)
        gc = ct.cumsum(g_step, 0)
        g_last = ct.sum(g_step, 0, keepdims=True)
        gap = gc - ct.reshape(gc, (1, CHUNK))
        kt = ct.transpose(kc)
        lower = bc * ct.mma(kc, kt, zero) * ct.exp(ct.where(rows > cols, gap, float("-inf")))
        inv = unit_lower_inverse(lower, eye, zero, LOG2_CHUNK)
        w = ct.mma(inv, bc * ct.exp(gc) * kc, ct.zeros((CHUNK, BLOCK_K), dtype=ct.float32))
        u = ct.mma(inv, bc * vc, ct.zeros((CHUNK, BLOCK_V), dtype=ct.float32))
        u = u - ct.mma(w, s, ct.zeros((CHUNK, BLOCK_V), dtype=ct.float32))
        attn = ct.mma(qc, kt, zero) * ct.exp(ct.where(rows >= cols, gap, float("-inf")))
        oc = ct.mma(attn, u, ct.exp(gc) * ct.mma(qc, s, ct.zeros((CHUNK, BLOCK_V), dtype=ct.float32))) * scale
        ct.store(o, index=(b, c, h, vb), tile=ct.reshape(ct.astype(oc, o.dtype), (1, CHUNK, 1, BLOCK_V)))
        kd = ct.transpose(kc * ct.exp(g_last - gc))
        s = ct.mma(kd, u, s * ct.exp(g_last))
    ct.store(new_state, index=(b, h, 0, vb), tile=ct.reshape(s, (1, 1, BLOCK_K, BLOCK_V)))
