"""A small package written by the tests: both frontends, helpers of sibling modules, `__init__` re-exports,
a module wrapping triton.language, guarded imports, and a back end of another vendor. Every module would
leave a marker file if it were imported or run (tileport must never do either)."""

from __future__ import annotations

import textwrap
import zipfile
from pathlib import Path

NAME = "tilelib"
VERSION = "0.1.0"


def planted(markers: Path, name: str) -> str:
    """A line that leaves the marker `name` when the module runs."""
    return f"open({str(markers / name)!r}, 'w').close()\n"


def modules(markers: Path) -> dict[str, str]:
    """Relative path -> source of every module of the package."""
    files = {
        "__init__.py": """
            from .ops.scale import scale_kernel as exported_scale
            from .utils import *
            """,
        "consts.py": """
            import triton.language as tl

            BLOCK = 128
            SCALE = 2.0
            ACC_DTYPE = tl.float32
            """,
        "utils/__init__.py": """
            from .tl_math import fast_exp as fexp
            from .tl_math import *
            """,
        "utils/tl_math.py": """
            import triton
            import triton.language as tl

            __all__ = ["twice"]


            @triton.jit
            def fast_exp(x):
                return tl.exp(x)


            @triton.jit
            def twice(x):
                return x * 2
            """,
        "runtime/__init__.py": "",
        "runtime/tl_extra.py": """
            import triton.language as tl

            exp2 = tl.exp2
            """,
        "ops/__init__.py": "",
        "ops/softmax.py": """
            try:
                import triton
                import triton.language as tl
            except ImportError:
                triton = None

            from tilelib.consts import ACC_DTYPE, BLOCK
            from ..runtime import tl_extra as ext
            from ..utils import fexp, twice


            @triton.jit
            def softmax_kernel(x_ptr, y_ptr, n):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                mask = offs < n
                x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(ACC_DTYPE)
                e = fexp(x - tl.max(x, axis=0)) + ext.exp2(x) * 0.0
                tl.store(y_ptr + offs, twice(e / tl.sum(e, axis=0)), mask=mask)


            def softmax(x, y):
                softmax_kernel[(x.numel() // BLOCK,)](x, y, x.numel())
            """,
        "ops/ct_helpers.py": """
            import cuda.tile as ct

            from ..consts import SCALE

            ACC = ct.float32


            def scaled_load(a, i, n):
                return ct.astype(ct.load(a, index=(i,), shape=(n,)), ACC) * SCALE
            """,
        "ops/scale.py": """
            try:
                import cuda.tile as ct
            except ImportError:
                ct = None

            from . import ct_helpers
            from ..consts import BLOCK

            ConstInt = ct.Constant[int]


            @ct.kernel
            def scale_kernel(x, y, TILE: ConstInt):
                t = ct_helpers.scaled_load(x, ct.bid(0), TILE) + BLOCK
                ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, y.dtype))
            """,
        "backends/_ascend/__init__.py": "",
        "backends/_ascend/softmax.py": """
            import triton
            import triton.language as tl


            @triton.jit
            def npu_softmax_kernel(x_ptr, n):
                tl.store(x_ptr + tl.arange(0, 16), tl.zeros((16,), tl.float32))
            """,
        "fused_ops.py": """
            import torch_npu
            import triton
            import triton.language as tl


            @triton.jit
            def npu_fill_kernel(x_ptr):
                tl.store(x_ptr + tl.arange(0, 16), tl.zeros((16,), tl.float32))
            """,
    }
    return {rel: planted(markers, rel.replace("/", "_")) + textwrap.dedent(text).lstrip("\n")
            for rel, text in files.items()}


def write_package(parent: Path, markers: Path) -> Path:
    """The package as a folder `parent/tilelib`."""
    root = parent / NAME
    for rel, text in modules(markers).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def write_wheel(folder: Path, markers: Path) -> Path:
    """The package as a wheel (its modules and a dist-info), built with zipfile."""
    wheel = folder / f"{NAME}-{VERSION}-py3-none-any.whl"
    dist = f"{NAME}-{VERSION}.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        for rel, text in modules(markers).items():
            z.writestr(f"{NAME}/{rel}", text)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return wheel
