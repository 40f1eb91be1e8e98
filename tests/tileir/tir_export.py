"""Export the test kernels to Tile IR bytecode with cuTile Python (CPU only, no tileiras)."""

from __future__ import annotations

import io
from functools import lru_cache
from typing import Any

import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                   ScalarConstraint, export_kernel)

import tir_kernels


def _param(p: Any) -> Any:
    if isinstance(p, tuple) and p[0] == "scalar":
        return ScalarConstraint(getattr(ct, p[1]))
    if isinstance(p, tuple):
        dtype, ndim = p[:2]
        return ArrayConstraint(getattr(ct, dtype), ndim, index_dtype=ct.int32,
                               stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False,
                               stride_constant=(None,) * (ndim - 1) + (1,),
                               shape_constant=p[2] if len(p) > 2 else None,
                               base_addr_divisible_by=16)
    return p


def export(kernel: Any, params: list, version: str = "13.4", gpu_code: str | None = None) -> bytes:
    sig = KernelSignature([_param(p) for p in params], CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    export_kernel(kernel, [sig], buf, output_format="tileir_bytecode", bytecode_version=version,
                  gpu_code=gpu_code)
    return buf.getvalue()


@lru_cache(maxsize=None)
def case(name: str, version: str = "13.4", gpu_code: str | None = None) -> bytes:
    kernel, params = tir_kernels.CASES[name]
    return export(kernel, params, version, gpu_code)
