"""`tileport doctor`: every component tileport uses, found or not, with the command that fixes what is missing.

The toolchain's components (tileport.toolchain) and, above them, the runtime's compiled op-call replay,
which the toolchain sits below (the runtime finds its build tools through it).
"""

from __future__ import annotations

from tileport import toolchain
from tileport.runtime import fastcall
from tileport.toolchain import Component


def check_fastcall() -> Component:
    """The compiled op-call replay (runtime.fastcall), built for the installed torch and this Python."""
    name, fix = "compiled op-call replay (runtime.fastcall)", "python3 -m tileport.runtime.fastcall build"
    if not toolchain.package_version("torch"):
        return Component(name, False, "", "", "needs torch: pip install torch", required=False)
    import torch  # its own version string names the build (the package metadata drops the local part)
    v = torch.__version__
    path = fastcall.built_path(v)
    return Component(name, path.is_file(), f"torch {v}" if path.is_file() else "", str(path) if path.is_file() else "",
                     fix, required=False)


def check_all() -> list[Component]:
    """Every component, in the order `tileport doctor` lists them."""
    return [*toolchain.check_all(), check_fastcall()]
