"""linear_cross_entropy: per-row loss and log-sum-exp of the logits hidden [N, H] @ weight [V, H]^T
against int32 labels [N], without the [N, V] logits in memory (kernels/linear_cross_entropy.py).

loss[i] = logsumexp(logits[i]) - logits[i, labels[i]] (0 where labels[i] == ignore_index), lse[i] =
logsumexp(logits[i]), both f32; the mean loss of torch's `F.cross_entropy(hidden @ weight.T, labels)`
is loss.sum() / (labels != ignore_index).sum(). The shape is (N, H, V).

One launch: a block per BLOCK_M rows walks the vocabulary in BLOCK_V chunks (MMA over H, online
log-sum-exp). f16 / bf16 products are exact in the f32 accumulator and f32 inputs are multiplied in
f32: against the f32 reference the error is the summation order over H and V and the approximate
exp, a few f32 ulps of |logits| * sqrt(H); hence 1e-4 in every dtype (outputs are f32).
"""

from __future__ import annotations

import math

from tileport.capture.signature import Capture

from ..spec import Launch, OpSpec, Tolerance
from ._common import ELEMENT_SIZE, FLOAT_DTYPES, cdiv, dtype_name, generator, randn, torch
from .cross_entropy import IGNORE_INDEX, make_labels

LOGIT_SCALE = 4.0  # standard deviation of the logits of the test inputs
# (BLOCK_M, BLOCK_V, BLOCK_K). f32 operands (f32 MMA, no TF32) take registers that 16-bit ones leave to the
# accumulator: at 64 x 128 x 32 the sm_90 code spills 1694 instructions' worth, at 32 x 128 x 16 138
# (tileiras 13.4, 128 registers at occupancy 2); the 16-bit tiles compile without spills.
FWD_TILES = {"float16": (64, 128, 64), "bfloat16": (64, 128, 64), "float32": (32, 128, 16)}
TOL_LINEAR_CE = {dt: Tolerance(rtol=1e-4, atol=1e-4) for dt in FLOAT_DTYPES}
SHAPES = [(1, 16, 1), (3, 17, 33), (37, 100, 1000), (130, 256, 5003), (1000, 1024, 32000)]
BENCH_SHAPES = [(8192, 4096, 32000), (4096, 4096, 128256)]
CAPTURE_DTYPES = {"hidden", "weight", "ws", "dhidden", "dweight"}  # arrays of the input dtype; labels int32


def make_inputs(shape, dtype, device, seed=0):
    n, h, v = shape
    g = generator(device, seed)
    hidden = randn((n, h), dtype, device, g)
    weight = randn((v, h), dtype, device, g, scale=LOGIT_SCALE / math.sqrt(h))
    return hidden, weight, make_labels(n, v, device, g), IGNORE_INDEX


def logits(hidden, weight):
    return hidden.float() @ weight.float().T


def reference(hidden, weight, labels, ignore_index):
    t = torch()
    x = logits(hidden, weight)
    lse = t.logsumexp(x, dim=1)
    valid = labels != ignore_index
    target = x.gather(1, t.where(valid, labels, 0).long()[:, None])[:, 0]
    return t.where(valid, lse - target, 0.0), lse


def allocate(hidden, weight, labels, ignore_index):
    t = torch()
    n = hidden.shape[0]
    return (t.empty((n,), dtype=t.float32, device=hidden.device),
            t.empty((n,), dtype=t.float32, device=hidden.device))


def check_inputs(name: str, hidden, weight, labels) -> None:
    if (hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]
            or labels.shape != (hidden.shape[0],) or hidden.dtype != weight.dtype):
        raise ValueError(f"{name} takes hidden [N, H], weight [V, H] of one dtype and labels [N]")
    if not (hidden.is_contiguous() and weight.is_contiguous()):
        raise ValueError(f"{name} takes contiguous hidden and weight")


def plan(hidden, weight, labels, ignore_index, outs):
    check_inputs("linear_cross_entropy", hidden, weight, labels)
    loss, lse = outs
    bm, bv, bk = FWD_TILES[dtype_name(hidden)]
    return [Launch("linear_ce_fwd_kernel", (cdiv(hidden.shape[0], bm), 1, 1),
                   {"hidden": hidden, "weight": weight, "labels": labels, "loss": loss, "lse": lse,
                    "ignore_index": ignore_index, "BLOCK_M": bm, "BLOCK_V": bv, "BLOCK_K": bk})]


def captures(kernel: str, arrays: dict[str, int], constants: dict[str, dict], scalars: dict[str, str]) -> list:
    """One capture per dtype: arrays in CAPTURE_DTYPES of that dtype, labels int32, the rest f32."""
    out = []
    for dt in FLOAT_DTYPES:
        arr = {name: (dt if name in CAPTURE_DTYPES else "int32" if name == "labels" else "float32", rank)
               for name, rank in arrays.items()}
        out.append(Capture(kernel=kernel, arrays=arr, scalars=scalars, constants=constants[dt]))
    return out


SPEC = OpSpec(
    name="linear_cross_entropy",
    kernel_file="linear_cross_entropy.py",
    kernels=["linear_ce_fwd_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOL_LINEAR_CE,
    captures=captures("linear_ce_fwd_kernel", {"hidden": 2, "weight": 2, "labels": 1, "loss": 1, "lse": 1},
                      {dt: dict(zip(("BLOCK_M", "BLOCK_V", "BLOCK_K"), t)) for dt, t in FWD_TILES.items()},
                      {"ignore_index": "int32"}),
    bytes=lambda shape, dt: (shape[0] + shape[2]) * shape[1] * ELEMENT_SIZE[dt] + 12 * shape[0],
    flops=lambda shape: 2 * shape[0] * shape[1] * shape[2],
    kind="compute",
)
