"""dropout: y = x * keep / (1 - p) over a flattened tensor, the mask drawn by Philox4x32-10.

Inputs (x, seed, offset, p): element i is kept iff word 0 of Philox4x32-10 of the counter
(lo32(offset + i), hi32(offset + i), 0, 0) under the key (lo32(seed), hi32(seed)), shifted right
by 8, is >= round(p * 2^24) (kernels/dropout.py). The mask is a function of (seed, offset, i) only:
dropout_bwd recomputes it, and a caller that draws several masks from one seed advances `offset` by
the elements each one used, as torch's Philox offsets do.

The reference implements the same Philox with int64 torch operators (`philox4x32`: 32-bit words in
int64, the 32 x 32 -> 64 products split in 16-bit halves so that nothing overflows), so the mask is
bit-identical and a kept value is the same f32 product rounded once: the tolerance is exact.
"""

from __future__ import annotations

from ..spec import Launch, OpSpec, Tolerance
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, cdiv, flat, flat_tile, generator, numel,
                      per_dtype_captures, randn, torch)
from ._elementwise import MATRIX_SHAPES

MASK32 = 0xFFFFFFFF
PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers
PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key schedule (Weyl) increments
PHILOX_ROUNDS = 10
RANDOM_BITS = 24  # the word's top 24 bits are compared with round(p * 2^24)

# Exact: the mask is the kernel's bit for bit, a kept value one f32 multiply rounded once.
TOL_EXACT = {dt: Tolerance(rtol=0.0, atol=0.0) for dt in FLOAT_DTYPES}
# The test inputs cross a 2^32 boundary of the counter (its high word changes inside the tensor).
SEED = 0x5EED_1234_ABCD
OFFSET = (1 << 32) - 3000
P = 0.3
SCALARS = {"seed": "int64", "offset": "int64", "threshold": "int32", "scale": "float32"}


def _mulhilo(a, m: int):
    """(hi, lo) 32-bit words of a * m for 32-bit words `a` held in int64 (any array type with integer
    operators: torch or NumPy) and a 32-bit constant `m`; no intermediate exceeds 2^50."""
    p_lo = a * (m & 0xFFFF)
    p_hi = a * (m >> 16)
    s = p_lo + ((p_hi & 0xFFFF) << 16)
    return (s >> 32) + (p_hi >> 16), s & MASK32


def philox4x32(c0, c1, c2, c3, k0: int, k1: int, rounds: int = PHILOX_ROUNDS) -> tuple:
    """Philox4x32 (Salmon et al., SC'11) of the counter words under the key, every word in int64."""
    for _ in range(rounds):
        hi0, lo0 = _mulhilo(c0, PHILOX_M[0])
        hi1, lo1 = _mulhilo(c2, PHILOX_M[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + PHILOX_W[0]) & MASK32, (k1 + PHILOX_W[1]) & MASK32
    return c0, c1, c2, c3


def keep_mask(index, seed: int, offset: int, threshold: int):
    """The kernel's keep mask of the int64 element indices `index` (torch or NumPy)."""
    counter = index + offset
    zero = counter * 0
    word = philox4x32(counter & MASK32, (counter >> 32) & MASK32, zero, zero,
                      seed & MASK32, (seed >> 32) & MASK32)[0]
    return (word >> (32 - RANDOM_BITS)) >= threshold


def threshold_of(p: float) -> int:
    return round(p * (1 << RANDOM_BITS))


def scale_of(p: float) -> float:
    """1 / (1 - p) as the f32 value the kernel multiplies by."""
    import struct
    return struct.unpack("f", struct.pack("f", 1.0 / (1.0 - p)))[0]


def make_inputs(shape, dtype, device, seed=0):
    g = generator(device, seed)
    return randn(shape, dtype, device, g), SEED + seed, OFFSET, P


def reference(x, seed, offset, p):
    t = torch()
    index = t.arange(x.numel(), device=x.device, dtype=t.int64).view(x.shape)
    keep = keep_mask(index, seed, offset, threshold_of(p))
    return t.where(keep, x.float() * scale_of(p), 0.0).to(x.dtype)


def allocate(x, seed, offset, p):
    return torch().empty_like(x)


def check_scalars(name: str, n: int, seed: int, offset: int, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name}: p must lie in [0, 1), got {p}")
    if not (-(1 << 63) <= seed < (1 << 63) and 0 <= offset and offset + n < (1 << 63)):
        raise ValueError(f"{name}: seed must be an int64 and 0 <= offset, offset + numel < 2^63")


def dropout_plan(name: str, kernel: str, src: str, dst: str):
    """The plan of dropout / dropout_bwd: one flattened 1-D launch over `src` into `dst`."""

    def plan(x, seed, offset, p, outs):
        check_scalars(name, x.numel(), seed, offset, p)
        n = x.numel()
        tile = flat_tile(n)
        return [Launch(kernel, (cdiv(n, tile), 1, 1),
                       {src: flat(x), dst: flat(outs), "seed": seed, "offset": offset,
                        "threshold": threshold_of(p), "scale": scale_of(p), "TILE": tile})]
    return plan


def dropout_captures(kernel: str, src: str, dst: str) -> list:
    return per_dtype_captures(kernel, {src: 1, dst: 1}, lambda dt: {"TILE": flat_tile(8192 * 8192)},
                              scalars=SCALARS)


SPEC = OpSpec(
    name="dropout",
    kernel_file="dropout.py",
    kernels=["dropout_fwd_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=dropout_plan("dropout", "dropout_fwd_kernel", "x", "y"),
    shapes=[*MATRIX_SHAPES[:3], (3, 50021), *MATRIX_SHAPES[3:]],
    bench_shapes=[(8192, 8192), (16384, 16384)],
    tolerances=TOL_EXACT,
    captures=dropout_captures("dropout_fwd_kernel", "x", "y"),
    bytes=lambda shape, dt: 2 * numel(shape) * ELEMENT_SIZE[dt],
    flops=lambda shape: numel(shape),
)
