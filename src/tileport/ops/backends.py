"""Backends of the operator library: `torch` (PyTorch baselines), `cutile` (our cuTile Python kernels) and
`cutile-rs` (the generated cdylib). A backend that cannot run a call raises `BackendUnavailable`
with the reason; nothing ever falls back to another backend.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from typing import Any, Sequence

from tileport.ops.spec import Launch, OpSpec
from tileport.runtime.abi import TileportError

BACKENDS = ("torch", "cutile", "cutile-rs")


class BackendUnavailable(TileportError):
    """The chosen backend cannot run this call here (no GPU, no toolchain, unsupported dtype...)."""


def cuda_unavailable_reason() -> str | None:
    """None when PyTorch sees a CUDA GPU, else why not."""
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    import torch
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to PyTorch"
    return None


@functools.cache
def unavailable_reason(backend: str) -> str | None:
    """None if `backend` can run on this machine, else why not."""
    if backend not in BACKENDS:
        return f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})"
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    if backend == "torch":
        return None
    reason = cuda_unavailable_reason()
    if reason:
        return reason
    if backend == "cutile":
        if importlib.util.find_spec("cuda.tile") is None:
            return "cuTile Python (cuda-tile) is not installed"
        return None
    return rust_library_reason()


def rust_library_reason() -> str | None:
    """None if the generated cdylib can be loaded (prebuilt, or built with cargo on first use)."""
    from tileport.runtime.library import REPO_CRATE

    prebuilt = os.environ.get("TILEPORT_LIB")
    if not (REPO_CRATE / "kernels.json").is_file():
        return (f"the generated crate ({REPO_CRATE}) and its kernels.json manifest are not there "
                "(tileport installed without its repository)")
    if prebuilt:
        if not os.path.isfile(prebuilt):
            return f"$TILEPORT_LIB is {prebuilt}, which is not a file"
        return None
    if shutil.which("cargo") is None:
        return "no prebuilt library ($TILEPORT_LIB is unset) and no cargo to build rust/ on first use"
    return None


def available_backends() -> list[str]:
    """The backends that can run here (see `unavailable_reason(name)` for why one cannot)."""
    return [b for b in BACKENDS if unavailable_reason(b) is None]


def require(backend: str) -> None:
    reason = unavailable_reason(backend)
    if reason:
        raise BackendUnavailable(f"backend {backend!r} is unavailable: {reason}")


def library() -> Any:
    """The generated cdylib, loaded (built with cargo on first use unless $TILEPORT_LIB names a
    prebuilt one); BackendUnavailable when it cannot be."""
    from tileport.runtime.library import load

    try:
        return load()
    except (TileportError, OSError) as e:
        raise BackendUnavailable(f"backend 'cutile-rs' is unavailable: the generated library could not be "
                                 f"loaded: {e}") from e


def run_plan_rust(launches: Sequence[Launch], stream: Any) -> None:
    """Execute a launch plan through the generated C ABI, on `stream` (no host synchronization)."""
    lib = library()
    handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(stream)
    for launch in launches:
        lib[launch.kernel](grid=launch.grid, stream=handle, **launch.args)


def check_plan(spec: OpSpec, launches: Sequence[Launch]) -> None:
    """PlanError unless the plan launches only the op's own kernels."""
    unknown = [launch.kernel for launch in launches if launch.kernel not in spec.kernels]
    if unknown:
        from tileport.ops.backends_cutile import PlanError
        raise PlanError(f"{spec.name}: plan launches kernels outside the op: {unknown} (its kernels: {spec.kernels})")


def run_plan(backend: str, spec: OpSpec, launches: Sequence[Launch], stream: Any) -> None:
    """Execute a plan without caching it (the call path caches plans: see plan_cache)."""
    if backend not in ("cutile", "cutile-rs"):
        raise ValueError(f"backend {backend!r} does not run launch plans")
    check_plan(spec, launches)
    if backend == "cutile":
        from tileport.ops.backends_cutile import run_plan_cutile
        run_plan_cutile(spec, launches, stream)
    else:
        run_plan_rust(launches, stream)
