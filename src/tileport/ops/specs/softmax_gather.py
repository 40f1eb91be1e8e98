"""softmax_gather: softmax variant (b) (gather/scatter rows) pinned for every shape."""

from __future__ import annotations

import dataclasses

from . import softmax
from .softmax import GATHER_CAPTURES, SHAPES_SINGLE_TILE, plan_gather

SPEC = dataclasses.replace(
    softmax.SPEC,
    name="softmax_gather",
    kernels=["softmax_gather_kernel"],
    plan=plan_gather,
    shapes=SHAPES_SINGLE_TILE,
    captures=GATHER_CAPTURES,
    tune=softmax.space(softmax.gather_candidates, softmax.gather_default),
)
