"""cuTile Python's own Tile IR export of an imported `@ct.kernel` (CPU only, no GPU, no torch).

`export_bytecode(kernel, capture)` exports the `Capture`'s concrete signature with
`cuda.tile.compilation.export_kernel` as Tile IR bytecode 13.4. `load_kernel_module` imports a trusted
kernel file by path (our own reference kernels; the translator and the capture of a user's file never import
user code: `tileport.capture.ir` compiles a module rebuilt from its AST).

The signature follows the convention shared by both sides of an IR diff (docs/design.md): arrays
contiguous (last stride 1, other strides dynamic), 16-byte aligned base addresses, int32 indexing,
non-negative strides, no aliasing; runtime scalars by dtype; `ct.Constant` parameters as bare values.
"""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tileport.capture.signature import Capture

BYTECODE_VERSION = "13.4"

_MODULES: dict[Path, ModuleType] = {}


def load_kernel_module(path: str | Path) -> ModuleType:
    """Import a kernel file by path (cached per resolved path)."""
    p = Path(path).resolve()
    mod = _MODULES.get(p)
    if mod is None:
        name = f"tileport_ref_kernels_{p.stem}"
        spec = importlib.util.spec_from_file_location(name, p)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import kernel file {p}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        _MODULES[p] = mod
    return mod


def _dtype(ct: Any, name: str) -> Any:
    try:
        dt = getattr(ct, name)
    except AttributeError as e:
        raise ValueError(f"unknown cuTile dtype {name!r}") from e
    if not isinstance(dt, ct.DType):
        raise ValueError(f"{name!r} is not a cuTile dtype")
    return dt


def kernel_parameters(kernel: Any) -> list[str]:
    """Parameter names of a `@ct.kernel`, in order."""
    import inspect

    fn = kernel._annotated_function.pyfunc if hasattr(kernel._annotated_function, "pyfunc") else None
    if fn is None:
        fn = getattr(kernel, "__wrapped__", None) or kernel._annotated_function
    return list(inspect.signature(fn).parameters)


def build_signature(kernel: Any, capture: Capture) -> Any:
    """The `KernelSignature` for a capture, parameters in the kernel's order."""
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                       ScalarConstraint)

    params: list[Any] = []
    names = kernel_parameters(kernel)
    known = set(capture.arrays) | set(capture.scalars) | set(capture.constants)
    extra = known - set(names)
    if extra:
        raise ValueError(f"{capture.label}: not parameters of {capture.kernel}: {sorted(extra)}")
    for name in names:
        if name in capture.arrays:
            dt_name, ndim = capture.arrays[name]
            params.append(ArrayConstraint(
                _dtype(ct, dt_name), ndim,
                index_dtype=ct.int32,
                stride_lower_bound_incl=0,
                alias_groups=(),
                may_alias_internally=False,
                stride_constant=(None,) * (ndim - 1) + (1,),
                base_addr_divisible_by=16,
            ))
        elif name in capture.scalars:
            params.append(ScalarConstraint(_dtype(ct, capture.scalars[name])))
        elif name in capture.constants:
            params.append(capture.constants[name])
        else:
            raise ValueError(f"{capture.label}: parameter {name!r} has no array, scalar or constant")
    return KernelSignature(params, CallingConvention.cutile_python_v2())


def export_bytecode(kernel: Any, capture: Capture) -> bytes:
    """Tile IR bytecode (version 13.4, architecture-independent) of a `@ct.kernel` for one capture."""
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    export_kernel(kernel, [build_signature(kernel, capture)], buf, output_format="tileir_bytecode",
                  bytecode_version=BYTECODE_VERSION)
    return buf.getvalue()
