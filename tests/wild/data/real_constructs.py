"""Constructs and translator slips seen on real cuTile packages, in kernels written for tileport's tests
(IR-diffed against cuTile Python by tests/wild/test_compile_unattended.py)."""

import cuda.tile as ct

ConstInt = ct.Constant[int]
REGISTRY = {}


def register(name):
    """A host-side decorator stacked on kernels (never run by tileport)."""
    def wrap(fn):
        REGISTRY[name] = fn
        return fn
    return wrap


def scaled_rows(t, b):
    """Rebinds its own parameter `b`, a name its caller uses for another value."""
    b = ct.astype(b, ct.float32)
    t = t * b
    return t


@ct.kernel
def helper_rebinds_param_kernel(x, w, y, TILE: ConstInt):
    b = ct.bid(0)
    t = ct.load(x, index=(b, 0), shape=(1, TILE))
    tw = ct.load(w, index=(0, 0), shape=(1, TILE))
    t = scaled_rows(t, tw)
    ct.store(y, index=(b, 0), tile=t)


@ct.kernel
def spin_lock_kernel(x, acc, locks, TILE: ConstInt, GROUPS: ConstInt):
    """Blocks of a group add their tile into the group's row under a lock (atomic CAS to take it,
    exchange to give it back)."""
    bid = ct.bid(0)
    g = bid % GROUPS
    t = ct.load(x, index=(bid,), shape=(TILE,))
    while ct.atomic_cas(locks, g, 0, 1, memory_order=ct.MemoryOrder.ACQUIRE) == 1:
        pass
    a = ct.load(acc, index=(g,), shape=(TILE,))
    ct.store(acc, index=(g,), tile=a + t)
    ct.atomic_xchg(locks, g, 0, memory_order=ct.MemoryOrder.RELEASE)


@ct.kernel
def transpose_kernel(x, y, TM: ConstInt, TN: ConstInt):
    """A 2-D tile of x stored transposed at the swapped tile index; blocks past x's last tile do nothing."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    if bm < ct.cdiv(x.shape[0], TM) and bn < ct.cdiv(x.shape[1], TN):
        t = ct.load(x, index=(bm, bn), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(bn, bm), tile=ct.transpose(t))



@ct.kernel
def scalar_index_kernel(x, ids, scale, y, TILE: ConstInt):
    """Arrays whose rank shows only in a scalar index (`ct.load(a, i, shape=())`), and tiles indexed by a
    0-d tile read from memory."""
    row = ct.bid(0)
    s = ct.load(scale, 0, shape=())
    src = ct.load(ids, row, shape=())
    t = ct.load(x, index=(src, 0), shape=(1, TILE))
    ct.store(y, index=(row, 0), tile=t * s)
    ct.store(scale, row + 1, tile=s)


@ct.kernel
def branch_defines_kernel(x, y, n, TILE: ConstInt):
    """A variable first defined in both branches of a runtime `if` and read after it."""
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    if n > 4:
        res = ct.exp(t) * 2.0
    else:
        res = t + 1.0
    ct.store(y, index=(ct.bid(0),), tile=res)


@ct.kernel
def branch_defines_several_kernel(x, y, n, TILE: ConstInt):
    """Several variables (tiles of two dtypes, a scalar) first defined in both branches of a runtime `if`."""
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    if n > 4:
        a = ct.exp(t)
        b = ct.astype(t, ct.float16)
        s = n * 2
    else:
        b = ct.astype(t + 1.0, ct.float16)
        a = t * 3.0
        s = n
    ct.store(y, index=(ct.bid(0),), tile=a + ct.astype(b, ct.float32) + s)


@ct.kernel
def unvalued_constants_kernel(x, y, eps: ct.Constant[float], MODE: ConstInt, FLAG: ct.Constant[bool],
                              N_CHUNKS: ConstInt, TILE: ConstInt):
    """Constants that steer code with no value known (translated without a configuration, compiled): a
    float (a runtime parameter), an int compared in `if` and in a comparison with a tile size (const
    generics compared), a bool (one entry per value)."""
    row = ct.bid(0)
    for c in range(N_CHUNKS):
        t = ct.load(x, index=(row, c), shape=(1, TILE))
        if MODE == 2:
            t = t * 2.0
        if FLAG:
            t = t + eps
        ct.store(y, index=(row, c), tile=t)
    if N_CHUNKS * TILE < x.shape[1]:
        t = ct.load(x, index=(row, N_CHUNKS), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(row, N_CHUNKS), tile=t / eps)


@ct.kernel
def fill_from_constants_kernel(y, TILE: ConstInt, K: ConstInt):
    """`ct.full` with a fill value computed from constants (cuTile folds it: a literal per value)."""
    t = ct.full((TILE,), K * 2 + 3, dtype=ct.float32)
    u = ct.full((TILE,), 1.0 / K, dtype=ct.float32)
    ct.store(y, index=(ct.bid(0),), tile=t + u)


@ct.kernel
def signed_shift_kernel(a, b, y, TILE: ConstInt):
    t = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
    u = ct.load(b, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=(t << 3) + (u >> 2) + (t >> u))


@ct.kernel
def unsigned_shift_kernel(a, b, y, TILE: ConstInt):
    """`>>` of an unsigned tile shifts zeros in (logical), of a signed one the sign (arithmetic)."""
    t = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
    u = ct.load(b, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=(t >> 1) | (u << 2) | (t >> u))


@register("stacked")
@ct.kernel(occupancy=2)
def stacked_decorator_kernel(x, y, TILE: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t * 2.0)


def make_scaled_kernel(occupancy, scale):
    """A kernel factory closing over its arguments and a constant local."""
    SHIFT = 2 * 3

    @ct.kernel(occupancy=occupancy)
    def factory_kernel(x, y, TILE: ConstInt):
        t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
        ct.store(y, index=(ct.bid(0),), tile=t * scale + SHIFT)
    return factory_kernel


SCALED = make_scaled_kernel(4, scale=0.5)


@ct.kernel
def mixed_mma_kernel(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """16-bit operands into an f32 accumulator, stored as f16."""
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, ct.bid(1)), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, ct.float16))


@ct.kernel
def early_return_kernel(x, ids, y, ignore_index, TILE: ConstInt):
    """Rows whose id is ignored are zeroed and the block returns early."""
    row = ct.bid(0)
    lbl = ct.load(ids, row, shape=())
    if lbl == ignore_index:
        ct.store(y, index=(row, 0), tile=ct.zeros((1, TILE), dtype=y.dtype))
        return
    t = ct.load(x, index=(row, 0), shape=(1, TILE))
    ct.store(y, index=(row, 0), tile=t * 2.0)


@ct.kernel
def bool_cast_kernel(x, y, z, TILE: ConstInt):
    """Casts from and to bool: unsigned conversions, an integer to bool a comparison with zero (as cuTile)."""
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    m = t > 0.5
    f = ct.astype(m, ct.float32)
    i = ct.astype(m, ct.int32)
    b = ct.astype(t, ct.bool_)
    ct.store(y, index=(ct.bid(0),), tile=f + ct.astype(i, ct.float32) + ct.astype(b, ct.float32))
    ct.store(z, index=(ct.bid(0),), tile=ct.astype(ct.astype(i, ct.bool_), ct.int32))


@ct.kernel
def dtype_bits_kernel(a, y, TILE: ConstInt):
    """Bitwise operators on a dtype chosen by the array's dtype, with literals of that dtype."""
    t = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
    it = ct.int32 if a.dtype == ct.float32 else ct.int16
    bits = ct.bitcast(t, it)
    mask = ct.full((TILE,), 0x7F, dtype=it)
    ct.store(y, index=(ct.bid(0),), tile=ct.bitcast((bits & ~mask) | (bits ^ mask), a.dtype))
