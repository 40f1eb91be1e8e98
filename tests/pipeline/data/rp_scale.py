"""Test data for `tileport record` and launch inference: y = alpha * x over 1-D arrays.

`demo()` launches with values the host code fixes (launch inference derives its record); `scale()`
takes its arrays from the caller (only a recording knows them)."""

import cuda.tile as ct
import torch

TILE = 256
N = 4096


@ct.kernel
def scale_kernel(x, y, alpha: float, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=(t * alpha).astype(y.dtype))


def scale(x, y, alpha, tile=TILE):
    grid = (ct.cdiv(x.shape[0], tile), 1, 1)
    ct.launch(torch.cuda.current_stream(), grid, scale_kernel, (x, y, alpha, tile))


def demo():
    x = torch.randn(N, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    ct.launch(torch.cuda.current_stream(), (N // TILE, 1, 1), scale_kernel, (x, y, 2.0, TILE))
    return y
