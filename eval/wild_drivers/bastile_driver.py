"""Wild driver for bastile==0.1.3: its own host functions (autograd functions and launchers) on
representative shapes, forward and backward, float32 and bfloat16 (the package targets bf16 training).

    tileport record --out launches.json -- python3 eval/wild_drivers/bastile_driver.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_cases, sync  # noqa: E402

import torch  # noqa: E402

DTYPES = (torch.float32, torch.bfloat16)


def rms_norm() -> None:
    from bastile.ops.rms_norm import CuTileRMSNormFunction
    for dt in DTYPES:
        x = torch.randn(4, 128, 1024, device="cuda", dtype=dt, requires_grad=True)
        w = torch.randn(1024, device="cuda", dtype=dt, requires_grad=True)
        y = CuTileRMSNormFunction.apply(x, w, 1e-6)  # _rms_fwd
        y.backward(torch.randn_like(y))  # _rms_bwd (a dense upstream gradient, as training has)
    sync()


def swiglu() -> None:
    from bastile.ops.swiglu import SwiGLUFunction
    for dt in DTYPES:
        gate = torch.randn(4, 128, 2048, device="cuda", dtype=dt, requires_grad=True)
        up = torch.randn(4, 128, 2048, device="cuda", dtype=dt, requires_grad=True)
        y = SwiGLUFunction.apply(gate, up)  # forward kernel
        y.backward(torch.randn_like(y))  # backward kernel
    sync()


def rope() -> None:
    from bastile.ops.rope import RoPEFunction
    for dt in DTYPES:
        q = torch.randn(2, 8, 128, 64, device="cuda", dtype=dt, requires_grad=True)
        k = torch.randn(2, 2, 128, 64, device="cuda", dtype=dt, requires_grad=True)
        cos = torch.randn(1, 128, 64, device="cuda", dtype=dt)
        sin = torch.randn(1, 128, 64, device="cuda", dtype=dt)
        q2, k2 = RoPEFunction.apply(q, k, cos, sin)
        torch.autograd.backward([q2, k2], [torch.randn_like(q2), torch.randn_like(k2)])  # backward passes -sin
    sync()


def cross_entropy() -> None:
    from bastile.ops.fused_linear_cross_entropy import _ce_cutile
    logits = torch.randn(64, 8192, device="cuda", dtype=torch.float32)
    target = torch.randint(0, 8192, (64,), device="cuda")
    target[::7] = -100  # some ignored rows, as a padded batch has
    loss = torch.empty(64, device="cuda", dtype=torch.float32)
    _ce_cutile(logits, target, loss, -100)
    sync()


if __name__ == "__main__":
    sys.exit(run_cases("bastile", {"rms_norm": rms_norm, "swiglu": swiglu, "rope": rope,
                                   "cross_entropy": cross_entropy}))
