"""Reference Tile IR of the operator library's own kernels, by op spec or kernel file name (CPU only).

`reference_bytecode(spec_or_path, capture)` imports the kernel module from its file (these are our own
reference kernels; the translator itself never imports user code) and exports the `Capture`'s concrete
signature with cuTile Python's exporter (`tileport.capture.export`). A relative name that is not a file
here names a file of the library's kernel folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tileport.capture.export import export_bytecode, load_kernel_module

from .spec import KERNELS_DIR, Capture, OpSpec


def _kernel_path(spec_or_path: OpSpec | str | Path) -> Path:
    if isinstance(spec_or_path, OpSpec):
        return spec_or_path.kernel_path
    p = Path(spec_or_path)
    if not p.is_absolute() and not p.exists():
        p = KERNELS_DIR / p
    return p


def reference_kernel(spec_or_path: OpSpec | str | Path, kernel_name: str) -> Any:
    mod = load_kernel_module(_kernel_path(spec_or_path))
    try:
        return getattr(mod, kernel_name)
    except AttributeError as e:
        raise AttributeError(f"{_kernel_path(spec_or_path)} has no kernel {kernel_name!r}") from e


def reference_bytecode(spec_or_path: OpSpec | str | Path, capture: Capture) -> bytes:
    """Tile IR bytecode of one capture of a reference kernel."""
    return export_bytecode(reference_kernel(spec_or_path, capture.kernel), capture)
