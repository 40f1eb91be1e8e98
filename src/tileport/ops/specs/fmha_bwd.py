"""fmha_bwd: attention prefill backward, causal or not, GQA / MQA, ragged lengths; (dq, dk, dv).

Inputs: the forward's q, k, v, seq_lens, causal, its outputs o and lse, the gradients do (of o) and
dlse (of lse, f32). Shapes (B, Hq, Hkv, S, D, causal) as fmha_fwd's. Three kernels
(kernels/attention_bwd.py): delta = rowsum(do * o) - dlse, then dk / dv over key tiles and dq over
query tiles. Reference: the gradients of the plain f32 attention per sequence, checked against
torch.autograd (the gradients of padding positions are 0). `fmha_fwd`'s autograd formula (torch_ops) is this op.
"""

from __future__ import annotations

import math

from ..spec import Capture, Launch, OpSpec, Tolerance
from . import _attention as A
from ._common import cdiv, generator, randn, torch

KERNELS = ["fmha_bwd_preprocess_kernel", "fmha_bwd_dkdv_kernel", "fmha_bwd_dq_kernel"]
# (BLOCK_M queries, BLOCK_N keys) of the key-tile kernel (dk, dv) and of the query-tile kernel
# (dq), per head dim; the preprocess takes PRE_BLOCK_M rows. Chosen as tiles that compile without
# spills for sm_90 (tileiras -O3, reference side; not yet timed on a GPU): the key-tile kernel holds
# two f32 (BLOCK_N, D) accumulators besides its k and v tiles; at D 128 with (64, 64) it spilled
# (255 registers, 128 B stack, 77 local loads / stores); with (32, 64) it uses 217 / 234 registers
# (causal), no stack. dq (64, 64) at D 128: 221 registers, no stack.
DKDV_TILES = {64: (64, 64), 128: (32, 64)}
DQ_TILES = {64: (64, 64), 128: (64, 64)}
PRE_BLOCK_M = 64
# Gradients sum BLOCK_N / S products of inputs rounded to f16 / bf16 (p and ds are rounded before
# their MMAs, as in every flash attention backward): measured in the interpreter against float64
# (two ragged sequences of <= 109 positions, D 64/128, causal and not), max |err| f16 2.3e-3,
# bf16 2.0e-2; the tolerance leaves room for the longer sums of the GPU shapes.
TOL_BWD = {
    "float16": Tolerance(rtol=2e-2, atol=2e-2),
    "bfloat16": Tolerance(rtol=1e-1, atol=1e-1),
}


def make_inputs(shape, dtype, device, seed=0):
    """q, k, v, seq_lens, causal as fmha_fwd's; o and lse of the reference forward; do, dlse."""
    q, k, v, lens = A.prefill_inputs(shape, dtype, device, seed)
    causal = bool(shape[5])
    g = generator(device, seed + 3)
    do = randn(q.shape, dtype, device, g)
    dlse = randn(q.shape[:3], "float32", device, g, scale=0.5)
    if torch().device(device).type == "meta":
        o, lse = A.prefill_allocate(q)
    else:
        o, lse = A.attention_reference(q, k, v, [(n, n) for n in lens.tolist()], causal=causal)
    return q, k, v, lens, causal, o, lse, do, dlse


def reference(q, k, v, seq_lens, causal, o, lse, do, dlse):
    """The gradients of the f32 math attention, sequence by sequence (o and lse recomputed):
    written out, not taken by autograd, because a custom op's implementation runs below torch's
    autograd (tests/ops/test_attention_bwd.py checks this against torch.autograd)."""
    t = torch()
    batch, hq, _, d = q.shape
    hkv = k.shape[1]
    group, scale = hq // hkv, 1.0 / math.sqrt(d)
    grads = [t.zeros(x.shape, dtype=t.float32, device=x.device) for x in (q, k, v)]
    for b, n in enumerate(seq_lens.tolist()):
        qf = q[b, :, :n].float()
        kf, vf = (x[b, :, :n].float().repeat_interleave(group, 0) for x in (k, v))
        g = do[b, :, :n].float()
        s = qf @ kf.transpose(-1, -2) * scale
        if causal:
            s = s.masked_fill(t.ones((n, n), dtype=t.bool, device=q.device).triu(1),
                              float("-inf"))
        p = t.softmax(s, dim=-1)
        delta = (g * (p @ vf)).sum(-1, keepdim=True) - dlse[b, :, :n, None].float()
        ds = p * (g @ vf.transpose(-1, -2) - delta)
        grads[0][b, :, :n] = ds @ kf * scale
        grads[1][b, :, :n] = (ds.transpose(-1, -2) @ qf * scale).reshape(hkv, group, n, d).sum(1)
        grads[2][b, :, :n] = (p.transpose(-1, -2) @ g).reshape(hkv, group, n, d).sum(1)
    return tuple(grad.to(q.dtype) for grad in grads)


def allocate(q, k, v, *rest):
    t = torch()
    return t.empty_like(q), t.empty_like(k), t.empty_like(v)


def constants(tiles, d, causal) -> dict:
    bm, bn = tiles[d]
    return {"BLOCK_M": bm, "BLOCK_N": bn, "HEAD_DIM": d, "CAUSAL": bool(causal)}


def plan(q, k, v, seq_lens, causal, o, lse, do, dlse, outs):
    A.check_dtype(q)
    A._check_prefill("fmha_bwd", q, k, v, seq_lens, A.HEAD_DIMS)
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:3] \
            or dlse.shape != q.shape[:3]:
        raise ValueError("fmha_bwd takes o, do [B, Hq, S, D] and lse, dlse [B, Hq, S] f32")
    dq, dk, dv = outs
    batch, hq, s, d = q.shape
    delta = torch().empty((batch, hq, s), dtype=torch().float32, device=q.device)
    dkdv, dq_consts = constants(DKDV_TILES, d, causal), constants(DQ_TILES, d, causal)
    scale = 1.0 / math.sqrt(d)
    grads = {"q": q, "k": k, "v": v, "do": do, "lse": lse, "delta": delta, "seq_lens": seq_lens,
             "qk_scale": scale * A.LOG2E, "sm_scale": scale}
    return [
        Launch("fmha_bwd_preprocess_kernel", (cdiv(s, PRE_BLOCK_M), batch * hq, 1),
               {"o": o, "do": do, "dlse": dlse, "delta": delta, "BLOCK_M": PRE_BLOCK_M,
                "HEAD_DIM": d}),
        Launch("fmha_bwd_dkdv_kernel", (cdiv(s, dkdv["BLOCK_N"]), batch * k.shape[1], 1),
               {**grads, **dkdv, "dk": dk, "dv": dv}),
        Launch("fmha_bwd_dq_kernel", (cdiv(s, dq_consts["BLOCK_M"]), batch * hq, 1),
               {**grads, **dq_consts, "dq": dq}),
    ]


def captures() -> list[Capture]:
    out = []
    for dt in A.ATTN_DTYPES:
        for d in A.HEAD_DIMS:
            out.append(Capture("fmha_bwd_preprocess_kernel",
                               {"o": (dt, 4), "do": (dt, 4), "dlse": ("float32", 3),
                                "delta": ("float32", 3)}, {},
                               {"BLOCK_M": PRE_BLOCK_M, "HEAD_DIM": d}))
            for causal in (False, True):
                arrays = {n: (dt, 4) for n in ("q", "k", "v", "do")}
                arrays.update(lse=("float32", 3), delta=("float32", 3), seq_lens=("int32", 1))
                scalars = {"qk_scale": "float32", "sm_scale": "float32"}
                # the output first: tools take a capture's tolerance from its first array's dtype
                out.append(Capture("fmha_bwd_dkdv_kernel",
                                   {"dk": (dt, 4), "dv": (dt, 4), **arrays}, scalars,
                                   constants(DKDV_TILES, d, causal)))
                out.append(Capture("fmha_bwd_dq_kernel", {"dq": (dt, 4), **arrays}, scalars,
                                   constants(DQ_TILES, d, causal)))
    return out


def flops(shape) -> int:
    """5 MMAs of 2 * D flops per visible (query, key) pair (s twice, dp, dv, dk, dq: the score MMA
    is recomputed by both gradient kernels): 2.5x the forward's."""
    return A.prefill_flops(shape, causal=bool(shape[5])) * 5 // 2


def bytes_moved(shape, dt) -> int:
    """q, k, v, o, do read and dq, dk, dv written once; lse, dlse, delta."""
    batch, hq, hkv, s, d = shape[:5]
    return (4 * batch * hq * s * d + 4 * batch * hkv * s * d) * 2 + 3 * 4 * batch * hq * s


SPEC = OpSpec(
    name="fmha_bwd",
    kernel_file="attention_bwd.py",
    kernels=KERNELS,
    dtypes=list(A.ATTN_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    # ragged lengths (B > 1), lengths not multiples of the tiles, GQA / MQA, D 64 / 128
    shapes=[(1, 1, 1, 1, 64, 0), (1, 1, 1, 1, 128, 1), (2, 4, 2, 77, 64, 1),
            (3, 8, 1, 200, 128, 0), (2, 8, 8, 513, 128, 1), (1, 32, 8, 1000, 64, 1),
            (2, 16, 4, 1024, 128, 1), (2, 16, 4, 1024, 128, 0)],
    bench_shapes=[(4, 32, 8, 4096, 128, 1), (4, 32, 8, 4096, 128, 0), (2, 32, 8, 8192, 128, 1)],
    tolerances=TOL_BWD,
    captures=captures(),
    bytes=bytes_moved,
    flops=flops,
    kind="compute",
)
