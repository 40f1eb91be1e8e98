"""The occupancy hint of a Triton port (how many tile blocks an SM keeps resident).

A Triton program holds its tiles in as many registers as ptxas gives it, and several programs share an
SM; tileiras, without a hint, compiles a kernel for one resident block (up to 255 registers per thread):
a program that holds one 8192-wide row then has an SM to itself and little memory traffic in flight.
The cuTile kernels of the library state their occupancy (`@ct.kernel(occupancy=...)`); a port states the
one its largest tile allows, with the library's limits (a tile block of 256 threads keeps 32 words per
thread of an 8192-word tile: 4 blocks fit the register file without spilling; a 16384-word tile needs half
of it):

| largest tile (32-bit words: f64/i64 count 2, a gathered or scattered element 1 more) | hint |
|---|---|
| at most 8192 | occupancy 4 |
| at most 16384 | occupancy 2 |
| larger, or unknown (a constexpr without a configured value) | none |

Kernels with a matrix multiply (`tl.dot`) get none: their accumulators and operand staging are sized by
the MMA pipeline, not by this rule. The sizes are those of every configured constexpr value set (the
largest wins), so the hint is one per entry.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tileport.model.ir import Do, Kernel, Let, walk
from tileport.model.ops import OpKind
from tileport.model.types import TileT, concrete_dtypes, eval_dim

LIMITS = ((8192, 4), (16384, 2))
WIDE = {"f64", "i64", "u64"}


def _words(kernel: Kernel, dtype: Any) -> int:
    return 2 if any(d in WIDE for d in concrete_dtypes(dtype, kernel.dtype_vars)) else 1


def _tiles(kernel: Kernel):
    """(tile type, words per element beyond the value) of every tile a statement makes or scatters: a
    gathered or scattered element also holds its offset."""
    for s in walk(kernel.body):
        if isinstance(s, Let) and isinstance(s.op.ty, TileT):
            yield s.op.ty, 1 if s.op.kind == OpKind.GATHER else 0
        elif isinstance(s, Do) and s.op.kind == OpKind.SCATTER and isinstance(s.op.args[1].ty, TileT):
            yield s.op.args[1].ty, 1


def largest_tile(kernel: Kernel, values: Mapping[str, Any]) -> int | None:
    """Words of the kernel's largest tile for one set of constexpr values (None: a size is unknown)."""
    consts = {k: v for k, v in values.items() if type(v) is int}
    largest = 0
    for ty, offsets in _tiles(kernel):
        n = 1
        for d in ty.shape:
            try:
                n *= eval_dim(d, consts)
            except (KeyError, TypeError, ValueError):
                return None
        largest = max(largest, n * (_words(kernel, ty.dtype) + offsets))
    return largest


def has_mma(kernel: Kernel) -> bool:
    """Whether the kernel multiplies matrices (`tl.dot`): tileiras lays out its warps, tiles and memory path."""
    return any(isinstance(s, Let) and s.op.kind == OpKind.MMA for s in walk(kernel.body))


def occupancy(kernel: Kernel, value_sets: Iterable[Mapping[str, Any]]) -> int | None:
    if has_mma(kernel):
        return None
    sizes = [largest_tile(kernel, v) for v in (list(value_sets) or [{}])]
    if any(n is None for n in sizes):
        return None
    words = max(sizes)
    return next((occ for limit, occ in LIMITS if words <= limit), None)


def add_hints(kernels: list[Kernel], value_sets: Iterable[Mapping[str, Any]]) -> None:
    sets = [dict(v) for v in value_sets]
    for k in kernels:
        occ = occupancy(k, sets)
        if occ is not None and "occupancy" not in k.hints:
            k.hints["occupancy"] = occ
            k.notes.append(f"occupancy hint {occ}: its largest tile lets {occ} tile blocks share an SM "
                           "(Triton programs share SMs; tileiras alone compiles for one)")
