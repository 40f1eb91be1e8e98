"""The operator API: `tileport.ops.<op>(...)` on the current backend, with a backend switch.

    import tileport
    tileport.set_backend("cutile-rs")          # or "cutile", "torch"
    y = tileport.ops.softmax(x)
    with tileport.use_backend("cutile"):
        y = tileport.ops.softmax(x, out=y)

Outputs are allocated by the op unless `out=` is given. A backend that cannot run a call raises
`BackendUnavailable` (or a typed error for bad inputs) with the reason; there is no fallback.
Non-torch arrays (CuPy, JAX, any DLPack producer) are accepted and viewed as torch tensors
without a copy; results are torch tensors.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Iterator

from tileport.ops.backends import BACKENDS, BackendUnavailable, require, run_plan
from tileport.ops.spec import OpSpec

_BACKEND: contextvars.ContextVar[str] = contextvars.ContextVar("tileport_backend", default="cutile-rs")


def set_backend(name: str) -> None:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
    _BACKEND.set(name)


def get_backend() -> str:
    return _BACKEND.get()


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
    token = _BACKEND.set(name)
    try:
        yield
    finally:
        _BACKEND.reset(token)


def _as_torch(x: Any) -> Any:
    import torch
    if isinstance(x, torch.Tensor) or not hasattr(x, "__dlpack__"):
        return x
    return torch.from_dlpack(x)  # zero-copy view of the producer's memory


def _check_dtypes(spec: OpSpec, inputs: tuple) -> None:
    import torch
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            if name not in spec.dtypes:
                raise TypeError(f"{spec.name} supports {', '.join(spec.dtypes)}, got {name}")
            return


def _check_out(spec: OpSpec, inputs: tuple, out: Any) -> None:
    import torch
    meta = tuple(t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs)
    expected = spec.allocate(*meta)
    exp = expected if isinstance(expected, tuple) else (expected,)
    got = out if isinstance(out, tuple) else (out,)
    if len(exp) != len(got) or any(not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype
                                   for g, e in zip(got, exp)):
        want = ", ".join(f"{tuple(e.shape)} {e.dtype}" for e in exp)
        raise ValueError(f"{spec.name}: out= must be {want}")


def call(spec: OpSpec, *inputs: Any, out: Any = None, backend: str | None = None) -> Any:
    """Run `spec` on `inputs` with `backend` (default: the current one)."""
    import torch

    backend = backend or get_backend()
    require(backend)
    inputs = tuple(_as_torch(x) for x in inputs)
    _check_dtypes(spec, inputs)
    if out is not None:
        _check_out(spec, inputs, out)
    if backend == "torch":
        result = spec.reference(*inputs)
        if out is None:
            return result
        for dst, src in zip(out if isinstance(out, tuple) else (out,),
                            result if isinstance(result, tuple) else (result,)):
            dst.copy_(src)
        return out
    devices = {t.device for t in inputs if isinstance(t, torch.Tensor)}
    if any(d.type != "cuda" for d in devices):
        raise BackendUnavailable(f"backend {backend!r} runs on CUDA tensors; got tensors on {sorted(map(str, devices))}")
    outs = spec.allocate(*inputs) if out is None else out
    launches = spec.plan(*inputs, outs)
    device = next(iter(devices)) if devices else torch.device("cuda")
    run_plan(backend, spec, launches, torch.cuda.current_stream(device))
    return outs


@functools.cache
def _specs() -> dict[str, OpSpec]:
    from tileport.ops.specs import all_specs
    return all_specs()


def op_names() -> list[str]:
    return sorted(_specs())


def get_op(name: str):
    """`tileport.ops.<name>` as a callable: op(*inputs, out=None, backend=None)."""
    spec = _specs().get(name)
    if spec is None:
        raise AttributeError(f"tileport.ops has no operator {name!r} (have: {', '.join(op_names())})")

    @functools.wraps(call)
    def op(*inputs: Any, out: Any = None, backend: str | None = None) -> Any:
        return call(spec, *inputs, out=out, backend=backend)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"The `{name}` operator (kernels: {', '.join(spec.kernels)}; dtypes: {', '.join(spec.dtypes)})."
    return op
