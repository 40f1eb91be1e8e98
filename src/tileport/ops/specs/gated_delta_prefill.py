"""gated_delta_prefill: the gated delta rule over T tokens of B sequences, recurrent form
(kernels/gated_delta.py), from an initial f32 state; the shape is (B, T, H, Dk, Dv).

Inputs (q, k, v, g, beta, state, scale): q, k [B, T, H, Dk] and v [B, T, H, Dv] in the dtype, g (log
decay, <= 0) and beta [B, T, H] f32, state [B, H, Dk, Dv] f32. Outputs (o [B, T, H, Dv] in the dtype,
the final state, f32). The test inputs' q and k are L2-normalized per head (as the models that use
the rule do), g = logsigmoid(N(4, 1)) (a decay of about 2 % a token), beta = sigmoid(N(0, 1)).
The reference is the plain recurrence in f32, token by token.

Tolerance (TOL_GATED_DELTA): the state is f32 arithmetic in another order, an error that grows
with the tokens a state has seen (f32: 1e-4 at T = 1024); o is rounded once to the dtype (one ulp).
"""

from __future__ import annotations

from ..spec import Launch, OpSpec, Tolerance
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, cdiv, generator, next_pow2, per_dtype_captures, randn,
                      torch)

STATE_TILE = 8192  # f32 values of a block's (BLOCK_K, BLOCK_V) state slice
MAX_DK = 256
TOL_GATED_DELTA = {
    "float32": Tolerance(rtol=1e-4, atol=1e-4),
    "float16": Tolerance(rtol=2e-3, atol=2e-3),
    "bfloat16": Tolerance(rtol=1e-2, atol=1e-2),
}
KERNEL = "gated_delta_rule_kernel"


def block_tiles(dk: int, dv: int) -> tuple[int, int]:
    """(BLOCK_K, BLOCK_V): the whole key dimension, a power-of-two slice of the value dimension."""
    if dk > MAX_DK:
        raise ValueError(f"gated delta rule: key heads wider than {MAX_DK} are not supported")
    block_k = next_pow2(dk)
    return block_k, min(next_pow2(dv), STATE_TILE // block_k)


def sequence_inputs(b: int, t: int, h: int, dk: int, dv: int, dtype: str, device, seed: int) -> tuple:
    """(q, k, v, g, beta, state) of B sequences of T tokens ([B, T, H, D] layouts)."""
    F = torch().nn.functional
    gen = generator(device, seed)
    q = F.normalize(randn((b, t, h, dk), "float32", device, gen), dim=-1).to(getattr(torch(), dtype))
    k = F.normalize(randn((b, t, h, dk), "float32", device, gen), dim=-1).to(getattr(torch(), dtype))
    v = randn((b, t, h, dv), dtype, device, gen)
    g = F.logsigmoid(randn((b, t, h), "float32", device, gen, shift=4.0))
    beta = torch().sigmoid(randn((b, t, h), "float32", device, gen))
    state = randn((b, h, dk, dv), "float32", device, gen, scale=0.1)
    return q, k, v, g, beta, state


def recurrence(q, k, v, g, beta, state, scale):
    """The rule token by token in f32 over [B, T, H, D] inputs: (o [B, T, H, Dv] f32, final state)."""
    t = torch()
    s = state.clone()
    outs = []
    for i in range(q.shape[1]):
        qi, ki, vi = q[:, i].float(), k[:, i].float(), v[:, i].float()
        s = s * t.exp(g[:, i])[..., None, None]
        delta = (vi - t.einsum("bhk,bhkv->bhv", ki, s)) * beta[:, i][..., None]
        s = s + ki[..., None] * delta[..., None, :]
        outs.append(t.einsum("bhk,bhkv->bhv", qi, s) * scale)
    return t.stack(outs, dim=1), s


def make_inputs(shape, dtype, device, seed=0):
    b, t, h, dk, dv = shape
    return (*sequence_inputs(b, t, h, dk, dv, dtype, device, seed), dk ** -0.5)


def reference(q, k, v, g, beta, state, scale):
    o, s = recurrence(q, k, v, g, beta, state, scale)
    return o.to(q.dtype), s


def allocate(q, k, v, g, beta, state, scale):
    return torch().empty_like(v), torch().empty_like(state)


def check_inputs(name: str, q, k, v, g, beta, state) -> None:
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    if (k.shape != q.shape or v.shape != (b, t, h, dv) or g.shape != (b, t, h) or beta.shape != g.shape
            or state.shape != (b, h, dk, dv)):
        raise ValueError(f"{name} takes q, k [B, T, H, Dk], v [B, T, H, Dv], g, beta [B, T, H] "
                         "and state [B, H, Dk, Dv]")


def rule_launch(q, k, v, g, beta, state, scale, o, new_state) -> Launch:
    b, _, h, dk = q.shape
    block_k, block_v = block_tiles(dk, v.shape[-1])
    return Launch(KERNEL, (cdiv(v.shape[-1], block_v), h, b),
                  {"q": q, "k": k, "v": v, "g": g, "beta": beta, "state": state, "o": o, "new_state": new_state,
                   "scale": scale, "BLOCK_K": block_k, "BLOCK_V": block_v})


def plan(q, k, v, g, beta, state, scale, outs):
    check_inputs("gated_delta_prefill", q, k, v, g, beta, state)
    return [rule_launch(q, k, v, g, beta, state, scale, *outs)]


CAPTURES = per_dtype_captures(KERNEL, {"q": 4, "k": 4, "v": 4, "o": 4},
                              lambda dt: dict(zip(("BLOCK_K", "BLOCK_V"), block_tiles(128, 128))),
                              fixed_arrays={"g": ("float32", 3), "beta": ("float32", 3), "state": ("float32", 4),
                                            "new_state": ("float32", 4)},
                              scalars={"scale": "float32"})


def rule_bytes(b: int, t: int, h: int, dk: int, dv: int, dt: str) -> int:
    return b * t * h * ((2 * dk + 2 * dv) * ELEMENT_SIZE[dt] + 8) + 8 * b * h * dk * dv


SPEC = OpSpec(
    name="gated_delta_prefill",
    kernel_file="gated_delta.py",
    kernels=[KERNEL],
    dtypes=list(FLOAT_DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=[(1, 1, 1, 16, 16), (2, 7, 3, 100, 72), (3, 33, 4, 128, 128), (2, 300, 2, 256, 96)],
    # the torch baseline is the token loop, which torch.compile unrolls: at most 512 tokens
    bench_shapes=[(8, 512, 16, 128, 128), (32, 128, 16, 128, 128)],
    tolerances=TOL_GATED_DELTA,
    captures=CAPTURES,
    bytes=lambda shape, dt: rule_bytes(*shape, dt),
    flops=lambda shape: 8 * shape[0] * shape[1] * shape[2] * shape[3] * shape[4],
)
