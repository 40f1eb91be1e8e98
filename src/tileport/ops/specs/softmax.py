"""softmax over the last axis of [M, N]: four specs over the kernels of kernels/softmax.py.

- `softmax` (the operator) takes, per row width, the variant measured fastest on H200 (CUPTI, L2
  flushed, GB/s, see docs/corpus.md) unless a tuned configuration is cached (ops/autotune.py):
    next_pow2(N) <= 8192   -> (b) gather rows, one block per row (f16 4096^2: 3641 vs 2919 for (a);
                              bf16 8192x1000: 2265 vs 828; f32 4096^2: 3938 vs 3580)
    next_pow2(N) <= 16384  -> (a) TMA rows, occupancy 2: the prefetch entry where it holds the row
                              (f16 1024x16384: 72.4 % of the copy bandwidth vs 55.3 % without
                              prefetch), else the wide entry (f32 1024x16384: 3207 vs 2938 for (b))
    longer rows            -> (d) split rows when there are fewer than SPLIT_MAX_ROWS of them
                              (f16 256x131072: 48.2 % vs 35.2 %), else (c) chunked online softmax
- `softmax_tma` (specs/softmax_tma.py) pins variant (a) (the occupancy-4 entry up to 8192 columns,
  the occupancy-2 entry up to 16384; BLOCK_M rows per tile for short rows, ROW_TILE_BYTES per load),
  `softmax_gather` (specs/softmax_gather.py) pins (b) and `softmax_online` (specs/softmax_online.py)
  pins (c), so each kernel is tested and benchmarked on its own.

Configuration space (`spec.tune`, searched by `python3 -m tileport.gpu.autotune`): a configuration
is {"variant": "gather" | "tma" | "online" | "split", knobs}: gather {grid}; tma {kernel (occupancy 4,
2, 2 with the next row block prefetched, or 2 with 8 worker warps holding the row in its own dtype),
BLOCK_M, grid}; online {kernel (pass 2 forward, or last chunk first), CHUNK,
BLOCK_M, grid}; split {TILE (columns per block), GROUPS (row groups run as one stats + write pair
each)}. The operator searches gather and tma while a row fits one tile, split too for rows of
MAX_NARROW_TILE columns and more, online and split beyond one tile; softmax_online searches online and
split (rows of >= 2 split tiles); softmax_tma tma (online beyond one tile). Grids: "persistent" =
min(tiles, NUM_SMS * occupancy), "full" = one block per tile.
"""

from __future__ import annotations

import importlib

from .. import autotune
from ..spec import Capture, ConfigSpace, Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_SOFTMAX, cdiv, next_pow2, num_sms,
                      per_dtype_captures, randn, rows_per_block, generator, torch)
from ._tune import BLOCK_MS, GRIDS, block_ms, row_candidates, row_grid, rows_class

# Occupancy hints of the kernels (must match the @ct.kernel decorators; a CPU test checks it).
OCCUPANCY = {"softmax_tma_kernel": 4, "softmax_tma_wide_kernel": 2, "softmax_tma_prefetch_kernel": 2,
             "softmax_tma_lean_kernel": 2, "softmax_gather_kernel": 4, "softmax_online_kernel": 4,
             "softmax_online_rev_kernel": 4, "softmax_split_stats_kernel": 4, "softmax_split_write_kernel": 4}
TMA_ENTRIES = {k: OCCUPANCY[k] for k in ("softmax_tma_kernel", "softmax_tma_wide_kernel",
                                          "softmax_tma_prefetch_kernel", "softmax_tma_lean_kernel")}
PREFETCH = "softmax_tma_prefetch_kernel"
LEAN = "softmax_tma_lean_kernel"
LEAN_MAX_BYTES = 32768  # its row block in the input dtype: a 16384-wide f16 row (128 registers, no spill)
SPLIT_ENTRIES = ("softmax_split_stats_kernel", "softmax_split_write_kernel")
SPLIT_TILES = (2048, 4096, 8192)  # columns per block (<= 8192 f32: the occupancy-4 budget)
SPLIT_GROUPS = (1, 2, 4)  # row groups; a pair per group, so that a group's tiles stay in L2 for pass 2
MAX_GRID_Y = 65535  # the split grid's row axis
# The long-row default splits rows when there are fewer than this many (fewer than 4 online blocks
# per SM on a 132-SM H200 leave SMs idle), into tiles of this many columns.
SPLIT_MAX_ROWS = 512
SPLIT_DEFAULT_TILE = 2048
GROUP_ROW_ALIGN = 16  # rows per group: a multiple of this (row r0 of any array then starts 16-byte aligned)
ONLINE_ENTRIES = ("softmax_online_kernel", "softmax_online_rev_kernel")
# The online default walks pass 2 last chunk first: a row of one chunk is read once, and on H200 it beat
# the forward pass 2 on cuTile Python at every bench shape it was timed on (4096x4096: f16 27.4 vs
# 30.7 us, bf16 28.7 vs 35.8, f32 38.4 vs 39.5; 1024x16384: f16 27.9 vs 28.6, bf16 30.2 vs 31.7, f32
# 46.6 vs 52.2 at CHUNK 8192), bench/results/2026-12-03-h200-softmax-online-configs.json.
ONLINE_DEFAULT_KERNEL = "softmax_online_rev_kernel"
# Row tiles up to MAX_NARROW_TILE columns use softmax_tma_kernel (occupancy 4), up to MAX_TMA_TILE
# softmax_tma_wide_kernel (occupancy 2); longer rows the online kernel.
MAX_NARROW_TILE = 8192
MAX_TMA_TILE = 16384
MAX_GATHER_TILE = 16384
# Column chunk of the online default, every dtype (H200, last-first kernel, 1024x16384: f16 27.9 us at
# 4096 vs 30.1 at 8192, bf16 30.2 vs 30.9, f32 46.6 vs 49.3).
ONLINE_CHUNK = 4096
ONLINE_CHUNKS = (1024, 2048, 4096, 8192)  # the search's chunks (<= 8192 f32: occupancy 4 budget)
CHUNK_AXIS = tuple(1 << i for i in range(14))  # declared: a short row is one chunk of next_pow2(N)
ONLINE_TOP_BLOCK_MS = 2
VARIANTS = ("gather", "tma", "online", "split")


def make_inputs(shape, dtype, device, seed=0):
    # scale 4: rows span ~e^30 in probability, far from uniform, still finite in every dtype
    return (randn(shape, dtype, device, generator(device, seed), scale=4.0),)


def reference(x):
    return torch().softmax(x.float(), dim=-1).to(x.dtype)


def allocate(x):
    return torch().empty_like(x)


def tma_constants(n_rows: int, n_cols: int, dtype: str) -> dict:
    tile = next_pow2(n_cols)
    return {"BLOCK_M": rows_per_block(n_rows, tile, dtype), "TILE": tile}


def online_chunk(n_cols: int) -> int:
    return min(next_pow2(n_cols), ONLINE_CHUNK)


def _check(x):
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError("softmax takes a 2-D tensor with unit last stride")


# ---------------------------------------------------------------------------------------------
# Configurations of the three variants ({"variant": ..., knobs}); see specs/_tune.py for the rules.


def gather_candidates(shape, dtype) -> list[dict]:
    return [{"variant": "gather", "grid": g} for g in GRIDS] if next_pow2(shape[1]) <= MAX_GATHER_TILE else []


def gather_default(shape, dtype) -> dict:
    # One block per row: for the pointer path a full grid beat the persistent one on H200
    # (f16 4096x4096: 3561 vs 2770 GB/s; 8192x1000: 1939 vs 1253 GB/s).
    return {"variant": "gather", "grid": "full"}


def prefetch_fits(block_m: int, tile: int, dtype: str) -> bool:
    """The prefetch entry holds the next tile in the input dtype beside the f32 working tile: at most
    a (1, 16384) f16 row's worth (compiled without spills at occupancy 2). It only runs persistent:
    with one block per tile there is no next block, and the extra load would be pure cost."""
    return block_m * tile * (4 + ELEMENT_SIZE[dtype]) <= 16384 * (4 + 2)


def tma_fits(config: dict, tile: int, dtype: str) -> bool:
    """The prefetch and lean entries' own register limits (the others: the occupancy budget only)."""
    if config["kernel"] == PREFETCH:
        return prefetch_fits(config["BLOCK_M"], tile, dtype) and config["grid"] == "persistent"
    if config["kernel"] == LEAN:
        return config["BLOCK_M"] * tile * ELEMENT_SIZE[dtype] <= LEAN_MAX_BYTES
    return True


def tma_candidates(shape, dtype) -> list[dict]:
    tile = next_pow2(shape[1])
    if tile > MAX_TMA_TILE:
        return []
    keep = rows_per_block(shape[0], tile, dtype)
    return [{"variant": "tma", **c} for c in row_candidates(shape[0], tile, TMA_ENTRIES, keep)
            if tma_fits(c, tile, dtype)]


def tma_default(shape, dtype) -> dict:
    """Wide rows (beyond MAX_NARROW_TILE) take the prefetch entry where its registers hold the row
    (H200, f16 1024x16384: 72.4 % of the copy bandwidth vs 55.3 % for the wide entry; the wide entry
    for f32 rows)."""
    tile = next_pow2(shape[1])
    block_m = rows_per_block(shape[0], tile, dtype)
    if tile <= MAX_NARROW_TILE:
        kernel = "softmax_tma_kernel"
    else:
        kernel = PREFETCH if prefetch_fits(block_m, tile, dtype) else "softmax_tma_wide_kernel"
    return {"variant": "tma", "kernel": kernel, "BLOCK_M": block_m, "grid": "persistent"}


def online_candidates(shape, dtype) -> list[dict]:
    m, n = shape
    occ = OCCUPANCY["softmax_online_kernel"]
    chunks = sorted({min(next_pow2(n), c) for c in ONLINE_CHUNKS} | {online_chunk(n)})
    return [{"variant": "online", "kernel": k, "CHUNK": chunk, "BLOCK_M": bm, "grid": g}
            for k in ONLINE_ENTRIES for chunk in chunks
            for bm in block_ms(m, chunk, occ, ONLINE_TOP_BLOCK_MS, keep=1) for g in GRIDS]


def online_default(shape, dtype) -> dict:
    return {"variant": "online", "kernel": ONLINE_DEFAULT_KERNEL, "CHUNK": online_chunk(shape[1]),
            "BLOCK_M": 1, "grid": "persistent"}


def long_row_default(shape, dtype) -> dict:
    """Rows beyond one tile: the split pair when the rows are too few to fill the GPU with one online
    block each (H200, f16 256x131072: 48.2 % of the copy bandwidth vs 35.2 % online), else the
    online kernel (f16 1024x16384: 55.9 % vs 47.5 % split)."""
    if shape[0] < SPLIT_MAX_ROWS and next_pow2(shape[1]) >= 2 * SPLIT_DEFAULT_TILE:
        return {"variant": "split", "TILE": SPLIT_DEFAULT_TILE, "GROUPS": 1}
    return online_default(shape, dtype)


def split_candidates(shape, dtype) -> list[dict]:
    """(d): tiles that split a row in at least two, row groups of at most MAX_GRID_Y rows (the
    candidates depend on the shape class only: the padded row width and row count)."""
    m, n = next_pow2(shape[0]), next_pow2(shape[1])
    return [{"variant": "split", "TILE": t, "GROUPS": g} for t in SPLIT_TILES if n // t >= 2
            for g in SPLIT_GROUPS if g <= m and m // g <= MAX_GRID_Y]


def online_or_split_candidates(shape, dtype) -> list[dict]:
    """softmax_online: the chunked kernels and the split pair (pass 2 re-reads the row either way)."""
    return online_candidates(shape, dtype) + split_candidates(shape, dtype)


def operator_candidates(shape, dtype) -> list[dict]:
    """The operator's choice among the variants: gather / TMA rows while a row fits one tile (and
    the split pair for rows of MAX_NARROW_TILE and more: few rows of one block each leave SMs idle),
    the online kernel and the split pair beyond (re-reading a row that fits in registers only costs
    bandwidth)."""
    tile = next_pow2(shape[1])
    if tile <= MAX_TMA_TILE:
        wide = split_candidates(shape, dtype) if tile >= MAX_NARROW_TILE else []
        return gather_candidates(shape, dtype) + tma_candidates(shape, dtype) + wide
    return online_or_split_candidates(shape, dtype)


def operator_default(shape, dtype) -> dict:
    """Per row width, the variant measured fastest on H200 (see the module docstring)."""
    tile = next_pow2(shape[1])
    if tile <= MAX_NARROW_TILE:
        return gather_default(shape, dtype)
    if tile <= MAX_TMA_TILE:
        return tma_default(shape, dtype)
    return long_row_default(shape, dtype)


def tma_or_online_candidates(shape, dtype) -> list[dict]:
    """softmax_tma: variant (a) while a row fits one tile, the online kernel beyond."""
    return tma_candidates(shape, dtype) or online_candidates(shape, dtype)


def tma_or_online_default(shape, dtype) -> dict:
    return tma_default(shape, dtype) if next_pow2(shape[1]) <= MAX_TMA_TILE else online_default(shape, dtype)


def space(candidates, default) -> ConfigSpace:
    axes = {"variant": VARIANTS, "kernel": tuple(TMA_ENTRIES) + ONLINE_ENTRIES, "BLOCK_M": BLOCK_MS,
            "CHUNK": CHUNK_AXIS, "grid": GRIDS, "TILE": SPLIT_TILES, "GROUPS": SPLIT_GROUPS}
    return ConfigSpace(axes=axes, candidates=candidates, default=default, shape_class=rows_class)


# ---------------------------------------------------------------------------------------------
# Plans


def split_launches(x, outs, config: dict) -> list[Launch]:
    """(d): per row group, the stats pass then the write pass over row slices of x, y and the f32
    partials [rows, splits] (allocated here, like matmul_splitk's workspace)."""
    t = torch()
    n_rows, n_cols = x.shape
    tile = config["TILE"]
    splits = cdiv(n_cols, tile)
    part_max = t.empty((n_rows, splits), dtype=t.float32, device=x.device)
    part_sum = t.empty((n_rows, splits), dtype=t.float32, device=x.device)
    # groups of a multiple of GROUP_ROW_ALIGN rows: every row slice starts 16-byte aligned (the ports'
    # launch check rejects a misaligned array)
    group = cdiv(cdiv(n_rows, config["GROUPS"]), GROUP_ROW_ALIGN) * GROUP_ROW_ALIGN
    launches = []
    for r0 in range(0, n_rows, group):
        rows = slice(r0, min(n_rows, r0 + group))
        grid = (splits, rows.stop - rows.start, 1)
        pm, ps = part_max[rows], part_sum[rows]
        launches += [Launch(SPLIT_ENTRIES[0], grid, {"x": x[rows], "part_max": pm, "part_sum": ps, "TILE": tile}),
                     Launch(SPLIT_ENTRIES[1], grid, {"x": x[rows], "part_max": pm, "part_sum": ps, "y": outs[rows],
                                                     "TILE": tile, "SPLITS": next_pow2(splits)})]
    return launches


def launches_for(x, outs, config: dict, sms: int) -> list[Launch]:
    """The launches of one configuration (x checked by the caller)."""
    n_rows, tile = x.shape[0], next_pow2(x.shape[1])
    variant = config["variant"]
    if variant == "gather":
        k = "softmax_gather_kernel"
        return [Launch(k, row_grid(config, n_rows, sms, OCCUPANCY[k]), {"x": x, "y": outs, "TILE": tile})]
    if variant == "split":
        return split_launches(x, outs, config)
    k, bm = config["kernel"], config["BLOCK_M"]
    grid = row_grid(config, cdiv(n_rows, bm), sms, OCCUPANCY[k])
    if variant == "tma":
        return [Launch(k, grid, {"x": x, "y": outs, "BLOCK_M": bm, "TILE": tile})]
    return [Launch(k, grid, {"x": x, "y": outs, "BLOCK_M": bm, "CHUNK": config["CHUNK"]})]


def _plan(spec_name: str, x, outs, config):
    _check(x)
    cfg = autotune.resolve(importlib.import_module(f"{__package__}.{spec_name}").SPEC, x, config)
    return launches_for(x, outs, cfg, num_sms(x.device))


def plan_softmax(x, outs, config=None):
    """The operator: the tuned configuration, else the fastest measured variant for the row width."""
    return _plan("softmax", x, outs, config)


def plan_tma(x, outs, config=None):
    """Variant (a); rows longer than MAX_TMA_TILE go to the online kernel."""
    return _plan("softmax_tma", x, outs, config)


def plan_gather(x, outs, config=None):
    _check(x)
    if next_pow2(x.shape[1]) > MAX_GATHER_TILE:
        raise ValueError(f"softmax_gather: rows longer than {MAX_GATHER_TILE} need softmax_online")
    return _plan("softmax_gather", x, outs, config)


def plan_online(x, outs, config=None):
    return _plan("softmax_online", x, outs, config)


def softmax_bytes(shape, dt):
    return 2 * shape[0] * shape[1] * ELEMENT_SIZE[dt]


def softmax_flops(shape):
    return 5 * shape[0] * shape[1]


IO_RANKS = {"x": 2, "y": 2}
BENCH = [(4096, 4096), (8192, 1000), (1024, 16384)]
SHAPES_SINGLE_TILE = [(1, 1), (3, 7), (256, 1009), (1823, 781), (300, 5000), (4096, 4096),
                      (8192, 1000), (1024, 16384)]
SHAPES_LONG = [(16, 100_003), (4, 262_144)]
# Captures per kernel, shared with the variant specs.
GATHER_CAPTURES = per_dtype_captures("softmax_gather_kernel", IO_RANKS, lambda dt: {"TILE": 4096})


def wide_row_constants(dt: str) -> dict:
    """The widest row the prefetch and lean entries hold: 16384 16-bit or 8192 f32 values."""
    return tma_constants(1024, 16384 if dt != "float32" else 8192, dt)


TMA_CAPTURES = (per_dtype_captures("softmax_tma_kernel", IO_RANKS, lambda dt: tma_constants(4096, 4096, dt))
                + per_dtype_captures(PREFETCH, IO_RANKS, wide_row_constants)
                + per_dtype_captures(LEAN, IO_RANKS, wide_row_constants))
TMA_WIDE_CAPTURES = per_dtype_captures("softmax_tma_wide_kernel", IO_RANKS,
                                       lambda dt: tma_constants(1024, 16384, dt))
ONLINE_CAPTURES = (per_dtype_captures("softmax_online_kernel", IO_RANKS,
                                      lambda dt: {"BLOCK_M": 1, "CHUNK": ONLINE_CHUNK})
                   + per_dtype_captures("softmax_online_rev_kernel", IO_RANKS,
                                        lambda dt: {"BLOCK_M": 1, "CHUNK": ONLINE_CHUNK})
                   + [Capture("softmax_online_kernel", {"x": ("float16", 2), "y": ("float16", 2)},
                              constants={"BLOCK_M": 2, "CHUNK": 4096})])  # several rows per tile
PARTIALS = {"part_max": ("float32", 2), "part_sum": ("float32", 2)}
SPLIT_CAPTURES = (per_dtype_captures(SPLIT_ENTRIES[0], {"x": 2}, lambda dt: {"TILE": 8192}, fixed_arrays=PARTIALS)
                  + per_dtype_captures(SPLIT_ENTRIES[1], IO_RANKS, lambda dt: {"TILE": 8192, "SPLITS": 16},
                                       fixed_arrays=PARTIALS))

SPEC = OpSpec(
    name="softmax",
    kernel_file="softmax.py",
    kernels=["softmax_gather_kernel", "softmax_tma_kernel", "softmax_tma_wide_kernel", PREFETCH, LEAN,
             *ONLINE_ENTRIES, *SPLIT_ENTRIES],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan_softmax,
    shapes=SHAPES_SINGLE_TILE + SHAPES_LONG,
    bench_shapes=BENCH,
    tolerances=TOL_SOFTMAX,
    captures=GATHER_CAPTURES + TMA_CAPTURES + TMA_WIDE_CAPTURES + ONLINE_CAPTURES + SPLIT_CAPTURES,
    bytes=softmax_bytes,
    flops=softmax_flops,
    tune=space(operator_candidates, operator_default),
)
