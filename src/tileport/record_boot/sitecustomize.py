"""Loaded at start-up by every Python process `tileport record` runs (its directory is first on
PYTHONPATH): installs tileport's launch hooks, then runs the environment's own sitecustomize, if any."""

import importlib.machinery
import importlib.util
import os
import sys

from tileport.record import install_hooks

install_hooks()

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
