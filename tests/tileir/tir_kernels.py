"""Small cuTile Python kernels the Tile IR toolkit tests export to bytecode on the fly.

`CASES` lists, per program name, the kernel and its parameters for an explicit KernelSignature
(arrays as `("dtype", ndim)` or `("dtype", ndim, shape_constant)`, runtime scalars as
`("scalar", "dtype")`, constants as values).
Pairs named `*_a` / `*_b` spell the same computation two ways (SEMANTIC_EQUIV tests).
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def vec_add(a, b, c, TILE: ConstInt):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,))
    tb = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=ta + tb)


@ct.kernel
def softmax_rows(x, y, TILE_N: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
    t = ct.astype(t, ct.float32)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    s = ct.sum(e, axis=1, keepdims=True)
    r = ct.truediv(e, s, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    ct.store(y, index=(row, 0), tile=ct.astype(r, y.dtype))


@ct.kernel(num_ctas=2, occupancy=2)
def matmul(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.full((BM, BN), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK), latency=2)
        tb = ct.load(b, index=(k, bn), shape=(BK, BN), latency=2)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))


@ct.kernel(num_ctas=2, occupancy=2)
def matmul_latency4(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """matmul with another latency hint on its loads (a WARN-level difference)."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.full((BM, BN), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK), latency=4)
        tb = ct.load(b, index=(k, bn), shape=(BK, BN), latency=4)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gather_scatter(x, idx, y, TILE: ConstInt):
    bid = ct.bid(0)
    offs = bid * TILE + ct.arange(TILE, dtype=ct.int32)
    src = ct.gather(idx, offs)
    v = ct.gather(x, src)
    ct.scatter(y, offs, v * 2.0)


@ct.kernel
def rms_norm(x, w, y, eps: float, TILE_N: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.ZERO)
    t = ct.astype(t, ct.float32)
    ms = ct.sum(t * t, axis=1, keepdims=True) / TILE_N
    r = ct.rsqrt(ms + eps)
    tw = ct.astype(ct.load(w, index=(0,), shape=(TILE_N,)), ct.float32)
    ct.store(y, index=(row, 0), tile=ct.astype(t * r * tw, y.dtype))


@ct.kernel
def misc(x, y, z, n: int, TILE: ConstInt):
    """Control flow, scans, argmax, atomics, a column-major view and more ops for the reader."""
    bid = ct.bid(0)
    t = ct.load(x, index=(0, bid), shape=(TILE, TILE), order="F", padding_mode=ct.PaddingMode.ZERO,
                latency=3, allow_tma=False)
    c = ct.cumsum(ct.transpose(t), axis=1)
    p = c ** 2.5
    q = ct.exp2(p, flush_to_zero=True) + ct.tanh(p)
    am = ct.argmax(q, axis=1)
    ct.store(y, index=(bid, 0), tile=ct.where(q > 0.0, q, -q))
    nb = ct.num_blocks(0)
    i = bid
    while i < n:
        if i % 2 == 0:
            ct.atomic_add(z, ct.arange(TILE, dtype=ct.int32), ct.astype(am, ct.float32))
        i += nb
    m = ct.minimum(ct.astype(am, ct.int32), ct.cdiv(n, TILE))
    ct.store(z, index=(bid,), tile=ct.astype(m, ct.float32))


@ct.kernel
def ceil_div_a(x, y, n: int, TILE: ConstInt):
    bid = ct.bid(0)
    k = ct.cdiv(n, TILE)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=t * ct.astype(k, ct.float32))


@ct.kernel
def ceil_div_b(x, y, n: int, TILE: ConstInt):
    bid = ct.bid(0)
    k = (n + TILE - 1) // TILE
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=t * ct.astype(k, ct.float32))


@ct.kernel
def min_a(x, y, n: int, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=ct.minimum(t, n))


@ct.kernel
def min_b(x, y, n: int, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=ct.where(t < n, t, n))


@ct.kernel
def tiles_a(a, c, BM: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    acc = ct.full((BM, BK), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        acc = acc + ct.astype(ct.load(a, index=(bm, k), shape=(BM, BK)), ct.float32)
    ct.store(c, index=(bm, 0), tile=acc)


@ct.kernel
def tiles_b(a, c, BM: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    acc = ct.full((BM, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], BK)):
        acc = acc + ct.astype(ct.load(a, index=(bm, k), shape=(BM, BK)), ct.float32)
    ct.store(c, index=(bm, 0), tile=acc)


@ct.kernel
def unrolled(x, y, TILE: ConstInt, STEPS: ConstInt):
    """A long straight-line program (for the diff timing test)."""
    bid = ct.bid(0)
    t = ct.astype(ct.load(x, index=(bid,), shape=(TILE,)), ct.float32)
    acc = t
    for i in ct.static_iter(range(STEPS)):
        acc = ct.exp(acc * 0.5 + t) - ct.rsqrt(acc * acc + 1.0 + i)
    ct.store(y, index=(bid,), tile=ct.astype(acc, y.dtype))


# cuTile Python twins of the cutile-rs book kernels compiled in data/cutile_rs (same parameter
# order and tiles), the reference side of the real generated samples in data/pairs.json.
@ct.kernel
def rs_add(z, x, y, S: ConstInt):
    bid = ct.bid(0)
    tx = ct.load(x, index=(bid,), shape=(S,))
    ty = ct.load(y, index=(bid,), shape=(S,))
    ct.store(z, index=(bid,), tile=tx + ty)


@ct.kernel
def rs_softmax(x, y, BM: ConstInt, BN: ConstInt):
    t = ct.load(x, index=(ct.bid(0), ct.bid(1)), shape=(BM, BN))
    m = ct.max(t, 1, keepdims=True)
    num = ct.exp(t - m)
    den = ct.sum(num, 1, keepdims=True)
    ct.store(y, index=(ct.bid(0), ct.bid(1)), tile=num / den)


@ct.kernel
def rs_gemm(z, x, y, BM: ConstInt, BN: ConstInt, BK: ConstInt, K: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.load(z, index=(bm, bn), shape=(BM, BN))
    for i in range(K // BK):
        tx = ct.load(x, index=(bm, i), shape=(BM, BK))
        ty = ct.load(y, index=(i, bn), shape=(BK, BN))
        acc = ct.mma(tx, ty, acc)
    ct.store(z, index=(bm, bn), tile=acc)


@ct.kernel
def continue_in_if(x, y, n, TILE: ConstInt):
    """A store inside an `if` that ends the loop iteration: its `continue` (nested in the `if`)
    carries y's token to the next iteration. Not in CASES; test_canon uses it."""
    bid = ct.bid(0)
    for i in range(n):
        t = ct.load(x, index=(i,), shape=(TILE,))
        if i == bid:
            ct.store(y, index=(i,), tile=t)
            continue
        ct.store(x, index=(i,), tile=t + 1)


F32_1D = ("float32", 1)
CASES = {
    "vec_add": (vec_add, [F32_1D, F32_1D, F32_1D, 1024]),
    "softmax": (softmax_rows, [("float16", 2), ("float16", 2), 1024]),
    "matmul": (matmul, [("float16", 2), ("float16", 2), ("float16", 2), 128, 128, 64]),
    "matmul_latency4": (matmul_latency4, [("float16", 2), ("float16", 2), ("float16", 2), 128, 128, 64]),
    "gather_scatter": (gather_scatter, [F32_1D, ("int32", 1), F32_1D, 256]),
    "rms_norm": (rms_norm, [("bfloat16", 2), ("bfloat16", 1), ("bfloat16", 2), ("scalar", "float32"), 4096]),
    "misc": (misc, [("float32", 2), ("float32", 2), F32_1D, ("scalar", "int32"), 64]),
    "ceil_div_a": (ceil_div_a, [F32_1D, F32_1D, ("scalar", "int32"), 256]),
    "ceil_div_b": (ceil_div_b, [F32_1D, F32_1D, ("scalar", "int32"), 256]),
    "min_a": (min_a, [("int32", 1), ("int32", 1), ("scalar", "int32"), 256]),
    "min_b": (min_b, [("int32", 1), ("int32", 1), ("scalar", "int32"), 256]),
    "tiles_a": (tiles_a, [("float16", 2), ("float32", 2), 64, 64]),
    "tiles_b": (tiles_b, [("float16", 2), ("float32", 2), 64, 64]),
    "rs_add": (rs_add, [F32_1D, F32_1D, F32_1D, 1024]),
    "rs_softmax": (rs_softmax, [("float32", 2), ("float32", 2), 1, 1024]),
    # cutile-rs types x as [-1, K] and y as [K, -1]: the same static dims here.
    "rs_gemm": (rs_gemm, [("float16", 2), ("float16", 2, (None, 4096)), ("float16", 2, (4096, None)),
                          128, 128, 64, 4096]),
}
