"""numpy/torch names and a cuda.tile submodule import in a kernel (translate tests; the numpy/torch names
are IR-diffed against cuTile Python in unattended.py's foreign_names_kernel)."""

import cuda.tile as ct
import numpy as np
import torch
from cuda.tile._numeric_semantics import RoundingMode as RM

ConstInt = ct.Constant[int]


@ct.kernel
def foreign_names_kernel(x, y, TILE: ConstInt):
    bid = ct.bid(0)
    low = ct.full((TILE,), -np.inf, dtype=torch.float32)
    t = ct.astype(ct.load(x, index=(bid,), shape=(TILE,)), np.float32)
    r = ct.mul(ct.maximum(t, low), 0.5, rounding_mode=RM.RN)
    ct.store(y, index=(bid,), tile=ct.astype(r, y.dtype))
