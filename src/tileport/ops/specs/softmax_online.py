"""softmax_online: the multi-pass softmax variants pinned for every shape: (c) (chunked online
softmax, one block per row block) and (d) (rows split across blocks: a stats pass and a write pass)."""

from __future__ import annotations

import dataclasses

from . import softmax
from .softmax import ONLINE_CAPTURES, SHAPES_LONG, SPLIT_CAPTURES, plan_online

SPEC = dataclasses.replace(
    softmax.SPEC,
    name="softmax_online",
    kernels=[*softmax.ONLINE_ENTRIES, *softmax.SPLIT_ENTRIES],
    plan=plan_online,
    shapes=[(1, 1), (3, 7), (256, 1009), (1823, 781), (64, 4097), (1024, 16384)] + SHAPES_LONG,
    bench_shapes=[(4096, 4096), (1024, 16384), (256, 131_072)],
    captures=ONLINE_CAPTURES + SPLIT_CAPTURES,
    tune=softmax.space(softmax.online_or_split_candidates, softmax.long_row_default),
)
