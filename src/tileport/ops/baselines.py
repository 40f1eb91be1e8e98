"""PyTorch baselines: every operator as a PyTorch user writes it, in the input dtype.

The `torch` backend runs these, and `tileport bench` times them (eager, and compiled with
`torch.compile`) next to the tile backends, on identical inputs. Each computes what the op's spec
computes (ops/specs/), so the outputs are comparable; the specs' references, which upcast to f32,
are kept for correctness checks only.

| op                                         | baseline                                                   |
|--------------------------------------------|------------------------------------------------------------|
| vector_add                                 | `a + b`                                                    |
| relu                                       | `torch.relu(x)`                                            |
| gelu                                       | `F.gelu(x, approximate="tanh")`                            |
| silu_and_mul                               | `F.silu(x[:, :n]) * x[:, n:]` (two roundings)              |
| swiglu / geglu                             | `F.silu(a) * b` / `F.gelu(a, approximate="tanh") * b`      |
| softmax, softmax_tma / _gather / _online   | `F.softmax(x, dim=-1)`                                     |
| rms_norm                                   | `F.rms_norm(x, (N,), w, eps=1e-6)`                         |
| layer_norm                                 | `torch.native_layer_norm(x, (N,), w, b, 1e-5)` (1)         |
| rope                                       | rotate-half on the op's f32 cos/sin tables (2)             |
| matmul, matmul_splitk / bmm                | `torch.matmul(a, b)` / `torch.bmm(a, b)` (3)               |

(1) what `F.layer_norm` runs, with the mean / rstd the op returns. (2) `cat(x1 * cos - x2 * sin,
x2 * cos + x1 * sin)` as in model code; type promotion computes in f32 like the kernel, one rounding.
(3) f32: TF32 when the user allows it, as `bench` does, since the kernels use TF32.

A spec that is not one of the library's own (a user's spec, or a library spec modified) runs its
reference on the `torch` backend.
"""

from __future__ import annotations

from typing import Any, Callable

from tileport.ops.spec import OpSpec
from tileport.ops.specs.layer_norm import EPS as LAYER_NORM_EPS
from tileport.ops.specs.rms_norm import EPS as RMS_NORM_EPS


def _t():
    import torch
    return torch


def _F():
    import torch.nn.functional as F
    return F


def vector_add(a, b):
    return a + b


def relu(x):
    return _t().relu(x)


def gelu(x):
    return _F().gelu(x, approximate="tanh")


def silu_and_mul(x):
    n = x.shape[-1] // 2
    return _F().silu(x[..., :n]) * x[..., n:]


def swiglu(a, b):
    return _F().silu(a) * b


def geglu(a, b):
    return _F().gelu(a, approximate="tanh") * b


def softmax(x):
    return _F().softmax(x, dim=-1)


def rms_norm(x, w):
    return _F().rms_norm(x, (x.shape[-1],), w, eps=RMS_NORM_EPS)


def layer_norm(x, w, b):
    torch = _t()
    y, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), w, b, LAYER_NORM_EPS)
    # [M, 1] statistics; f32 on CUDA (a no-op .to), the input dtype on some CPU builds
    return y, mean.reshape(-1).to(torch.float32), rstd.reshape(-1).to(torch.float32)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return _t().cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def matmul(a, b):
    return _t().matmul(a, b)


def bmm(a, b):
    return _t().bmm(a, b)


BASELINES: dict[str, Callable[..., Any]] = {
    "vector_add": vector_add, "relu": relu, "gelu": gelu, "silu_and_mul": silu_and_mul, "swiglu": swiglu,
    "geglu": geglu, "softmax": softmax, "softmax_tma": softmax, "softmax_gather": softmax,
    "softmax_online": softmax, "rms_norm": rms_norm, "layer_norm": layer_norm, "rope": rope,
    "matmul": matmul, "matmul_splitk": matmul, "bmm": bmm,
}


def baseline(spec: OpSpec) -> Callable[..., Any]:
    """The function the `torch` backend runs for `spec` (see the table above)."""
    from tileport.ops.specs import all_specs
    if all_specs().get(spec.name) is spec and spec.name in BASELINES:
        return BASELINES[spec.name]
    return spec.reference
