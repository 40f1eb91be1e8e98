"""tileport: deterministic cuTile Python -> cuTile Rust porting, with proofs."""

from tileport.version import __version__


def __getattr__(name: str):
    # The operator API at top level (tileport.set_backend, tileport.ops, ...) without importing
    # the operator library (and its specs) for CLI-only use.
    if name in ("set_backend", "get_backend", "use_backend", "available_backends"):
        from tileport import ops
        return getattr(ops, name)
    if name == "ops":
        import importlib
        return importlib.import_module("tileport.ops")
    raise AttributeError(f"module 'tileport' has no attribute {name!r}")
