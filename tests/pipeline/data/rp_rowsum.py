"""Test data for `tileport record`: the sum of each row of a 2-D array (rows may be strided)."""

import cuda.tile as ct
import torch

ConstInt = ct.Constant[int]


@ct.kernel
def row_sum_kernel(x, out, BLOCK: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, BLOCK), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(row,), tile=ct.sum(t, axis=1))


def row_sum(x):
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    block = 1 << (x.shape[1] - 1).bit_length()
    ct.launch(torch.cuda.current_stream(), (x.shape[0], 1, 1), row_sum_kernel, (x, out, block))
    return out
