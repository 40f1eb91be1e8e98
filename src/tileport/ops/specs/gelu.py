"""gelu: tanh-approximated GELU, element-wise (flattened contiguous view), f32 math."""

from __future__ import annotations

from ._common import torch
from ._elementwise import elementwise_spec


def reference(x):
    F = torch().nn.functional
    return F.gelu(x.float(), approximate="tanh").to(x.dtype)


# scale 3: covers the saturated tails and the curved middle of the activation
SPEC = elementwise_spec(name="gelu", kernel="gelu_tanh_kernel", inputs={"x": 3.0}, output="y",
                        reference=reference, flops_per_element=10,
                        bench_shapes=[(8192, 8192), (16384, 16384)])
