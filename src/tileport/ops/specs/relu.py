"""relu: y = max(x, 0), element-wise over a tensor of any shape (flattened contiguous view)."""

from __future__ import annotations

from ._common import torch
from ._elementwise import elementwise_spec


def reference(x):
    return torch().relu(x)


SPEC = elementwise_spec(name="relu", kernel="relu_kernel", inputs={"x": 1.0}, output="y",
                        reference=reference, flops_per_element=1,
                        bench_shapes=[(8192, 8192), (16384, 16384)])
