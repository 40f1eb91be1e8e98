"""Test data for `tileport record`: out[i] = src[idx[i]] (an integer index array: its recorded value
range bounds the random indices of the differential test)."""

import cuda.tile as ct
import torch


@ct.kernel
def take_kernel(src, idx, out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    i = ct.load(idx, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=ct.gather(src, i))


def take(src, idx, tile=128):
    out = torch.empty(idx.shape[0], dtype=src.dtype, device=src.device)
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(idx.shape[0], tile), 1, 1), take_kernel, (src, idx, out, tile))
    return out
