"""Construct kernels the reference corpus does not exercise (tests/translator/test_compile_constructs.py).

Parsed by the translator (never imported by it); the reference IR capture executes only the
definitions. Each kernel isolates a few constructs of docs/translator.md.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
ConstFloat = ct.Constant[float]
OFFSET = 0.5


@ct.kernel
def load_modes_kernel(x, y, TM: ConstInt, TN: ConstInt):
    """padding modes, latency and allow_tma on loads and stores."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    a = ct.load(x, index=(bm, bn), shape=(TM, TN), padding_mode=ct.PaddingMode.NAN, latency=3,
                allow_tma=False)
    b = ct.load(x, index=(bm, bn), shape=(TM, TN), padding_mode=ct.PaddingMode.POS_INF)
    c = ct.load(x, index=(bm, bn), shape=(TM, TN), padding_mode=ct.PaddingMode.NEG_ZERO)
    ct.store(y, index=(bm, bn), tile=ct.minimum(ct.maximum(a, b), c), latency=2, allow_tma=False)


@ct.kernel
def load_order_kernel(x, y, TM: ConstInt, TN: ConstInt):
    """A permuted (order="F") load: dim_map [1, 0]; the tile shape is `shape=` as written."""
    b = ct.bid(0)
    t = ct.load(x, index=(b, 0), shape=(TN, TM), order="F")
    ct.store(y, index=(0, b), tile=ct.transpose(t))


@ct.kernel
def gather_checked_kernel(x, y, n, TILE: ConstInt):
    """1-D gather / scatter with bounds checks, a user mask and a float padding value."""
    b = ct.bid(0)
    offs = b * TILE + ct.arange(TILE, dtype=ct.int32)
    keep = offs < n
    t = ct.gather(x, offs, mask=keep, padding_value=-1.0, latency=2)
    ct.scatter(y, offs, t * 2.0, mask=keep)


@ct.kernel
def gather_2d_kernel(x, y, TM: ConstInt, TN: ConstInt):
    """2-D gather with broadcast index tiles, integer padding (a splat), unchecked scatter."""
    rows = ct.bid(0) * TM + ct.arange(TM, dtype=ct.int32)
    cols = ct.arange(TN, dtype=ct.int32)
    t = ct.gather(x, (rows[:, None], cols[None, :]), padding_value=7)
    ct.scatter(y, (rows[:, None], cols[None, :]), t + 1, check_bounds=False)


@ct.kernel
def creation_kernel(y, TILE: ConstInt):
    """ct.arange, ct.full, ct.zeros."""
    b = ct.bid(0)
    idx = ct.astype(ct.arange(TILE, dtype=ct.int32), ct.float32)
    f = ct.full((TILE,), 3.5, ct.float32)
    z = ct.zeros((TILE,), dtype=ct.float32)
    ct.store(y, index=(b,), tile=idx * f + z)


@ct.kernel
def arith_kernel(a, b, y, m, TILE: ConstInt):
    """Operators, comparisons, ct.where with scalar arms, ct.maximum/minimum."""
    i = ct.bid(0)
    ta = ct.load(a, index=(i,), shape=(TILE,))
    tb = ct.load(b, index=(i,), shape=(TILE,))
    s = ta + tb
    d = ta - tb
    p = ta * 2.0
    q = ta / tb
    w = ct.where(ta > tb, ct.maximum(s, d), ct.minimum(p, q))
    w = ct.where(ta <= 0.0, 0.0, w)
    ct.store(y, index=(i,), tile=w)
    ct.store(m, index=(i,), tile=ct.where(ta == tb, 1, 0))


@ct.kernel
def int_arith_kernel(a, b, y, TILE: ConstInt):
    """Integer tiles: + - * //, ct.maximum, integer literals (splats), comparisons."""
    i = ct.bid(0)
    ta = ct.load(a, index=(i,), shape=(TILE,))
    tb = ct.load(b, index=(i,), shape=(TILE,))
    r = (ta + tb) * 3 - ta // tb
    r = ct.where(r >= 0, ct.maximum(r, tb), ct.minimum(r, ta))
    ct.store(y, index=(i,), tile=r)


@ct.kernel
def math_kernel(x, y, TILE: ConstInt):
    """exp, exp2, log, sqrt, rsqrt, tanh, sigmoid, abs with rounding modes and flush-to-zero."""
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i,), shape=(TILE,)), ct.float32)
    e = ct.exp(t)
    ea = ct.exp(t, rounding_mode=ct.RoundingMode.APPROX)
    e2 = ct.exp2(t, flush_to_zero=True)
    lg = ct.log(e)
    s = ct.sqrt(lg)
    sa = ct.sqrt(s, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    r = ct.rsqrt(sa, flush_to_zero=True)
    th = ct.tanh(r)
    tha = ct.tanh(th, rounding_mode=ct.RoundingMode.APPROX)
    sig = 1.0 / (1.0 + ct.exp(-tha))
    out = ct.abs(sig) + ea + e2
    ct.store(y, index=(i,), tile=ct.astype(out, y.dtype))


@ct.kernel
def reduce_kernel(x, s0, s1, s2, TM: ConstInt, TN: ConstInt):
    """ct.sum/max/min with axis and keepdims, and a full reduction."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN))
    rs = ct.sum(t, axis=1)
    cm = ct.max(t, axis=0)
    mn = ct.min(t, axis=1, keepdims=True)
    total = ct.sum(rs)
    ct.store(s0, index=(i,), tile=rs + ct.reshape(mn, (TM,)))
    ct.store(s1, index=(i,), tile=cm)
    ct.store(s2, index=(i,), tile=ct.reshape(total, (1,)))


@ct.kernel
def matmul_f16_kernel(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """ct.matmul on f16 tiles: cuTile accumulates in f16."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    ta = ct.load(a, index=(bm, 0), shape=(TM, TK))
    tb = ct.load(b, index=(0, bn), shape=(TK, TN))
    ct.store(c, index=(bm, bn), tile=ct.matmul(ta, tb))


@ct.kernel
def shape_kernel(x, v, y, z, TM: ConstInt, TN: ConstInt):
    """transpose, permute, reshape with a derived constant, x[:, None], explicit broadcasts."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN))
    t3 = ct.reshape(t, (TM, TN, 1))
    p = ct.permute(t3, (2, 0, 1))
    back = ct.reshape(p, (TM, TN))
    flat = ct.reshape(ct.transpose(ct.transpose(back)), (TM * TN,))
    ct.store(z, index=(i,), tile=flat)
    col = ct.load(v, index=(i,), shape=(TM,))
    row = ct.load(v, index=(0,), shape=(TN,))
    ct.store(y, index=(i, 0), tile=col[:, None] + row + t)


@ct.kernel
def loops_kernel(x, y, n, TILE: ConstInt):
    """range loops with a step and a loop-carried tile; `if` on runtime values."""
    i = ct.bid(0)
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for k in range(i, n, 2):
        acc = acc + ct.astype(ct.load(x, index=(k,), shape=(TILE,)), ct.float32)
    for k in range(4):
        acc = acc * 0.5
    if n > 100:
        acc = acc + 1.0
    if i == 0:
        ct.store(y, index=(i,), tile=ct.astype(acc, y.dtype))


@ct.kernel
def branch_kernel(x, y, TILE: ConstInt, MODE: ConstInt, UPCAST: ConstBool):
    """Branches on constants: each (MODE, UPCAST) in use becomes its own entry."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(TILE,))
    if UPCAST:
        t = ct.astype(t, ct.float32)
    if MODE == 1:
        t = t + 1.0
    else:
        t = t - 1.0
    ct.store(y, index=(i,), tile=ct.astype(t, y.dtype))


@ct.kernel
def float_const_kernel(x, y, TILE: ConstInt, ALPHA: ConstFloat):
    """A float constant: one entry per value, the value a decimal literal."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(TILE,))
    ct.store(y, index=(i,), tile=t * ALPHA + OFFSET)


@ct.kernel
def fma_kernel(a, b, c, y, TILE: ConstInt):
    """cuTile's FMA fusion: a*b+c, c+a*b, c-a*b, a*b-c, and with flush-to-zero."""
    i = ct.bid(0)
    ta = ct.load(a, index=(i,), shape=(TILE,))
    tb = ct.load(b, index=(i,), shape=(TILE,))
    tc = ct.load(c, index=(i,), shape=(TILE,))
    r1 = ta * tb + tc
    r2 = tc + ta * tb
    r3 = tc - ta * tb
    r4 = ta * tb - tc
    r5 = ct.add(ct.mul(ta, tb, flush_to_zero=True), tc, flush_to_zero=True)
    ct.store(y, index=(i,), tile=r1 * r2 * r3 * r4 * r5)


@ct.kernel(occupancy=2, num_ctas=1)
def persistent_kernel(x, w, y, n_rows, TILE: ConstInt):
    """Persistent grid-stride loop with a hoisted invariant and a store whose index is not the
    loop variable (its memory token is carried around the loop)."""
    pid = ct.bid(0)
    nprog = ct.num_blocks(0)
    wt = ct.load(w, index=(0,), shape=(TILE,))
    for row in range(pid, n_rows, nprog):
        t = ct.load(x, index=(row, 0), shape=(1, TILE))
        scale = ct.full((1, TILE), 2.0, ct.float32)
        ct.store(y, index=(n_rows - 1 - row, 0), tile=t * wt * scale)


@ct.kernel
def inplace_kernel(x, n_rows, TILE: ConstInt):
    """Read and write one array in a persistent loop: two loop-carried memory tokens (R8)."""
    for row in range(ct.bid(0), n_rows, ct.num_blocks(0)):
        t = ct.load(x, index=(row, 0), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
        ct.store(x, index=(row, 0), tile=t * 2.0 + 1.0)


@ct.kernel
def cond_chain_kernel(x, y, n, TILE: ConstInt):
    """Chains of conditional expressions: down the else branches (the port's `else if`, a reduction
    in the condition's block) and down the then branches (nested, each `if` its block's value)."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(TILE,))
    s = 1.0 if n == 1 else (2.0 if n == 2 else (3.0 if n == 3 else 0.5))
    u = ((0.25 if n == 7 else 3.0) if n == 6 else 2.0) if n > 5 else 1.0
    r = t * 2.0 if ct.sum(t) > 0.0 else (t * 3.0 if ct.max(t) > 1.0 else (t + 1.0 if ct.min(t) < -1.0 else t))
    ct.store(y, index=(i,), tile=ct.astype(r * s * u, y.dtype))
