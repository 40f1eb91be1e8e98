"""The compiled op-call replay (fastcall.cpp): built once per torch and Python, then tried first by
every `tileport.ops.<op>` call on the cutile-rs backend.

    python3 -m tileport.runtime.fastcall build    # compile it (a torch C++ extension; needs a C++ compiler)
    python3 -m tileport.runtime.fastcall status   # whether op calls use it, and if not, why

A repeated op call whose plan is cached (plan_cache) and whose launch the library recorded costs, in
Python, the call key, `torch.empty_like` and a ctypes call: about 6 µs on top of the prepared launch
on an H200 host, where a torch eager op spends about 2.5 over the driver's launch. The extension does
the same work in one compiled call: it compares the inputs with the key's layouts, allocates the output, reads the data
pointers and calls `tileport_launch_prepared`. A call its guards do not accept (another layout, a
tensor subclass, `out=`, a misaligned base) takes the Python path, which handles it as before.

Nothing is built implicitly: until `build` ran for the torch and Python in use, op calls take the
Python path and `status` says so. $TILEPORT_FASTCALL=0 turns it off. The build lives in
$TILEPORT_FASTCALL_DIR, else $XDG_CACHE_HOME/tileport/fastcall, else ~/.cache/tileport/fastcall, under
a name that hashes the source, the torch version and the Python version (a stale build is never
loaded).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

from tileport.cache import user_cache_dir

SOURCE = Path(__file__).with_name("fastcall.cpp")
ENV = "TILEPORT_FASTCALL"
DIR_ENV = "TILEPORT_FASTCALL_DIR"

_loaded: list = []  # [module or None, reason]: resolved once per process
_lock = threading.Lock()


def cache_dir() -> Path:
    return user_cache_dir(DIR_ENV, "fastcall")


def module_name(torch_version: str) -> str:
    """The extension's name for this source, torch and Python (its build directory too)."""
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes(), torch_version.encode(), sys.implementation.cache_tag.encode()):
        digest.update(part + b"\0")
    return f"tileport_fastcall_{digest.hexdigest()[:16]}"


def built_path(torch_version: str) -> Path:
    """Where `build` leaves the extension for this torch version, source and Python."""
    name = module_name(torch_version)
    return cache_dir() / name / f"{name}.so"  # torch.utils.cpp_extension's naming


def build(verbose: bool = False) -> Path:
    """Compile the extension for the torch and Python in use; returns the built library's path."""
    import torch
    from torch.utils import cpp_extension
    name = module_name(torch.__version__)
    build_dir = cache_dir() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(name=name, sources=[str(SOURCE)], build_directory=str(build_dir), extra_cflags=["-O2"],
                       verbose=verbose)
    path = built_path(torch.__version__)
    if not path.is_file():  # cpp_extension names the library itself: say what it left instead
        raise RuntimeError(f"the build left no {path.name} in {build_dir}: {sorted(p.name for p in build_dir.iterdir())}")
    _loaded.clear()  # the next lookup loads the new build
    return path


def _load() -> tuple[Any, str]:
    if os.environ.get(ENV, "1") == "0":
        return None, f"off (${ENV}=0)"
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch is not imported"
    path = built_path(torch.__version__)
    if not path.is_file():
        return None, f"not built for torch {torch.__version__} (run: python3 -m tileport.runtime.fastcall build)"
    name = module_name(torch.__version__)
    spec = importlib.util.spec_from_file_location(name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path)))
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except ImportError as e:
        return None, f"{path} does not load: {e}"
    return mod, f"on ({path})"


def module() -> Any:
    """The loaded extension, or None (`status()` says why)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.extend(_load())
    return _loaded[0]


def status() -> str:
    module()
    return _loaded[1]


def runner(plans: tuple) -> Any:
    """inputs -> the output of the first of `plans` whose guards hold, else None."""
    return functools.partial(module().run, plans)


def plan(inputs: tuple, output: Any, sources: tuple, handle: int, launch_address: int, stream_of: Any,
         on_error: Any, keepalive: Any) -> Any:
    """The extension's plan of one cached call (None when it cannot guard such a call; see fastcall.cpp)."""
    return module().plan(inputs, output, sources, handle, launch_address, stream_of, on_error, keepalive)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tileport.runtime.fastcall", description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("build", "status"))
    ap.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401  (the extension is built against it; status reads its version)
    except ImportError:
        print("fastcall: torch is not installed; op calls need torch and take no compiled path without it")
        return 1
    if args.command == "build":
        try:
            path = build(args.verbose)
        except Exception as e:  # the compiler's own report is the diagnostic
            print(f"fastcall: build failed: {e}", file=sys.stderr)
            return 1
        print(f"fastcall: built {path}")
    print(f"fastcall: {status()}")
    return 0 if module() is not None else 1


if __name__ == "__main__":
    sys.exit(main())
