"""softmax_online: softmax variant (c) (chunked online softmax) pinned for every shape."""

from __future__ import annotations

import dataclasses

from . import softmax
from .softmax import ONLINE_CAPTURES, SHAPES_LONG, plan_online

SPEC = dataclasses.replace(
    softmax.SPEC,
    name="softmax_online",
    kernels=list(softmax.ONLINE_ENTRIES),
    plan=plan_online,
    shapes=[(1, 1), (3, 7), (256, 1009), (1823, 781), (64, 4097), (1024, 16384)] + SHAPES_LONG,
    bench_shapes=[(4096, 4096), (1024, 16384), (256, 131_072)],
    captures=ONLINE_CAPTURES,
    tune=softmax.space(softmax.online_candidates, softmax.online_default),
)
