"""vector_add: c = a + b on 1-D arrays; ragged tails handled by the view (padding + dropped stores)."""

from __future__ import annotations

from ._elementwise import elementwise_spec


def reference(a, b):
    return a + b


SPEC = elementwise_spec(name="vector_add", kernel="vector_add_kernel", inputs={"a": 1.0, "b": 1.0},
                        output="c", reference=reference, flops_per_element=1,
                        shapes=[(1,), (1000,), (4097,), (65536,), (1_000_003,), (1 << 24,)],
                        bench_shapes=[(1 << 24,), (1 << 27,)], capture_numel=1 << 24)
