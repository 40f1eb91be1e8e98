"""Helpers shared by the operator specs. Nothing here imports torch at module import time."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Iterable

from ..spec import Capture, Tolerance

FLOAT_DTYPES = ("float32", "float16", "bfloat16")

# Used when the plan runs on a machine without CUDA (CPU checks of the plans): H200 has 132 SMs.
DEFAULT_NUM_SMS = 132

ELEMENT_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2}

# Element-wise ops and normalizations, computed in f32 and rounded once to the output dtype; the
# reference does the same math in f32, so f16 / bf16 results differ by at most one ulp
# (2^-10 / 2^-7 relative) plus the f32 noise of approximate exp / divide / rsqrt.
TOL_POINTWISE = {
    "float32": Tolerance(rtol=1e-5, atol=1e-5),
    "float16": Tolerance(rtol=1e-3, atol=1e-3),
    "bfloat16": Tolerance(rtol=1e-2, atol=1e-2),
}
# Softmax outputs lie in [0, 1]; small probabilities need a small atol.
TOL_SOFTMAX = {
    "float32": Tolerance(rtol=1e-5, atol=1e-6),
    "float16": Tolerance(rtol=1e-3, atol=1e-5),
    "bfloat16": Tolerance(rtol=1e-2, atol=1e-5),
}
# Matmuls: f32 accumulation in a different order than the f32 reference, output rounded to the
# input dtype; f32 inputs go through TF32 (10-bit mantissa operands), checked against an exact f32
# reference. Inputs are scaled so that outputs are O(1).
TOL_MATMUL = {
    "float32": Tolerance(rtol=1e-2, atol=1e-2),
    "float16": Tolerance(rtol=1e-2, atol=1e-2),
    "bfloat16": Tolerance(rtol=2e-2, atol=2e-2),
}


def torch():
    import torch as _torch  # lazy: specs must import without torch

    return _torch


def torch_dtype(name: str) -> Any:
    return getattr(torch(), name)


def dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


@lru_cache(maxsize=None)
def _num_sms_cuda(index: int) -> int:
    return int(torch().cuda.get_device_properties(index).multi_processor_count)


def num_sms(device: Any) -> int:
    """Number of SMs of the tensor's device (DEFAULT_NUM_SMS when it is not a CUDA device)."""
    dev = torch().device(device)
    if dev.type != "cuda":
        return DEFAULT_NUM_SMS
    index = dev.index if dev.index is not None else torch().cuda.current_device()
    return _num_sms_cuda(index)


def generator(device: Any, seed: int) -> Any:
    """A seeded generator on `device` (None on the `meta` device, used to check plans on CPU)."""
    dev = torch().device(device)
    if dev.type == "meta":
        return None
    g = torch().Generator(device=dev)
    g.manual_seed(int(seed))
    return g


def randn(shape: Iterable[int], dtype: str, device: Any, gen: Any, scale: float = 1.0,
          shift: float = 0.0) -> Any:
    """Normal samples generated in f32 on `device`, scaled/shifted, then cast to `dtype`."""
    t = torch().randn(tuple(shape), generator=gen, device=torch().device(device),
                      dtype=torch().float32)
    if scale != 1.0:
        t = t.mul_(scale)
    if shift != 0.0:
        t = t.add_(shift)
    return t.to(torch_dtype(dtype))


def numel(shape: Iterable[int]) -> int:
    return math.prod(int(s) for s in shape)


def per_dtype_captures(kernel: str, arrays: dict[str, int], constants_for: Any,
                       fixed_arrays: dict | None = None,
                       scalars: dict[str, str] | None = None) -> list[Capture]:
    """One capture per dtype of FLOAT_DTYPES: `arrays` maps array parameters to their rank (they take
    the dtype), `fixed_arrays` maps parameters to a fixed (dtype, rank), `constants_for(dtype)` gives
    the constants."""
    out = []
    for dt in FLOAT_DTYPES:
        arr = {name: (dt, rank) for name, rank in arrays.items()}
        arr.update(fixed_arrays or {})
        out.append(Capture(kernel=kernel, arrays=arr, scalars=dict(scalars or {}),
                           constants=dict(constants_for(dt))))
    return out


# 1-D tile of the flattened element-wise kernels. Measured on H200 (CUPTI, L2 flushed): 1024 is the
# best or within 1 % of the best for every dtype (bf16 gelu 8192^2: 3692 GB/s at 1024, 2722 at 4096,
# 1949 at 8192; f32 vector_add 2^27: 4359 at 1024, 4372 at 2048, 2816 at 8192).
FLAT_TILE = 1024


def flat_tile(n: int) -> int:
    """TILE for the flattened element-wise kernels (the whole padded array when it is smaller)."""
    return min(next_pow2(n), FLAT_TILE)


def flat(t: Any) -> Any:
    """The 1-D view of a tensor (no copy): a 1-D tensor as it is (the kernels take strided arrays),
    a contiguous one of any rank flattened."""
    if len(t.shape) == 1:
        return t
    if not t.is_contiguous():
        raise ValueError("tileport element-wise ops take contiguous tensors")
    return t.view(-1)


# Row kernels (softmax / rms_norm / layer_norm) load BLOCK_M rows per tile when rows are short, so
# that one view load moves about ROW_TILE_BYTES.
ROW_TILE_BYTES = 16384


def rows_per_block(n_rows: int, tile: int, dtype: str, target_bytes: int = ROW_TILE_BYTES) -> int:
    """BLOCK_M (a power of two) for (BLOCK_M, TILE) row tiles of `dtype` elements."""
    bm = max(1, target_bytes // (tile * ELEMENT_SIZE[dtype]))
    bm = 1 << (bm.bit_length() - 1)  # round down to a power of two
    return min(bm, next_pow2(n_rows))


def persistent_grid(n_blocks: int, device: Any, occupancy: int) -> tuple[int, int, int]:
    """Grid of a persistent kernel: one resident wave (NUM_SMS * occupancy), at most n_blocks."""
    return (max(1, min(int(n_blocks), num_sms(device) * int(occupancy))), 1, 1)


# Test and benchmark shapes [M, N] of the normalizations (rms_norm, layer_norm).
NORM_SHAPES = [(1, 1), (3, 17), (37, 1000), (1000, 5120), (2, 16384), (8192, 4096)]
NORM_BENCH = [(8192, 4096), (4096, 8192), (16384, 2048)]
