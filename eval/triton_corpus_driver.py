"""Launches every kernel of the Triton corpus (src/tileport/ops/triton_kernels/) through its host
launcher on representative shapes and dtypes (ragged edges included), and checks each result against
PyTorch, so that

    tileport record --out triton-launches.json -- python3 eval/triton_corpus_driver.py

records the launch spec of the whole corpus. Needs a GPU, torch and triton. Exit status 1 when a
corpus kernel disagrees with PyTorch (error normalized by the reference's largest magnitude above
`TOLERANCE` of its dtype); `--out FILE` writes the per-case results as JSON; `--only OP` runs one op.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

KERNELS = Path(__file__).resolve().parents[1] / "src" / "tileport" / "ops" / "triton_kernels"
# max |triton - torch| / max(|torch|, 1) per output dtype (f32 GEMMs run as TF32 in both)
TOLERANCE = {torch.float32: 2e-3, torch.float16: 1e-2, torch.bfloat16: 4e-2}
ELEMENTWISE = [(torch.float32, (4097, 1000)), (torch.float16, (8192, 8192)), (torch.bfloat16, (8192, 8192))]
ROWS = [(torch.float32, (1000, 1000)), (torch.float16, (4096, 1023)), (torch.bfloat16, (8192, 8192))]


def corpus_module(name: str):
    """A corpus file as a module (by path: its kernels keep their file name in the records)."""
    spec = importlib.util.spec_from_file_location(f"triton_corpus_{name}", KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def randn(shape, dtype, scale=1.0):
    return (torch.randn(shape, device="cuda", dtype=torch.float32) * scale).to(dtype)


def gelu_ref(x):
    return F.gelu(x.float(), approximate="tanh")


def rope_tables(seq, head_dim):
    inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device="cuda") / head_dim)
    ang = torch.arange(seq, dtype=torch.float64, device="cuda")[:, None] * inv_freq[None, :]
    return ang.cos().float().contiguous(), ang.sin().float().contiguous()


def rope_ref(x, cos, sin):
    half = x.shape[-1] // 2
    xf = x.float()
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([xf[..., :half] * c - xf[..., half:] * s, xf[..., half:] * c + xf[..., :half] * s], dim=-1)


def attention_ref(q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    kf, vf = k.float().repeat_interleave(group, 1), v.float().repeat_interleave(group, 1)
    return F.scaled_dot_product_attention(q.float(), kf, vf, is_causal=causal)


def decode_ref(q, k, v, kv_lens):
    group = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float32, device="cuda")
    for b, n in enumerate(kv_lens.tolist()):
        kb = k[b, :, :n].float().repeat_interleave(group, 0)
        vb = v[b, :, :n].float().repeat_interleave(group, 0)
        scores = (kb @ q[b].float()[:, :, None]).squeeze(-1) / math.sqrt(q.shape[-1])
        out[b] = (scores.softmax(-1)[:, None, :] @ vb).squeeze(1)
    return out


def elementwise_cases(op, n_inputs, launch, reference, scales=(3.0, 1.0)):
    for dtype, shape in ELEMENTWISE:
        inputs = [randn(shape, dtype, scales[i]) for i in range(n_inputs)]
        yield f"{op} {dtype} {shape}", launch(*inputs), reference(*inputs)


def cases(only: str | None):
    """(label, triton result, torch reference) of every launch."""
    m = corpus_module
    table = {
        "vector_add": lambda: elementwise_cases("vector_add", 2, m("vector_add").vector_add,
                                                lambda a, b: a.float() + b),
        "relu": lambda: elementwise_cases("relu", 1, m("relu").relu, lambda x: x.float().relu()),
        "gelu": lambda: elementwise_cases("gelu", 1, m("gelu").gelu, gelu_ref),
        "swiglu": lambda: elementwise_cases("swiglu", 2, m("swiglu").swiglu,
                                            lambda a, b: F.silu(a.float()) * b.float()),
        "geglu": lambda: elementwise_cases("geglu", 2, m("geglu").geglu, lambda a, b: gelu_ref(a) * b.float()),
        "silu_and_mul": lambda: silu_and_mul_cases(m("silu_and_mul")),
        "softmax": lambda: ((f"softmax {dt} {s}", m("softmax").softmax(x), x.float().softmax(-1))
                            for dt, s in ROWS for x in [randn(s, dt, 2.0)]),
        "layer_norm": lambda: layer_norm_cases(m("layer_norm")),
        "rms_norm": lambda: rms_norm_cases(m("rms_norm")),
        "rope": lambda: rope_cases(m("rope")),
        "matmul": lambda: matmul_cases(m("matmul").matmul, "matmul"),
        "matmul_block_ptr": lambda: matmul_cases(m("matmul_block_ptr").matmul_block_ptr, "matmul_block_ptr"),
        "attention": lambda: attention_cases(m("attention")),
        "flash_decode": lambda: flash_decode_cases(m("flash_decode")),
    }
    for op, make in table.items():
        if only in (None, op):
            yield from make()


def silu_and_mul_cases(mod):
    for dtype, (rows, n) in [(torch.float32, (129, 4097)), (torch.bfloat16, (8192, 8192))]:
        x = randn((rows, 2 * n), dtype, 3.0)
        yield f"silu_and_mul {dtype} {(rows, 2 * n)}", mod.silu_and_mul(x), F.silu(x[:, :n].float()) * x[:, n:].float()


def layer_norm_cases(mod):
    for dtype, shape in ROWS:
        x, w, b = randn(shape, dtype, 2.0), randn(shape[1:], dtype, 0.5), randn(shape[1:], dtype, 0.5)
        y, mean, rstd = mod.layer_norm(x, w, b, 1e-5)
        ref = F.layer_norm(x.float(), shape[1:], w.float(), b.float(), 1e-5)
        yield f"layer_norm {dtype} {shape}", y, ref
        yield f"layer_norm mean {dtype} {shape}", mean, x.float().mean(-1)


def rms_norm_cases(mod):
    for dtype, shape in ROWS:
        x, w = randn(shape, dtype, 2.0), randn(shape[1:], dtype, 0.5)
        xf = x.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, True) + 1e-6) * w.float()
        yield f"rms_norm {dtype} {shape}", mod.rms_norm(x, w, 1e-6), ref


def rope_cases(mod):
    for dtype, shape in [(torch.float32, (2, 7, 3, 80)), (torch.float16, (1, 129, 8, 128)),
                         (torch.bfloat16, (4, 4096, 32, 128))]:
        x = randn(shape, dtype)
        cos, sin = rope_tables(shape[1], shape[3])
        yield f"rope {dtype} {shape}", mod.rope(x, cos, sin), rope_ref(x, cos, sin)


def matmul_cases(fn, op):
    for dtype, (m, n, k) in [(torch.float32, (129, 255, 100)), (torch.float16, (1000, 1000, 1000)),
                             (torch.bfloat16, (4096, 4096, 4096))]:
        s = float(k) ** -0.25
        a, b = randn((m, k), dtype, s), randn((k, n), dtype, s)
        yield f"{op} {dtype} {(m, n, k)}", fn(a, b), a.float() @ b.float()


def attention_cases(mod):
    for dtype, (batch, hq, hkv, seq, d, causal) in [(torch.bfloat16, (2, 8, 2, 77, 64, True)),
                                                    (torch.float16, (1, 16, 16, 1024, 128, False)),
                                                    (torch.bfloat16, (4, 32, 8, 4096, 128, True))]:
        q = randn((batch, hq, seq, d), dtype)
        k, v = randn((batch, hkv, seq, d), dtype), randn((batch, hkv, seq, d), dtype)
        o, lse = mod.attention_fwd(q, k, v, causal=causal)
        yield f"attention {dtype} {(batch, hq, hkv, seq, d)} causal={causal}", o, attention_ref(q, k, v, causal)


def flash_decode_cases(mod):
    for dtype, (batch, hq, hkv, seq, d) in [(torch.bfloat16, (3, 32, 8, 1000, 128)), (torch.float16, (2, 8, 2, 77, 64)),
                                            (torch.bfloat16, (16, 32, 8, 8192, 128))]:
        q, k, v = randn((batch, hq, d), dtype), randn((batch, hkv, seq, d), dtype), randn((batch, hkv, seq, d), dtype)
        kv_lens = torch.tensor([max(1, seq - 97 * b) for b in range(batch)], dtype=torch.int32, device="cuda")
        o, lse = mod.flash_decode(q, k, v, kv_lens)
        yield f"flash_decode {dtype} {(batch, hq, hkv, seq, d)}", o, decode_ref(q, k, v, kv_lens)


def compare(label: str, got: torch.Tensor, ref: torch.Tensor) -> dict:
    err = (got.float() - ref.float()).abs().max().item() / max(ref.float().abs().max().item(), 1.0)
    tol = TOLERANCE[got.dtype]
    return {"case": label, "dtype": str(got.dtype).removeprefix("torch."), "normalized_error": err, "tolerance": tol,
            "ok": bool(err <= tol)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the per-case results as JSON here")
    ap.add_argument("--only", help="one op of the corpus (e.g. softmax)")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    results = []
    for label, got, ref in cases(args.only):
        torch.cuda.synchronize()
        results.append(compare(label, got, ref))
        r = results[-1]
        print(f"{'ok ' if r['ok'] else 'BAD'} {label}: error {r['normalized_error']:.2e} (tolerance {r['tolerance']})")
    bad = [r for r in results if not r["ok"]]
    print(f"{len(results) - len(bad)}/{len(results)} Triton corpus cases agree with PyTorch")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=f".{args.out.name}.")
        with os.fdopen(fd, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "cases": results}, f, indent=1)
        os.replace(tmp, args.out)
    return 1 if bad or not results else 0


if __name__ == "__main__":
    sys.exit(main())
