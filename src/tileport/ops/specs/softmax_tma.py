"""softmax_tma: softmax variant (a) (persistent rows, TMA view loads with -inf padding) pinned for
every shape that fits one row tile (longer rows fall back to the online kernel, as in the operator).
"""

from __future__ import annotations

import dataclasses

from . import softmax
from ._common import per_dtype_captures
from .softmax import IO_RANKS, ONLINE_CAPTURES, TMA_WIDE_CAPTURES, plan_tma, tma_constants

SPEC = dataclasses.replace(
    softmax.SPEC,
    name="softmax_tma",
    kernels=["softmax_tma_kernel", "softmax_tma_wide_kernel", "softmax_online_kernel"],
    plan=plan_tma,
    captures=(per_dtype_captures("softmax_tma_kernel", IO_RANKS,
                                 lambda dt: tma_constants(4096, 4096, dt))
              + TMA_WIDE_CAPTURES + ONLINE_CAPTURES),
)
