"""Kernels exhibiting constructs real-world cuTile files use (written for tileport's tests; IR-diffed)."""

import math

import cuda.tile as ct
import numpy as np
import torch

ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]
PAD = ct.PaddingMode.ZERO
EXP = ct.exp
HINTS = ct.ByTarget(sm_100=4, default=2)


@ct.kernel(num_ctas=ct.ByTarget(sm_100=2, sm_120=1, default=1), occupancy=HINTS)
def by_target_kernel(x, y, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=PAD)
    ct.store(y, index=(bid,), tile=EXP(t))


@ct.kernel
def const_operand_kernel(x, y, N: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    offs = bid * TILE + ct.arange(TILE, dtype=ct.int32)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=PAD)
    t = ct.where(offs < N, t, 0)
    ct.store(y, index=(bid,), tile=t + (offs // N))


@ct.kernel
def dtype_choice_kernel(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    mma_dtype = ct.tfloat32 if a.dtype == ct.float32 else a.dtype
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(TM, TK), padding_mode=PAD).astype(mma_dtype)
        tb = ct.load(b, index=(k, ct.bid(1)), shape=(TK, TN), padding_mode=PAD).astype(mma_dtype)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc.astype(c.dtype))


@ct.kernel
def gather_rows_kernel(ids, table, out, TILE: ConstInt, D: ConstInt):
    rows = ct.load(ids, index=(ct.bid(0),), shape=(TILE,), padding_mode=PAD)[:, None]
    cols = ct.arange(D, dtype=ct.int32)[None, :]
    ct.store(out, index=(ct.bid(0), 0), tile=ct.gather(table, (rows, cols)))


@ct.kernel
def scalar_tile_kernel(x, lens, y, total, TILE: ConstInt):
    bid = ct.bid(0)
    n = ct.load(lens, index=(bid,), shape=())
    m = ct.load(lens, index=(bid,), shape=(1,)).item()
    t = ct.load(x, index=(bid,), shape=(TILE,))
    if n > m:
        t = t * 2.0
    ct.store(y, index=(bid,), tile=t)
    ct.store(total, index=(bid,), tile=ct.sum(t, axis=0))


@ct.kernel
def cat_kernel(x, y, TM: ConstInt, TN: ConstInt):
    bid = ct.bid(0)
    left = ct.load(x, index=(bid, 0), shape=(TM, TN))
    right = ct.load(x, index=(bid, 1), shape=(TM, TN))
    ct.store(y, index=(bid, 0), tile=ct.cat((left, right * 2.0), -1))


@ct.kernel
def bitcast_kernel(x, bits, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(bits, index=(bid,), tile=ct.bitcast(t, ct.int32) & 0x7FFFFFFF)


@ct.kernel
def int_power_kernel(x, e, y, P: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    n = ct.load(e, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=t ** 2 + t ** P + t ** n + t ** 0.5)


@ct.kernel
def if_expression_kernel(x, y, n, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    k = 1 if n > 2 else 2
    u = t * 2.0 if n > 5 else t + 1.0
    ct.store(y, index=(bid,), tile=u * k)


@ct.kernel
def cumsum_kernel(x, y, TM: ConstInt, TN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(TM, TN))
    ct.store(y, index=(bid, 0), tile=ct.cumsum(t) + ct.cumsum(t, 0, reverse=True))


@ct.kernel
def if_in_loop_kernel(x, y, n, TILE: ConstInt):
    acc = ct.zeros((TILE,), dtype=ct.float32)
    m = ct.zeros((TILE,), dtype=ct.float32)
    for i in range(n):
        t = ct.load(x, index=(i,), shape=(TILE,))
        acc = acc + t
        if ct.sum(t) > 0.0:
            m = m + t
    ct.store(y, index=(0,), tile=acc + m)


@ct.kernel
def empty_if_kernel(x, y, n, TILE: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    if n > 2:
        pass
    ct.store(y, index=(ct.bid(0),), tile=t)


@ct.kernel
def bitwise_kernel(a, b, y, TILE: ConstInt):
    x = ct.bitcast(ct.load(a, index=(ct.bid(0),), shape=(TILE,)), ct.int32)
    z = ct.bitcast(ct.load(b, index=(ct.bid(0),), shape=(TILE,)), ct.int32)
    r = ((x & z) | (x ^ 3)) + (x << 2) + (z >> 1) + ~x
    ct.store(y, index=(ct.bid(0),), tile=ct.bitcast(r, ct.float32))


@ct.kernel
def extract_kernel(x, y, TM: ConstInt, TN: ConstInt):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(TM, TN))
    ct.store(y, index=(ct.bid(0), 0), tile=ct.extract(t, (0, 1), (TM, TN // 2)))


@ct.kernel
def reassigned_fma_kernel(x, y, n, TILE: ConstInt):
    acc = ct.full((TILE,), 1.0, dtype=ct.float32)
    for i in range(n):
        t = ct.load(x, index=(i,), shape=(TILE,))
        acc = ct.mul(acc, ct.exp(t))  # loop-carried `acc`: reassigned by the product, then by the add
        acc = ct.add(acc, t)
    ct.store(y, index=(ct.bid(0),), tile=acc)


@ct.kernel
def lhs_product_kernel(x, w, y, s, TILE: ConstInt):
    xt = ct.load(x, index=(ct.bid(0), 0), shape=(TILE, TILE))
    wx = xt * ct.load(w, index=(ct.bid(0), 0), shape=(TILE, TILE))  # a product read twice
    c = ct.sum(wx, axis=1, keepdims=True)
    ct.store(s, index=(ct.bid(0), 0), tile=c)
    ct.store(y, index=(ct.bid(0), 0), tile=wx - xt * c)  # cuTile tries only the lhs product: no fma


@ct.kernel
def const_modulo_kernel(x, y, N: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    row = bid % N  # the divisor's sign test folds to a constant on both sides
    t = ct.load(x, index=(bid // N, row), shape=(1, TILE))
    ct.store(y, index=(bid // N, row), tile=t)


@ct.kernel
def while_break_kernel(x, y, n, TILE: ConstInt):
    acc = ct.zeros((TILE,), dtype=ct.float32)
    i = 0
    while i < n:
        t = ct.load(x, index=(i,), shape=(TILE,))
        acc = acc + t
        if ct.sum(acc) > 4.0:
            break
        i += 1
    ct.store(y, index=(ct.bid(0),), tile=acc)


@ct.kernel
def while_stride_kernel(x, y, n, TILE: ConstInt):
    i = ct.bid(0)
    while i < n:
        t = ct.load(x, index=(i,), shape=(TILE,))
        ct.store(y, index=(i,), tile=t * 2.0)
        i += ct.num_blocks(0)


@ct.kernel
def atomic_rmw_kernel(x, acc, hi, lo, bits, fsum, y, TILE: ConstInt):
    lane = ct.arange(TILE, dtype=ct.int32)
    t = ct.load(x, index=(0,), shape=(TILE,))
    prev = ct.atomic_add(acc, lane, t)
    ct.atomic_max(hi, lane, t)
    ct.atomic_min(lo, (lane,), t, memory_order=ct.MemoryOrder.RELAXED)
    ct.atomic_and(bits, lane, t)
    ct.atomic_or(bits, lane, 1, memory_order=ct.MemoryOrder.RELEASE)
    ct.atomic_xor(bits, lane, t, memory_scope=ct.MemoryScope.BLOCK)
    ct.atomic_add(fsum, lane, ct.astype(t, ct.float32), memory_order=ct.MemoryOrder.ACQUIRE)
    ct.store(y, index=(0,), tile=prev + ct.atomic_xchg(acc, lane, t))


@ct.kernel
def atomic_cas_kernel(flags, y, TILE: ConstInt):
    lane = ct.arange(TILE, dtype=ct.int32)
    old = ct.atomic_cas(flags, lane, 0, lane + 1)
    ct.store(y, index=(ct.bid(0),), tile=old)


@ct.kernel
def atomic_loop_kernel(x, counter, y, n, TILE: ConstInt):
    lane = ct.arange(TILE, dtype=ct.int32)
    acc = ct.zeros((TILE,), dtype=ct.int32)
    i = 0
    while i < n:
        t = ct.load(x, index=(i,), shape=(TILE,))
        acc = acc + ct.atomic_add(counter, lane, t)
        i += 1
    ct.store(y, index=(ct.bid(0),), tile=acc)


@ct.kernel
def pack_bytes_kernel(x, y, TM: ConstInt, TN: ConstInt):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(TM, TN))
    ct.store(y, index=(ct.bid(0),), tile=ct.pack_to_bytes(t))


@ct.kernel
def branch_store_load_kernel(x, y, n, TILE: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    if n > 0:
        ct.store(y, index=(ct.bid(0),), tile=t)
    else:
        ct.store(x, index=(ct.bid(0),), tile=ct.load(y, index=(ct.bid(0),), shape=(TILE,)))
    ct.store(x, index=(ct.bid(0),), tile=ct.load(y, index=(ct.bid(0),), shape=(TILE,)) * 2.0)


@ct.kernel
def unpack_bytes_kernel(x, y, TILE: ConstInt):
    b = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=ct.unpack_from_bytes(b, ct.float16) * 2.0)


@ct.kernel
def fma_per_dtype_kernel(x, y, TILE: ConstInt):
    # f32 accumulator += the array dtype's square: one fma for f32 inputs, mulf + ftof + addf for f16 ones
    # (cutile-gpt layernorm.py's sum of squares); the port has one entry per group of dtypes
    acc = ct.full((1, TILE), 0, dtype=ct.float32)
    for j in range(4):
        t = ct.load(x, index=(ct.bid(0), j), shape=(1, TILE))
        acc += t * t
    ct.store(y, index=(ct.bid(0), 0), tile=acc.astype(y.dtype))


@ct.kernel
def const_shape_kernel(x, y, TILE: ConstInt):
    # tile shapes computed from constants (issue slip: 128x8 in the port where the reference had 64x8)
    t = ct.load(x, index=(ct.bid(0), 0), shape=(min(TILE, 64), max(8, TILE // 32)))
    u = ct.load(x, index=(ct.bid(0), 0), shape=(TILE * 2 // 4, 8))
    ct.store(y, index=(ct.bid(0), 0), tile=t)
    ct.store(y, index=(ct.bid(0), 1), tile=u)


@ct.kernel
def carry_four_kernel(x, y, n, TILE: ConstInt):
    # four loop-carried values, two of them swapped as a tuple and one reassigned to itself (issue slip: a
    # carried value dropped, 4 in the reference, 3 in the port)
    a = ct.zeros((TILE,), dtype=ct.float32)
    b = ct.zeros((TILE,), dtype=ct.float32)
    c = ct.zeros((TILE,), dtype=ct.float32)
    d = ct.full((TILE,), 1.0, dtype=ct.float32)
    for i in range(n):
        t = ct.load(x, index=(i,), shape=(TILE,))
        a, b = b, a + t
        c, d = c + b, d
    ct.store(y, index=(ct.bid(0),), tile=a + b + c + d)


def stats_and_last(x, b, n, TILE):
    # the last chunk is reassigned in the loop (never read there first) and returned: loop-carried
    t = ct.astype(ct.load(x, index=(b, 0), shape=(1, TILE)), ct.float32)
    m = ct.max(t, 1, keepdims=True)
    for c in range(1, n):
        t = ct.load(x, index=(b, c), shape=(1, TILE))
        t = ct.astype(t, ct.float32)
        m = ct.maximum(m, ct.max(t, 1, keepdims=True))
    return m, t


@ct.kernel
def helper_carry_kernel(x, y, n, TILE: ConstInt):
    # issue slip (a carried value dropped: 2 loop results in the reference, 1 in the port): a helper's loop
    # reassigns `t` that only its final `return` reads; the port kept the value from before the loop
    m, t = stats_and_last(x, ct.bid(0), n, TILE)
    ct.store(y, index=(ct.bid(0), 0), tile=ct.astype(t - m, y.dtype))


@ct.kernel
def foreign_names_kernel(x, y, TILE: ConstInt):
    # numpy/torch dtype names and infinities, math.inf, a ct.full of a constant expression (inf / 2)
    low = ct.full((TILE,), -np.inf, dtype=torch.float32)
    high = ct.full((TILE,), math.inf / 2, dtype=np.float32)
    t = ct.astype(ct.load(x, index=(ct.bid(0),), shape=(TILE,)), np.float32)
    ct.store(y, index=(ct.bid(0),), tile=ct.astype(ct.minimum(ct.maximum(t, low), high), y.dtype))


@ct.kernel
def slice_kernel(x, y, row0, H: ConstInt, TILE: ConstInt):
    # Array.slice views (the kernels cutile-stencil generates): one sliced along two axes (a runtime start, then a
    # constant one: the view's alignment depends on the constant and the dtype), one along the last axis
    rows = x.shape[0] - row0
    v = x.slice(axis=0, start=row0, stop=row0 + rows).slice(axis=1, start=H, stop=x.shape[1])
    out = y.slice(axis=-1, start=H - 1, stop=y.shape[1] - 1)
    t = ct.load(v, index=(ct.bid(0), ct.bid(1)), shape=(8, TILE))
    ct.store(out, index=(ct.bid(0), ct.bid(1)), tile=t)


@ct.kernel
def slice_inplace_kernel(x, TILE: ConstInt):
    # a load and a store through two views of one array: ordered as accesses of that array (memory tokens)
    n = x.shape[0] - 1
    src = x.slice(axis=0, start=1, stop=1 + n)
    dst = x.slice(axis=0, start=0, stop=n)
    t = ct.load(src, index=(ct.bid(0),), shape=(TILE,))
    ct.store(dst, index=(ct.bid(0),), tile=t * 2)
