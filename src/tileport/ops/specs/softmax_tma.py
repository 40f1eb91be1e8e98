"""softmax_tma: softmax variant (a) (persistent rows, TMA view loads with -inf padding) pinned for
every shape that fits one row tile (longer rows fall back to the online kernel, as in the operator).
"""

from __future__ import annotations

from ..spec import OpSpec
from ._common import FLOAT_DTYPES, TOL_SOFTMAX, per_dtype_captures
from .softmax import (BENCH, IO_RANKS, ONLINE_CHUNK, SHAPES_LONG, SHAPES_SINGLE_TILE, allocate,
                      make_inputs, plan_tma, reference, softmax_bytes, softmax_flops, tma_constants)

SPEC = OpSpec(
    name="softmax_tma",
    kernel_file="softmax.py",
    kernels=["softmax_tma_kernel", "softmax_tma_wide_kernel", "softmax_online_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan_tma,
    shapes=SHAPES_SINGLE_TILE + SHAPES_LONG,
    bench_shapes=BENCH,
    tolerances=TOL_SOFTMAX,
    captures=(per_dtype_captures("softmax_tma_kernel", IO_RANKS,
                                 lambda dt: tma_constants(4096, 4096, dt))
              + per_dtype_captures("softmax_tma_wide_kernel", IO_RANKS,
                                   lambda dt: tma_constants(1024, 16384, dt))
              + per_dtype_captures("softmax_online_kernel", IO_RANKS,
                                   lambda dt: {"CHUNK": ONLINE_CHUNK[dt]})),
    bytes=softmax_bytes,
    flops=softmax_flops,
)
