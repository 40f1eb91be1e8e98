"""gated_delta_decode: one decode step of the gated delta rule for B sequences (kernels/gated_delta.py
with T = 1); the shape is (B, H, Dk, Dv).

Inputs (q, k [B, H, Dk], v [B, H, Dv] in the dtype, g, beta [B, H] f32, state [B, H, Dk, Dv] f32,
scale); outputs (o [B, H, Dv] in the dtype, the updated state, f32): S = exp(g) S, S += k (beta
(v - k^T S)), o = scale q^T S per (batch, head). The plan passes the [B, 1, H, D] views of the inputs
to the prefill's kernel. Test inputs, reference (the same recurrence, one token) and tolerances as
gated_delta_prefill's.
"""

from __future__ import annotations

from ..spec import OpSpec
from ._common import FLOAT_DTYPES, torch
from .gated_delta_prefill import (CAPTURES, KERNEL, TOL_GATED_DELTA, check_inputs, recurrence, rule_bytes,
                                  rule_launch, sequence_inputs)


def make_inputs(shape, dtype, device, seed=0):
    b, h, dk, dv = shape
    q, k, v, g, beta, state = sequence_inputs(b, 1, h, dk, dv, dtype, device, seed)
    return q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], state, dk ** -0.5


def token_views(q, k, v, g, beta):
    return q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None]


def reference(q, k, v, g, beta, state, scale):
    o, s = recurrence(*token_views(q, k, v, g, beta), state, scale)
    return o[:, 0].to(q.dtype), s


def allocate(q, k, v, g, beta, state, scale):
    return torch().empty_like(v), torch().empty_like(state)


def plan(q, k, v, g, beta, state, scale, outs):
    views = token_views(q, k, v, g, beta)
    check_inputs("gated_delta_decode", *views, state)
    o, new_state = outs
    return [rule_launch(*views, state, scale, o[:, None], new_state)]


SPEC = OpSpec(
    name="gated_delta_decode",
    kernel_file="gated_delta.py",
    kernels=[KERNEL],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 16, 16), (3, 5, 100, 72), (17, 16, 128, 128), (4, 8, 256, 96)],
    bench_shapes=[(64, 32, 128, 128), (256, 16, 128, 128)],
    tolerances=TOL_GATED_DELTA,
    captures=CAPTURES,
    bytes=lambda shape, dt: rule_bytes(shape[0], 1, *shape[1:], dt),
    flops=lambda shape: 8 * shape[0] * shape[1] * shape[2] * shape[3],
)
