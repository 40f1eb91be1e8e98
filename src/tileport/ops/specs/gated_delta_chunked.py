"""gated_delta_chunked: gated_delta_prefill's operator (same inputs, outputs, reference and tolerances)
computed CHUNK tokens at a time (kernels/gated_delta.py, gated_delta_chunk_kernel): per chunk the
delta rule's values u come from one triangular system, (I + L)^-1 as a product of log2(CHUNK) factors
of the nilpotent L, and the outputs and the state update are MMAs; all in f32.

One block per (Dv tile, head, batch) walks the chunks with its (Dk, BLOCK_V) state slice in
registers, BLOCK_V sized so that the slice holds CHUNK_STATE_TILE f32 values. The MMAs take f32
operands, which sm_90 holds in registers: tileiras 13.4 spills, for f16 and Dk = 128, 18828
instructions' worth at CHUNK 64 (4 warps), 11251 with 8 worker warps, 3652 at CHUNK 32 and 604 at
CHUNK 16 (8 worker warps, BLOCK_V 32), the configuration taken. Whether the chunked form beats the
recurrent one (gated_delta_prefill) is for the GPU to say.
"""

from __future__ import annotations

from ..spec import Launch, OpSpec
from ._common import FLOAT_DTYPES, cdiv, next_pow2, per_dtype_captures
from .gated_delta_prefill import (MAX_DK, TOL_GATED_DELTA, allocate, check_inputs, make_inputs, reference,
                                  rule_bytes)

KERNEL = "gated_delta_chunk_kernel"
CHUNK = 16
CHUNK_STATE_TILE = 4096


def chunk_tiles(dk: int, dv: int) -> tuple[int, int]:
    if dk > MAX_DK:
        raise ValueError(f"gated delta rule: key heads wider than {MAX_DK} are not supported")
    block_k = next_pow2(dk)
    return block_k, min(next_pow2(dv), CHUNK_STATE_TILE // block_k)


def constants(dk: int, dv: int) -> dict:
    block_k, block_v = chunk_tiles(dk, dv)
    return {"CHUNK": CHUNK, "LOG2_CHUNK": CHUNK.bit_length() - 1, "BLOCK_K": block_k, "BLOCK_V": block_v}


def plan(q, k, v, g, beta, state, scale, outs):
    check_inputs("gated_delta_chunked", q, k, v, g, beta, state)
    o, new_state = outs
    b, _, h, dk = q.shape
    consts = constants(dk, v.shape[-1])
    return [Launch(KERNEL, (cdiv(v.shape[-1], consts["BLOCK_V"]), h, b),
                   {"q": q, "k": k, "v": v, "g": g, "beta": beta, "state": state, "o": o, "new_state": new_state,
                    "scale": scale, **consts})]


SPEC = OpSpec(
    name="gated_delta_chunked",
    kernel_file="gated_delta.py",
    kernels=[KERNEL],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1, 16, 16), (2, 7, 3, 100, 72), (3, 130, 4, 128, 128), (2, 300, 2, 256, 96)],
    bench_shapes=[(8, 512, 16, 128, 128), (32, 128, 16, 128, 128)],
    tolerances=TOL_GATED_DELTA,
    captures=per_dtype_captures(KERNEL, {"q": 4, "k": 4, "v": 4, "o": 4}, lambda dt: constants(128, 128),
                                fixed_arrays={"g": ("float32", 3), "beta": ("float32", 3), "state": ("float32", 4),
                                              "new_state": ("float32", 4)},
                                scalars={"scale": "float32"}),
    bytes=lambda shape, dt: rule_bytes(*shape, dt),
    flops=lambda shape: 8 * shape[0] * shape[1] * shape[2] * shape[3] * shape[4],
)
