"""Shared host logic of the attention ops (kernels/attention.py): inputs, references, plans, captures.

Layouts (torch SDPA's): prefill q, o [B, Hq, S, D], k, v [B, Hkv, S, D], lse [B, Hq, S] f32;
decode q, o [B, Hq, D], a KV cache [B, Hkv, S, D] (or a page pool [P, Hkv, PAGE, D] with a block
table [B, S / PAGE] int32), lse [B, Hq] f32. Sequence lengths [B] int32 make a batch ragged in the
padded layout: prefill positions >= seq_lens[b] are padding (output 0, lse -inf); decode's query
is the last cached position (kv_lens[b] >= 1). Hq must be a multiple of Hkv (GQA; MQA is Hkv = 1).

Shapes of the specs are (B, Hq, Hkv, S, D) plus, for prefill, the causal flag (0 / 1) or the window.
Lengths are ragged whenever B > 1: sequence b holds S - b * (S // (B + 1)) - 3 b positions (>= 1).
"""

from __future__ import annotations

import itertools
import math

from ..spec import Capture, Launch, Tolerance
from ._common import cdiv, dtype_name, generator, num_sms, randn, torch

ATTN_DTYPES = ("float16", "bfloat16")
LOG2E = math.log2(math.e)

# P is rounded to the input dtype before the P @ V MMA (as every flash attention does), and the
# output once more: a few ulp of f16 (2^-11) / bf16 (2^-8) on outputs of magnitude <= ~2. lse is
# f32 throughout (errors ~1e-6). Measured in the interpreter against float64 (seq 141, D 64/128):
# f16 max |err| 1.3e-3, bf16 7.4e-3.
TOL_ATTENTION = {
    "float16": Tolerance(rtol=4e-3, atol=4e-3),
    "bfloat16": Tolerance(rtol=2e-2, atol=2e-2),
}
# Inputs are N(0, 1.5^2): scores of std ~2.25 make the softmax peaked, not uniform.
INPUT_SCALE = 1.5
SOFTCAP = 5.0  # small enough that tanh bends these scores (Gemma 2 uses 50 on real logits)

# Prefill tiles per head dim: BLOCK_M query rows x BLOCK_N keys, with the kernel hints
# occupancy=1, num_worker_warps=8 (not yet measured on a GPU: chosen as the largest tiles that
# compile without spills for sm_90, tileiras -O3: 128x128 uses 245 / 247 registers for D 64 / 128,
# no stack; with the default warps, 128x64 already spills). Decode: key tiles of DECODE_BLOCK_N
# positions of a contiguous cache, or one page (PAGE_SIZE) of a paged one; the query group padded to
# GROUP_TILE rows of one MMA. 128-key tiles over 64: 80.8 -> 77.8 us (16 x 4096) and 148.1 -> 142.3
# us (128 x 1024) on the H200, bf16 (bench/results/2026-12-02-h200-decode-space.json).
PREFILL_TILES = {64: (128, 128), 128: (128, 128)}
# Head dims of the ops. Each (variant, head dim, dtype) is a specialization the port is generated
# for, so the variants take only the head dims of the models that use them: sinks (gpt-oss) 64,
# softcap 128.
HEAD_DIMS = (64, 128)
DECODE_BLOCK_N = 128
PAGE_SIZE = 64
GROUP_TILE = 16
# Decode splits target this many tile blocks per SM (split-KV fills the machine at small batch).
DECODE_BLOCKS_PER_SM = 2
# Declared tuning space (what an autotuner should sweep on the GPU; the plans use the first entry).
TUNE_SPACE = {
    "fmha_fwd_kernel": {"BLOCK_M": (128, 64), "BLOCK_N": (128, 64), "occupancy": (1, 2),
                        "num_worker_warps": (8, 4)},
    "flash_decode_partial_kernel": {"BLOCK_N": (128, 64), "DECODE_BLOCKS_PER_SM": (2, 1, 4),
                                    "latency": (4, 2, 8)},
    "flash_decode_combine_kernel": {"occupancy": (4, 8)},
}


def seq_lens_of(batch: int, s: int) -> list[int]:
    """The ragged lengths of a (B, ..., S, ...) shape (see the module docstring)."""
    return [max(1, s - b * (s // (batch + 1)) - 3 * b) for b in range(batch)]


def _lens_tensor(lens, device):
    return torch().tensor(lens, dtype=torch().int32, device=torch().device(device)) \
        if torch().device(device).type != "meta" else \
        torch().empty((len(lens),), dtype=torch().int32, device="meta")


def prefill_inputs(shape, dtype, device, seed):
    """q, k, v, seq_lens of a prefill shape (B, Hq, Hkv, S, D, ...)."""
    batch, hq, hkv, s, d = shape[:5]
    g = generator(device, seed)
    q = randn((batch, hq, s, d), dtype, device, g, scale=INPUT_SCALE)
    k = randn((batch, hkv, s, d), dtype, device, g, scale=INPUT_SCALE)
    v = randn((batch, hkv, s, d), dtype, device, g)
    return q, k, v, _lens_tensor(seq_lens_of(batch, s), device)


def sinks_input(hq, device, seed):
    return randn((hq,), "float32", device, generator(device, seed + 1), scale=2.0)


def masked_scores(qf, kf, q_pos, k_pos, causal, window, softcap):
    """f32 scores [H, n_q, n_k] with -inf where masked (softcap on the scaled logits)."""
    t = torch()
    s = (qf @ kf.transpose(-1, -2)) / math.sqrt(qf.shape[-1])
    if softcap:
        s = softcap * t.tanh(s / softcap)
    keep = t.ones((q_pos.shape[0], k_pos.shape[0]), dtype=t.bool, device=qf.device)
    if causal:
        keep &= k_pos[None, :] <= q_pos[:, None]
    if window:
        keep &= q_pos[:, None] - k_pos[None, :] < window
    return s.masked_fill(~keep, float("-inf"))


# Query rows per chunk of the plain reference: bounds its [H, rows, S] f32 score tensor.
REF_ROWS = 1024


def attention_reference(q, k, v, lens, causal=False, window=0, sinks=None,
                        softcap=0.0, use_sdpa=False):
    """Plain f32 attention per sequence: (o in q's dtype, lse f32), zeros / -inf on padding.
    q [B, Hq, Sq, D] with lens[b] = (n_q, n_k); query i sits at key position i + n_k - n_q.
    `use_sdpa`: o from torch's scaled_dot_product_attention (f32, math on CPU) instead."""
    t = torch()
    batch, hq, sq, d = q.shape
    group = hq // k.shape[1]
    o = t.zeros(q.shape, dtype=t.float32, device=q.device)
    lse = t.full((batch, hq, sq), float("-inf"), dtype=t.float32, device=q.device)
    for b, (n_q, n_k) in enumerate(lens):
        kf = k[b, :, :n_k].float().repeat_interleave(group, 0)
        vf = v[b, :, :n_k].float().repeat_interleave(group, 0)
        k_pos = t.arange(n_k, device=q.device)
        for r0 in range(0, n_q, REF_ROWS):
            r1 = min(n_q, r0 + REF_ROWS)
            qf = q[b, :, r0:r1].float()
            q_pos = t.arange(r0, r1, device=q.device) + (n_k - n_q)
            s = masked_scores(qf, kf, q_pos, k_pos, causal, window, softcap)
            if sinks is not None:
                s = t.cat([s, sinks.float()[:, None, None].expand(hq, r1 - r0, 1)], dim=-1)
            lse[b, :, r0:r1] = t.logsumexp(s, dim=-1)
            p = t.exp(s - lse[b, :, r0:r1, None])
            if use_sdpa:
                mask = s[..., :n_k] > float("-inf")
                o[b, :, r0:r1] = t.nn.functional.scaled_dot_product_attention(
                    qf[None], kf[None], vf[None], attn_mask=mask[None])[0]
            else:
                o[b, :, r0:r1] = p[..., :n_k] @ vf
    return o.to(q.dtype), lse


def prefill_allocate(q, *rest):
    t = torch()
    b, hq, s, _ = q.shape
    return t.empty_like(q), t.empty((b, hq, s), dtype=t.float32, device=q.device)


def _check_prefill(name, q, k, v, seq_lens, head_dims):
    if q.dim() != 4 or k.shape != v.shape or k.dim() != 4 or q.shape[0] != k.shape[0] \
            or q.shape[2:] != k.shape[2:] or q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"{name} takes q [B, Hq, S, D], k and v [B, Hkv, S, D] with Hkv | Hq")
    if q.shape[3] not in head_dims:
        raise ValueError(f"{name}: head dim {q.shape[3]} is not one of {sorted(head_dims)}")
    if seq_lens.shape != (q.shape[0],):
        raise ValueError(f"{name}: seq_lens must be [B] int32")


def prefill_plan(name, q, k, v, seq_lens, outs, causal=False, window=0, sinks=None, softcap=0.0,
                 head_dims=HEAD_DIMS):
    """One fmha_fwd_kernel launch; the variant flags become the kernel's constants. `head_dims`:
    those the op is captured (so ported) for."""
    _check_prefill(name, q, k, v, seq_lens, head_dims)
    o, lse = outs
    b, hq, s, d = q.shape
    consts = prefill_constants(d, causal=causal or window > 0, sliding=window > 0,
                               sinks=sinks is not None, softcap=bool(softcap))
    scale = 1.0 / math.sqrt(d)
    dummy = sinks if sinks is not None else unused_view(lse, 1)
    args = {"q": q, "k": k, "v": v, "o": o, "lse": lse, "seq_lens": seq_lens, "sinks": dummy,
            "qk_scale": scale / softcap if softcap else scale * LOG2E,
            "softcap": float(softcap), "window": int(window), **consts}
    return [Launch("fmha_fwd_kernel", (cdiv(s, consts["BLOCK_M"]), b * hq, 1), args)]


def unused_view(tensor, rank: int):
    """A parameter the launch's variant never reads (no sinks, no block table): a view of one element of
    an input or output of that dtype. A buffer of the plan's own that a kernel only reads would keep the
    call out of the plan cache (plan_cache: it is allocated again per call, so it holds no data)."""
    return tensor.as_strided((1,) * rank, (1,) * rank)


def prefill_constants(d, causal=False, sliding=False, sinks=False, softcap=False) -> dict:
    bm, bn = PREFILL_TILES[d]
    return {"BLOCK_M": bm, "BLOCK_N": bn, "HEAD_DIM": d, "CAUSAL": bool(causal),
            "SLIDING": bool(sliding), "HAS_SINKS": bool(sinks), "SOFTCAP": bool(softcap)}


def prefill_captures(head_dims=HEAD_DIMS, **variant) -> list[Capture]:
    out = []
    for dt in ATTN_DTYPES:
        for d in head_dims:
            arrays = {n: (dt, 4) for n in ("q", "k", "v", "o")}
            arrays.update(lse=("float32", 3), seq_lens=("int32", 1), sinks=("float32", 1))
            out.append(Capture("fmha_fwd_kernel", arrays,
                               {"qk_scale": "float32", "softcap": "float32", "window": "int32"},
                               prefill_constants(d, **variant)))
    return out


def prefill_flops(shape, causal=False, window=0) -> int:
    """2 MMAs of 2 * D flops per (query, visible key) pair, over the ragged lengths."""
    batch, hq, _hkv, s, d = shape[:5]
    pairs = 0
    for n in seq_lens_of(batch, s):
        if window:
            w = min(window, n)
            pairs += w * (w + 1) // 2 + (n - w) * w
        elif causal:
            pairs += n * (n + 1) // 2
        else:
            pairs += n * n
    return 4 * d * hq * pairs


def prefill_bytes(shape, dt) -> int:
    batch, hq, hkv, s, d = shape[:5]
    return (2 * batch * hq * s * d + 2 * batch * hkv * s * d) * 2 + 4 * batch * hq * s


# ---- decode -------------------------------------------------------------------------------------


def decode_inputs(shape, dtype, device, seed):
    """q [B, Hq, D], k and v caches [B, Hkv, S, D], kv_lens [B] of a decode shape."""
    batch, hq, hkv, s, d = shape[:5]
    g = generator(device, seed)
    q = randn((batch, hq, d), dtype, device, g, scale=INPUT_SCALE)
    k = randn((batch, hkv, s, d), dtype, device, g, scale=INPUT_SCALE)
    v = randn((batch, hkv, s, d), dtype, device, g)
    return q, k, v, _lens_tensor(seq_lens_of(batch, s), device)


def to_pages(cache, order, page=PAGE_SIZE):
    """[B, H, S, D] -> a page pool [P, H, page, D]: (sequence b, tile t) goes to page
    order[b * pages + t]; S is padded to whole pages with zeros."""
    t = torch()
    batch, heads, s, d = cache.shape
    pages = cdiv(s, page)
    padded = t.zeros((batch, heads, pages * page, d), dtype=cache.dtype, device=cache.device)
    padded[:, :, :s] = cache
    tiles = padded.reshape(batch, heads, pages, page, d).transpose(1, 2).reshape(-1, heads, page, d)
    pool = t.empty_like(tiles)
    pool[order.long()] = tiles
    return pool


def from_pages(pool, block_table):
    """The contiguous cache [B, H, pages * page, D] of a page pool and its block table."""
    batch, pages = block_table.shape
    _, heads, page, d = pool.shape
    tiles = pool[block_table.reshape(-1).long()].reshape(batch, pages, heads, page, d)
    return tiles.transpose(1, 2).reshape(batch, heads, pages * page, d)


def paged_inputs(shape, dtype, device, seed):
    """q, k_pages, v_pages, block_table, kv_lens: the decode inputs with the caches as shuffled
    pages of PAGE_SIZE positions."""
    q, k, v, lens = decode_inputs(shape, dtype, device, seed)
    batch, _, _, s, _ = shape[:5]
    pages = cdiv(s, PAGE_SIZE)
    if torch().device(device).type == "meta":
        order = torch().empty((batch * pages,), dtype=torch().int32, device="meta")
    else:
        g = torch().Generator(device="cpu")
        g.manual_seed(seed + 2)
        order = torch().randperm(batch * pages, generator=g).to(torch().int32).to(device)
    return q, to_pages(k, order), to_pages(v, order), order.reshape(batch, pages), lens


def decode_reference(q, k, v, kv_lens, window=0, sinks=None, softcap=0.0, use_sdpa=False):
    lens = [(1, int(n)) for n in kv_lens.tolist()]
    o, lse = attention_reference(q[:, :, None], k, v, lens, causal=True, window=window,
                                 sinks=sinks, softcap=softcap, use_sdpa=use_sdpa)
    return o[:, :, 0], lse[:, :, 0]


def decode_allocate(q, *rest):
    t = torch()
    return t.empty_like(q), t.empty(q.shape[:2], dtype=t.float32, device=q.device)


# At most this many splits: the combine kernel reads every split's partial of every query head.
MAX_DECODE_SPLITS = 64
# A block's fixed cost (q load, filling its 4-deep load pipeline, the partial stores) in key tiles:
# a model for choosing the split count, not a measurement.
BLOCK_OVERHEAD_TILES = 4


def decode_splits(batch, hkv, max_len, sms, block_n=None) -> tuple[int, int]:
    """(n_splits, key tiles per split) that minimize the longest block chain: waves of
    DECODE_BLOCKS_PER_SM x SMs concurrent blocks times the key tiles of one split plus
    BLOCK_OVERHEAD_TILES (fewer splits on a tie). Filling only part of the last wave wastes bandwidth: 16 x 8192 tokens with 8 kv
    heads took 3 splits (384 blocks, 1.45 waves of 264: 74 % of copy bandwidth measured on the
    H200) where 2 splits fill one wave (256 blocks)."""
    tiles = max(1, cdiv(max_len, block_n or DECODE_BLOCK_N))
    slots = DECODE_BLOCKS_PER_SM * sms
    best = None
    for splits in range(1, min(tiles, MAX_DECODE_SPLITS) + 1):
        per_split = cdiv(tiles, splits)
        used = cdiv(tiles, per_split)  # no empty split
        cost = (cdiv(batch * hkv * used, slots) * (per_split + BLOCK_OVERHEAD_TILES), used)
        if best is None or cost < best[0]:
            best = (cost, used, per_split)
    return best[1], best[2]


def decode_plan(name, q, k, v, kv_lens, outs, block_table=None, window=0, sinks=None,
                softcap=0.0, head_dims=HEAD_DIMS):
    """flash_decode_partial_kernel over (splits, B * Hkv), then flash_decode_combine_kernel over
    (B, Hq); the f32 partials are the plan's workspace."""
    t = torch()
    batch, hq, d = q.shape
    hkv = k.shape[1]
    paged = block_table is not None
    if q.dim() != 3 or k.dim() != 4 or k.shape != v.shape or hq % hkv != 0 \
            or k.shape[3] != d or kv_lens.shape != (batch,):
        raise ValueError(f"{name} takes q [B, Hq, D], caches [., Hkv, ., D] with Hkv | Hq, "
                         "kv_lens [B]")
    if d not in head_dims or hq // hkv > GROUP_TILE:
        raise ValueError(f"{name}: head dim {d} / query group {hq // hkv} not supported "
                         f"(head dims {sorted(head_dims)}, groups <= {GROUP_TILE})")
    if paged and (k.shape[2] != PAGE_SIZE or block_table.shape[0] != batch):
        raise ValueError(f"{name}: pages hold {PAGE_SIZE} positions; block_table is [B, pages]")
    max_len = block_table.shape[1] * PAGE_SIZE if paged else k.shape[2]
    splits, per_split = decode_splits(batch, hkv, max_len, num_sms(q.device), decode_block_n(paged))
    o, lse = outs
    # one split: the partial kernel writes o and lse (views of them), no combine kernel
    final = splits == 1 and o.is_contiguous() and lse.is_contiguous()
    o_part = o.view(batch, hq, 1, d) if final else t.empty((batch, hq, splits, d), dtype=t.float32,
                                                             device=q.device)
    lse_part = lse.view(batch, hq, 1) if final else t.empty((batch, hq, splits), dtype=t.float32,
                                                             device=q.device)
    group = hq // hkv
    dummy_table, dummy_sinks = unused_view(kv_lens, 2), unused_view(lse, 1)
    scale = 1.0 / math.sqrt(d)
    partial = {
        "q": q.view(batch, hkv, group, d), "k": k, "v": v,
        "block_table": block_table if paged else dummy_table, "kv_lens": kv_lens,
        "sinks": sinks if sinks is not None else dummy_sinks,
        "o_part": o_part.view(batch, hkv, group, splits, d),
        "lse_part": lse_part.view(batch, hkv, group, splits),
        "qk_scale": scale / softcap if softcap else scale * LOG2E, "softcap": float(softcap),
        "window": int(window), "tiles_per_split": per_split,
        **decode_constants(d, paged=paged, sliding=window > 0, sinks=sinks is not None,
                           softcap=bool(softcap), final=final)}
    launches = [Launch("flash_decode_partial_kernel", (splits, batch * hkv, 1), partial)]
    if not final:
        combine = {"o_part": o_part, "lse_part": lse_part, "o": o, "lse": lse, "n_splits": splits,
                   "HEAD_DIM": d}
        launches.append(Launch("flash_decode_combine_kernel", (batch, hq, 1), combine))
    return launches


def decode_block_n(paged: bool) -> int:
    """Key positions per tile: one page of a paged cache."""
    return PAGE_SIZE if paged else DECODE_BLOCK_N


def decode_constants(d, paged=False, sliding=False, sinks=False, softcap=False, final=False) -> dict:
    return {"GROUP_TILE": GROUP_TILE, "BLOCK_N": decode_block_n(paged), "HEAD_DIM": d,
            "PAGED": bool(paged), "SLIDING": bool(sliding), "HAS_SINKS": bool(sinks),
            "SOFTCAP": bool(softcap), "FINAL": bool(final)}


def decode_captures(head_dims=HEAD_DIMS, combine=True, **variant) -> list[Capture]:
    """The partial kernel's captures for one variant, split (f32 partials) and final (o in the
    input dtype), and the combine kernel's, if `combine`."""
    out = []
    for dt, d, final in itertools.product(ATTN_DTYPES, head_dims, (False, True)):
        arrays = {n: (dt, 4) for n in ("q", "k", "v")}
        arrays.update(block_table=("int32", 2), kv_lens=("int32", 1), sinks=("float32", 1),
                      o_part=(dt if final else "float32", 5), lse_part=("float32", 4))
        out.append(Capture("flash_decode_partial_kernel", arrays,
                           {"qk_scale": "float32", "softcap": "float32", "window": "int32",
                            "tiles_per_split": "int32"},
                           decode_constants(d, final=final, **variant)))
    for dt in ATTN_DTYPES if combine else ():
        for d in head_dims:
            # the output first: tools take a capture's tolerance from its first array's dtype
            out.append(Capture("flash_decode_combine_kernel",
                               {"o": (dt, 3), "o_part": ("float32", 4),
                                "lse_part": ("float32", 3), "lse": ("float32", 2)},
                               {"n_splits": "int32"}, {"HEAD_DIM": d}))
    return out


def decode_bytes(shape, dt) -> int:
    """The KV cache actually read (the ragged lengths) plus q and o."""
    batch, hq, hkv, s, d = shape[:5]
    return 2 * sum(seq_lens_of(batch, s)) * hkv * d * 2 + 2 * batch * hq * d * 2


def decode_flops(shape) -> int:
    batch, hq, _hkv, s, d = shape[:5]
    return 4 * d * hq * sum(seq_lens_of(batch, s))


def check_dtype(x) -> str:
    dt = dtype_name(x)
    if dt not in ATTN_DTYPES:
        raise ValueError(f"attention ops take {', '.join(ATTN_DTYPES)}, got {dt}")
    return dt
