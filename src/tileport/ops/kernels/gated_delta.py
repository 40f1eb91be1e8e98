"""Gated delta rule, recurrent form: per (batch, head) an f32 state S [Dk, Dv] and for each token t

    S = exp(g_t) * S
    S = S + k_t (beta_t * (v_t - k_t^T S))      (the delta rule: k_t's row of S moved towards v_t)
    o_t = scale * q_t^T S

q, k [B, T, H, Dk] and v, o [B, T, H, Dv] in the input dtype; g (log decay) and beta [B, T, H] f32;
state (in) and new_state (out) [B, H, Dk, Dv] f32. T = 1 is a decode step.

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
