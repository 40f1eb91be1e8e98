"""mla_prefill: DeepSeek-style multi-head latent attention prefill, absorbed, causal, ragged.

Inputs q_nope [B, H, S, 512] (absorbed into the latent space), q_pe [B, H, S, 64], the latent
cache ckv [B, S, 512], the rope keys kpe [B, S, 64], seq_lens [B] int32. Outputs o [B, H, S, 512]
(latent; the caller applies the value up-projection) and lse [B, H, S] f32; padding rows give 0
and -inf. Shapes (B, H, S). scale = 1 / sqrt(128 + 64) as mla_decode's. Reference: plain f32
torch per sequence.
"""

from __future__ import annotations

from ..spec import Capture, Launch, OpSpec
from . import _attention as A
from ._common import cdiv, generator, randn, torch
from .mla_decode import LORA, ROPE, SM_SCALE

# BLOCK_M query rows x BLOCK_N latent rows: the (BLOCK_M, 512) f32 accumulator is what bounds the
# tiles (64 x 512 x 4 B = 128 KiB of registers over 8 warps). Not measured on a GPU yet.
BLOCK_M, BLOCK_N = 64, 32


def make_inputs(shape, dtype, device, seed=0):
    batch, heads, s = shape
    g = generator(device, seed)
    q_nope = randn((batch, heads, s, LORA), dtype, device, g, scale=0.1)
    q_pe = randn((batch, heads, s, ROPE), dtype, device, g)
    ckv = randn((batch, s, LORA), dtype, device, g)
    kpe = randn((batch, s, ROPE), dtype, device, g)
    return q_nope, q_pe, ckv, kpe, A._lens_tensor(A.seq_lens_of(batch, s), device)


def reference(q_nope, q_pe, ckv, kpe, seq_lens):
    t = torch()
    o = t.zeros(q_nope.shape, dtype=t.float32, device=q_nope.device)
    lse = t.full(q_nope.shape[:3], float("-inf"), dtype=t.float32, device=q_nope.device)
    for b, n in enumerate(seq_lens.tolist()):
        c = ckv[b, :n].float()
        s = (q_nope[b, :, :n].float() @ c.T + q_pe[b, :, :n].float() @ kpe[b, :n].float().T) \
            * SM_SCALE
        s = s.masked_fill(t.ones((n, n), dtype=t.bool, device=s.device).triu(1), float("-inf"))
        lse[b, :, :n] = t.logsumexp(s, dim=-1)
        o[b, :, :n] = t.softmax(s, dim=-1) @ c
    return o.to(q_nope.dtype), lse


def allocate(q_nope, *rest):
    t = torch()
    return t.empty_like(q_nope), t.empty(q_nope.shape[:3], dtype=t.float32, device=q_nope.device)


def plan(q_nope, q_pe, ckv, kpe, seq_lens, outs):
    A.check_dtype(q_nope)
    batch, heads, s, lora = q_nope.shape
    if lora != LORA or q_pe.shape != (batch, heads, s, ROPE) or ckv.shape != (batch, s, LORA) \
            or kpe.shape != (batch, s, ROPE) or seq_lens.shape != (batch,):
        raise ValueError(f"mla_prefill takes q_nope [B, H, S, {LORA}], q_pe [B, H, S, {ROPE}], "
                         f"ckv [B, S, {LORA}], kpe [B, S, {ROPE}], seq_lens [B]")
    o, lse = outs
    args = {"q_nope": q_nope, "q_pe": q_pe, "ckv": ckv, "kpe": kpe, "seq_lens": seq_lens,
            "o": o, "lse": lse, "qk_scale": SM_SCALE * A.LOG2E, "BLOCK_M": BLOCK_M,
            "BLOCK_N": BLOCK_N, "LORA": LORA, "ROPE": ROPE}
    return [Launch("mla_prefill_kernel", (cdiv(s, BLOCK_M), batch * heads, 1), args)]


def _captures():
    out = []
    for dt in A.ATTN_DTYPES:
        # the output first: tools take a capture's tolerance from its first array's dtype
        arrays = {n: (dt, 4) for n in ("o", "q_nope", "q_pe")}
        arrays.update(ckv=(dt, 3), kpe=(dt, 3), seq_lens=("int32", 1), lse=("float32", 3))
        out.append(Capture("mla_prefill_kernel", arrays, {"qk_scale": "float32"},
                           {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "LORA": LORA, "ROPE": ROPE}))
    return out


def flops(shape) -> int:
    """Per visible (query, key) pair: the 576-wide score dot and the 512-wide value dot."""
    batch, heads, s = shape
    pairs = sum(n * (n + 1) // 2 for n in A.seq_lens_of(batch, s))
    return 2 * heads * (2 * LORA + ROPE) * pairs


SPEC = OpSpec(
    name="mla_prefill",
    kernel_file="attention.py",
    kernels=["mla_prefill_kernel"],
    dtypes=list(A.ATTN_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    # ragged lengths (B > 1) not multiples of the tiles; 128 heads as DeepSeek-V3
    shapes=[(1, 1, 1), (2, 4, 77), (3, 16, 200), (2, 128, 513), (1, 16, 1000)],
    bench_shapes=[(1, 128, 4096), (4, 16, 4096)],
    tolerances=A.TOL_ATTENTION,
    captures=_captures(),
    bytes=lambda shape, dt: 2 * shape[0] * shape[2] * (shape[1] * (2 * LORA + ROPE) + LORA + ROPE)
    + 4 * shape[0] * shape[1] * shape[2],
    flops=flops,
    kind="compute",
)
