"""dropout_bwd: dx = dy * keep / (1 - p), the mask of dropout's (seed, offset, p) recomputed (not stored)."""

from __future__ import annotations

import dataclasses

from . import dropout


def reference(dy, seed, offset, p):
    return dropout.reference(dy, seed, offset, p)


def allocate(dy, seed, offset, p):
    return dropout.allocate(dy, seed, offset, p)


SPEC = dataclasses.replace(
    dropout.SPEC,
    name="dropout_bwd",
    kernels=["dropout_bwd_kernel"],
    reference=reference,
    allocate=allocate,
    plan=dropout.dropout_plan("dropout_bwd", "dropout_bwd_kernel", "dy", "dx"),
    captures=dropout.dropout_captures("dropout_bwd_kernel", "dy", "dx"),
)
