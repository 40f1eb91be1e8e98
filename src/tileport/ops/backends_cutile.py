"""The `cutile` backend: executes an op's launch plan with cuTile Python (`ct.launch`).

The plan (from the op's spec) names each kernel, its grid and every argument by parameter name; this
module turns that into positional arguments in the kernel's parameter order and launches. The
`cutile-rs` backend executes the very same plans through the generated C ABI.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

from tileport.capture.export import kernel_parameters, load_kernel_module

from .spec import Launch, OpSpec


class PlanError(ValueError):
    """A launch plan that does not fit its kernel (unknown kernel, missing or extra arguments)."""


def positional_args(params: Sequence[str], launch: Launch) -> tuple:
    """The launch's arguments in the order of the kernel's parameters `params` (every one exactly once)."""
    missing = [p for p in params if p not in launch.args]
    extra = [a for a in launch.args if a not in params]
    if missing or extra:
        raise PlanError(f"launch of {launch.kernel}: missing arguments {missing}, "
                        f"unknown arguments {extra} (parameters: {list(params)})")
    return tuple(launch.args[p] for p in params)


@functools.cache
def _kernel(path: Path, name: str) -> tuple[Any, tuple[str, ...]]:
    """The `@ct.kernel` `name` of the kernel file at `path`, and its parameter names in order."""
    kernel = getattr(load_kernel_module(path), name)
    return kernel, tuple(kernel_parameters(kernel))


def _grid(launch: Launch) -> tuple[int, int, int]:
    grid = tuple(int(g) for g in launch.grid)
    if len(grid) != 3 or any(g < 1 for g in grid):
        raise PlanError(f"launch of {launch.kernel}: bad grid {launch.grid}")
    return grid  # type: ignore[return-value]


def run_plan_cutile(spec: OpSpec, launches: Sequence[Launch], stream: Any) -> None:
    """Launch every kernel of the plan, in order, on `stream` (e.g. torch.cuda.current_stream()).

    Only reached through `backends.run_plan`, which has checked that the plan launches the op's own
    kernels."""
    import cuda.tile as ct

    for launch in launches:
        kernel, params = _kernel(spec.kernel_path, launch.kernel)
        ct.launch(stream, _grid(launch), kernel, positional_args(params, launch))
