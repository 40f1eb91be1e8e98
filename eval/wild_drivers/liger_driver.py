"""Wild driver for liger-kernel==0.8.5: its own CUDA Triton ops (the autograd functions of
liger_kernel.ops.*), forward and backward, on small realistic shapes, float32 and bfloat16 where Liger
supports them, so that `tileport record` captures every Triton launch they make.

    tileport record --out launches.json -- python3 eval/wild_drivers/liger_driver.py

Only liger_kernel.ops.* modules are imported, never the package's `__init__` files: `liger_kernel/__init__`
imports `liger_kernel.functional` and `liger_kernel/ops/__init__` imports every op module and auto-selects
a backend implementation (cuTile, CuTe DSL, Ascend) that may replace the Triton one. `import_ops()` binds
`liger_kernel`, `liger_kernel.ops` and `liger_kernel.ops.experimental` to empty package modules over the
installed folders, so `import liger_kernel.ops.rms_norm` runs rms_norm.py and what it imports itself
(liger_kernel.ops.utils, liger_kernel.utils, and for the dispatched ops liger_kernel.backends /
liger_kernel.functional: torch and triton only, no transformers). The dispatcher is pinned to Liger's
Triton implementation (LIGER_KERNEL_IMPL=nvidia-triton) so the dispatched ops (jsd, fused linear losses)
launch the Triton kernels. Ascend (NPU) ops are not driven.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import sync  # noqa: E402

os.environ.setdefault("LIGER_KERNEL_IMPL", "nvidia-triton")  # read by Liger's dispatcher at call time
os.environ.setdefault("LIGER_FUSED_MOE_AUTOTUNE", "0")  # Liger's switch: one MoE config, not 32 compiled and timed

import torch  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
DTYPES = (F32, BF16)
DEV = "cuda"
EMPTY_PACKAGES = ("liger_kernel", "liger_kernel.ops", "liger_kernel.ops.experimental")


def import_ops() -> Path:
    """Bind Liger's package folders to empty package modules (their `__init__` never runs); the folder of
    the installed liger_kernel."""
    spec = importlib.util.find_spec("liger_kernel")  # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("liger_kernel is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    for name in EMPTY_PACKAGES:
        if name in sys.modules:
            continue
        module = types.ModuleType(name)
        module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        module.__package__ = name
        sys.modules[name] = module
    return root


def ops(name: str) -> Any:
    return importlib.import_module(f"liger_kernel.ops.{name}")


def rand(*shape: int, dtype: torch.dtype = F32, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, device=DEV, dtype=dtype).requires_grad_(grad)


def first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def backward(*outs: torch.Tensor) -> None:
    """A dense random upstream gradient for every output (as training has); a scalar loss gets 1."""
    outs = [o for o in outs if o is not None and o.requires_grad]
    grads = [torch.ones_like(o) if o.dim() == 0 else torch.randn_like(o) for o in outs]
    torch.autograd.backward(outs, grads)


# ------------------------------------------------------------------------------------ norms

def rms_norm() -> None:
    f = ops("rms_norm").LigerRMSNormFunction
    for dt in DTYPES:
        x, w = rand(4, 128, 1024, dtype=dt), rand(1024, dtype=dt)
        backward(f.apply(x, w, 1e-6, 0.0, "llama", False))
    sync()


def rms_norm_gemma() -> None:  # offset 1 and the gemma casting mode: another specialization of the same kernels
    f = ops("rms_norm").LigerRMSNormFunction
    x, w = rand(4, 128, 1024, dtype=BF16), rand(1024, dtype=BF16)
    backward(f.apply(x, w, 1e-6, 1.0, "gemma", False))
    sync()


def layer_norm() -> None:
    f = ops("layer_norm").LigerLayerNormFunction
    for dt in DTYPES:
        x, w, b = rand(4, 128, 1024, dtype=dt), rand(1024, dtype=dt), rand(1024, dtype=dt)
        backward(f.apply(x, w, b, 1e-5))
    sync()


def fused_add_rms_norm() -> None:
    f = ops("fused_add_rms_norm").LigerFusedAddRMSNormFunction
    for dt in DTYPES:
        x, r, w = rand(4, 128, 1024, dtype=dt), rand(4, 128, 1024, dtype=dt), rand(1024, dtype=dt)
        backward(*f.apply(x, r, w, 1e-6, 0.0, "llama", False))
    sync()


def modulated_rms_norm() -> None:
    f = ops("modulated_rms_norm").LigerModulatedRMSNormFunction
    for dt in DTYPES:
        x, w = rand(4, 128, 1024, dtype=dt), rand(1024, dtype=dt)
        scale, shift = rand(4, 1, 1024, dtype=dt), rand(4, 1, 1024, dtype=dt)  # one modulation per sequence
        backward(first(f.apply(x, w, scale, shift, 1e-6, 0.0, "llama", False)))
    sync()


def poly_norm() -> None:
    f = ops("poly_norm").LigerPolyNormFunction
    for dt in DTYPES:
        x, w, b = rand(4, 128, 1024, dtype=dt), rand(3, dtype=dt), rand(1, dtype=dt)
        backward(f.apply(x, w, b, 1e-6, False))
    sync()


def group_norm() -> None:
    f = ops("group_norm").LigerGroupNormFunction
    for dt in DTYPES:
        x, w, b = rand(8, 64, 512, dtype=dt), rand(64, dtype=dt), rand(64, dtype=dt)
        backward(f.apply(x, w, b, 64, 8, 1e-5))
    sync()


def dyt() -> None:
    f = ops("dyt").LigerDyTFunction
    for dt in DTYPES:
        x, alpha = rand(4, 128, 1024, dtype=dt), torch.full((1,), 0.5, device=DEV, dtype=dt, requires_grad=True)
        gamma, beta = rand(1024, dtype=dt), rand(1024, dtype=dt)
        backward(f.apply(x, alpha, gamma, beta))
    sync()


# ------------------------------------------------------------------------------------ activations

def swiglu() -> None:
    m = ops("swiglu")
    for dt in DTYPES:
        a, b = rand(4, 128, 2048, dtype=dt), rand(4, 128, 2048, dtype=dt)
        backward(m.LigerSiLUMulFunction.apply(a, b))
        backward(m.LigerFusedGateUpSiLUMulFunction.apply(rand(4, 128, 4096, dtype=dt)))
    sync()


def geglu() -> None:
    f = ops("geglu").LigerGELUMulFunction
    for dt in DTYPES:
        backward(f.apply(rand(4, 128, 2048, dtype=dt), rand(4, 128, 2048, dtype=dt)))
    sync()


def relu_squared() -> None:
    f = ops("relu_squared").LigerReLUSquaredFunction
    for dt in DTYPES:
        backward(f.apply(rand(4, 128, 2048, dtype=dt)))
    sync()


def softmax() -> None:  # (the multi-block kernels are launched for no row length on CUDA)
    f = ops("softmax").LigerSoftmaxFunction
    for dt in DTYPES:
        backward(f.apply(rand(256, 1024, dtype=dt)))
    sync()


def sparsemax() -> None:
    f = ops("sparsemax").LigerSparsemaxFunction
    for dt in DTYPES:
        backward(f.apply(rand(256, 1024, dtype=dt), -1))
    sync()


# ------------------------------------------------------------------------------------ position embeddings

def rope() -> None:
    f = ops("rope").LigerRopeFunction
    for dt in DTYPES:
        q, k = rand(2, 8, 128, 64, dtype=dt), rand(2, 2, 128, 64, dtype=dt)  # (batch, heads, seq, head_dim)
        cos, sin = torch.randn(1, 128, 64, device=DEV, dtype=dt), torch.randn(1, 128, 64, device=DEV, dtype=dt)
        backward(*f.apply(q, k, cos, sin))
    sync()


def qwen2vl_mrope() -> None:
    f = ops("qwen2vl_mrope").LigerQwen2VLMRopeFunction
    for dt in DTYPES:
        q, k = rand(2, 8, 128, 128, dtype=dt), rand(2, 2, 128, 128, dtype=dt)
        cos = torch.randn(3, 2, 128, 128, device=DEV, dtype=dt)  # (t/h/w sections, batch, seq, head_dim)
        sin = torch.randn(3, 2, 128, 128, device=DEV, dtype=dt)
        backward(*f.apply(q, k, cos, sin, [16, 24, 24]))
    sync()


def llama4_rope() -> None:
    f = ops("llama4_rope").LigerLlama4RopeFunction
    for dt in DTYPES:
        q, k = rand(2, 128, 8, 128, dtype=dt), rand(2, 128, 2, 128, dtype=dt)  # (batch, seq, heads, head_dim)
        angles = torch.randn(128, 64, device=DEV)
        freqs = torch.polar(torch.ones_like(angles), angles)  # complex (seq, head_dim / 2)
        backward(*f.apply(q, k, freqs))
    sync()


def embedding() -> None:
    f = ops("experimental.embedding").LigerEmbeddingFunction
    for dt in DTYPES:
        table = rand(32000, 512, dtype=dt)
        idx = torch.randint(0, 32000, (4, 128), device=DEV)
        backward(f.apply(table, idx))
    sync()


# ------------------------------------------------------------------------------------ losses

def cross_entropy() -> None:
    f = ops("cross_entropy").LigerCrossEntropyFunction
    for dt in DTYPES:
        logits = rand(256, 32000, dtype=dt)
        target = torch.randint(0, 32000, (256,), device=DEV)
        target[::7] = -100  # padded positions, as a batch has
        backward(first(f.apply(logits, target, None, -100, 1e-4, 0.1, "mean", 30.0, True)))  # z-loss, smoothing,
    sync()                                                                                  # softcap on


def fused_linear_cross_entropy() -> None:
    f = ops("fused_linear_cross_entropy").LigerFusedLinearCrossEntropyFunction
    for dt in DTYPES:
        x, w = rand(256, 512, dtype=dt), rand(8192, 512, dtype=dt)
        target = torch.randint(0, 8192, (256,), device=DEV)
        target[::7] = -100
        backward(first(f.apply(x, w, target)))
    sync()


def kl_div() -> None:
    f = ops("kl_div").LigerKLDivLossFunction
    for dt in DTYPES:
        y_pred = torch.randn(256, 8192, device=DEV, dtype=dt).log_softmax(-1).requires_grad_(True)
        y_true = torch.randn(256, 8192, device=DEV, dtype=dt).softmax(-1)
        backward(f.apply(y_pred, y_true, "batchmean", False, 1e-10))
    sync()


def jsd() -> None:
    f = ops("jsd").LigerJSDFunction
    for dt in DTYPES:
        student = torch.randn(256, 8192, device=DEV, dtype=dt).log_softmax(-1).requires_grad_(True)
        teacher = torch.randn(256, 8192, device=DEV, dtype=dt).log_softmax(-1)
        backward(f.apply(student, teacher, None, 0.5))
    sync()


def tvd() -> None:
    f = ops("tvd").LigerTVDLossFunction
    for dt in DTYPES:
        p = torch.randn(256, 8192, device=DEV, dtype=dt).softmax(-1).requires_grad_(True)
        q = torch.randn(256, 8192, device=DEV, dtype=dt).softmax(-1)
        backward(f.apply(p, q, None, "batchmean"))
    sync()


def fused_linear_jsd() -> None:
    f = ops("fused_linear_jsd").LigerFusedLinearJSDFunction
    for dt in DTYPES:
        xs, ws = rand(256, 512, dtype=dt), rand(8192, 512, dtype=dt)
        xt, wt = rand(256, 512, dtype=dt, grad=False), rand(8192, 512, dtype=dt, grad=False)
        backward(f.apply(xs, ws, xt, wt))
    sync()


def fused_linear_kl_div() -> None:
    f = ops("fused_linear_kl_div").LigerFusedLinearKLDivFunction
    for dt in DTYPES:
        x, w = rand(256, 512, dtype=dt), rand(8192, 512, dtype=dt)
        target = torch.randn(256, 8192, device=DEV, dtype=dt).softmax(-1)
        backward(first(f.apply(x, w, target)))
    sync()


def fused_ce_tvd() -> None:
    f = ops("fused_ce_tvd").LigerFusedCETVDFunction
    for dt in DTYPES:
        student, teacher = rand(256, 8192, dtype=dt), torch.randn(256, 8192, device=DEV, dtype=dt)
        target = torch.randint(0, 8192, (256,), device=DEV)
        backward(*f.apply(student, teacher, target))
    sync()


def vocab_parallel_cross_entropy() -> None:  # no process group: the single-GPU path of the same kernels
    f = ops("vocab_parallel_cross_entropy").LigerVocabParallelCEFunction
    for dt in DTYPES:
        logits = rand(128, 2, 8192, dtype=dt)  # (seq, batch, vocab)
        target = torch.randint(0, 8192, (128, 2), device=DEV)
        backward(first(f.apply(logits, target, None, -100, 0.1, "megatron", "partition")))
    sync()


def grpo_loss() -> None:
    f = ops("grpo_loss").GrpoLossFunction
    for dt in DTYPES:
        b, length, vocab = 4, 64, 4096
        logits = rand(b, length + 1, vocab, dtype=dt)
        old_logp, ref_logp = torch.randn(b, length, device=DEV), torch.randn(b, length, device=DEV)
        ids = torch.randint(0, vocab, (b, length), device=DEV)
        adv, mask = torch.randn(b, device=DEV), torch.ones(b, length, device=DEV, dtype=torch.int32)
        backward(first(f.apply(logits, old_logp, ref_logp, ids, adv, mask, 1.0, 0.04, 0.2, 0.2, False)))
    sync()


# ------------------------------------------------------------------------------------ attention, mixing, MoE

def multi_token_attention() -> None:
    f = ops("multi_token_attention").LigerMultiTokenAttentionFunction
    for dt in DTYPES:
        scores = rand(2, 8, 128, 128, dtype=dt)
        weight = rand(8, 8, 3, 3, dtype=dt)
        backward(f.apply(scores, weight, None, 1, 1))
    scores = rand(2, 8, 128, 128, dtype=F32)  # sparsemax activation: float32 only
    backward(f.apply(scores, rand(8, 8, 3, 3, dtype=F32), None, 1, 1, 1, 1, True))
    sync()


def fused_neighborhood_attention() -> None:
    f = ops("fused_neighborhood_attention").LigerFusedNeighborhoodAttentionFunction
    for dt in DTYPES:
        q, k, v = (rand(2, 4, 256, 64, dtype=dt) for _ in range(3))
        backward(f.apply(q, k, v, 7, 1))
    sync()


def attn_res() -> None:
    f = ops("attn_res").LigerAttnResFunction
    for dt in DTYPES:
        v = rand(4, 2, 128, 1024, dtype=dt)  # (blocks, batch, seq, hidden)
        backward(f.apply(v, rand(1024, dtype=dt), rand(1024, dtype=dt), 1e-6))
    sync()


def mhc() -> None:
    m = ops("mhc")
    hc, c, n = 4, 256, 256
    x = rand(n, hc, c, dtype=BF16)
    phi, b = rand(hc * c, hc * hc + 2 * hc, dtype=F32), rand(hc * hc + 2 * hc, dtype=F32)
    alphas = [torch.tensor(0.5, device=DEV, requires_grad=True) for _ in range(3)]
    h_pre, h_post, h_res = m.LigerMHCCoeffsFunction.apply(x, phi, b, *alphas, False, 20, 1e-6, 1e-6, 1e-6, 2.0)
    layer_in = m.LigerMHCPreFunction.apply(x, h_pre)
    out = m.LigerMHCPostResFunction.apply(x, layer_in, h_post, h_res)
    backward(out)
    sync()


def fused_moe() -> None:
    f = ops("fused_moe").LigerFusedMoEFunction
    for dt in DTYPES:
        t, h, inter, e, k = 256, 512, 1024, 8, 2
        x, gate_up, down = rand(t, h, dtype=dt), rand(e, 2 * inter, h, dtype=dt), rand(e, h, inter, dtype=dt)
        idx = torch.stack([torch.randperm(e, device=DEV)[:k] for _ in range(t)]).to(torch.int32)
        weights = torch.rand(t, k, device=DEV, dtype=dt)
        backward(f.apply(x, gate_up, down, idx, weights))
    sync()


def mlp() -> None:  # gate/up GEMM + SwiGLU on tensor descriptors (TMA), down projection by torch
    f = ops("mlp").LigerMLPFunction
    for dt in DTYPES:
        x, gate, up = rand(2, 128, 512, dtype=dt), rand(1024, 512, dtype=dt), rand(1024, 512, dtype=dt)  # [B, S, dim]
        backward(f.apply(x, gate, up, rand(512, 1024, dtype=dt)))
    sync()


def mm_int8int2() -> None:  # int8 activations x ternary weights packed four to a byte
    m = ops("experimental.mm_int8int2")
    a = torch.randint(-128, 128, (128, 512), device=DEV, dtype=torch.int8)
    packed = m.pack_weights(torch.randint(-1, 2, (512, 256), device=DEV, dtype=torch.int32))
    m.matmul(a, packed)
    sync()


CASES: dict[str, Callable[[], None]] = {f.__name__: f for f in (
    rms_norm, rms_norm_gemma, layer_norm, fused_add_rms_norm, modulated_rms_norm, poly_norm, group_norm, dyt,
    swiglu, geglu, relu_squared, softmax, sparsemax, rope, qwen2vl_mrope, llama4_rope, embedding,
    cross_entropy, fused_linear_cross_entropy, kl_div, jsd, tvd, fused_linear_jsd, fused_linear_kl_div,
    fused_ce_tvd, vocab_parallel_cross_entropy, grpo_loss, multi_token_attention, fused_neighborhood_attention,
    attn_res, mhc, mm_int8int2, mlp, fused_moe)}


def run_case(case: Callable[[], None]) -> dict:
    try:
        case()
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - one case's failure is reported; the others still run
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1000], "traceback": traceback.format_exc()[-2000:]}


def main() -> int:
    """Every case (or those named in $LIGER_DRIVER_ONLY, comma-separated), each isolated; the summary
    ($WILD_DRIVER_OUT, as common.run_cases writes it) is rewritten after each case, so a time limit keeps it."""
    import_ops()
    torch.manual_seed(0)
    only = set(os.environ.get("LIGER_DRIVER_ONLY", "").split(",")) - {""}
    results: dict[str, dict] = {}
    for name, case in CASES.items():
        if only and name not in only:
            continue
        results[name] = run_case(case)
        print(f"liger_kernel: {name}: {'ok' if results[name]['ok'] else results[name]['error']}", flush=True)
        if os.environ.get("WILD_DRIVER_OUT"):
            Path(os.environ["WILD_DRIVER_OUT"]).write_text(json.dumps(
                {"package": "liger_kernel", "cases": results, "ok": sum(r["ok"] for r in results.values()),
                 "total": len(results)}, indent=1))
    print(f"liger_kernel: driver done: {sum(r['ok'] for r in results.values())}/{len(results)} cases ran", flush=True)
    return 0 if any(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
