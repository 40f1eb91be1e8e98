"""Matrix multiplication c[M, N] = a[M, K] @ b[K, N] with grouped tile ordering, Triton version.

Pointer arithmetic on row/column offsets with strides passed as arguments (any layout). Inputs
f16 / bf16 (f32 accumulation) or f32 (multiplied as TF32, Triton's default for `tl.dot` on f32, as
`USE_TF32` in `ops/kernels/matmul.py`); output in c's dtype. Ragged M / N / K: operand loads are
masked with 0 (padded K columns add nothing) and the store is masked.

Ordering: the linear program id is mapped to (tile row, tile column) GROUP_M tile rows at a time, so
programs running together sweep GROUP_M rows of a against one column panel of b and share it in L2.
Launch: grid (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def grouped_tile(pid, num_tiles_m, num_tiles_n, GROUP_M: tl.constexpr):
    """(tile row, tile column) of linear program `pid`, GROUP_M tile rows per group."""
    tiles_per_group = GROUP_M * num_tiles_n
    group = pid // tiles_per_group
    first_row = group * GROUP_M
    rows_in_group = tl.minimum(num_tiles_m - first_row, GROUP_M)
    local = pid % tiles_per_group
    return first_row + local % rows_in_group, local // rows_in_group


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_left = K - k0
        a = tl.load(a_tile, mask=(rows[:, None] < M) & (ks[None, :] < k_left), other=0.0)
        b = tl.load(b_tile, mask=(ks[:, None] < k_left) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, block_m: int = 128, block_n: int = 128, block_k: int = 64,
           group_m: int = 8, num_warps: int = 8, num_stages: int = 3) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
                        num_warps=num_warps, num_stages=num_stages)
    return c
