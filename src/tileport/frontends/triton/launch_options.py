"""Triton launch options carried into the port's entry hints, where cutile 0.5.0 has the same knob.

| Triton option (recorded launch, or the autotuner's choice) | entry hint | mapping |
|---|---|---|
| `num_warps` (Triton's default 4) | `num_worker_warps` | the largest over the kernel's launches, at most 8: tileiras 13.4 compiles 4 or 8 worker warps only; 1 and 2 get no hint (tileiras' own 4) |
| `num_stages` | none | tileiras pipelines loops itself; cutile's per-load latency hint is no stage count |
| `num_ctas` | none | Triton's clusters (`num_ctas` > 1) are the `num_ctas` entry hint, but no recorded launch asks for one |

Without the hint tileiras gives a kernel that computes in registers 4 warps whatever its tile: a Triton
kernel launched with 8 or more warps for a wide row (Liger's `calculate_settings`: 8 from 2048 columns, 16
from 8192) then holds 2 to 8 times the elements per thread (an 8192-wide f32 row: 16 `LDG.E.128` and 80
registers per thread at 4 warps, 8 and 48 at 8). Kernels with a matrix multiply get none: their warps
are laid out by tileiras' MMA pipeline (producer and consumer warps), not by Triton's `num_warps`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tileport.frontends.triton.occupancy import has_mma

TRITON_DEFAULT_WARPS = 4
TILEIRAS_WARPS = (4, 8)  # worker warps tileiras 13.4 compiles


def _num_warps(options: Mapping[str, Any]) -> int:
    """A launch's num_warps (Triton's default where the launch gives none or no integer)."""
    n = options.get("num_warps")
    return n if type(n) is int and n > 0 else TRITON_DEFAULT_WARPS


def worker_warps(options: Iterable[Mapping[str, Any]]) -> int | None:
    """The `num_worker_warps` hint of a kernel's launches (None: no launch, or none tileiras can take)."""
    warps = [_num_warps(o) for o in options]
    if not warps:
        return None
    fitting = [w for w in TILEIRAS_WARPS if w <= max(warps)]
    return fitting[-1] if fitting else None


def add_warps(kernels: list, options: Iterable[Mapping[str, Any]]) -> None:
    options = list(options)
    warps = worker_warps(options)
    if warps is None:
        return
    for k in kernels:
        if "num_worker_warps" in k.hints or has_mma(k):
            continue
        k.hints["num_worker_warps"] = warps
        asked = sorted({_num_warps(o) for o in options})
        k.notes.append(f"num_worker_warps hint {warps}: the launches' num_warps {asked}"
                       + (" (tileiras 13.4 compiles at most 8)" if max(asked) > warps else ""))
