"""The `cutile` backend: executes an op's launch plan with cuTile Python (`ct.launch`).

The plan (from the op's spec) names each kernel, its grid and every argument by parameter name; this
module turns that into positional arguments in the kernel's parameter order and launches. The
`cutile-rs` backend executes the very same plans through the generated C ABI.
"""

from __future__ import annotations

from typing import Any, Sequence

from .capture_ref import kernel_parameters, load_kernel_module
from .spec import Launch, OpSpec


class PlanError(ValueError):
    """A launch plan that does not fit its kernel (unknown kernel, missing or extra arguments)."""


def positional_args(kernel: Any, launch: Launch) -> tuple:
    """The launch's arguments in the kernel's parameter order (every parameter exactly once)."""
    params = kernel_parameters(kernel)
    missing = [p for p in params if p not in launch.args]
    extra = [a for a in launch.args if a not in params]
    if missing or extra:
        raise PlanError(f"launch of {launch.kernel}: missing arguments {missing}, "
                        f"unknown arguments {extra} (parameters: {params})")
    return tuple(launch.args[p] for p in params)


def _grid(launch: Launch) -> tuple[int, int, int]:
    grid = tuple(int(g) for g in launch.grid)
    if len(grid) != 3 or any(g < 1 for g in grid):
        raise PlanError(f"launch of {launch.kernel}: bad grid {launch.grid}")
    return grid  # type: ignore[return-value]


def run_plan_cutile(spec: OpSpec, launches: Sequence[Launch], stream: Any) -> None:
    """Launch every kernel of the plan, in order, on `stream` (e.g. torch.cuda.current_stream())."""
    import cuda.tile as ct

    mod = load_kernel_module(spec.kernel_path)
    for launch in launches:
        if launch.kernel not in spec.kernels:
            raise PlanError(f"{spec.name}: plan launches {launch.kernel!r}, not one of {spec.kernels}")
        kernel = getattr(mod, launch.kernel)
        ct.launch(stream, _grid(launch), kernel, positional_args(kernel, launch))
