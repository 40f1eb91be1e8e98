"""softmax_tma: softmax variant (a) (persistent rows, TMA view loads with -inf padding) pinned for
every shape that fits one row tile (longer rows fall back to the online kernel, as in the operator).
"""

from __future__ import annotations

import dataclasses

from . import softmax
from .softmax import ONLINE_CAPTURES, TMA_CAPTURES, TMA_WIDE_CAPTURES, plan_tma

SPEC = dataclasses.replace(
    softmax.SPEC,
    name="softmax_tma",
    kernels=["softmax_tma_kernel", "softmax_tma_wide_kernel", softmax.PREFETCH, softmax.LEAN,
             *softmax.ONLINE_ENTRIES],
    plan=plan_tma,
    captures=TMA_CAPTURES + TMA_WIDE_CAPTURES + ONLINE_CAPTURES,
    tune=softmax.space(softmax.tma_or_online_candidates, softmax.tma_or_online_default),
)
