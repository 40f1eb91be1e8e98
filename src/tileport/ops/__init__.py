"""The operator library: `tileport.ops.<op>(...)` for every corpus operator, on a chosen backend.

Backends: `torch` (reference), `cutile` (our cuTile Python kernels), `cutile-rs` (the generated
Rust ports, through the C ABI). See tileport.ops.api.
"""

from tileport.ops.api import call, get_backend, get_op, op_names, set_backend, use_backend
from tileport.ops.backends import BACKENDS, BackendUnavailable, available_backends


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    return get_op(name)


def __dir__():
    return sorted(set(globals()) | set(op_names()))


__all__ = ["BACKENDS", "BackendUnavailable", "available_backends", "call", "get_backend", "get_op",
           "op_names", "set_backend", "use_backend"]
