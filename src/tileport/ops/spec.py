"""Operator specifications: what an operator is, independent of the backend that runs it.

An `OpSpec` ties together the cuTile Python kernel file, the host-side launch plan (shared by the
`cutile` and `cutile-rs` backends), the PyTorch reference, test and benchmark shapes, tolerances and
the signatures used to capture Tile IR on CPU. Nothing here imports torch or cuda.tile at module
import time, so specs load on CPU-only machines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tileport.capture.signature import Capture

KERNELS_DIR = Path(__file__).parent / "kernels"


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel's name, its grid and every argument by parameter name.

    `args` maps each kernel parameter (arrays, runtime scalars and `ct.Constant` values) to its value.
    """

    kernel: str
    grid: tuple[int, int, int]
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class ConfigSpace:
    """The launch configurations an op may run with, searched on the GPU by `tileport.gpu.autotune`.

    A problem is (shape, dtype): the shape the op's `make_inputs` takes (its first input's shape) and
    the op's dtype. `axes` declares every knob and the values it may take (tile sizes, rows per tile,
    the kernel entry, which fixes the occupancy hint, the grid policy...); `candidates(shape, dtype)`
    lists the points valid for that problem (a subset of the product of the axes: every tile constant
    a power of two, the tile within the entry's register budget), `default(shape, dtype)` is the
    deterministic choice used when no tuned configuration is cached (one of the candidates), and
    `shape_class(shape)` names the problems that share one tuned configuration (equal candidate
    lists). The op's plan takes `config=` (one candidate) and otherwise asks `ops.autotune`.
    """

    axes: Mapping[str, Sequence[Any]]
    candidates: Callable[[tuple[int, ...], str], list[dict]]
    default: Callable[[tuple[int, ...], str], dict]
    shape_class: Callable[[tuple[int, ...]], str]


@dataclass(frozen=True)
class OpSpec:
    """An operator of the library.

    - `kernel_file`: file name under ops/kernels/ holding the cuTile Python kernels.
    - `kernels`: the `@ct.kernel` functions this op launches.
    - `dtypes`: torch dtype names the op supports ("float32", "float16", "bfloat16").
    - `make_inputs(shape, dtype, device, seed)`: the op's positional inputs (torch tensors/scalars).
    - `reference(*inputs)`: the PyTorch result (a tensor or a tuple of tensors).
    - `allocate(*inputs)`: empty output tensor(s) for the op.
    - `plan(*inputs, outs)`: the launches (same for both tile backends); `outs` is what `allocate` gave.
    - `shapes`: correctness shapes (include ragged / non-power-of-two ones); `bench_shapes`: benchmark
      shapes; `tolerances`: per dtype; `captures`: signatures for CPU Tile IR capture.
    - `flops(shape)` / `bytes(shape, dtype)`: work per call, for TFLOP/s and GB/s.
    - `tune`: the op's launch configuration space (None: the plan has one fixed configuration);
      its plan then takes `config=` (see `ConfigSpace`).
    """

    name: str
    kernel_file: str
    kernels: Sequence[str]
    dtypes: Sequence[str]
    make_inputs: Callable[..., tuple]
    reference: Callable[..., Any]
    allocate: Callable[..., Any]
    plan: Callable[..., Sequence[Launch]]
    shapes: Sequence[tuple[int, ...]]
    bench_shapes: Sequence[tuple[int, ...]]
    tolerances: Mapping[str, Tolerance]
    captures: Sequence[Capture]
    bytes: Callable[[tuple[int, ...], str], int] | None = None
    flops: Callable[[tuple[int, ...]], int] | None = None
    kind: str = "memory"  # "memory" or "compute": which roofline the benchmark reports against
    tune: ConfigSpace | None = None

    @property
    def kernel_path(self) -> Path:
        return KERNELS_DIR / self.kernel_file
