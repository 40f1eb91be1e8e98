"""cross_entropy_bwd: dlogits = (softmax(logits) - onehot(labels)) * dloss[:, None], zero rows where the
label is ignore_index; softmax from the forward's lse (exp(x - lse)), one pass over the column chunks,
rounded once to the logits' dtype. Inputs (logits, labels, lse, dloss, ignore_index); the test inputs'
lse is the f32 logsumexp of the logits, dloss standard normal.

Tolerance: the gradient lies in [-1, 1] * |dloss|; f32 math with the approximate exp, one rounding to
the dtype: as softmax (small probabilities need a small atol).
"""

from __future__ import annotations

from ..spec import OpSpec
from ._common import ELEMENT_SIZE, FLOAT_DTYPES, TOL_SOFTMAX, generator, randn, torch
from .cross_entropy import (BENCH_SHAPES, IGNORE_INDEX, LOGIT_SCALE, SHAPES, captures, check_rows, make_labels,
                            row_launch)


def make_inputs(shape, dtype, device, seed=0):
    m, v = shape
    g = generator(device, seed)
    logits = randn((m, v), dtype, device, g, scale=LOGIT_SCALE)
    labels = make_labels(m, v, device, g)
    lse = torch().logsumexp(logits.float(), dim=1)
    return logits, labels, lse, randn((m,), "float32", device, g), IGNORE_INDEX


def reference(logits, labels, lse, dloss, ignore_index):
    t = torch()
    p = t.exp(logits.float() - lse[:, None])
    valid = labels != ignore_index
    onehot = t.zeros_like(p).scatter_(1, t.where(valid, labels, 0).long()[:, None], 1.0)
    grad = t.where(valid, dloss, 0.0)[:, None]
    return ((p - onehot) * grad).to(logits.dtype)


def allocate(logits, labels, lse, dloss, ignore_index):
    return torch().empty_like(logits)


def plan(logits, labels, lse, dloss, ignore_index, outs):
    check_rows("cross_entropy_bwd", logits, labels)
    if lse.shape != labels.shape or dloss.shape != labels.shape:
        raise ValueError("cross_entropy_bwd takes lse [M] and dloss [M]")
    return [row_launch("cross_entropy_bwd_kernel", logits,
                       {"logits": logits, "labels": labels, "lse": lse, "dloss": dloss, "dlogits": outs,
                        "ignore_index": ignore_index})]


SPEC = OpSpec(
    name="cross_entropy_bwd",
    kernel_file="cross_entropy.py",
    kernels=["cross_entropy_bwd_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOL_SOFTMAX,
    captures=captures("cross_entropy_bwd_kernel", {"logits": 2, "labels": 1, "lse": 1, "dloss": 1, "dlogits": 2}),
    bytes=lambda shape, dt: 2 * shape[0] * shape[1] * ELEMENT_SIZE[dt] + 12 * shape[0],
    flops=lambda shape: 4 * shape[0] * shape[1],
)
