"""rope: rotary embedding (rotate-half) of x [batch, seq, heads, head_dim] with cos/sin [seq, D/2] f32.

Tables: cos[s, i] = cos(s * base^(-2i/D)), sin likewise (positions = sequence index). The plan passes
the free [B, S, H, 2, D/2] views of x and y to the kernel ([B * S, H, 2, D/2] to the rows entries).
"""

from __future__ import annotations

from itertools import product

from .. import autotune
from ..spec import Capture, ConfigSpace, Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, generator, next_pow2, num_sms,
                      numel, per_dtype_captures, randn, torch)

BASE = 10000.0
# Elements of one half-tile (x1 or x2) a block aims for: all heads of one position up to this size.
HALF_TILE_ELEMS = 2048
# Positions per block. One position per block measured best on H200 for rope_kernel (bf16
# 4x4096x32x128: 3143 GB/s with BLOCK_S=1, 757 with 2, 916 with 4), so the default keeps 1; the
# search still offers 2 to 8 (the rows entries with 8 heads move only 2 KiB per block at 1).
BLOCK_S = 1


# The search: the entry, positions and heads per block, with at most MAX_HALF_TILE_ELEMS elements per
# half-tile (x1 and x2 in f32 registers). rope_persistent_kernel runs PERSISTENT_BLOCKS_PER_SM blocks
# per SM over all (head block, batch) pairs, each looping over sequence blocks;
# rope_rows_persistent_kernel and rope_rows_pair_persistent_kernel ROWS_PERSISTENT_BLOCKS_PER_SM blocks per SM
# over the head blocks, each looping over row blocks.
ROWS = "rope_rows_kernel"
ROWS_PAIR = "rope_rows_pair_kernel"
ROWS_PAIR_PERSISTENT = "rope_rows_pair_persistent_kernel"
ROWS_PERSISTENT = "rope_rows_persistent_kernel"
ROWS_NOTMA = "rope_rows_notma_kernel"
# The entries over [B * S, H, 2, D/2]: a row block of BLOCK_S rows must not straddle two sequences
# (its table rows are one sequence block), so they take BLOCK_S only where it divides S.
ROWS_ENTRIES = (ROWS, ROWS_PAIR, ROWS_PERSISTENT, ROWS_NOTMA, ROWS_PAIR_PERSISTENT)
# one tile per block / a loop over sequence blocks / the rows entries: one tile per block, one load
# of both halves per block, a loop over row blocks, one tile per block with x and y accessed without
# TMA (vector loads and stores straight to and from registers), the one-load entry looping over row
# blocks (4 blocks per SM, loads and stores hinted at the highest DRAM latency). Registers per thread on sm_90
# (compiled on the CPU, f16 [1, 16384, 8, 128], (BLOCK_S, BLOCK_H) = (1, 8) / (2, 8) / (4, 8)):
# rows 35 / 68 / 126, pair 32 / 56 / 64.
ENTRIES = ("rope_kernel", "rope_persistent_kernel") + ROWS_ENTRIES
BLOCK_SS = (1, 2, 4, 8)
BLOCK_HS = tuple(1 << i for i in range(13))
MAX_HALF_TILE_ELEMS = 4096
PERSISTENT_BLOCKS_PER_SM = 4
PERSISTENT_MIN_HEADS = 32
# Blocks per SM of the persistent rows entry: its pipelined loop takes 88 to 162 registers per thread
# at the [1, 16384, 8, 128] f16 candidates' tiles (sm_90, compiled on the CPU; 35 to 126 without the
# loop), so 4 blocks of 128 threads are about what an SM holds; the persistent pair entry is compiled for
# 4 blocks per SM (its occupancy hint).
ROWS_PERSISTENT_BLOCKS_PER_SM = 4


def tiles(s: int, h: int, half: int) -> tuple[int, int, int]:
    half_tile = next_pow2(half)
    block_h = min(next_pow2(h), max(1, HALF_TILE_ELEMS // half_tile))
    return min(BLOCK_S, next_pow2(s)), block_h, half_tile


def candidates(shape, dtype) -> list[dict]:
    """BLOCK_H: the default's (all heads up to HALF_TILE_ELEMS) or half of it; BLOCK_S: 1 to 8
    positions (the rows entries: those dividing S); tiles between a quarter of the default's size
    (at most HALF_TILE_ELEMS / 4: smaller blocks only add per-block cost) and MAX_HALF_TILE_ELEMS;
    every entry."""
    _, s, h, d = shape
    block_s, block_h, half_tile = tiles(s, h, d // 2)
    lo = min(HALF_TILE_ELEMS // 4, block_s * block_h * half_tile)
    hi = max(MAX_HALF_TILE_ELEMS, half_tile)
    return [{"kernel": k, "BLOCK_S": bs, "BLOCK_H": bh}
            for k, bs, bh in product(ENTRIES, BLOCK_SS, sorted({block_h, max(1, block_h // 2)}))
            if bs <= next_pow2(s) and lo <= bs * bh * half_tile <= hi
            and (k not in ROWS_ENTRIES or s % bs == 0)]


def default(shape, dtype) -> dict:
    """One tile per block; for full tiles of PERSISTENT_MIN_HEADS heads or more, the persistent
    entry on half of them (H200, f16 4x4096x32x128: 78.8 % of the copy bandwidth vs 74.1 %; with 8
    heads the one-tile entry stays ahead, 67.1 % vs 65.4 %). A batch of one takes the rows entry,
    whose [S, H, 2, D/2] view has no length-1 axis: cuTile Python compiles a length-1 axis as the
    constant 1, the cutile-rs port keeps rope's lengths dynamic (its launcher cannot make that axis
    static without a false divisibility claim), and on [1, 16384, 8, 128] the port took 1.12x the
    time (H200, f16 and bf16); on cuTile Python the rows entry runs as fast as the one-tile entry
    (66.6 % vs 67.1 %). With an even sequence it takes the pair entry on two positions per block
    (both halves in one load): the search's H200 winner on f16 [1, 16384, 8, 128], 73.8 % of the
    copy bandwidth vs 66.7 % for the rows entry (both backends, rs/cuTile 1.001). Where 4 divides the
    sequence and 4 positions of the block's heads are at most HALF_TILE_ELEMS per half (that tile's
    size), the persistent pair entry on 4 positions per block: 0.953x the time of the pair entry on 4
    positions compiled for 8 blocks per SM and 0.912x that of the pair entry on 2 positions, timed side
    by side (H200, f16 [1, 16384, 8, 128], bench/results/2026-12-02-h200-rope-latency.json; its shares of
    the copy bandwidth read high, as its caveat says); 80.7 % of the copy bandwidth measured without that
    effect (bench/results/2026-12-02-h200-bench-weak-copy-nocompile.json)."""
    b, s, h, d = shape
    block_s, block_h, half_tile = tiles(s, h, d // 2)
    if block_h >= PERSISTENT_MIN_HEADS:
        return {"kernel": "rope_persistent_kernel", "BLOCK_S": block_s, "BLOCK_H": block_h // 2}
    if b == 1:
        if s % 4 == 0 and 4 * block_h * half_tile <= HALF_TILE_ELEMS:
            return {"kernel": ROWS_PAIR_PERSISTENT, "BLOCK_S": 4, "BLOCK_H": block_h}
        if s % 2 == 0:
            return {"kernel": ROWS_PAIR, "BLOCK_S": 2, "BLOCK_H": block_h}
        return {"kernel": ROWS, "BLOCK_S": 1, "BLOCK_H": block_h}
    return {"kernel": "rope_kernel", "BLOCK_S": block_s, "BLOCK_H": block_h}


def shape_class(shape) -> str:
    """The padded sizes, and the largest BLOCK_S dividing S (it decides the rows entries' candidates)."""
    b, s, h, d = shape
    rows_block_s = max(bs for bs in BLOCK_SS if s % bs == 0)
    return f"B{next_pow2(b)}xS{next_pow2(s)}/{rows_block_s}xH{next_pow2(h)}xD{next_pow2(d // 2) * 2}"


def grid_for(config: dict, s: int, h: int, b: int, sms: int) -> tuple[int, int, int]:
    seq_blocks, head_blocks = cdiv(s, config["BLOCK_S"]), cdiv(h, config["BLOCK_H"])
    if config["kernel"] in (ROWS_PERSISTENT, ROWS_PAIR_PERSISTENT):
        return (min(b * seq_blocks, max(1, sms * ROWS_PERSISTENT_BLOCKS_PER_SM // head_blocks)), head_blocks, 1)
    if config["kernel"] in ROWS_ENTRIES:
        return (b * seq_blocks, head_blocks, 1)
    if config["kernel"] == "rope_persistent_kernel":
        seq_blocks = min(seq_blocks, max(1, sms * PERSISTENT_BLOCKS_PER_SM // (head_blocks * b)))
    return (seq_blocks, head_blocks, b)


def rope_tables(seq: int, head_dim: int, device):
    t = torch()
    inv_freq = BASE ** (-t.arange(0, head_dim, 2, dtype=t.float64, device=device) / head_dim)
    ang = t.arange(seq, dtype=t.float64, device=device)[:, None] * inv_freq[None, :]
    return t.cos(ang).float().contiguous(), t.sin(ang).float().contiguous()


def make_inputs(shape, dtype, device, seed=0):
    b, s, h, d = shape
    if d % 2:
        raise ValueError("rope needs an even head_dim")
    x = randn(shape, dtype, device, generator(device, seed))
    cos, sin = rope_tables(s, d, device)
    return x, cos, sin


def reference(x, cos, sin):
    xf = x.float()
    half = x.shape[-1] // 2
    x1, x2 = xf[..., :half], xf[..., half:]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch().cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def allocate(x, cos, sin):
    return torch().empty_like(x)


def plan(x, cos, sin, outs, config=None):
    b, s, h, d = x.shape
    half = d // 2
    if d % 2 or not x.is_contiguous() or cos.shape != (s, half) or sin.shape != (s, half):
        raise ValueError("rope takes contiguous x [B, S, H, D] (D even) and cos/sin [S, D/2]")
    cfg = autotune.resolve(SPEC, x, config)
    split_heads = (b * s, h, 2, half) if cfg["kernel"] in ROWS_ENTRIES else (b, s, h, 2, half)
    return [Launch(cfg["kernel"], grid_for(cfg, s, h, b, num_sms(x.device)), {
        "x": x.view(*split_heads), "cos": cos, "sin": sin, "y": outs.view(*split_heads),
        "BLOCK_S": cfg["BLOCK_S"], "BLOCK_H": cfg["BLOCK_H"], "HALF_TILE": next_pow2(half)})]


def _constants(dt):
    bs, bh, ht = tiles(4096, 32, 64)
    return {"BLOCK_S": bs, "BLOCK_H": bh, "HALF_TILE": ht}


SPEC = OpSpec(
    name="rope",
    kernel_file="rope.py",
    kernels=list(ENTRIES),
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1, 2), (2, 7, 3, 80), (1, 129, 8, 128), (1, 130, 5, 96), (1, 132, 5, 96), (3, 33, 5, 96),
            (4, 1024, 32, 128)],
    bench_shapes=[(4, 4096, 32, 128), (1, 16384, 8, 128)],
    tolerances=TOL_POINTWISE,
    captures=(per_dtype_captures("rope_kernel", {"x": 5, "y": 5}, _constants,
                                 fixed_arrays={"cos": ("float32", 2), "sin": ("float32", 2)})
              # the [1, 16384, 8, 128] benchmark's tile (8 heads per block)
              + per_dtype_captures("rope_persistent_kernel", {"x": 5, "y": 5},
                                   lambda dt: {"BLOCK_S": 1, "BLOCK_H": 8, "HALF_TILE": 64},
                                   fixed_arrays={"cos": ("float32", 2), "sin": ("float32", 2)})
              + per_dtype_captures(ROWS, {"x": 4, "y": 4}, _constants,
                                   fixed_arrays={"cos": ("float32", 2), "sin": ("float32", 2)})
              # the rows entries on the [1, 16384, 8, 128] benchmark's rows with several positions per block
              + [Capture(ROWS, {"x": ("float16", 4), "y": ("float16", 4), "cos": ("float32", 2),
                                "sin": ("float32", 2)}, constants={"BLOCK_S": 4, "BLOCK_H": 8, "HALF_TILE": 64})]
              + [cap for entry in (ROWS_PAIR, ROWS_PERSISTENT, ROWS_NOTMA)
                 for cap in per_dtype_captures(entry, {"x": 4, "y": 4},
                                               lambda dt: {"BLOCK_S": 2, "BLOCK_H": 8, "HALF_TILE": 64},
                                               fixed_arrays={"cos": ("float32", 2), "sin": ("float32", 2)})]
              + per_dtype_captures(ROWS_PAIR_PERSISTENT, {"x": 4, "y": 4},
                                   lambda dt: {"BLOCK_S": 4, "BLOCK_H": 8, "HALF_TILE": 64},
                                   fixed_arrays={"cos": ("float32", 2), "sin": ("float32", 2)})),
    bytes=lambda shape, dt: (2 * numel(shape) * ELEMENT_SIZE[dt]
                             + 2 * shape[1] * (shape[3] // 2) * 4),
    flops=lambda shape: 3 * numel(shape),
    tune=ConfigSpace(axes={"kernel": ENTRIES, "BLOCK_S": BLOCK_SS, "BLOCK_H": BLOCK_HS},
                     candidates=candidates, default=default, shape_class=shape_class),
)
