"""PyTorch integration: every operator of the library as a `torch.library` custom op.

Importing this module (or touching `tileport.ops.torch`) registers, once per process, one custom
op per spec, `torch.ops.tileport.<op>`, and binds it here as `tileport.ops.torch.<op>`:

    import tileport.ops
    y = tileport.ops.torch.softmax(x)               # == torch.ops.tileport.softmax(x)
    y, mean, rstd = torch.ops.tileport.layer_norm(x, w, b)
    f = torch.compile(lambda x: tileport.ops.torch.gelu(x) * 2, fullgraph=True)

- Schemas are derived from the specs, never written by hand: the positional inputs (names from the
  spec's PyTorch reference, Tensor / float / SymInt / bool from `make_inputs` on the meta device) and
  the outputs (`allocate`: one Tensor, or a tuple such as layer_norm's (y, mean, rstd)).
- The real kernel dispatches through `tileport.ops.api.call` on the backend current *when the op
  runs* (`set_backend` / `use_backend`), so one compiled graph runs on any backend, with the same
  no-fallback rule: a backend that cannot run the call raises `BackendUnavailable`.
- The fake (meta) kernel is the spec's `allocate`, run on the fake / meta inputs, so
  `torch.compile(fullgraph=True)`, `torch.export` and meta tensors see the exact output shapes,
  dtypes and devices, including symbolic shapes.
- The ops are functional (no alias annotations in the schema, fresh outputs; use
  `tileport.ops.<op>(..., out=)` to write into given tensors) and forward only (no autograd formula
  is registered: no gradient flows), except those of `AUTOGRAD_OPS`: `fmha_fwd`'s backward is the
  `fmha_bwd` op (our kernels on the tile backends, the autograd of the math reference on `torch`),
  on the backend current when the backward runs.

Importing `tileport` or `tileport.ops` never imports torch; this module needs it.
"""

from __future__ import annotations

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised by the CPU tests without torch
    raise ImportError("tileport.ops.torch (tileport.ops.torch_ops) registers the operators with torch.library "
                      "and needs PyTorch: pip install torch") from e

from typing import Any

from tileport.ops import api
from tileport.ops.spec import OpSpec

NAMESPACE = "tileport"
SCHEMA_TYPES = {"tensor": "Tensor", "float": "float", "int": "SymInt", "bool": "bool"}
_RESERVED_ARG_NAMES = {"self", "out"}  # special in the schema language

# Defined through the low-level `torch.library.Library` with a plain Python kernel per device key
# (KERNEL_KEYS) and a fake kernel (Meta / FakeTensor): `torch.library.custom_op` puts a Python autograd wrapper
# in front of every call, which cost more host time than the whole tile-backend op call. Without an
# autograd kernel, the dispatcher's C++ autograd fallback handles calls (no autograd formula either way).
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")  # registrations live as long as this object
KERNEL_KEYS = ("CPU", "CUDA")  # the torch backend runs on CPU tensors too; the tile backends on CUDA
_defined: set[str] = set()  # op names defined through _LIB


def schema_of(spec: OpSpec | str) -> str:
    """The op's schema, e.g. "(Tensor x, Tensor w, Tensor b) -> (Tensor, Tensor, Tensor)"."""
    sig = api.signature(spec)
    args = ", ".join(f"{SCHEMA_TYPES[i.kind]} {i.name + '_' if i.name in _RESERVED_ARG_NAMES else i.name}"
                     for i in sig.inputs)
    ret = f"({', '.join(['Tensor'] * sig.n_outputs)})" if sig.multi_output else "Tensor"
    return f"({args}) -> {ret}"


def _fresh(result: Any, inputs: tuple) -> Any:
    """A custom op's outputs may not alias its inputs: clone any output that does (a torch baseline
    or reference that returns a view), so every backend honours the schema. The tile backends always
    return fresh outputs and skip this."""
    ptrs = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
    outs = result if isinstance(result, tuple) else (result,)
    fixed = tuple(o.clone() if o.untyped_storage().data_ptr() in ptrs else o for o in outs)
    return fixed if isinstance(result, tuple) else fixed[0]


def _kernels(spec: OpSpec):
    def impl(*args: Any) -> Any:
        backend = api.get_backend()
        result = api.call(spec, *args, backend=backend)
        return _fresh(result, args) if backend == "torch" else result

    def fake(*args: Any) -> Any:
        return spec.allocate(*args)

    impl.__name__ = fake.__name__ = spec.name
    return impl, fake


def _existing(name: str) -> Any | None:
    try:
        return getattr(getattr(torch.ops, NAMESPACE), name)
    except (AttributeError, RuntimeError):
        return None


def register_all() -> dict[str, Any]:
    """Register every operator (idempotent) and bind each here; returns op name -> OpOverloadPacket."""
    bound = {}
    for name, spec in api.specs().items():
        if name in globals() and name not in _defined and _existing(name) is None:
            raise RuntimeError(f"operator name {name!r} collides with tileport.ops.torch_ops.{name}")
        if name not in _defined and _existing(name) is None:
            impl, fake = _kernels(spec)
            _LIB.define(name + schema_of(spec))
            for device in KERNEL_KEYS:
                _LIB.impl(name, impl, device)
            torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_LIB)
            _defined.add(name)
        bound[name] = _existing(name)
        globals()[name] = bound[name]
    return bound


# ---- attention: autograd formulas -------------------------------------------------------------

AUTOGRAD_OPS = api.AUTOGRAD_OPS  # ops with a backward (tileport.ops.<op> routes them here)
_with_autograd: set[str] = set()


def _fmha_fwd_setup_context(ctx, inputs, output) -> None:
    q, k, v, seq_lens, causal = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, seq_lens, o, lse)
    ctx.causal = causal


def _fmha_fwd_backward(ctx, grad_o, grad_lse):
    """(dq, dk, dv) from the fmha_bwd op; seq_lens and causal take no gradient."""
    q, k, v, seq_lens, o, lse = ctx.saved_tensors
    grad_o = torch.zeros_like(o) if grad_o is None else grad_o.contiguous()
    grad_lse = torch.zeros_like(lse) if grad_lse is None else grad_lse.contiguous()
    dq, dk, dv = torch.ops.tileport.fmha_bwd(q, k, v, seq_lens, ctx.causal, o, lse, grad_o,
                                             grad_lse)
    return dq, dk, dv, None, None


def register_attention_autograd() -> None:
    """fmha_fwd's autograd formula (idempotent: only on the op this module defined)."""
    if "fmha_fwd" in _defined and "fmha_fwd" not in _with_autograd:
        torch.library.register_autograd(f"{NAMESPACE}::fmha_fwd", _fmha_fwd_backward,
                                        setup_context=_fmha_fwd_setup_context, lib=_LIB)
        _with_autograd.add("fmha_fwd")


def __getattr__(name: str):
    raise AttributeError(f"tileport.ops.torch has no operator {name!r} (have: {', '.join(api.op_names())})")


def __dir__():
    return sorted(set(globals()) | set(api.op_names()))


OPS = register_all()
register_attention_autograd()
