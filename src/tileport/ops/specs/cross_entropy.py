"""cross_entropy: per-row loss and log-sum-exp of logits [M, V] against int32 labels [M].

loss[i] = logsumexp(logits[i]) - logits[i, labels[i]] (0 where labels[i] == ignore_index), lse[i] =
logsumexp(logits[i]); both f32 (kernels/cross_entropy.py: one online pass over column chunks). The
mean loss of torch's `F.cross_entropy` is loss.sum() / (labels != ignore_index).sum(); lse is what
cross_entropy_bwd needs. Math in f32 from the logits as given; against an f32 torch reference the
error is the f32 summation order and the approximate exp: rtol / atol 1e-5 in every dtype (the outputs
are f32; the lse of a 128k-column row sums 2^17 terms).
"""

from __future__ import annotations

from tileport.capture.signature import Capture

from ..spec import Launch, OpSpec, Tolerance
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, cdiv, generator, next_pow2,
                      persistent_grid, randn, torch)

OCCUPANCY = {"cross_entropy_fwd_kernel": 4, "cross_entropy_bwd_kernel": 4}  # must match the decorators
IGNORE_INDEX = -100
MAX_CHUNK = 4096  # columns per chunk
TILE_ELEMENTS = 8192  # BLOCK_M x CHUNK f32 values per tile
LOGIT_SCALE = 4.0

TOL_CE = {dt: Tolerance(rtol=1e-5, atol=1e-5) for dt in FLOAT_DTYPES}
SHAPES = [(1, 1), (3, 17), (37, 1000), (1000, 5120), (4, 50257), (2048, 32000)]
BENCH_SHAPES = [(8192, 32000), (4096, 128256)]


def tiles(m: int, v: int) -> tuple[int, int]:
    """(BLOCK_M, CHUNK) of an [m, v] problem: powers of two, BLOCK_M x CHUNK <= TILE_ELEMENTS."""
    chunk = min(next_pow2(v), MAX_CHUNK)
    return min(TILE_ELEMENTS // chunk, next_pow2(m)), chunk


def make_labels(m: int, v: int, device, g):
    """Labels in [0, v), every 7th row ignored."""
    t = torch()
    labels = t.randint(0, v, (m,), generator=g, device=t.device(device), dtype=t.int32)
    labels[::7] = IGNORE_INDEX
    return labels


def make_inputs(shape, dtype, device, seed=0):
    m, v = shape
    g = generator(device, seed)
    return randn((m, v), dtype, device, g, scale=LOGIT_SCALE), make_labels(m, v, device, g), IGNORE_INDEX


def reference(logits, labels, ignore_index):
    t = torch()
    x = logits.float()
    lse = t.logsumexp(x, dim=1)
    valid = labels != ignore_index
    target = x.gather(1, t.where(valid, labels, 0).long()[:, None])[:, 0]
    return t.where(valid, lse - target, 0.0), lse


def allocate(logits, labels, ignore_index):
    t = torch()
    m = logits.shape[0]
    return (t.empty((m,), dtype=t.float32, device=logits.device),
            t.empty((m,), dtype=t.float32, device=logits.device))


def check_rows(name: str, logits, labels) -> None:
    if logits.dim() != 2 or logits.stride(1) != 1 or labels.shape != (logits.shape[0],):
        raise ValueError(f"{name} takes logits [M, V] (unit last stride) and labels [M]")


def row_launch(kernel: str, logits, args: dict) -> Launch:
    m, v = logits.shape
    block_m, chunk = tiles(m, v)
    grid = persistent_grid(cdiv(m, block_m), logits.device, OCCUPANCY[kernel])
    return Launch(kernel, grid, {**args, "BLOCK_M": block_m, "CHUNK": chunk})


def plan(logits, labels, ignore_index, outs):
    check_rows("cross_entropy", logits, labels)
    loss, lse = outs
    return [row_launch("cross_entropy_fwd_kernel", logits,
                       {"logits": logits, "labels": labels, "loss": loss, "lse": lse, "ignore_index": ignore_index})]


def captures(kernel: str, arrays: dict[str, int]) -> list:
    """One capture per dtype: `arrays` of the logits' dtype by rank; labels int32, the rest f32."""
    block_m, chunk = tiles(8192, 32000)
    out = []
    for dt in FLOAT_DTYPES:
        arr = {name: (dt if name in ("logits", "dlogits") else "int32" if name == "labels" else "float32", rank)
               for name, rank in arrays.items()}
        out.append(Capture(kernel=kernel, arrays=arr, scalars={"ignore_index": "int32"},
                           constants={"BLOCK_M": block_m, "CHUNK": chunk}))
    return out


SPEC = OpSpec(
    name="cross_entropy",
    kernel_file="cross_entropy.py",
    kernels=["cross_entropy_fwd_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOL_CE,
    captures=captures("cross_entropy_fwd_kernel", {"logits": 2, "labels": 1, "loss": 1, "lse": 1}),
    bytes=lambda shape, dt: shape[0] * shape[1] * ELEMENT_SIZE[dt] + 12 * shape[0],
    flops=lambda shape: 4 * shape[0] * shape[1],
)
