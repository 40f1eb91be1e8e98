"""geglu: y = gelu_tanh(a) * b for two same-shaped inputs (flattened contiguous views), f32 math."""

from __future__ import annotations

from ._common import torch
from ._elementwise import elementwise_spec


def reference(a, b):
    F = torch().nn.functional
    return (F.gelu(a.float(), approximate="tanh") * b.float()).to(a.dtype)


SPEC = elementwise_spec(name="geglu", kernel="geglu_kernel", inputs={"a": 3.0, "b": 1.0}, output="y",
                        reference=reference, flops_per_element=12,
                        bench_shapes=[(8192, 8192), (8192, 14336)])
