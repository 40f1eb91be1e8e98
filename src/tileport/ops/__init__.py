"""The operator library: `tileport.ops.<op>(...)` for every corpus operator, on a chosen backend.

Backends: `torch` (PyTorch baselines in the input dtype), `cutile` (our cuTile Python kernels),
`cutile-rs` (the generated Rust ports, through the C ABI). See tileport.ops.api and docs/ops.md.

`tileport.ops.torch` (the module tileport.ops.torch_ops, which needs PyTorch) holds the same
operators registered as `torch.library` custom ops, `torch.ops.tileport.<op>`, for torch.compile.
Importing tileport.ops never imports torch.
"""

from tileport.ops.api import call, get_backend, op_names, set_backend, signature, use_backend
from tileport.ops.backends import BACKENDS, BackendUnavailable, available_backends, unavailable_reason
from tileport.ops.operators import get_op


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    if name in ("torch", "torch_ops"):
        import importlib
        module = importlib.import_module("tileport.ops.torch_ops")  # registers torch.ops.tileport.*
        globals()["torch"] = module
        return module
    op = globals()[name] = get_op(name)  # bound here: later lookups skip this hook (~2 µs a call)
    return op


def __dir__():
    import importlib.util
    extra = {"torch"} if importlib.util.find_spec("torch") is not None else set()
    return sorted(set(globals()) | set(op_names()) | extra)


__all__ = ["BACKENDS", "BackendUnavailable", "available_backends", "call", "get_backend", "get_op",
           "op_names", "set_backend", "signature", "unavailable_reason", "use_backend"]
