"""Operator specs of the reference corpus. `all_specs()` returns them by name.

Each module defines `SPEC = OpSpec(...)`; nothing here imports torch or cuda.tile at import time.
"""

from __future__ import annotations

import importlib

from ..spec import OpSpec

SPEC_MODULES = (
    "vector_add",
    "relu",
    "gelu",
    "silu_and_mul",
    "swiglu",
    "geglu",
    "softmax",
    "softmax_tma",
    "softmax_gather",
    "softmax_online",
    "rms_norm",
    "layer_norm",
    "rope",
    "matmul",
    "bmm",
    "matmul_splitk",
    "fmha_fwd",
    "fmha_fwd_sinks",
    "fmha_fwd_softcap",
    "fmha_bwd",
    "flash_decode",
    "flash_decode_paged",
    "flash_decode_sinks",
    "flash_decode_softcap",
    "mla_decode",
    "mla_prefill",
    "dropout",
    "dropout_bwd",
    "cross_entropy",
    "cross_entropy_bwd",
    "moe_topk_softmax",
    "moe_topk_sigmoid",
    "moe_route",
    "rms_norm_bwd",
    "layer_norm_bwd",
    "linear_cross_entropy",
    "linear_cross_entropy_bwd",
    "gated_delta_decode",
    "gated_delta_prefill",
    "gated_delta_chunked",
    "fused_moe",
    "moe_experts",
    "grouped_gemm",
    "matmul_fp8",
)


def all_specs() -> dict[str, OpSpec]:
    out: dict[str, OpSpec] = {}
    for mod_name in SPEC_MODULES:
        spec = importlib.import_module(f"{__name__}.{mod_name}").SPEC
        if spec.name in out:
            raise ValueError(f"duplicate op spec name {spec.name!r}")
        out[spec.name] = spec
    return out


def get_spec(name: str) -> OpSpec:
    specs = all_specs()
    try:
        return specs[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(sorted(specs))}") from None
