"""The operator API: `tileport.ops.<op>(...)` on the current backend, with a backend switch.

    import tileport
    tileport.set_backend("cutile-rs")          # or "cutile", "torch"
    y = tileport.ops.softmax(x)
    with tileport.use_backend("cutile"):
        y = tileport.ops.softmax(x, out=y)

Outputs are allocated by the op unless `out=` is given. A backend that cannot run a call raises
`BackendUnavailable` with the reason, bad inputs raise `TypeError` / `ValueError`; there is no
fallback to another backend. Non-torch arrays (CuPy, JAX, NumPy, any DLPack producer) are accepted
and viewed as torch tensors without a copy; results are always torch tensors.

Backend selection: `set_backend(name)` sets the process-wide default (every thread; the initial
default is $TILEPORT_BACKEND, read once by the first call that needs it, else "cutile-rs");
`use_backend(name)` overrides it in the current thread / async task until the block exits, and
nests. A `backend=` argument overrides both for one call. Nothing here imports torch until an
operator runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from tileport.ops import autotune, plan_cache
from tileport.ops.backends import BACKENDS, BackendUnavailable, check_plan, require, run_plan
from tileport.ops.spec import OpSpec
from tileport.ops.specs._common import dtype_name

DEFAULT_BACKEND = "cutile-rs"
# Ops with a backward (torch_ops registers their autograd formulas): tileport.ops.<op> runs them as
# the torch custom op when an input requires grad. Here, not in torch_ops, so that the operator
# wrappers know it without importing torch.
AUTOGRAD_OPS = frozenset({"fmha_fwd"})
BACKEND_ENV = "TILEPORT_BACKEND"

# set_backend's choice, or the initial default once a call resolved it ($TILEPORT_BACKEND, read once, else
# DEFAULT_BACKEND); None: not resolved yet
_default: list[str | None] = [None]
_default_lock = threading.Lock()  # writes of _default only; reads take no lock
_scoped: contextvars.ContextVar[str | None] = contextvars.ContextVar("tileport_backend", default=None)


def _validate(name: str, what: str = "backend") -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown {what} {name!r}; choose from {', '.join(BACKENDS)}")
    return name


def set_backend(name: str) -> None:
    """Make `name` the default backend of the process (all threads), effective at once.

    Inside a `use_backend` block it also replaces that block's backend until the block exits."""
    name = _validate(name)
    with _default_lock:
        _default[0] = name
    if _scoped.get() is not None:
        _scoped.set(name)


def get_backend() -> str:
    """The backend an op call without `backend=` runs on, here and now."""
    scoped = _scoped.get()
    if scoped is not None:
        return scoped
    chosen = _default[0]
    if chosen is None:  # the initial default: the environment is read once, not on every call
        with _default_lock:  # a set_backend in another thread meanwhile wins over the environment
            if _default[0] is None:
                _default[0] = _initial_backend()
            chosen = _default[0]
    return chosen


def _initial_backend() -> str:
    env = os.environ.get(BACKEND_ENV)
    if env:
        return _validate(env, f"backend in ${BACKEND_ENV}")
    return DEFAULT_BACKEND


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    """Run the block's op calls on `name` (this thread / task only); restores what was in force."""
    token = _scoped.set(_validate(name))
    try:
        yield name
    finally:
        _scoped.reset(token)


# ---------------------------------------------------------------------------------------------
# Operator signatures, derived from the specs


@dataclass(frozen=True)
class Input:
    """One positional input of an op: `kind` is "tensor", "float", "int" or "bool"; a tensor's
    `dtype` is None when it takes the op's dtype (one of spec.dtypes, shared by all such inputs), or
    the fixed dtype it always has (e.g. rope's float32 cos/sin tables)."""

    name: str
    kind: str
    dtype: str | None = None


@dataclass(frozen=True)
class Signature:
    inputs: tuple[Input, ...]
    n_outputs: int
    multi_output: bool  # allocate() returns a tuple (even of one tensor)


def input_names(spec: OpSpec) -> list[str]:
    """Names of the op's positional inputs (those of its PyTorch reference); no torch needed."""
    params = list(inspect.signature(spec.reference).parameters.values())
    if not params or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        raise TypeError(f"{spec.name}: the reference must take named positional inputs")
    return [p.name for p in params]


def _scalar_kind(v: Any) -> str | None:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return None


_SIGNATURES: dict[str, Signature] = {}


def _derive_signature(spec: OpSpec) -> Signature:
    import torch

    names = input_names(spec)
    shape = tuple(spec.shapes[0])
    per_dtype = {dt: spec.make_inputs(shape, dt, "meta", 0) for dt in spec.dtypes}
    first = per_dtype[spec.dtypes[0]]
    if len(first) != len(names):
        raise TypeError(f"{spec.name}: make_inputs gives {len(first)} inputs, the reference takes {len(names)}")
    inputs = []
    for i, (n, v) in enumerate(zip(names, first)):
        if isinstance(v, torch.Tensor):
            got = {dt: dtype_name(ins[i]) for dt, ins in per_dtype.items()}
            if all(g == dt for dt, g in got.items()):
                inputs.append(Input(n, "tensor", None))
            elif len(set(got.values())) == 1:
                inputs.append(Input(n, "tensor", next(iter(got.values()))))
            else:
                raise TypeError(f"{spec.name}: input `{n}` has dtypes {got}, neither the op's nor fixed")
        else:
            kind = _scalar_kind(v)
            if kind is None:
                raise TypeError(f"{spec.name}: input `{n}` is a {type(v).__name__}; ops take tensors, "
                                "float, int and bool inputs")
            inputs.append(Input(n, kind))
    outs = spec.allocate(*first)
    multi = isinstance(outs, tuple)
    return Signature(tuple(inputs), len(outs) if multi else 1, multi)


def signature(spec: OpSpec | str) -> Signature:
    """The op's inputs (names, tensor or scalar kinds, dtype rules) and outputs, learned from the
    spec's `make_inputs` / `allocate` on the meta device (needs torch; cached for library ops)."""
    if isinstance(spec, str):
        if spec not in _specs():
            raise KeyError(f"unknown op {spec!r}; known: {', '.join(op_names())}")
        spec = _specs()[spec]
    sig = _SIGNATURES.get(spec.name)
    if sig is None or _specs().get(spec.name) is not spec:
        sig = _derive_signature(spec)
        if _specs().get(spec.name) is spec:
            _SIGNATURES[spec.name] = sig
    return sig


def _check_inputs(spec: OpSpec, inputs: tuple) -> None:
    import torch

    sig = signature(spec)
    if len(inputs) != len(sig.inputs):
        names = ", ".join(i.name for i in sig.inputs)
        raise TypeError(f"{spec.name}() takes {len(sig.inputs)} input(s) ({names}), got {len(inputs)}")
    op_dtype: tuple[str, str] | None = None  # (dtype, input that set it)
    for x, s in zip(inputs, sig.inputs):
        if s.kind == "tensor":
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"{spec.name}: input `{s.name}` must be a tensor or a DLPack array, "
                                f"got {type(x).__name__}")
            got = dtype_name(x)
            if s.dtype is not None:
                if got != s.dtype:
                    raise TypeError(f"{spec.name}: input `{s.name}` must be {s.dtype}, got {got}")
            elif got not in spec.dtypes:
                raise TypeError(f"{spec.name} supports {', '.join(spec.dtypes)}, got {got} for `{s.name}`")
            elif op_dtype is None:
                op_dtype = (got, s.name)
            elif got != op_dtype[0]:
                raise TypeError(f"{spec.name}: inputs must share one dtype; `{op_dtype[1]}` is {op_dtype[0]}, "
                                f"`{s.name}` is {got}")
        elif _scalar_kind(x) not in {"float": ("float", "int"), "int": ("int",), "bool": ("bool",)}[s.kind]:
            raise TypeError(f"{spec.name}: input `{s.name}` must be a Python {s.kind}, got {type(x).__name__}")


_OUT_CACHE: dict[tuple, tuple] = {}


def _expected_outputs(spec: OpSpec, inputs: tuple) -> tuple:
    """((shape, dtype), ...) of the op's outputs for these inputs (cached by input shapes/dtypes)."""
    import torch
    key = (spec.name,) + tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in inputs)
    hit = _OUT_CACHE.get(key)
    if hit is None:
        meta = tuple(t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs)
        outs = spec.allocate(*meta)
        hit = tuple((tuple(o.shape), o.dtype) for o in (outs if isinstance(outs, tuple) else (outs,)))
        if len(_OUT_CACHE) > 4096:
            _OUT_CACHE.clear()
        _OUT_CACHE[key] = hit
    return hit


def _check_out(spec: OpSpec, inputs: tuple, out: Any) -> Any:
    """`out` as the op returns it (a tensor, or a tuple for multi-output ops), checked."""
    import torch
    sig = signature(spec)
    got = tuple(_as_torch(o) for o in out) if isinstance(out, (tuple, list)) else (_as_torch(out),)
    exp = _expected_outputs(spec, inputs)
    devices = {t.device for t in inputs if isinstance(t, torch.Tensor)}
    if len(got) != len(exp) or any(not isinstance(g, torch.Tensor) or tuple(g.shape) != s or g.dtype != d
                                   for g, (s, d) in zip(got, exp)):
        want = ", ".join(f"{s} {d}" for s, d in exp)
        have = ", ".join(f"{tuple(g.shape)} {g.dtype}" if isinstance(g, torch.Tensor) else type(g).__name__
                         for g in got)
        raise ValueError(f"{spec.name}: out= must be {want}; got {have}")
    if devices and any(g.device not in devices for g in got):
        raise ValueError(f"{spec.name}: out= must be on {sorted(map(str, devices))}, "
                         f"got {sorted({str(g.device) for g in got})}")
    return got if sig.multi_output else got[0]


def _as_torch(x: Any) -> Any:
    import torch
    if isinstance(x, torch.Tensor) or not hasattr(x, "__dlpack__"):
        return x
    return torch.from_dlpack(x)  # zero-copy view of the producer's memory


def call(spec: OpSpec, *inputs: Any, out: Any = None, backend: str | None = None) -> Any:
    """Run `spec` on `inputs` with `backend` (default: the current one); returns torch tensor(s).

    A repeated call signature (plan_cache.call_key) replays its cached plan: no planning, no full
    input check, no host synchronization, nothing allocated but the outputs."""
    return call_with(spec, inputs, out, backend)


def call_with(spec: OpSpec, inputs: tuple, out: Any = None, backend: str | None = None) -> Any:
    """`call` with the inputs as one tuple: the operator wrappers pass theirs on as they got them."""
    if backend is None:
        backend = get_backend()
    plan = plan_cache.lookup(plan_cache.call_key(spec, backend, inputs, out))
    if plan is not None:
        return plan.run(inputs, out)
    return _first_call(spec, inputs, out, backend)


def _first_call(spec: OpSpec, inputs: tuple, out: Any, backend: str) -> Any:
    """A call signature not seen yet: check everything, plan, record the plan, run it."""
    _validate(backend)
    require(backend)
    import torch

    inputs = tuple(_as_torch(x) for x in inputs)
    if out is not None:
        out = tuple(_as_torch(o) for o in out) if isinstance(out, (tuple, list)) else _as_torch(out)
    key = plan_cache.call_key(spec, backend, inputs, out)
    plan = plan_cache.lookup(key)  # DLPack inputs: known once viewed as tensors
    if plan is not None:
        return plan.run(inputs, out)
    _check_inputs(spec, inputs)
    if out is not None:
        out = _check_out(spec, inputs, out)
    multi = signature(spec).multi_output
    if backend == "torch":
        from tileport.ops.baselines import baseline
        torch_plan = plan_cache.TorchPlan(spec, baseline(spec), multi)
        result = torch_plan.run(inputs, out)
        plan_cache.store(key, torch_plan)
        return result
    devices = {t.device for t in inputs if isinstance(t, torch.Tensor)}
    if out is not None:
        devices |= {o.device for o in plan_cache.as_tuple(out)}
    if any(d.type != "cuda" for d in devices):
        raise BackendUnavailable(f"backend {backend!r} runs on CUDA tensors; got tensors on "
                                 f"{', '.join(sorted(map(str, devices)))}")
    if len(devices) > 1:
        raise ValueError(f"{spec.name}: inputs are on several devices: {', '.join(sorted(map(str, devices)))}")
    outs = spec.allocate(*inputs) if out is None else out
    with autotune.planning_for(backend):  # the plan picks this backend's tuned configuration
        launches = spec.plan(*inputs, outs)
    check_plan(spec, launches)
    try:
        cached = plan_cache.record(spec, backend, inputs, plan_cache.as_tuple(outs), launches,
                                   allocated=out is None, multi_output=multi)
    except plan_cache.NotCacheable:
        device = next(iter(devices)) if devices else torch.device("cuda")
        run_plan(backend, spec, launches, torch.cuda.current_stream(device))
        return outs
    cached.run(inputs, outs)
    plan_cache.store(key, cached)
    return outs


@functools.cache
def _specs() -> dict[str, OpSpec]:
    from tileport.ops.specs import all_specs
    return all_specs()


def library_spec(name: str) -> OpSpec | None:
    """The library's own spec of op `name` (None for other names)."""
    return _specs().get(name)


def specs() -> dict[str, OpSpec]:
    """Every operator spec, by name."""
    return dict(_specs())


def op_names() -> list[str]:
    return sorted(_specs())
