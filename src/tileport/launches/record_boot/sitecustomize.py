"""Loaded at start-up by every Python process `tileport record` runs (its directory is first on
PYTHONPATH): installs tileport's launch hooks, then runs the environment's own sitecustomize, if any.

The tileport that started the recording is imported from $TILEPORT_RECORD_HOME, which is on sys.path
only for that import: the program's own module search path stays as it was."""

import importlib.machinery
import importlib.util
import os
import sys

_home = os.environ.get("TILEPORT_RECORD_HOME")
if _home:
    sys.path.insert(0, _home)
    try:
        from tileport.launches.record import install_hooks
    finally:
        sys.path.remove(_home)
    install_hooks()

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
