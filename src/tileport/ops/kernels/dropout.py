"""Dropout forward and backward with a counter-based RNG (Philox-4x32-10).

Element i of the flattened tensor keeps its value iff the first 32-bit word of
Philox4x32-10(counter = (lo32(offset + i), hi32(offset + i), 0, 0), key = (lo32(seed), hi32(seed)))
shifted right by 8 (24 random bits) is >= `threshold` (round(p * 2^24), p the drop probability); a
kept value is scaled by `scale` (1 / (1 - p)) in f32 and rounded once to the output dtype. The mask
is a pure function of (seed, offset, i): the backward recomputes it instead of reading one back, and
any launch grid or tile size gives the same mask. Philox's 32 x 32 -> 64 multiplies are done in
uint64 (cuTile has no mulhi), the rest in uint32 (wrapping adds for the key schedule). `seed` and
`offset` are `ct.ScalarInt64`: cuTile launches a Python int as an int32 otherwise.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10


def lo_hi(v):
    """The low and high 32-bit words of a 64-bit integer tile, as uint32."""
    return ct.astype(v, ct.uint32), ct.astype(ct.astype(v, ct.uint64) >> 32, ct.uint32)


def philox_first_word(c0, c1, k0, k1):
    """Word 0 of Philox4x32-10 of the counter (c0, c1, 0, 0) under the key (k0, k1) (uint32 tiles)."""
    c2 = ct.zeros(c0.shape, dtype=ct.uint32)
    c3 = ct.zeros(c0.shape, dtype=ct.uint32)
    for _ in range(PHILOX_ROUNDS):
        p0 = ct.astype(c0, ct.uint64) * PHILOX_M0
        p1 = ct.astype(c2, ct.uint64) * PHILOX_M1
        lo0, hi0 = lo_hi(p0)
        lo1, hi1 = lo_hi(p1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + PHILOX_W0
        k1 = k1 + PHILOX_W1
    return c0


def keep_mask(bid, seed, offset, threshold, TILE):
    """Which elements of tile `bid` dropout keeps: a boolean (TILE,) tile."""
    index = ct.astype(bid, ct.int64) * TILE + ct.arange(TILE, dtype=ct.int64)
    c0, c1 = lo_hi(index + offset)
    key = ct.full((TILE,), seed, dtype=ct.int64)
    k0, k1 = lo_hi(key)
    bits = ct.astype(philox_first_word(c0, c1, k0, k1) >> 8, ct.int32)
    return bits >= threshold


def scaled_where(t, keep, scale):
    return ct.where(keep, ct.astype(t, ct.float32) * scale, 0.0)


@ct.kernel
def dropout_fwd_kernel(x, y, seed: ct.ScalarInt64, offset: ct.ScalarInt64, threshold, scale, TILE: ConstInt):
    bid = ct.bid(0)
    keep = keep_mask(bid, seed, offset, threshold, TILE)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(bid,), tile=ct.astype(scaled_where(t, keep, scale), y.dtype))


@ct.kernel
def dropout_bwd_kernel(dy, dx, seed: ct.ScalarInt64, offset: ct.ScalarInt64, threshold, scale, TILE: ConstInt):
    bid = ct.bid(0)
    keep = keep_mask(bid, seed, offset, threshold, TILE)
    t = ct.load(dy, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(dx, index=(bid,), tile=ct.astype(scaled_where(t, keep, scale), dx.dtype))
