"""The source side of the Liger check: tileport.gpu.triton_source rebuilds a Liger-style kernel file whose
libdevice functions are imported under a Triton-version switch (`if <host test>: try/except import ...
else: import ...`), which 12 of Liger-Kernel 0.8.5's CUDA kernels need (rsqrt, tanh). The file text is our
own, in the same form."""

from __future__ import annotations

from tileport.gpu.triton_source import sanitize

SWITCHED = '''import operator

import triton
import triton.language as tl

from mypkg.utils import compare_version

if compare_version("triton", operator.ge, "3.0.0"):
    try:
        from triton.language.extra.libdevice import rsqrt
    except ModuleNotFoundError:  # older layouts
        from triton.language.extra.cuda.libdevice import rsqrt
else:  # Triton 2
    from triton.language.math import rsqrt


@triton.jit
def norm_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * rsqrt(tl.sum(x * x) / n), mask=offs < n)
'''


def test_an_import_switch_is_rebuilt_as_try_except():
    m = sanitize("liger_style.py", SWITCHED)
    assert m.problems == {} and m.functions == ["norm_kernel"]
    lines = m.source.splitlines()
    assert lines[7] == "try:" and lines[12] == "except ImportError:"  # the `if` and `else:` lines, in place
    assert lines[9].strip() == "from triton.language.extra.libdevice import rsqrt"
    assert "compare_version" not in m.source and "mypkg" not in m.source  # host code is not kept
    compile(m.source, "liger_style.py", "exec")


def test_a_switch_importing_other_packages_or_with_elif_is_not_kept():
    numpy = SWITCHED.replace("    from triton.language.math import rsqrt", "    from numpy import sqrt as rsqrt")
    elif_ = SWITCHED.replace("else:  # Triton 2", "elif True:")
    for text in (numpy, elif_):
        m = sanitize("liger_style.py", text)
        assert "norm_kernel" in m.problems and "`rsqrt` is bound by code tileport does not run" in \
            m.problems["norm_kernel"].message
        assert "try:" not in m.source
