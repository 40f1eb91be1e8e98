"""mla_decode: DeepSeek-style multi-head latent attention decode, absorbed, split-KV.

Inputs q_nope [B, H, 512] (absorbed into the latent space), q_pe [B, H, 64], the latent cache
ckv [B, S, 512], the rope keys kpe [B, S, 64], kv_lens [B] int32 (>= 1). Output o [B, H, 512]
(latent; the caller applies the value up-projection) and lse [B, H] f32. Shapes (B, H, S).
scale = 1 / sqrt(128 + 64) (DeepSeek-V2/V3's qk head dim). Reference: plain f32 torch.
"""

from __future__ import annotations

import math

from ..spec import Capture, Launch, OpSpec
from . import _attention as A
from ._common import cdiv, generator, num_sms, randn, torch

LORA, ROPE = 512, 64
SM_SCALE = 1.0 / math.sqrt(128 + ROPE)
# HEAD_TILE heads are the MMA rows; BLOCK_N latent rows per key tile (a (32, 512) bf16 tile is
# 32 KiB). Not measured on a GPU yet.
HEAD_TILE, BLOCK_N = 16, 32


def make_inputs(shape, dtype, device, seed=0):
    batch, heads, s = shape
    g = generator(device, seed)
    q_nope = randn((batch, heads, LORA), dtype, device, g, scale=0.1)
    q_pe = randn((batch, heads, ROPE), dtype, device, g)
    ckv = randn((batch, s, LORA), dtype, device, g)
    kpe = randn((batch, s, ROPE), dtype, device, g)
    return q_nope, q_pe, ckv, kpe, A._lens_tensor(A.seq_lens_of(batch, s), device)


def reference(q_nope, q_pe, ckv, kpe, kv_lens):
    t = torch()
    o = t.zeros(q_nope.shape, dtype=t.float32, device=q_nope.device)
    lse = t.empty(q_nope.shape[:2], dtype=t.float32, device=q_nope.device)
    for b, n in enumerate(kv_lens.tolist()):
        c = ckv[b, :n].float()
        s = (q_nope[b].float() @ c.T + q_pe[b].float() @ kpe[b, :n].float().T) * SM_SCALE
        lse[b] = t.logsumexp(s, dim=-1)
        o[b] = t.exp(s - lse[b, :, None]) @ c
    return o.to(q_nope.dtype), lse


def allocate(q_nope, *rest):
    t = torch()
    return t.empty_like(q_nope), t.empty(q_nope.shape[:2], dtype=t.float32, device=q_nope.device)


def plan(q_nope, q_pe, ckv, kpe, kv_lens, outs):
    A.check_dtype(q_nope)
    t = torch()
    batch, heads, lora = q_nope.shape
    if lora != LORA or q_pe.shape != (batch, heads, ROPE) or ckv.shape[0] != batch \
            or ckv.shape[2] != LORA or kpe.shape != (batch, ckv.shape[1], ROPE) \
            or kv_lens.shape != (batch,):
        raise ValueError(f"mla_decode takes q_nope [B, H, {LORA}], q_pe [B, H, {ROPE}], "
                         f"ckv [B, S, {LORA}], kpe [B, S, {ROPE}], kv_lens [B]")
    head_blocks = cdiv(heads, HEAD_TILE)
    tiles = max(1, cdiv(ckv.shape[1], BLOCK_N))
    splits = max(1, min(tiles, cdiv(A.DECODE_BLOCKS_PER_SM * num_sms(q_nope.device),
                                    batch * head_blocks)))
    per_split = cdiv(tiles, splits)
    splits = cdiv(tiles, per_split)
    o_part = t.empty((batch, heads, splits, LORA), dtype=t.float32, device=q_nope.device)
    lse_part = t.empty((batch, heads, splits), dtype=t.float32, device=q_nope.device)
    o, lse = outs
    partial = {"q_nope": q_nope, "q_pe": q_pe, "ckv": ckv, "kpe": kpe, "kv_lens": kv_lens,
               "o_part": o_part, "lse_part": lse_part, "qk_scale": SM_SCALE * A.LOG2E,
               "tiles_per_split": per_split, "HEAD_TILE": HEAD_TILE, "BLOCK_N": BLOCK_N,
               "LORA": LORA, "ROPE": ROPE}
    combine = {"o_part": o_part, "lse_part": lse_part, "o": o, "lse": lse, "n_splits": splits,
               "HEAD_DIM": LORA}
    return [Launch("mla_decode_partial_kernel", (splits, batch * head_blocks, 1), partial),
            Launch("flash_decode_combine_kernel", (batch, heads, 1), combine)]


def _captures():
    out = []
    for dt in A.ATTN_DTYPES:
        arrays = {n: (dt, 3) for n in ("q_nope", "q_pe", "ckv", "kpe")}
        arrays.update(kv_lens=("int32", 1), o_part=("float32", 4), lse_part=("float32", 3))
        out.append(Capture("mla_decode_partial_kernel", arrays,
                           {"qk_scale": "float32", "tiles_per_split": "int32"},
                           {"HEAD_TILE": HEAD_TILE, "BLOCK_N": BLOCK_N, "LORA": LORA,
                            "ROPE": ROPE}))
    for dt in A.ATTN_DTYPES:
        out.append(Capture("flash_decode_combine_kernel",
                           {"o": (dt, 3), "o_part": ("float32", 4), "lse_part": ("float32", 3),
                            "lse": ("float32", 2)}, {"n_splits": "int32"}, {"HEAD_DIM": LORA}))
    return out


SPEC = OpSpec(
    name="mla_decode",
    kernel_file="attention.py",
    kernels=["mla_decode_partial_kernel", "flash_decode_combine_kernel"],
    dtypes=list(A.ATTN_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1), (2, 16, 77), (3, 19, 1000), (2, 128, 4099)],
    bench_shapes=[(64, 128, 4096), (16, 16, 32768)],
    tolerances=A.TOL_ATTENTION,
    captures=_captures(),
    bytes=lambda shape, dt: 2 * sum(A.seq_lens_of(shape[0], shape[2])) * (LORA + ROPE)
    + 2 * shape[0] * shape[1] * (2 * LORA + ROPE),
    flops=lambda shape: 2 * shape[1] * (2 * LORA + ROPE) * sum(A.seq_lens_of(shape[0], shape[2])),
)
