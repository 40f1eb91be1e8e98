"""linear_cross_entropy_bwd: dhidden and dweight of linear_cross_entropy's per-row loss, given the
forward's lse and the loss gradient dloss [N] (f32), without the [N, V] logits in memory.

Inputs (hidden, weight, labels, lse, dloss, ignore_index) -> (dhidden [N, H], dweight [V, H]) in the
input dtype; the test inputs' lse is the f32 logsumexp of the logits, dloss standard normal. The
plan walks the batch in chunks of C rows (C x V input-dtype values of workspace, at most
WS_BYTES, C a multiple of every row tile): per chunk the dlogits kernel writes (softmax - onehot) *
dloss, then dh = ws @ weight and dw_acc += ws^T @ hidden (kernels/linear_cross_entropy.py); dweight
needs an f32 [V, H] accumulator beside it, which the first chunk writes (ACCUMULATE false) and the later
ones add to. The reference is torch autograd of the f32 logits'
cross-entropy.

Tolerance: the dlogits are rounded to the input dtype before the two MMAs (half an ulp of each
term, summed with random signs over V or N), then the sums are rounded once: matmul-like rtol for
16-bit inputs and an atol 1 / 10 of it (the gradients' scale is the weights' LOGIT_SCALE / sqrt(H)
and the hidden's 1); f32 is f32 arithmetic in another order (1e-4 / 1e-5).
"""

from __future__ import annotations

from ..spec import Launch, OpSpec, Tolerance
from ._common import ELEMENT_SIZE, FLOAT_DTYPES, cdiv, dtype_name, generator, randn, torch
from .linear_cross_entropy import (BENCH_SHAPES, FWD_TILES, IGNORE_INDEX, SHAPES, captures, check_inputs, logits,
                                   make_labels)
from .linear_cross_entropy import make_inputs as forward_inputs

# (BLOCK_M, BLOCK_H, BLOCK_K) of dh = ws @ weight and (BLOCK_V, BLOCK_H, BLOCK_K) of dw += ws^T @ hidden;
# f32 in 64 x 64 x 16 tiles, which compile without spills on sm_90 (64 x 128 x 16: 299 spill instructions)
DH_TILES = {"float16": (64, 128, 64), "bfloat16": (64, 128, 64), "float32": (64, 64, 16)}
DW_TILES = {"float16": (64, 128, 64), "bfloat16": (64, 128, 64), "float32": (64, 64, 16)}
# the chunk's row count: a multiple of every row tile (the dlogits and dh BLOCK_M, the dw BLOCK_K); the dlogits
# BLOCK_M is a multiple of the dw BLOCK_K, so that the dw loop reads only ws rows the dlogits kernel wrote
ROW_ALIGN = 64
WS_BYTES = 256 << 20
TOL_LINEAR_CE_BWD = {
    "float32": Tolerance(rtol=1e-4, atol=1e-5),
    "float16": Tolerance(rtol=1e-2, atol=1e-3),
    "bfloat16": Tolerance(rtol=2e-2, atol=2e-3),
}


def make_inputs(shape, dtype, device, seed=0):
    hidden, weight, labels, ignore_index = forward_inputs(shape, dtype, device, seed)
    lse = torch().logsumexp(logits(hidden, weight), dim=1)
    return hidden, weight, labels, lse, randn((shape[0],), "float32", device, generator(device, seed + 1)), ignore_index


def reference(hidden, weight, labels, lse, dloss, ignore_index):
    t = torch()
    with t.enable_grad():
        h = hidden.detach().float().requires_grad_()
        w = weight.detach().float().requires_grad_()
        loss = t.nn.functional.cross_entropy(h @ w.T, labels.long(), ignore_index=ignore_index, reduction="none")
        dh, dw = t.autograd.grad(loss, (h, w), dloss)
    return dh.to(hidden.dtype), dw.to(weight.dtype)


def allocate(hidden, weight, labels, lse, dloss, ignore_index):
    return torch().empty_like(hidden), torch().empty_like(weight)


def chunk_rows(n: int, v: int, dtype: str) -> int:
    """Rows of one chunk: as many as WS_BYTES of [rows, v] workspace hold, a multiple of ROW_ALIGN."""
    fit = max(ROW_ALIGN, WS_BYTES // (v * ELEMENT_SIZE[dtype]) // ROW_ALIGN * ROW_ALIGN)
    return min(fit, cdiv(n, ROW_ALIGN) * ROW_ALIGN)


def plan(hidden, weight, labels, lse, dloss, ignore_index, outs):
    check_inputs("linear_cross_entropy_bwd", hidden, weight, labels)
    if lse.shape != labels.shape or dloss.shape != labels.shape:
        raise ValueError("linear_cross_entropy_bwd takes lse [N] and dloss [N]")
    dhidden, dweight = outs
    t = torch()
    (n, h), v, dt = hidden.shape, weight.shape[0], dtype_name(hidden)
    rows = chunk_rows(n, v, dt)
    ws = t.empty((rows, v), dtype=hidden.dtype, device=hidden.device)
    dw_acc = t.empty((v, h), dtype=t.float32, device=hidden.device)
    (bm, bv, bk), (hm, hh, hk), (wv, wh, wk) = FWD_TILES[dt], DH_TILES[dt], DW_TILES[dt]
    launches = []
    for row0 in range(0, n, rows):
        in_batch = min(rows, n - row0)  # the last chunk's grids stop at its last row tile in the batch
        launches += [
            Launch("linear_ce_dlogits_kernel", (cdiv(in_batch, bm), cdiv(v, bv), 1),
                   {"hidden": hidden, "weight": weight, "labels": labels, "lse": lse, "dloss": dloss, "ws": ws,
                    "ignore_index": ignore_index, "row_tile0": row0 // bm, "BLOCK_M": bm, "BLOCK_V": bv,
                    "BLOCK_K": bk}),
            Launch("linear_ce_dh_kernel", (cdiv(in_batch, hm), cdiv(h, hh), 1),
                   {"ws": ws, "weight": weight, "dhidden": dhidden, "row_tile0": row0 // hm, "BLOCK_M": hm,
                    "BLOCK_H": hh, "BLOCK_K": hk}),
            Launch("linear_ce_dw_kernel", (cdiv(v, wv), cdiv(h, wh), 1),
                   {"ws": ws, "hidden": hidden, "dw_acc": dw_acc, "dweight": dweight, "row_tile0": row0 // wk,
                    "BLOCK_V": wv, "BLOCK_H": wh, "BLOCK_K": wk, "ACCUMULATE": row0 > 0}),
        ]
    return launches


def _tiles(names: tuple[str, ...], table: dict, **more) -> dict:
    return {dt: {**dict(zip(names, t)), **more} for dt, t in table.items()}


SPEC = OpSpec(
    name="linear_cross_entropy_bwd",
    kernel_file="linear_cross_entropy.py",
    kernels=["linear_ce_dlogits_kernel", "linear_ce_dh_kernel", "linear_ce_dw_kernel"],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOL_LINEAR_CE_BWD,
    captures=(captures("linear_ce_dlogits_kernel",
                       {"hidden": 2, "weight": 2, "labels": 1, "lse": 1, "dloss": 1, "ws": 2},
                       _tiles(("BLOCK_M", "BLOCK_V", "BLOCK_K"), FWD_TILES),
                       {"ignore_index": "int32", "row_tile0": "int32"})
              + captures("linear_ce_dh_kernel", {"ws": 2, "weight": 2, "dhidden": 2},
                         _tiles(("BLOCK_M", "BLOCK_H", "BLOCK_K"), DH_TILES), {"row_tile0": "int32"})
              + [c for accumulate in (False, True)
                 for c in captures("linear_ce_dw_kernel", {"ws": 2, "hidden": 2, "dw_acc": 2, "dweight": 2},
                                   _tiles(("BLOCK_V", "BLOCK_H", "BLOCK_K"), DW_TILES, ACCUMULATE=accumulate),
                                   {"row_tile0": "int32"})]),
    bytes=lambda shape, dt: (2 * (shape[0] + shape[2]) * shape[1] + 2 * shape[0] * shape[2]) * ELEMENT_SIZE[dt]
    + 8 * shape[2] * shape[1],
    flops=lambda shape: 6 * shape[0] * shape[1] * shape[2],
    kind="compute",
)
