"""Wild driver for cutile-gpt==0.2.1: its own launcher functions (cupy arrays) on GPT-2-small shapes.

The package needs cupy (cupy-cuda13x): where it is missing, every case reports the ImportError and
nothing is recorded for this package (the wheel is ~100 MB: not carried to the GPU machine).

    tileport record --out launches.json -- python3 eval/wild_drivers/cutile_gpt_driver.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_cases  # noqa: E402

B, T, C, H, V = 2, 128, 768, 12, 4096  # batch, tokens, embedding, heads, vocabulary


def _cp():
    import cupy as cp
    cp.random.seed(0)
    return cp


def gelu() -> None:
    cp = _cp()
    from cutile_gpt.kernels.gelu import cutile_gelu
    from cutile_gpt.examples.gelu_tile import gelu_tile
    x = cp.random.randn(B, T, 4 * C).astype(cp.float32)
    cutile_gelu(x)
    cutile_gelu(x.reshape(-1))
    cutile_gelu(x.reshape(B * T, 4 * C))  # a 2-D input takes the package's gelu_kernel_2d
    gelu_tile(x)
    cp.cuda.runtime.deviceSynchronize()


def layer_norm() -> None:
    cp = _cp()
    from cutile_gpt.kernels.layernorm import cutile_layer_norm
    from cutile_gpt.examples.layernorm_tile import layernorm_tile
    x = cp.random.randn(B, T, C).astype(cp.float32)
    w, b = cp.random.randn(C).astype(cp.float32), cp.random.randn(C).astype(cp.float32)
    cutile_layer_norm(x, w, b)
    layernorm_tile(x, w, b)
    cp.cuda.runtime.deviceSynchronize()


def linear() -> None:
    cp = _cp()
    from cutile_gpt.kernels.linear import cutile_linear, cutile_linear_bias
    from cutile_gpt.examples.linear_tile import linear_tile
    x = cp.random.randn(B * T, C).astype(cp.float32)
    w = cp.random.randn(3 * C, C).astype(cp.float32)
    bias = cp.random.randn(3 * C).astype(cp.float32)
    cutile_linear(x, w)
    cutile_linear_bias(x, w, bias)
    linear_tile(x, w)
    linear_tile(x, w, bias)
    cp.cuda.runtime.deviceSynchronize()


def embedding() -> None:
    cp = _cp()
    from cutile_gpt.kernels.embedding import cutile_embedding
    idx = cp.random.randint(0, V, (B, T)).astype(cp.int64)
    cutile_embedding(idx, cp.random.randn(V, C).astype(cp.float32))
    cp.cuda.runtime.deviceSynchronize()


def mlp() -> None:
    cp = _cp()
    from cutile_gpt.kernels.fused_mlp import cutile_fused_mlp
    x = cp.random.randn(B * T, C).astype(cp.float32)
    cutile_fused_mlp(x, cp.random.randn(4 * C, C).astype(cp.float32), cp.random.randn(4 * C).astype(cp.float32),
                     cp.random.randn(C, 4 * C).astype(cp.float32), cp.random.randn(C).astype(cp.float32))
    cp.cuda.runtime.deviceSynchronize()


def attention() -> None:
    cp = _cp()
    from cutile_gpt.kernels.attention import cutile_causal_attention
    from cutile_gpt.examples.attention_tile import attention_tile
    q, k, v = (cp.random.randn(B, H, T, C // H).astype(cp.float32) for _ in range(3))
    cutile_causal_attention(q, k, v, H)
    attention_tile(q, k, v, H)
    cp.cuda.runtime.deviceSynchronize()


if __name__ == "__main__":
    sys.exit(run_cases("cutile_gpt", {"gelu": gelu, "layer_norm": layer_norm, "linear": linear,
                                      "embedding": embedding, "mlp": mlp, "attention": attention}))
