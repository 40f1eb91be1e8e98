"""Fused scale-and-bias kernels written the way framework code usually looks (a tileport test input).

Host-side registration, logging, torch/numpy imports, wrappers and a launcher around `@ct.kernel`
functions: tileport must capture the kernels from this file without running any of it.
"""
from __future__ import annotations

import functools
import logging
from typing import Callable

import cuda.tile as ct
import numpy as np
import torch

from .registry import experimental_kernel, register_impl  # host-only package code

log = logging.getLogger(__name__)
log.setLevel(logging.INFO)

BLOCK_ROWS = 4
BLOCK_COLS = 2 ** 7
ACC_DTYPE = torch.float32
NEG_INF = -np.inf
PAD_ZERO = ct.PaddingMode.ZERO
ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]


def _timed(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        log.info("launching %s", fn.__name__)
        return fn(*args, **kwargs)
    return wrapper


@ct.function
def affine(t, scale, bias):
    return t * scale + bias


apply_affine = affine


@register_impl("scale_bias", backend="cutile", priority=10)
@experimental_kernel
@ct.kernel(occupancy=2)
def scale_bias_kernel(x: ct.Array, y: ct.Array, scale: float, bias: float,
                      ROWS: ConstInt = BLOCK_ROWS, COLS: ConstInt = BLOCK_COLS, CLAMP: ConstBool = False):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(ROWS, COLS), padding_mode=PAD_ZERO)
    t = apply_affine(ct.astype(t, ACC_DTYPE), scale, bias)
    if CLAMP:
        t = ct.maximum(t, 0.0)
    ct.store(y, index=(bid, 0), tile=ct.astype(t, y.dtype))


@register_impl("row_max", backend="cutile")
@ct.kernel
def row_max_kernel(x, out, COLS: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(1, COLS), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(out, index=(bid,), tile=ct.reshape(ct.max(ct.astype(t, torch.float32), 1), (1,)))


class ScaleBias(torch.nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()
        self.scale, self.bias = scale, bias

    @_timed
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        grid = (x.shape[0] // BLOCK_ROWS, 1, 1)
        ct.launch(torch.cuda.current_stream(), grid, scale_bias_kernel, (x, y, self.scale, self.bias))
        return y


if __name__ == "__main__":
    print(ScaleBias(2.0, 1.0)(torch.randn(64, 128, device="cuda")))
