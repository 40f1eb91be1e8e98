"""Kernels exhibiting the constructs real-world cuTile files use (written for tileport's tests)."""

import cuda.tile as ct
import numpy as np
import torch
from cuda.tile._numeric_semantics import RoundingMode as RM

ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]
PAD = ct.PaddingMode.ZERO
EXP = ct.exp
HINTS = ct.ByTarget(sm_100=4, default=2)


@ct.kernel(num_ctas=ct.ByTarget(sm_100=2, sm_120=1, default=1), occupancy=HINTS)
def by_target_kernel(x, y, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=PAD)
    ct.store(y, index=(bid,), tile=EXP(t))


@ct.kernel
def foreign_names_kernel(x, y, TILE: ConstInt):
    bid = ct.bid(0)
    low = ct.full((TILE,), -np.inf, dtype=torch.float32)
    t = ct.astype(ct.load(x, index=(bid,), shape=(TILE,)), np.float32)
    r = ct.mul(ct.maximum(t, low), 0.5, rounding_mode=RM.RN)
    ct.store(y, index=(bid,), tile=ct.astype(r, y.dtype))


@ct.kernel
def const_operand_kernel(x, y, N: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    offs = bid * TILE + ct.arange(TILE, dtype=ct.int32)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=PAD)
    t = ct.where(offs < N, t, 0)
    ct.store(y, index=(bid,), tile=t + (offs // N))
