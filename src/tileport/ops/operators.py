"""`tileport.ops.<op>`: each operator as a callable, eager through its compiled replay when it has one
(tileport.runtime.fastcall), else its cached plan (plan_cache; a call not seen yet goes through
`tileport.ops.api.call_with`), or, while torch.compile traces it, the
`torch.ops.tileport.<op>` custom op (tileport.ops.torch_ops, which wraps `api.call` in turn: this
module sits above both, so neither imports the other's caller)."""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any

from tileport.ops import api, plan_cache


_IS_COMPILING: list = [None]  # torch.compiler.is_compiling once torch is imported


def _compiling() -> bool:
    """True while torch.compile (dynamo) traces the caller; never imports torch."""
    is_compiling = _IS_COMPILING[0]
    if is_compiling is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        is_compiling = _IS_COMPILING[0] = torch.compiler.is_compiling
    return is_compiling()


def _needs_grad(inputs: tuple) -> bool:
    """True when grad mode is on and an input requires grad: an op with an autograd formula
    (api.AUTOGRAD_OPS) then runs as the torch custom op, so that backward reaches our kernels."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    for x in inputs:  # a loop, not any(<generator>)
        if isinstance(x, torch.Tensor) and x.requires_grad:
            return True
    return False


@functools.cache
def get_op(name: str):
    """`tileport.ops.<name>` as a callable: op(*inputs, out=None, backend=None).

    Traced by torch.compile (no out=, no backend=), it becomes the `torch.ops.tileport.<name>`
    custom op, which runs on the backend current when the compiled code runs."""
    spec = api.library_spec(name)
    if spec is None:
        raise AttributeError(f"tileport.ops has no operator {name!r} (have: {', '.join(api.op_names())})")

    routes_grad = name in api.AUTOGRAD_OPS  # other ops never look at requires_grad (no backward to reach)
    # api.call_with's cached path, inlined (one call layer less on every call): the key, its plan, the run
    call_key, lookup, get_backend = plan_cache.call_key, plan_cache.lookup, api.get_backend
    fast_by_backend = plan_cache.fast_table(name)  # backend -> compiled replays (runtime.fastcall)

    def op(*inputs: Any, out: Any = None, backend: str | None = None) -> Any:
        if out is None:
            if backend is not None:
                chosen = backend
            elif _compiling() or (routes_grad and _needs_grad(inputs)):
                from tileport.ops import torch_ops
                return getattr(torch_ops, name)(*inputs)
            else:
                chosen = get_backend()
            fast = fast_by_backend.get(chosen)
            if fast is not None:
                result = fast(inputs)
                if result is not None:
                    return result
            plan = lookup(call_key(spec, chosen, inputs, None))
            if getattr(plan, "fast_pending", False):  # None and plans without a compiled form: False
                result = plan.run(inputs, None)
                plan_cache.promote(fast_by_backend, chosen, plan, inputs, result)
                return result
        else:
            plan = lookup(call_key(spec, get_backend() if backend is None else backend, inputs, out))
        if plan is not None:
            return plan.run(inputs, out)
        return api.call_with(spec, inputs, out, backend)  # not seen yet: checked, planned, cached there

    P = inspect.Parameter
    op.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [P(n, P.POSITIONAL_ONLY) for n in api.input_names(spec)]
        + [P("out", P.KEYWORD_ONLY, default=None), P("backend", P.KEYWORD_ONLY, default=None)])
    op.__name__ = op.__qualname__ = name
    op.__module__ = "tileport.ops"
    op.__doc__ = (f"The `{name}` operator ({', '.join(api.input_names(spec))}); "
                  f"kernels: {', '.join(spec.kernels)}; dtypes: {', '.join(spec.dtypes)}.\n\n"
                  "Returns torch tensor(s), allocated unless `out=` is given; `backend=` overrides the current "
                  "backend for this call.")
    return op
