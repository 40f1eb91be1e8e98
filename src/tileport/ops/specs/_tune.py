"""Configuration spaces shared by the row kernels (softmax variants, rms_norm, layer_norm) and rope.

Rules every candidate obeys, on both backends (the cutile-rs cdylib JIT-compiles one specialization
per set of tile constants and rejects a tile constant that is not a positive power of two):

| knob      | values                                     | why                                          |
|-----------|--------------------------------------------|----------------------------------------------|
| `kernel`  | the op's entries (each fixes an occupancy) | occupancy is a compile-time hint, not a launch argument |
| `BLOCK_M` | powers of two <= next_pow2(rows)           | tile shapes are powers of two                |
| tile size | f32 elements per CTA tile <= 32768 / occupancy | the f32 working tile must stay in registers (a 16384-wide f32 row at occupancy 4 spilled: 1.65x slower on H200) |
| `grid`    | "persistent" (NUM_SMS x occupancy blocks walk the tiles) or "full" (one block per tile) | host-side only: the kernels loop with a grid stride, so both are the same specialization |
"""

from __future__ import annotations

from itertools import product
from typing import Any, Mapping

from ._common import next_pow2

GRIDS = ("persistent", "full")
BLOCK_MS = tuple(1 << i for i in range(14))  # declared axis: 1 .. 8192 rows per tile
TOP_BLOCK_MS = 3  # candidates: the largest few BLOCK_M an entry allows (tiny row tiles are never faster)
REGISTER_ELEMS = 32768  # f32 tile elements per CTA at occupancy 1 (the budget divides by occupancy)


def tile_budget(occupancy: int) -> int:
    return REGISTER_ELEMS // occupancy


def block_ms(n_rows: int, tile: int, occupancy: int, top: int = TOP_BLOCK_MS, keep: int | None = None) -> list[int]:
    """The largest `top` powers of two BLOCK_M with BLOCK_M <= next_pow2(n_rows) and a
    (BLOCK_M, tile) f32 tile within the occupancy's register budget, plus `keep` (the default's
    BLOCK_M) when it is allowed too; empty if one row does not fit."""
    allowed = [bm for bm in BLOCK_MS if bm <= next_pow2(n_rows) and bm * tile <= tile_budget(occupancy)]
    return sorted(set(allowed[-top:]) | ({keep} & set(allowed)))


def row_candidates(n_rows: int, tile: int, entries: Mapping[str, int], keep: int | None = None) -> list[dict]:
    """(kernel, BLOCK_M, grid) points of a row kernel whose row tile is `tile` columns wide (`keep`:
    a BLOCK_M to include whatever the others are, the default's)."""
    return [{"kernel": kernel, "BLOCK_M": bm, "grid": grid}
            for kernel, occ in entries.items()
            for bm, grid in product(block_ms(n_rows, tile, occ, keep=keep), GRIDS)]


def row_grid(config: Mapping[str, Any], n_blocks: int, sms: int, occupancy: int) -> tuple[int, int, int]:
    """Grid of a grid-stride row kernel over `n_blocks` tiles under the config's grid policy."""
    if config["grid"] == "full":
        return (max(1, n_blocks), 1, 1)
    return (max(1, min(n_blocks, sms * occupancy)), 1, 1)


def rows_class(shape: tuple[int, ...]) -> str:
    """Shape class of [M, N] row problems: the padded row tile and the power-of-two row bucket."""
    m, n = shape
    return f"M{next_pow2(m)}xN{next_pow2(n)}"
