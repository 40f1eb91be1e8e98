"""Shared set-up of the rope rotation measurements (eval/measure/evict_last_flush.py).

rope f16 [1, 16384, 8, 128]: the op's inputs and an output for a copy of x; `time_rotations` times a base set of
functions side by side (gpu.timing.gpu_times, L2 flushed) with each rotation's extra functions, twice, printing
each record as it comes. It changes nothing in the library.
"""

from __future__ import annotations

import json
from typing import Callable

import torch

from tileport.gpu.bench import case_inputs
from tileport.gpu.timing import gpu_times
from tileport.ops.specs import get_spec

SHAPE, DTYPE = (1, 16384, 8, 128), "float16"


def rope_case():
    """(spec, inputs, x, y): rope's inputs at SHAPE/DTYPE (randn), x the first, y an empty tensor like x."""
    spec = get_spec("rope")
    inputs = case_inputs(spec, DTYPE, SHAPE, "randn")
    return spec, inputs, inputs[0], torch.empty_like(inputs[0])


def time_rotations(base: dict[str, Callable[[], None]], rotations: dict[str, dict[str, Callable[[], None]]],
                   flush: Callable[[], None], repeats: int = 2) -> list[dict]:
    """Median µs of every function, per rotation (base + its extra functions), `repeats` times over."""
    records = []
    for _ in range(repeats):
        for name, extra in rotations.items():
            t = gpu_times({**base, **extra}, flush, budget_s=0.1)
            rec = {"rotation": name, "median_us": {k: round(v.median_us, 3) for k, v in t.items()}}
            records.append(rec)
            print(json.dumps(rec), flush=True)
    return records
