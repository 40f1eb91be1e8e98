"""softmax_online: softmax variant (c) (chunked online softmax) pinned for every shape."""

from __future__ import annotations

from ..spec import OpSpec
from ._common import FLOAT_DTYPES, TOL_SOFTMAX, per_dtype_captures
from .softmax import (IO_RANKS, ONLINE_CHUNK, SHAPES_LONG, allocate, make_inputs, plan_online,
                      reference, softmax_bytes, softmax_flops)

SPEC = OpSpec(
    name="softmax_online",
    kernel_file="softmax.py",
    kernels=["softmax_online_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan_online,
    shapes=[(1, 1), (3, 7), (256, 1009), (1823, 781), (64, 4097), (1024, 16384)] + SHAPES_LONG,
    bench_shapes=[(4096, 4096), (1024, 16384), (256, 131_072)],
    tolerances=TOL_SOFTMAX,
    captures=per_dtype_captures("softmax_online_kernel", IO_RANKS,
                                lambda dt: {"CHUNK": ONLINE_CHUNK[dt]}),
    bytes=softmax_bytes,
    flops=softmax_flops,
)
