"""tileport: deterministic cuTile Python -> cuTile Rust porting, with proofs."""

import os as _os
import sys as _sys


def _safe_path() -> None:
    """`python -m tileport...` runs with the working directory first on sys.path, where a user's `copy.py`
    or `json.py` would be imported in place of the standard library's; the `tileport` command and
    `python -P -m tileport` put nothing there. Drop that entry before tileport imports anything. Python's
    own `-m` machinery (runpy, importlib.util) imports a few modules before this runs (`warnings`,
    `functools`, `contextlib`... unless the interpreter's startup did): when one of them came from the
    working directory, it has run; start again with `-P` so that tileport does not run on it."""
    if _sys.flags.safe_path or _sys.argv[:1] != ["-m"] or _main_module().split(".")[0] != __name__:
        return  # not `python -m tileport...` locating its module (tileport imported by a program, ...)
    cwd = _os.getcwd()
    if not _sys.path or _sys.path[0] not in ("", cwd):
        return
    del _sys.path[0]
    shadows = sorted(_os.path.relpath(m.__spec__.origin, cwd) for name, m in list(_sys.modules.items())
                     if name != __name__ and _from_folder(name, m, cwd))
    if shadows:
        print(f"tileport: {', '.join(shadows)} in the working directory ran in place of Python's own module(s) "
              "before tileport started (`python -m` looks there first); starting again as `python -P -m ...` "
              "(the `tileport` command never looks there)", file=_sys.stderr, flush=True)
        _sys.stdout.flush()
        _os.execv(_sys.executable, [_sys.executable, "-P", *_sys.orig_argv[1:]])


def _main_module() -> str:
    """The module `python -m` runs, from the interpreter's own arguments ('' if none)."""
    argv = _sys.orig_argv[1:]
    for i, arg in enumerate(argv):
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else ""
        if arg.startswith("-m"):
            return arg[2:]
    return ""


def _from_folder(name: str, module, folder: str) -> bool:
    """`module` (imported as top-level `name`) is a file of `folder`: `name.py` or `name/__init__.py`."""
    if "." in name:
        return False
    origin = getattr(getattr(module, "__spec__", None), "origin", None) or ""
    where = _os.path.dirname(origin)
    package = where == _os.path.join(folder, name) and _os.path.basename(origin).startswith("__init__.")
    return where == folder or package


_safe_path()

from tileport.version import __version__  # noqa: E402 - after the path is safe


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
