"""How far two faithful ports of the same kernel can lie apart by reduction order alone (CPU, torch).

Triton and cuTile both type `sum` of a bf16 tile as a bf16 reduction whose combine rounds to bf16 at every
step (f32 tiles: f32), in an order neither fixes, and float atomics add in the order programs arrive. This
script replays the GPU check's inputs (standard normal f32 drawn by `numpy.random.default_rng(seed)` in
argument order, cast to the array's dtype) for four Liger kernels and compares the outputs of one formula
(the port's operations, its fma contractions included) under several reduction orders:

- `triton`: Triton's order for a 1-D blocked layout (each thread sums its `per_thread` contiguous elements
  left to right, then xor-butterfly shuffles across the 32 lanes, then across the warps),
- `pairwise`: a balanced tree over halves,
- `sequential`: left to right,
- `f32`: an f32 accumulator rounded to bf16 once (what a backend that widens the accumulator gives),
- `f64`: the exact sum (how far Triton itself is from it; bf16 cases),
- Triton's order with half the warps (Triton's own spread between two launch configurations).

For kernels with float atomics (attn_res backward) the `triton` reference adds the programs' contributions in
one random order, and each alternative in another (`atomic order`).

For each order it prints the check's figures against the `triton` order: max |error| and the max of
error / (atol + rtol * |ref|) with the check's bf16 (or f32) tolerance.

    python scripts/reduction_noise.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

BF16 = torch.bfloat16


def triton_order(x: torch.Tensor, per_thread: int, num_warps: int) -> torch.Tensor:
    """Row sums of `x` (rows, n) in bf16, combined in Triton's blocked-layout order."""
    rows, n = x.shape
    lanes = min(32 * num_warps, n // per_thread)
    reps = n // (per_thread * lanes)  # a tile larger than the CTA's footprint wraps: more registers per thread
    assert reps * per_thread * lanes == n
    v = x.reshape(rows, reps, lanes, per_thread).permute(0, 2, 1, 3).reshape(rows, lanes, reps * per_thread)
    acc = v[..., 0]
    for i in range(1, reps * per_thread):
        acc = acc + v[..., i]
    warps = max(1, lanes // 32)
    acc = _butterfly(acc.reshape(rows, warps, lanes // warps))
    return _butterfly(acc) if warps > 1 else acc[..., 0]


def _butterfly(acc: torch.Tensor) -> torch.Tensor:
    """xor-shuffle reduction over the last axis (offsets n/2, n/4, ..., 1); every lane ends with the sum."""
    n = acc.shape[-1]
    idx = torch.arange(n)
    off = n // 2
    while off:
        acc = acc + acc[..., idx ^ off]
        off //= 2
    return acc[..., 0]


def pairwise(x: torch.Tensor) -> torch.Tensor:
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = x[..., :h] + x[..., h:]
    return x[..., 0]


def sequential(x: torch.Tensor) -> torch.Tensor:
    acc = x[..., 0]
    for i in range(1, x.shape[-1]):
        acc = acc + x[..., i]
    return acc


def widened(x: torch.Tensor) -> torch.Tensor:
    return x.float().sum(-1).to(BF16)


def draws(seed: int, shapes: list[tuple[int, ...]], dtype=BF16) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    return [torch.from_numpy(rng.standard_normal(int(np.prod(s))).astype(np.float32)).reshape(s).to(dtype)
            for s in shapes]


def fma(a, b, c) -> torch.Tensor:
    """f32 fused multiply-add (the f64 product of two f32 is exact; one rounding of the sum)."""
    return (torch.as_tensor(a).double() * torch.as_tensor(b).double() + torch.as_tensor(c).double()).float()


def figures(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float) -> dict:
    g, r = got.double(), ref.double()
    err = (g - r).abs()
    return {"max_abs": float(err.max()), "max_ratio": float((err / (atol + rtol * r.abs())).max())}


def softmax_backward(seed: int, reduce) -> torch.Tensor:
    """Liger `_softmax_single_block_backward_kernel`, bf16, 256 x 1024: dx = y * (dy - sum(dy * y))."""
    dy, y, _ = draws(seed, [(256, 1024)] * 3)
    dot = reduce(dy * y)
    return y * (dy - dot[:, None])


def tv_distance(seed: int, reduce) -> torch.Tensor:
    """Liger `_tv_distance_kernel`, bf16 p, q 256 x 8192, batchmean: loss = (0.0 + sum(0.5 * |p - q|)) * scale,
    the sum in bf16, the rest in f32 (scale = 1/256 as recorded)."""
    p, q = draws(seed, [(256, 8192)] * 2)
    return reduce(0.5 * (p - q).abs()).float() * (1.0 / 256)


def poly_norm_backward(seed: int, reduce) -> torch.Tensor:
    """Liger `_poly_norm_backward_kernel`, f32, 512 x 1024: dX, with the port's fma contractions."""
    dy, _, x, w, rstd, _, _ = draws(seed, [(512, 1024), (512, 1024), (512, 1024), (3,), (512, 3), (132, 3), (132,)],
                                    torch.float32)
    r3, r2, r1 = (rstd[:, i:i + 1] for i in range(3))
    x2 = x * x
    x3 = x2 * x
    s3, s2, s1 = (reduce(dy * p)[:, None] for p in (x3, x2, x))
    c3, c2, c1 = (torch.tensor(k, dtype=torch.float32) / 1024 for k in (3.0, 2.0, 1.0))
    d3 = fma((3.0 * x2) * r3, dy, -((((((c3 * x) * x) * x) * x) * x) * ((r3 * r3) * r3)) * s3)
    d2 = fma((2.0 * x) * r2, dy, -((((c2 * x) * x) * x) * ((r2 * r2) * r2)) * s2)
    d1 = fma(1.0 * r1, dy, -((c1 * x) * ((r1 * r1) * r1)) * s1)
    return fma(w[2], d1, fma(w[0], d3, w[1] * d2))


ATOMIC_ORDER = [0]  # which random order the programs' float atomics arrive in (set per run)


def attn_res_backward(seed: int, reduce) -> torch.Tensor:
    """Liger `_attn_res_bwd_kernel`, f32, 4 blocks x 256 tokens x 1024: dV, dW_query, dW_norm concatenated
    (dW_* = initial value + atomic adds of the 256 programs, in ATOMIC_ORDER's permutation)."""
    f32 = torch.float32
    dh, v, wq, wn, alpha, rstd, _, dwq0, dwn0 = draws(
        seed, [(256, 1024), (4, 256, 1024), (1024,), (1024,), (256, 4), (256, 4), (4, 256, 1024), (1024,), (1024,)],
        f32)
    d_alpha = torch.stack([reduce(dh * v[i]) for i in range(4)], 1)
    sum_a_da = pairwise(alpha * d_alpha)[:, None]
    d_scores = alpha * (d_alpha - sum_a_da)
    dv, dwq, dwn = [], torch.zeros(256, 1024, dtype=f32), torch.zeros(256, 1024, dtype=f32)
    for i in range(4):
        a_i, ds_i, r = (t[:, i:i + 1] for t in (alpha, d_scores, rstd))
        v_norm = v[i] * r
        dk = (ds_i * wq) * wn
        t = ((r * r) * r) * (reduce(dk * v[i])[:, None] / 1024)
        dv.append(fma(a_i, dh, fma(r, dk, -(t * v[i]))))
        dwq = fma(ds_i, v_norm * wn, dwq)
        dwn = fma(ds_i * wq, v_norm, dwn)
    order = torch.from_numpy(np.random.default_rng(1000 + ATOMIC_ORDER[0]).permutation(256))
    outs = []
    for acc, init in ((dwq, dwq0), (dwn, dwn0)):
        total = init.clone()
        for tok in order:
            total = total + acc[tok]
        outs.append(total)
    return torch.cat([torch.stack(dv).flatten(), *outs])


F32 = (1e-4, 1e-5)  # the check's f32 tolerance for Triton ports
CASES = {
    "softmax_backward dx (bf16, n=1024, 4 warps)": (softmax_backward, 8, 4, (1.6e-2, 1.6e-2)),
    "tv_distance loss (f32 of a bf16 sum, n=8192, 16 warps)": (tv_distance, 8, 16, F32),
    "poly_norm_backward dX (f32, n=1024, 4 warps)": (poly_norm_backward, 4, 4, F32),
    "attn_res_bwd dV + dW_query + dW_norm (f32, n=1024, 4 warps)": (attn_res_backward, 4, 4, F32),
}
PARTS = {"attn_res_bwd": {"dV": slice(0, 4 * 256 * 1024), "dW_query": slice(4 * 256 * 1024, 4 * 256 * 1024 + 1024),
                          "dW_norm": slice(4 * 256 * 1024 + 1024, None)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    out = {}
    for name, (fn, per_thread, warps, (rtol, atol)) in CASES.items():
        x_bf16 = "bf16" in name
        out[name] = {}
        parts = next((v for k, v in PARTS.items() if name.startswith(k)), {"": slice(None)})
        for seed in range(args.seeds):
            ATOMIC_ORDER[0] = 0
            ref = fn(seed, lambda x: triton_order(x, per_thread, warps))
            alt = max(1, warps // 2)  # Triton itself with another num_warps: its own rounding-order spread
            runs = {f"triton, num_warps={alt}": lambda x: triton_order(x, per_thread, alt), "pairwise": pairwise,
                    "sequential": sequential}
            if x_bf16:
                runs["f32"] = widened
                runs["f64 (exact sum)"] = lambda x: x.double().sum(-1)
            ATOMIC_ORDER[0] = 1  # every run but the reference: the atomics arrive in another order
            if name.startswith("attn_res"):
                runs["atomic order only"] = lambda x: triton_order(x, per_thread, warps)
            row = {other: fn(seed, red) for other, red in runs.items()}
            row = {other: {part: figures(got[sl], ref[sl], rtol, atol) for part, sl in parts.items()}
                   for other, got in row.items()}
            out[name][f"seed {seed}"] = row
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
