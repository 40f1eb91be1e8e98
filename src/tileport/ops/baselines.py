"""PyTorch baselines: every operator as a PyTorch user writes it, in the input dtype.

The `torch` backend runs these, and `tileport bench` times them (eager, and compiled with
`torch.compile`) next to the tile backends, on identical inputs. Each computes what the op's spec
computes (ops/specs/), so the outputs are comparable; the specs' references, which upcast to f32,
are kept for correctness checks only.

| op                                       | baseline                                                             |
|------------------------------------------|----------------------------------------------------------------------|
| vector_add                               | `a + b`                                                              |
| relu                                     | `torch.relu(x)`                                                      |
| gelu                                     | `F.gelu(x, approximate="tanh")`                                      |
| silu_and_mul                             | `F.silu(x[:, :n]) * x[:, n:]` (two roundings)                        |
| swiglu / geglu                           | `F.silu(a) * b` / `F.gelu(a, approximate="tanh") * b`                |
| softmax, softmax_tma / _gather / _online | `F.softmax(x, dim=-1)`                                               |
| rms_norm                                 | `F.rms_norm(x, (N,), w, eps=1e-6)`                                   |
| layer_norm                               | `torch.native_layer_norm(x, (N,), w, b, 1e-5)` (1)                   |
| rms_norm_bwd, layer_norm_bwd             | `F.rms_norm` / `F.layer_norm` backwards written out in f32 (8)       |
| linear_cross_entropy (_bwd)              | f32 logits `hidden @ weight.T` in memory, `F.cross_entropy` (9)      |
| rope                                     | rotate-half on the op's f32 cos/sin tables (2)                       |
| matmul, matmul_splitk / bmm              | `torch.matmul(a, b)` / `torch.bmm(a, b)` (3)                         |
| fmha_fwd                                 | SDPA's kernel per sequence (cuDNN / flash), GQA native, its lse (4)  |
| fmha_bwd                                 | SDPA's flash backward per sequence, dlse folded into o (5)           |
| fmha_fwd_sinks, flash_decode_sinks       | eager matmul + softmax with the sink logit concatenated (6)          |
| fmha_fwd_softcap, flash_decode_softcap   | eager matmul, `cap * tanh(s / cap)`, softmax (6)                     |
| flash_decode                             | SDPA's kernel per sequence, one query token (4)                      |
| flash_decode_paged                       | the sequence's pages gathered (`index_select`), then as flash_decode |
| mla_prefill, mla_decode                  | eager absorbed MLA as DeepSeek's reference code (7)                  |
| dropout / dropout_bwd                    | `F.dropout(x, p)` / autograd's `native_dropout_backward` (10)        |
| cross_entropy / cross_entropy_bwd        | `F.cross_entropy` of the f32 logits, their logsumexp / backward (11) |
| moe_topk_softmax / moe_topk_sigmoid      | `torch.topk` of the f32 softmax / sigmoid scores, renormalized       |
| moe_route                                | the above, then bincount / stable sort / cumsum alignment (12)       |
| gated_delta_decode / _prefill / _chunked | the recurrence token by token in f32 (the specs' reference)          |
| fused_moe, moe_experts                   | softmax top-k, then a loop over the experts' routed tokens (13)      |
| grouped_gemm                             | one `torch.matmul` per problem into the packed output (13)           |
| matmul_fp8                               | the operands dequantized to bf16, `torch.matmul` (14)                |

(1) what `F.layer_norm` runs, with the mean / rstd the op returns. (2) `cat(x1 * cos - x2 * sin,
x2 * cos + x1 * sin)` as in model code; type promotion computes in f32 like the kernel, one rounding.
(3) f32: TF32 when the user allows it, as `bench` does, since the kernels use TF32.

Attention (ops/specs/_attention.py): every batch is ragged in the padded layout, so each baseline
reads the lengths on the host (`seq_lens.tolist()`, as a user slicing their sequences does) and
runs each sequence on its own positions: the work of the ragged lengths, as the kernels do, not of
the padding; padding rows are 0 (o, gradients) and -inf (lse), as the specs define them.
`torch.compile` traces these with one graph break at the lengths (ATTENTION_HOST_LENGTHS; the rest
is one graph specialized on them). Decode runs B SDPA launches: SDPA takes per-sequence key
lengths only as a mask, and a mask takes it off the fused kernels.
(4) The kernel `F.scaled_dot_product_attention(q, k, v, is_causal=..., enable_gqa=True)` runs for
these f16 / bf16 inputs, as SDPA chooses it (`torch._fused_sdp_choice`; on an H200 with torch 2.11
cuDNN's, `aten._scaled_dot_product_cudnn_attention`; else flash's), called directly because it also
returns the (natural-log, scaled) logsumexp the op returns (the GPU test checks that its output is
SDPA's, bit for bit); on the CPU `_scaled_dot_product_flash_attention_for_cpu`.
Decode is one query row at the last position: no mask. (5) The aten backward autograd calls
after that forward, with the given lse; Hkv | Hq natively (the CPU's expands k / v and sums dk /
dv over each group, as autograd does). The op also takes dlse, the gradient of
lse, which SDPA does not have: it enters the backward only through delta = rowsum(do * o) - dlse,
so o is passed as o + alpha * do with alpha = -dlse / rowsum(do * do) (exact in real numbers,
one rounding to the input dtype; a row with do = 0 keeps dlse out). (6) As the open-weight models'
reference code runs these variants (gpt-oss: the sink logit concatenated to the scores, softmax,
dropped; Gemma 2: tanh capping), GQA as a batched matmul over the query groups, the causal /
window mask as a -inf fill, P rounded to the input dtype for P @ V, lse by `torch.logsumexp` of
the same scores. One change from that code: the scores are f32 (`torch.bmm(..., out_dtype=
torch.float32)`, the same tensor-core product): input-dtype scores, as gpt-oss's reference has,
miss the op's tolerance (measured on the CPU, fmha_fwd_sinks (2, 16, 4, 1000, 64, 128): error
1.24x the tolerance in f16, 1.55x in bf16; f32 scores 0.19x / 0.26x). SDPA has no sinks or
softcap; flex_attention (score_mod / mask_mod, compiled) has no sink term, and its eager path
materializes the scores as this does.
(7) `(q_nope @ ckv^T + q_pe @ kpe^T) * scale` in the input dtype, causal mask for prefill,
`softmax(dim=-1, dtype=float32).type_as(...)`, `@ ckv`, as DeepSeek-V3's inference code does in its
absorbed mode (576-wide q / k, 512-wide v: no SDPA kernel takes these head dims).
(8) torch.compile traces no `torch.autograd.grad` (the specs' references): the same f32 formula as the
kernel, `torch.compile` fusing it (layer_norm_bwd from the forward's saved mean and rstd). (9) The [N, V] logits in memory, f32 from input-dtype operands (the
tensor-core product, as the attention baselines' scores), loss and lse by `F.cross_entropy` and
`torch.logsumexp`; the backward recomputes them and forms (softmax - onehot) * dloss in the dtype for
two matmuls.
(10) torch's own Philox stream, so another mask than the op's (timed, not compared (OWN_RANDOM_STREAM): the GPU check
compares the tile backends with the spec's reference, which draws the op's mask). The backward is
what autograd runs after `F.dropout`: `native_dropout_backward(dy, mask, 1 / (1 - p))` with the mask
the forward saved; that forward runs once per input tensor, outside the timed call (`_saved`).
(11) Model code upcasts the logits (`logits.float()`) before `F.cross_entropy(..., reduction="none",
ignore_index=...)`; the op's second output, the logsumexp, is `torch.logsumexp` of the same f32
logits. The backward is autograd's for that forward: `nll_loss_backward`, then
`_log_softmax_backward_data` from the saved f32 log-softmax (made once per input, outside the timed
call), cast back to the logits' dtype (the backward of `.float()`). (12) The spec's own torch
alignment (`specs/moe_route.py`: `bincount`, a stable `sort`, `cumsum`, `searchsorted`), as a
PyTorch user writes moe_align_block_size without a custom kernel.

(13) As Mixtral's reference MoE block: `topk(softmax(logits))` renormalized, then per expert its tokens
(`nonzero`), gate / up / SiLU-and-mul / down in the input dtype, weighted, `index_add_`; grouped GEMM slices
each problem out of the packed arrays. Both read sizes on the host (the tokens of each expert, the
problem sizes): `torch.compile` breaks the graph there (GRAPH_BREAKS). (14) What a PyTorch user without a
block-scaled fp8 kernel writes; `torch._scaled_mm` takes per-tensor or per-row scales, not 128-blocks.

A spec that is not one of the library's own (a user's spec, or a library spec modified) runs its
reference on the `torch` backend.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from tileport.ops.spec import OpSpec
from tileport.ops.specs._attention import PAGE_SIZE
from tileport.ops.specs.layer_norm import EPS as LAYER_NORM_EPS
from tileport.ops.specs.mla_decode import SM_SCALE as MLA_SCALE
from tileport.ops.specs.rms_norm import EPS as RMS_NORM_EPS


def _t():
    import torch
    return torch


def _F():
    import torch.nn.functional as F
    return F


def vector_add(a, b):
    return a + b


def relu(x):
    return _t().relu(x)


def gelu(x):
    return _F().gelu(x, approximate="tanh")


def silu_and_mul(x):
    n = x.shape[-1] // 2
    return _F().silu(x[..., :n]) * x[..., n:]


def swiglu(a, b):
    return _F().silu(a) * b


def geglu(a, b):
    return _F().gelu(a, approximate="tanh") * b


def softmax(x):
    return _F().softmax(x, dim=-1)


def rms_norm(x, w):
    return _F().rms_norm(x, (x.shape[-1],), w, eps=RMS_NORM_EPS)


def layer_norm(x, w, b):
    torch = _t()
    y, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), w, b, LAYER_NORM_EPS)
    # [M, 1] statistics; f32 on CUDA (a no-op .to), the input dtype on some CPU builds
    return y, mean.reshape(-1).to(torch.float32), rstd.reshape(-1).to(torch.float32)


def rms_norm_bwd(dy, x, w):
    torch = _t()
    xf, g = x.float(), dy.float() * w.float()
    r = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + RMS_NORM_EPS)
    dx = r * (g - xf * r * r * (g * xf).mean(dim=-1, keepdim=True))
    return dx.to(x.dtype), (dy.float() * xf * r).sum(dim=0).to(w.dtype)


def layer_norm_bwd(dy, x, w, mean, rstd):
    g, dyf = dy.float() * w.float(), dy.float()
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    dx = rstd[:, None] * (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    return dx.to(x.dtype), (dyf * xhat).sum(dim=0).to(w.dtype), dyf.sum(dim=0).to(w.dtype)


def _logits(hidden, weight):
    return _matmul_f32(hidden[None], weight.T[None])[0]


def linear_cross_entropy(hidden, weight, labels, ignore_index):
    torch = _t()
    logits = _logits(hidden, weight)
    loss = _F().cross_entropy(logits, labels.long(), ignore_index=ignore_index, reduction="none")
    return loss, torch.logsumexp(logits, dim=1)


def linear_cross_entropy_bwd(hidden, weight, labels, lse, dloss, ignore_index):
    torch = _t()
    p = torch.exp(_logits(hidden, weight) - lse[:, None])
    valid = labels != ignore_index
    onehot = torch.zeros_like(p).scatter_(1, torch.where(valid, labels, 0).long()[:, None], 1.0)
    d = ((p - onehot) * torch.where(valid, dloss, 0.0)[:, None]).to(hidden.dtype)
    return d @ weight, d.T @ hidden


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return _t().cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def matmul(a, b):
    return _t().matmul(a, b)


def bmm(a, b):
    return _t().bmm(a, b)


# ---- attention ----------------------------------------------------------------------------------


def _sdpa_kernel(q, k, v, causal):
    """(o, lse) of one sequence, q [1, Hq, n_q, D], k / v [1, Hkv, n_k, D]: the kernel SDPA picks
    for these inputs (cuDNN's or flash's on an H200 with torch 2.11: `torch._fused_sdp_choice`),
    with its f32 logsumexp [1, Hq, n_q] (see (4) above)."""
    torch = _t()
    aten = torch.ops.aten
    if not q.is_cuda:
        out = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
        return out[0], out[1][..., :q.shape[2]]
    from torch.nn.attention import SDPBackend
    choice = SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=causal, enable_gqa=True))
    if choice == SDPBackend.CUDNN_ATTENTION:
        out = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
        lse = out[1]
        return out[0], (lse[..., 0] if lse.dim() == 4 else lse)[..., :q.shape[2]]
    if choice == SDPBackend.FLASH_ATTENTION:
        out = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
        return out[0], out[1][..., :q.shape[2]]
    raise NotImplementedError(f"SDPA picks {choice.name} for these inputs: the baseline calls cuDNN's or flash's "
                              "kernel (they return the logsumexp the op returns)")


def _padded_outputs(q, lse_shape):
    """o (zeros) and lse (-inf) of the padded layout: what padding positions hold."""
    torch = _t()
    return torch.zeros_like(q), torch.full(lse_shape, float("-inf"), dtype=torch.float32, device=q.device)


def fmha_fwd(q, k, v, seq_lens, causal):
    o, lse = _padded_outputs(q, q.shape[:3])
    for b, n in enumerate(seq_lens.tolist()):
        ob, lb = _sdpa_kernel(q[b:b + 1, :, :n], k[b:b + 1, :, :n], v[b:b + 1, :, :n], causal)
        o[b, :, :n], lse[b, :, :n] = ob[0], lb[0]
    return o, lse


def _flash_backward(do, q, k, v, o, lse, causal):
    """dq, dk, dv of one sequence ([1, H, n, D]; lse [1, Hq, n]) by the backward autograd runs after
    `_sdpa_kernel` (dropout 0: the rng state is not read)."""
    torch = _t()
    aten = torch.ops.aten
    if not q.is_cuda:
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(do, q, k, v, o, lse, 0.0, causal)
    n = q.shape[2]
    rng = torch.zeros((2,), dtype=torch.uint64, device=q.device)
    unused = torch.empty((), dtype=torch.uint64, device=q.device)
    return aten._scaled_dot_product_flash_attention_backward(do, q, k, v, o, lse, None, None, n, n, 0.0, causal,
                                                             rng, unused)


def _fold_dlse(o, do, dlse):
    """o' with rowsum(do * o') = rowsum(do * o) - dlse: the backward's only use of o is that row sum,
    and a gradient dlse of lse adds exactly -dlse to it (see (5) above)."""
    torch = _t()
    do32 = do.float()
    den = (do32 * do32).sum(-1, keepdim=True)
    alpha = torch.where(den > 0, -dlse[..., None] / den, 0.0)
    return (o.float() + alpha * do32).to(o.dtype)


def _repeat_kv(x, group):
    """[1, Hkv, n, D] -> [1, Hkv * group, n, D]: the CPU flash backward wants equal head counts."""
    return x.repeat_interleave(group, dim=1)


def fmha_bwd(q, k, v, seq_lens, causal, o, lse, do, dlse):
    torch = _t()
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    hkv = k.shape[1]
    group = q.shape[1] // hkv
    for b, n in enumerate(seq_lens.tolist()):
        rows = (slice(b, b + 1), slice(None), slice(0, n))
        kb, vb = k[rows], v[rows]
        if not q.is_cuda and group > 1:  # CPU only: the CUDA kernel takes Hkv | Hq itself
            kb, vb = _repeat_kv(kb, group), _repeat_kv(vb, group)
        o_fold = _fold_dlse(o[rows], do[rows], dlse[rows])
        gq, gk, gv = _flash_backward(do[rows], q[rows], kb, vb, o_fold, lse[rows].contiguous(), causal)
        if gk.shape[1] != hkv:  # the expanded heads' gradients summed over each group, as autograd does
            gk, gv = (g.reshape(1, hkv, group, n, -1).sum(2) for g in (gk, gv))
        dq[b, :, :n], dk[b, :, :n], dv[b, :, :n] = gq[0], gk[0], gv[0]
    return dq, dk, dv


def _matmul_f32(a, b):
    """Batched a @ b with f32 output from input-dtype operands: the tensor-core product (`out_dtype`)
    on CUDA; the CPU has no such kernel, so its operands are upcast (exact products either way)."""
    torch = _t()
    if a.is_cuda:
        return torch.bmm(a, b, out_dtype=torch.float32)
    return a.float() @ b.float()


def _eager_attention(q, k, v, causal=True, window=0, sinks=None, softcap=0.0):
    """(o, lse) of one sequence as model reference code computes it, in the input dtype: q [Hq, n_q, D],
    k / v [Hkv, n_k, D], query i at key position i + n_k - n_q (see (6) above)."""
    torch = _t()
    hq, n_q, d = q.shape
    hkv, n_k, _ = k.shape
    group = hq // hkv
    s = _matmul_f32(q.reshape(hkv, group * n_q, d), k.transpose(-1, -2)).reshape(hq, n_q, n_k) / math.sqrt(d)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if causal or window:
        q_pos = torch.arange(n_k - n_q, n_k, device=q.device)[:, None]
        k_pos = torch.arange(n_k, device=q.device)[None, :]
        masked = k_pos > q_pos
        if window:
            masked |= q_pos - k_pos >= window
        s = s.masked_fill(masked, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks[:, None, None].expand(hq, n_q, 1)], dim=-1)
    lse = torch.logsumexp(s, dim=-1)
    p = _F().softmax(s, dim=-1)[..., :n_k].to(v.dtype)
    o = (p.reshape(hkv, group * n_q, n_k) @ v).reshape(hq, n_q, d)
    return o, lse


def _eager_prefill(q, k, v, seq_lens, **variant):
    o, lse = _padded_outputs(q, q.shape[:3])
    for b, n in enumerate(seq_lens.tolist()):
        o[b, :, :n], lse[b, :, :n] = _eager_attention(q[b, :, :n], k[b, :, :n], v[b, :, :n], **variant)
    return o, lse


def fmha_fwd_sinks(q, k, v, seq_lens, sinks, window):
    return _eager_prefill(q, k, v, seq_lens, window=window, sinks=sinks)


def fmha_fwd_softcap(q, k, v, seq_lens, softcap):
    return _eager_prefill(q, k, v, seq_lens, softcap=softcap)


def _decode_outputs(q):
    torch = _t()
    return torch.empty_like(q), torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)


def flash_decode(q, k_cache, v_cache, kv_lens):
    o, lse = _decode_outputs(q)
    for b, n in enumerate(kv_lens.tolist()):
        ob, lb = _sdpa_kernel(q[b:b + 1, :, None], k_cache[b:b + 1, :, :n], v_cache[b:b + 1, :, :n], False)
        o[b], lse[b] = ob[0, :, 0], lb[0, :, 0]
    return o, lse


def _gather_pages(pages, table_row, n):
    """[1, H, n, D]: the first n positions of one sequence, its pages gathered from the pool."""
    used = pages.index_select(0, table_row[:-(-n // PAGE_SIZE)])  # [p, H, PAGE, D]
    heads, d = pages.shape[1], pages.shape[3]
    return used.transpose(0, 1).reshape(1, heads, -1, d)[:, :, :n]


def flash_decode_paged(q, k_pages, v_pages, block_table, kv_lens):
    o, lse = _decode_outputs(q)
    for b, n in enumerate(kv_lens.tolist()):
        kb, vb = _gather_pages(k_pages, block_table[b], n), _gather_pages(v_pages, block_table[b], n)
        ob, lb = _sdpa_kernel(q[b:b + 1, :, None], kb, vb, False)
        o[b], lse[b] = ob[0, :, 0], lb[0, :, 0]
    return o, lse


def _eager_decode(q, k_cache, v_cache, kv_lens, **variant):
    o, lse = _decode_outputs(q)
    for b, n in enumerate(kv_lens.tolist()):
        ob, lb = _eager_attention(q[b, :, None], k_cache[b, :, :n], v_cache[b, :, :n], **variant)
        o[b], lse[b] = ob[:, 0], lb[:, 0]
    return o, lse


def flash_decode_sinks(q, k_cache, v_cache, kv_lens, sinks, window):
    return _eager_decode(q, k_cache, v_cache, kv_lens, window=window, sinks=sinks)


def flash_decode_softcap(q, k_cache, v_cache, kv_lens, softcap):
    return _eager_decode(q, k_cache, v_cache, kv_lens, causal=False, softcap=softcap)


def _mla(q_nope, q_pe, ckv, kpe, causal):
    """(o, lse) of one sequence, absorbed: q [H, n_q, 512 | 64], ckv [n, 512], kpe [n, 64] (see (7))."""
    torch = _t()
    s = (q_nope @ ckv.T + q_pe @ kpe.T) * MLA_SCALE
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones((n, n), dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s.float(), dim=-1)
    p = s.softmax(dim=-1, dtype=torch.float32).type_as(s)
    return p @ ckv, lse


def mla_prefill(q_nope, q_pe, ckv, kpe, seq_lens):
    o, lse = _padded_outputs(q_nope, q_nope.shape[:3])
    for b, n in enumerate(seq_lens.tolist()):
        o[b, :, :n], lse[b, :, :n] = _mla(q_nope[b, :, :n], q_pe[b, :, :n], ckv[b, :n], kpe[b, :n], True)
    return o, lse


def mla_decode(q_nope, q_pe, ckv, kpe, kv_lens):
    o, lse = _decode_outputs(q_nope)
    for b, n in enumerate(kv_lens.tolist()):
        ob, lb = _mla(q_nope[b, :, None], q_pe[b, :, None], ckv[b, :n], kpe[b, :n], False)
        o[b], lse[b] = ob[:, 0], lb[:, 0]
    return o, lse


_SAVED: dict[tuple, Any] = {}


def _saved(key: tuple, make: Callable[[], Any]) -> Any:
    """What autograd's forward saved for a backward baseline, made once per input tensor (the timed call
    is the backward alone). Keyed by the tensor's storage, shape and version, so a new input is not
    served another input's state."""
    if key not in _SAVED:
        _SAVED.clear()  # one input's state at a time: bench runs the cases one after another
        _SAVED[key] = make()
    return _SAVED[key]


def _tensor_key(x) -> tuple:
    return (x.data_ptr(), tuple(x.shape), x.dtype, x._version)


def dropout(x, seed, offset, p):
    return _F().dropout(x, p, training=True)


def dropout_bwd(dy, seed, offset, p):
    torch = _t()
    mask = _saved(("dropout", _tensor_key(dy), p), lambda: torch.ops.aten.native_dropout(dy, p, True)[1])
    return torch.ops.aten.native_dropout_backward(dy, mask, 1.0 / (1.0 - p))


def cross_entropy(logits, labels, ignore_index):
    x = logits.float()
    loss = _F().cross_entropy(x, labels.long(), ignore_index=ignore_index, reduction="none")
    return loss, _t().logsumexp(x, dim=1)


def cross_entropy_bwd(logits, labels, lse, dloss, ignore_index):
    torch = _t()
    log_p, target = _saved(("cross_entropy", _tensor_key(logits), _tensor_key(labels)),
                           lambda: (torch.log_softmax(logits.float(), dim=1), labels.long()))
    total = torch.zeros((), dtype=torch.float32, device=logits.device)
    grad = torch.ops.aten.nll_loss_backward(dloss, log_p, target, None, 0, ignore_index, total)
    return torch.ops.aten._log_softmax_backward_data(grad, log_p, 1, torch.float32).to(logits.dtype)


def _moe_topk(logits, k, sigmoid):
    torch = _t()
    x = logits.float()
    scores = torch.sigmoid(x) if sigmoid else torch.softmax(x, dim=1)
    w, ids = torch.topk(scores, k, dim=1)
    return w / w.sum(dim=1, keepdim=True), ids.to(torch.int32)


def moe_topk_softmax(logits, k):
    return _moe_topk(logits, k, False)


def moe_topk_sigmoid(logits, k):
    return _moe_topk(logits, k, True)


def moe_route(logits, k, block_size):
    from tileport.ops.specs.moe_route import align_reference
    weights, ids = _moe_topk(logits, k, False)
    return (weights, ids, *align_reference(ids, logits.shape[1], block_size))


def gated_delta_decode(q, k, v, g, beta, state, scale):
    from tileport.ops.specs.gated_delta_decode import reference
    return reference(q, k, v, g, beta, state, scale)


def gated_delta_prefill(q, k, v, g, beta, state, scale):
    from tileport.ops.specs.gated_delta_prefill import reference
    return reference(q, k, v, g, beta, state, scale)


def moe_experts(x, w13, w2, topk_weights, topk_ids):
    torch, F = _t(), _F()
    weights = topk_weights.to(x.dtype)
    f = w2.shape[2]
    out = torch.zeros_like(x)
    for e in range(w13.shape[0]):
        token, slot = (topk_ids == e).nonzero(as_tuple=True)
        h = x[token] @ w13[e].T
        y = (F.silu(h[:, :f]) * h[:, f:]) @ w2[e].T
        out.index_add_(0, token, y * weights[token, slot, None])
    return out


def fused_moe(x, logits, w13, w2, k):
    torch = _t()
    weights, ids = torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1)
    return moe_experts(x, w13, w2, weights / weights.sum(dim=-1, keepdim=True), ids)


def grouped_gemm(a, b, sizes):
    c = a.new_zeros((a.shape[0], b.shape[1]))
    ra = rb = 0
    for m, n, k in sizes.tolist():
        c[ra:ra + m, :n] = a[ra:ra + m, :k] @ b[rb:rb + k, :n]
        ra, rb = ra + -(-m // 8) * 8, rb + -(-k // 8) * 8
    return c


def matmul_fp8(a, b, a_scale, b_scale):
    torch = _t()

    def dequantize(q, scale, rows):
        s = scale.repeat_interleave(rows, 0).repeat_interleave(128, 1)[:q.shape[0], :q.shape[1]]
        return (q.float() * s).to(torch.bfloat16)
    return dequantize(a, a_scale, 1) @ dequantize(b, b_scale, 128).T


BASELINES: dict[str, Callable[..., Any]] = {
    "vector_add": vector_add, "relu": relu, "gelu": gelu, "silu_and_mul": silu_and_mul, "swiglu": swiglu,
    "geglu": geglu, "softmax": softmax, "softmax_tma": softmax, "softmax_gather": softmax,
    "softmax_online": softmax, "rms_norm": rms_norm, "layer_norm": layer_norm, "rope": rope,
    "rms_norm_bwd": rms_norm_bwd, "layer_norm_bwd": layer_norm_bwd, "linear_cross_entropy": linear_cross_entropy,
    "linear_cross_entropy_bwd": linear_cross_entropy_bwd,
    "matmul": matmul, "matmul_splitk": matmul, "bmm": bmm,
    "fmha_fwd": fmha_fwd, "fmha_bwd": fmha_bwd, "fmha_fwd_sinks": fmha_fwd_sinks,
    "fmha_fwd_softcap": fmha_fwd_softcap, "flash_decode": flash_decode,
    "flash_decode_paged": flash_decode_paged, "flash_decode_sinks": flash_decode_sinks,
    "flash_decode_softcap": flash_decode_softcap, "mla_prefill": mla_prefill, "mla_decode": mla_decode,
    "dropout": dropout, "dropout_bwd": dropout_bwd, "cross_entropy": cross_entropy,
    "cross_entropy_bwd": cross_entropy_bwd, "moe_topk_softmax": moe_topk_softmax,
    "moe_topk_sigmoid": moe_topk_sigmoid, "moe_route": moe_route,
    "gated_delta_decode": gated_delta_decode, "gated_delta_prefill": gated_delta_prefill,
    "gated_delta_chunked": gated_delta_prefill,
    "fused_moe": fused_moe, "moe_experts": moe_experts, "grouped_gemm": grouped_gemm, "matmul_fp8": matmul_fp8,
}
# Baselines that read the sequence lengths on the host: `torch.compile` cannot trace them as one
# graph (fullgraph=True); `bench` compiles them with the graph break at the lengths.
ATTENTION_HOST_LENGTHS = frozenset(name for name in BASELINES if name.startswith(("fmha", "flash_decode", "mla")))
# Baselines `torch.compile` traces with graph breaks: sizes read on the host (the attention lengths,
# the experts' tokens, the problem sizes, the padded total moe_route's alignment reads) and the
# forward state a backward baseline reuses (`_saved`).
GRAPH_BREAKS = ATTENTION_HOST_LENGTHS | {"fused_moe", "moe_experts", "grouped_gemm", "moe_route", "dropout_bwd",
                                        "cross_entropy_bwd"}
# Baselines that draw other random numbers than the op (timed beside it, not compared with its reference).
OWN_RANDOM_STREAM = frozenset({"dropout", "dropout_bwd"})
# Baselines whose `torch.topk` orders equal scores its own way (the op: the lowest expert id first): the same
# scores are chosen, their ids may differ where scores tie (bf16 logits tie often).
TOPK_TIES = frozenset({"moe_topk_softmax", "moe_topk_sigmoid"})


def baseline(spec: OpSpec) -> Callable[..., Any]:
    """The function the `torch` backend runs for `spec` (see the table above)."""
    from tileport.ops.specs import all_specs
    if all_specs().get(spec.name) is spec and spec.name in BASELINES:
        return BASELINES[spec.name]
    return spec.reference
