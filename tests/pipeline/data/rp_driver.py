"""A user's program as `tileport record` sees it: it runs the kernels of rp_scale.py, rp_rowsum.py and
rp_take.py on a GPU (some launches repeat: the spec keeps them once, with a count)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

import rp_rowsum  # noqa: E402
import rp_scale  # noqa: E402
import rp_take  # noqa: E402


def main() -> None:
    x = torch.randn(1000, dtype=torch.float16, device="cuda")
    for _ in range(3):
        rp_scale.scale(x, torch.empty_like(x), 0.5)
    rp_scale.scale(torch.randn(8192, device="cuda"), torch.empty(8192, device="cuda"), 3.0, tile=512)
    m = torch.randn(300, 37, device="cuda").t()  # 37 x 300, strides (1, 37): a transposed view
    rp_rowsum.row_sum(m)
    rp_rowsum.row_sum(torch.randn(64, 1000, device="cuda"))
    src = torch.randn(5000, device="cuda")
    rp_take.take(src, torch.randint(0, 5000, (777,), device="cuda", dtype=torch.int32))
    torch.cuda.synchronize()
    print("driver done")


if __name__ == "__main__":
    main()
