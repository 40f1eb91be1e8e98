"""The spec shape shared by the flattened element-wise ops: same-shaped contiguous inputs, one output
like the first input, one 1-D launch over the flattened arrays with a `TILE` constant."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..spec import Launch, OpSpec
from ._common import (ELEMENT_SIZE, FLOAT_DTYPES, TOL_POINTWISE, cdiv, flat, flat_tile, generator,
                      numel, per_dtype_captures, randn, torch)

MATRIX_SHAPES = [(1, 1), (7, 33), (1000, 1000), (4096, 4097), (8192, 8192)]


def elementwise_spec(*, name: str, kernel: str, inputs: dict[str, float], output: str,
                     reference: Callable[..., Any], flops_per_element: int,
                     bench_shapes: Sequence[tuple[int, ...]],
                     shapes: Sequence[tuple[int, ...]] = MATRIX_SHAPES,
                     capture_numel: int = 8192 * 8192) -> OpSpec:
    """`inputs` maps the kernel's input parameters, in order, to the scale of their random test data;
    `output` is its output parameter."""

    def make_inputs(shape, dtype, device, seed=0):
        g = generator(device, seed)
        return tuple(randn(shape, dtype, device, g, scale=scale) for scale in inputs.values())

    def allocate(*tensors):
        return torch().empty_like(tensors[0])

    def plan(*args):
        *tensors, outs = args
        first = tensors[0]
        for param, t in zip(inputs, tensors):
            if t.shape != first.shape:
                raise ValueError(f"{name}: {param} {tuple(t.shape)} differs from "
                                 f"{next(iter(inputs))} {tuple(first.shape)}")
        n = first.numel()
        tile = flat_tile(n)
        arrays = {param: flat(t) for param, t in zip(inputs, tensors)}
        return [Launch(kernel, (cdiv(n, tile), 1, 1), {**arrays, output: flat(outs), "TILE": tile})]

    n_arrays = len(inputs) + 1
    return OpSpec(
        name=name,
        kernel_file=f"{name}.py",
        kernels=[kernel],
        dtypes=list(FLOAT_DTYPES),
        make_inputs=make_inputs,
        reference=reference,
        allocate=allocate,
        plan=plan,
        shapes=list(shapes),
        bench_shapes=list(bench_shapes),
        tolerances=TOL_POINTWISE,
        captures=per_dtype_captures(kernel, {param: 1 for param in [*inputs, output]},
                                    lambda dt: {"TILE": flat_tile(capture_numel)}),
        bytes=lambda shape, dt: n_arrays * numel(shape) * ELEMENT_SIZE[dt],
        flops=lambda shape: flops_per_element * numel(shape),
    )
