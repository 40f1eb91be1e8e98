"""softmax_gather: softmax variant (b) (gather/scatter rows) pinned for every shape."""

from __future__ import annotations

from ..spec import OpSpec
from ._common import FLOAT_DTYPES, TOL_SOFTMAX, per_dtype_captures
from .softmax import (BENCH, IO_RANKS, SHAPES_SINGLE_TILE, allocate, make_inputs, plan_gather,
                      reference, softmax_bytes, softmax_flops)

SPEC = OpSpec(
    name="softmax_gather",
    kernel_file="softmax.py",
    kernels=["softmax_gather_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan_gather,
    shapes=SHAPES_SINGLE_TILE,
    bench_shapes=BENCH,
    tolerances=TOL_SOFTMAX,
    captures=per_dtype_captures("softmax_gather_kernel", IO_RANKS,
                                lambda dt: {"TILE": 4096}),
    bytes=softmax_bytes,
    flops=softmax_flops,
)
