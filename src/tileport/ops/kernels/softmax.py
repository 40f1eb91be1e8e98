"""Row softmax over the last axis of a 2-D array, y = softmax(x, dim=-1), in three variants.

All three compute in f32 (inputs f32 / f16 / bf16), subtract the row max before the exponential,
use the approximate exp and an approximate, flush-to-zero divide, and cast back to the output dtype.
Each walks the rows with a grid-stride loop; (a) and (c) are launched persistent (about
NUM_SMS * occupancy tile blocks, one resident wave), (b) with one block per row (the plan's choice:
measured faster for the pointer path).

(a) softmax_tma_kernel / softmax_tma_wide_kernel: BLOCK_M rows = one (BLOCK_M, TILE) view load
    (TILE = next power of two >= n_cols; the plan takes BLOCK_M = 1 for long rows and more rows for
    short ones, so that one load moves enough bytes); the view pads the column tail with -inf, which
    exp() turns into 0, so no mask is needed (rows past the end are padded too and their stores are
    dropped). The two entries share one body and differ in the occupancy hint: 4 resident blocks
    per SM for tiles up to 8192 f32 values, 2 for wider ones (a 16384-wide f32 row tile needs half
    of the register file per block; with occupancy 4 it spills, measured 1.65x slower on H200).
    softmax_tma_prefetch_kernel (occupancy 2) loads row block i+1 before the math of block i, so a
    persistent block always has a load in flight (the row tiles compile to register loads: without
    it a block waits for each load, then computes with nothing in flight). It holds the prefetched
    tile in the input dtype next to the f32 working tile: a 16384-wide f16 row fits (254 registers,
    no spill, sm_90), a 16384-wide f32 row does not.
(b) softmax_gather_kernel: the same row as an element gather/scatter: column offsets come from
    ct.arange, the column bound is an explicit mask (bounds checks off, the row index is always in
    range), masked lanes read -inf.
    softmax_tma_lean_kernel (occupancy 2, 8 worker warps) keeps the row in the input dtype and
    recomputes the exponential in the output pass as exp(x - (max + log(sum))) instead of holding an
    f32 copy, and loads and stores without TMA (allow_tma=False: vector loads and stores as the
    gather kernel's, no TMA copy warps, no shared-memory staging of the output): a 16384-wide f16
    row fits 128 registers per thread without spills (sm_90), twice the threads of
    softmax_tma_wide_kernel issue the row's loads.
(c) softmax_online_kernel: rows too long for one tile. Pass 1 walks BLOCK_M rows in
    (BLOCK_M, CHUNK) tiles, keeping a running max and a running sum per row rescaled by
    exp(old_max - new_max); pass 2 re-reads the rows (mostly from L2) and writes exp(x - max) / sum.
    softmax_online_rev_kernel walks pass 2 last chunk first (see its docstring).
    BLOCK_M > 1 puts more bytes in flight per load for rows of a few chunks (a load moves
    BLOCK_M * CHUNK elements; one 4096-wide f16 row is only 8 KiB); rows past the end are padded
    with -inf and their stores are dropped.
(d) softmax_split_stats_kernel + softmax_split_write_kernel: long rows split across blocks (a row
    of 131072 is the whole work of one block in (c): 256 such rows keep only 256 blocks busy and
    stream 64 MiB through each block's pass 1 before its pass 2 re-reads it, more than L2 holds).
    Pass 1, grid (splits, rows): one (1, TILE) column tile per block reduced to its max and
    sum(exp(x - max)), stored as f32 partials [rows, splits]. Pass 2, same grid walked backwards
    (the tiles pass 1 read last are the likeliest still in L2): the row's partials combined,
    sum = sum_s part_sum[s] * exp(part_max[s] - max), then the block's tile re-read and written.
    The plan may run the pair on row groups (row slices of x, y and the partials), so that one
    group's tiles still sit in L2 when pass 2 re-reads them.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


def softmax_row_blocks_tma(x, y, BLOCK_M, TILE):
    """Persistent grid-stride loop over (BLOCK_M, TILE) row blocks (shared by both TMA kernels)."""
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.load(x, index=(rb, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.NEG_INF)
        t = ct.astype(t, ct.float32)
        row_max = ct.max(t, 1, keepdims=True)
        num = ct.exp(t - row_max, rounding_mode=ct.RoundingMode.APPROX)
        den = ct.sum(num, 1, keepdims=True)
        out = ct.truediv(num, den, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
        ct.store(y, index=(rb, 0), tile=ct.astype(out, y.dtype))


@ct.kernel(occupancy=4)
def softmax_tma_kernel(x, y, BLOCK_M: ConstInt, TILE: ConstInt):
    softmax_row_blocks_tma(x, y, BLOCK_M, TILE)


@ct.kernel(occupancy=2)
def softmax_tma_wide_kernel(x, y, BLOCK_M: ConstInt, TILE: ConstInt):
    softmax_row_blocks_tma(x, y, BLOCK_M, TILE)


@ct.kernel(occupancy=2)
def softmax_tma_prefetch_kernel(x, y, BLOCK_M: ConstInt, TILE: ConstInt):
    """(a) with the next row block's load issued before this one's math (software pipelining by
    hand: the load latency of block i+1 overlaps the reductions of block i)."""
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    ahead = ct.load(x, index=(bid, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.NEG_INF)
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.astype(ahead, ct.float32)
        # a block's last iteration loads the final row block again (in range; the value is unused)
        nxt = min(rb + num_blocks, n_row_blocks - 1)
        ahead = ct.load(x, index=(nxt, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.NEG_INF)
        row_max = ct.max(t, 1, keepdims=True)
        num = ct.exp(t - row_max, rounding_mode=ct.RoundingMode.APPROX)
        den = ct.sum(num, 1, keepdims=True)
        out = ct.truediv(num, den, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
        ct.store(y, index=(rb, 0), tile=ct.astype(out, y.dtype))


@ct.kernel(occupancy=4)
def softmax_gather_kernel(x, y, TILE: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_rows = x.shape[0]
    cols = ct.arange(TILE, dtype=ct.int32)
    in_row = cols < x.shape[1]
    for row in range(bid, n_rows, num_blocks):
        t = ct.gather(x, (row, cols), mask=in_row, padding_value=float("-inf"), check_bounds=False)
        t = ct.astype(t, ct.float32)
        row_max = ct.max(t, 0, keepdims=True)
        num = ct.exp(t - row_max, rounding_mode=ct.RoundingMode.APPROX)
        den = ct.sum(num, 0, keepdims=True)
        out = ct.truediv(num, den, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
        ct.scatter(y, (row, cols), ct.astype(out, y.dtype), mask=in_row, check_bounds=False)


def online_update(t, run_max, run_sum):
    """One chunk t (f32) into the running max and sum, the old sum rescaled by exp(old - new max)."""
    new_max = ct.maximum(run_max, ct.max(t, 1, keepdims=True))
    scale = ct.exp(run_max - new_max, rounding_mode=ct.RoundingMode.APPROX)
    part = ct.sum(ct.exp(t - new_max, rounding_mode=ct.RoundingMode.APPROX), 1, keepdims=True)
    return new_max, run_sum * scale + part


def online_row_stats(x, rb, n_chunks, BLOCK_M, CHUNK):
    """Pass 1 of (c): running max and 1 / sum over the chunks of row block rb. Chunk 0 initializes
    them (it always holds a real column)."""
    t = ct.load(x, index=(rb, 0), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
    t = ct.astype(t, ct.float32)
    run_max = ct.max(t, 1, keepdims=True)
    run_sum = ct.sum(ct.exp(t - run_max, rounding_mode=ct.RoundingMode.APPROX), 1, keepdims=True)
    for c in range(1, n_chunks):
        chunk = ct.load(x, index=(rb, c), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
        run_max, run_sum = online_update(ct.astype(chunk, ct.float32), run_max, run_sum)
    inv_sum = ct.truediv(1.0, run_sum, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    return run_max, inv_sum


def online_row_stats_last(x, rb, n_chunks, BLOCK_M, CHUNK):
    """Pass 1 of (c) with the last chunk peeled off the loop: running max and 1 / sum, and the last
    chunk (f32) still in registers. The running max starts at -inf (exp(-inf - max) = 0 drops the
    empty sum); every chunk before the last is all real columns, so the max is finite from the
    first update on."""
    run_max = ct.full((BLOCK_M, 1), float("-inf"), dtype=ct.float32)
    run_sum = ct.full((BLOCK_M, 1), 0.0, dtype=ct.float32)
    for c in range(n_chunks - 1):
        t = ct.load(x, index=(rb, c), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
        run_max, run_sum = online_update(ct.astype(t, ct.float32), run_max, run_sum)
    last = ct.load(x, index=(rb, n_chunks - 1), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
    last = ct.astype(last, ct.float32)
    run_max, run_sum = online_update(last, run_max, run_sum)
    inv_sum = ct.truediv(1.0, run_sum, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    return run_max, inv_sum, last


def online_write_tile(y, rb, c, t, run_max, inv_sum):
    """Pass 2 of (c) for one chunk t (f32): exp(x - max) / sum."""
    out = ct.exp(t - run_max, rounding_mode=ct.RoundingMode.APPROX) * inv_sum
    ct.store(y, index=(rb, c), tile=ct.astype(out, y.dtype))


def online_write_chunk(x, y, rb, c, run_max, inv_sum, BLOCK_M, CHUNK):
    """Pass 2 of (c) for a chunk re-read from memory (mostly L2)."""
    t = ct.load(x, index=(rb, c), shape=(BLOCK_M, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
    online_write_tile(y, rb, c, ct.astype(t, ct.float32), run_max, inv_sum)


@ct.kernel(occupancy=4)
def softmax_online_kernel(x, y, BLOCK_M: ConstInt, CHUNK: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, CHUNK))
    n_chunks = ct.num_tiles(x, 1, shape=(BLOCK_M, CHUNK))
    for rb in range(bid, n_row_blocks, num_blocks):
        run_max, inv_sum = online_row_stats(x, rb, n_chunks, BLOCK_M, CHUNK)
        for c in range(n_chunks):
            online_write_chunk(x, y, rb, c, run_max, inv_sum, BLOCK_M, CHUNK)


@ct.kernel(occupancy=4)
def softmax_online_rev_kernel(x, y, BLOCK_M: ConstInt, CHUNK: ConstInt):
    """(c) with pass 2 walking the chunks last-first: the chunks pass 1 read last are the likeliest
    to be still in L2 when the rows in flight outgrow it (walking forward evicts each chunk just
    before re-reading it, e.g. 256 rows of 131072 f16 = 64 MiB). The last chunk is written from the
    registers pass 1 left it in, so a row of one chunk is read once (single pass). Its pass-2 loop
    compiles without the software pipelining of the forward loop (sm_90: 160 loads in the code vs
    448), yet on H200 it was the faster of the two at rows of 1 to 4 chunks too: the plans' default."""
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, CHUNK))
    n_chunks = ct.num_tiles(x, 1, shape=(BLOCK_M, CHUNK))
    for rb in range(bid, n_row_blocks, num_blocks):
        run_max, inv_sum, last = online_row_stats_last(x, rb, n_chunks, BLOCK_M, CHUNK)
        online_write_tile(y, rb, n_chunks - 1, last, run_max, inv_sum)
        for c in range(2, n_chunks + 1):
            online_write_chunk(x, y, rb, n_chunks - c, run_max, inv_sum, BLOCK_M, CHUNK)


@ct.kernel(occupancy=2, num_worker_warps=8)
def softmax_tma_lean_kernel(x, y, BLOCK_M: ConstInt, TILE: ConstInt):
    """(a) without an f32 copy of the row block: the max in the input dtype (exact), the output as
    exp(x - (max + log(sum))), so the row stays in registers in its own dtype; loads and stores
    without TMA (plain vector accesses, no copy warps or shared-memory staging)."""
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.load(x, index=(rb, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.NEG_INF, allow_tma=False)
        row_max = ct.astype(ct.max(t, 1, keepdims=True), ct.float32)
        den = ct.sum(ct.exp(ct.astype(t, ct.float32) - row_max, rounding_mode=ct.RoundingMode.APPROX), 1,
                     keepdims=True)
        out = ct.exp(ct.astype(t, ct.float32) - (row_max + ct.log(den)), rounding_mode=ct.RoundingMode.APPROX)
        ct.store(y, index=(rb, 0), tile=ct.astype(out, y.dtype), allow_tma=False)


@ct.kernel(occupancy=4)
def softmax_split_stats_kernel(x, part_max, part_sum, TILE: ConstInt):
    """Pass 1 of (d): block (split, row) stores the max and sum(exp(x - max)) of its column tile."""
    split = ct.bid(0)
    row = ct.bid(1)
    t = ct.load(x, index=(row, split), shape=(1, TILE), padding_mode=ct.PaddingMode.NEG_INF)
    t = ct.astype(t, ct.float32)
    tile_max = ct.max(t, 1, keepdims=True)
    tile_sum = ct.sum(ct.exp(t - tile_max, rounding_mode=ct.RoundingMode.APPROX), 1, keepdims=True)
    ct.store(part_max, index=(row, split), tile=tile_max)
    ct.store(part_sum, index=(row, split), tile=tile_sum)


@ct.kernel(occupancy=4)
def softmax_split_write_kernel(x, part_max, part_sum, y, TILE: ConstInt, SPLITS: ConstInt):
    """Pass 2 of (d): the row's partials (SPLITS >= splits, padded with -inf / 0) combined, then
    the block's column tile written; blocks map to tiles last-first. No TMA (allow_tma=False): a
    block moves one tile, as the gather kernel's, with plain vector loads and stores (sm_90: no
    shared-memory staging, no copy warps, no barrier)."""
    split = ct.num_blocks(0) - 1 - ct.bid(0)
    row = ct.num_blocks(1) - 1 - ct.bid(1)
    maxes = ct.load(part_max, index=(row, 0), shape=(1, SPLITS), padding_mode=ct.PaddingMode.NEG_INF, allow_tma=False)
    sums = ct.load(part_sum, index=(row, 0), shape=(1, SPLITS), padding_mode=ct.PaddingMode.ZERO, allow_tma=False)
    row_max = ct.max(maxes, 1, keepdims=True)
    total = ct.sum(sums * ct.exp(maxes - row_max, rounding_mode=ct.RoundingMode.APPROX), 1, keepdims=True)
    inv_total = ct.truediv(1.0, total, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    t = ct.load(x, index=(row, split), shape=(1, TILE), padding_mode=ct.PaddingMode.NEG_INF, allow_tma=False)
    out = ct.exp(ct.astype(t, ct.float32) - row_max, rounding_mode=ct.RoundingMode.APPROX) * inv_total
    ct.store(y, index=(row, split), tile=ct.astype(out, y.dtype), allow_tma=False)
