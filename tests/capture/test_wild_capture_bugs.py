"""Capture bugs the wild corpus showed with hand-given values, each on a kernel written the same way.

With `--config`, stage A stopped at "kernel definitions failed to evaluate: name 'torch' is not
defined" (torch dtypes and host code around the kernels), "Undefined variable RMd used" (a rounding
mode imported under an alias, also from cuda.tile's private module) and "Undefined variable np used"
(`dtype=np.int32` inside a kernel); and, with a probe, "uses `cp`" (cupy's `cp.float32`, `-cp.inf`
in a kernel, as numpy's). The module rebuilt from the AST must compile in cuTile Python.
"""

from __future__ import annotations

import pytest

from tileport.capture import disassemble, reference_bytecode
from tileport.capture.source import sanitize
from tileport.ops.spec import Capture

TORCH_HOST = '''\
import cuda.tile as ct
import torch

ConstInt = ct.Constant[int]
ACC = torch.float32
_cache = {}


def sm_count():
    return torch.cuda.get_device_properties(0).multi_processor_count


@ct.kernel
def rows_kernel(x, y, TILE: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,)).astype(torch.float32)
    ct.store(y, index=(ct.bid(0),), tile=(t * 2.0).astype(ACC))


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ct.launch(torch.cuda.current_stream(), (sm_count(),), rows_kernel, (x, x, 64))
'''

ROUNDING_ALIAS = '''\
import cuda.tile as ct
from cuda.tile._numeric_semantics import RoundingMode as RMd
from cuda.tile import RoundingMode as RM2

ConstInt = ct.Constant[int]


@ct.kernel
def recip_kernel(x, y, TILE: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    r = ct.truediv(1.0, t, flush_to_zero=True, rounding_mode=RMd.APPROX)
    ct.store(y, index=(ct.bid(0),), tile=ct.truediv(r, t, rounding_mode=RM2.APPROX))
'''

NUMPY_DTYPE = '''\
import cuda.tile as ct
import numpy as np

ConstInt = ct.Constant[int]


@ct.kernel
def iota_kernel(y, TILE: ConstInt):
    offs = ct.bid(0) * TILE + ct.arange(TILE, dtype=np.int32)
    ct.store(y, index=(ct.bid(0),), tile=offs.astype(np.float32))
'''

CUPY_DTYPE = '''\
import cuda.tile as ct
import cupy as cp

ConstInt = ct.Constant[int]


@ct.kernel
def fill_kernel(y, TILE: ConstInt):
    m = ct.full((TILE,), -cp.inf, dtype=cp.float32)
    ct.store(y, index=(ct.bid(0),), tile=ct.maximum(m, ct.full((TILE,), 0.0, dtype=cp.float32)))
'''

CASES = [
    (TORCH_HOST, Capture("rows_kernel", {"x": ("float16", 1), "y": ("float32", 1)}, {}, {"TILE": 64})),
    (ROUNDING_ALIAS, Capture("recip_kernel", {"x": ("float32", 1), "y": ("float32", 1)}, {}, {"TILE": 64})),
    (NUMPY_DTYPE, Capture("iota_kernel", {"y": ("float32", 1)}, {}, {"TILE": 64})),
    (CUPY_DTYPE, Capture("fill_kernel", {"y": ("float32", 1)}, {}, {"TILE": 64})),
]


@pytest.mark.parametrize("text,capture", CASES, ids=["torch-host", "rounding-alias", "numpy-dtype", "cupy-dtype"])
def test_wild_style_kernel_captures(tmp_path, text, capture):
    path = tmp_path / f"{capture.kernel}.py"
    path.write_text(text)
    s = sanitize(path, text)
    assert s.kernels == [capture.kernel] and not s.problems, s.problems
    assert "torch" not in s.source and "np." not in s.source and "cp." not in s.source
    ir = disassemble(reference_bytecode(path, capture))
    assert capture.kernel in ir


# A name the installed cuda.tile lacks, imported for host code (an autotuner) or for one kernel only: the
# rebuilt module imported every name of the file, so one failed import stopped every kernel's capture.
UNUSED_IMPORTS = '''\
import cuda.tile as ct
from cuda.tile import something_new_in_a_later_release
from cuda.tile.tune import exhaustive_search as search
from cuda.tile import RoundingMode as RM

ConstInt = ct.Constant[int]
TUNER = search


@ct.kernel
def scale_kernel(x, y, TILE: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=ct.truediv(t, 3.0, rounding_mode=RM.APPROX))


@ct.kernel
def new_kernel(x, TILE: ConstInt):
    something_new_in_a_later_release(x)


def tune(x, y):
    return TUNER(scale_kernel, x, y)
'''


def test_imports_the_kernels_do_not_use_are_left_out(tmp_path):
    path = tmp_path / "unused_imports.py"
    path.write_text(UNUSED_IMPORTS)
    s = sanitize(path, UNUSED_IMPORTS, available={"RoundingMode", "exhaustive_search"})
    assert "something_new" not in s.source and "search" not in s.source and "TUNER" not in s.source
    assert "from cuda.tile import RoundingMode as RM" in s.source
    assert s.kernels == ["scale_kernel"]
    problem = s.problems["new_kernel"]
    assert problem.construct == "import" and (problem.loc.line, problem.loc.col) == (18, 5), problem
    assert "something_new_in_a_later_release" in problem.message
    capture = Capture("scale_kernel", {"x": ("float32", 1), "y": ("float32", 1)}, {}, {"TILE": 64})
    assert "scale_kernel" in disassemble(reference_bytecode(path, capture))


FACTORIES = '''\
import cuda.tile as ct
import torch

ConstInt = ct.Constant[int]


def make_add(occupancy, bias):
    STEP = 2 * 4

    @ct.kernel(occupancy=occupancy)
    def add_kernel(x, y, TILE: ConstInt):
        t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
        ct.store(y, index=(ct.bid(0),), tile=t + bias * STEP)
    return add_kernel


def make_mul(occupancy):
    @ct.kernel(occupancy=occupancy)
    @torch.compiler.disable
    def mul_kernel(x, y, TILE: ConstInt):
        t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
        ct.store(y, index=(ct.bid(0),), tile=t * 3.0)
    return mul_kernel


def make_nested(flag):
    if flag:
        @ct.kernel
        def nested_kernel(x, TILE: ConstInt):
            pass
        return nested_kernel


ADD = make_add(4, bias=0.5)
MUL = make_mul(occupancy=2)
'''


def test_kernels_built_by_factories_capture_with_their_closures(tmp_path):
    """A kernel built by a factory (closing over the factory's arguments, the same in every call of the file,
    and its constant locals) had no capture ("has no kernel"): the factory is rebuilt as a generated
    function on its own lines and called with those values; two factories may use the same names."""
    path = tmp_path / "factories.py"
    path.write_text(FACTORIES)
    s = sanitize(path, FACTORIES)
    assert s.kernels == ["add_kernel", "mul_kernel"], s.problems
    assert s.problems["nested_kernel"].construct == "factory"
    assert "(add_kernel,) = make_add(occupancy=4, bias=0.5)" in s.source
    lines = s.source.splitlines()
    assert lines[10 - 1] == "    @ct.kernel(occupancy=4)" and lines[8 - 1] == "    STEP = 8"
    for kernel, hint in (("add_kernel", "occupancy = 4"), ("mul_kernel", "occupancy = 2")):
        ir = disassemble(reference_bytecode(path, Capture(kernel, {"x": ("float32", 1), "y": ("float32", 1)}, {},
                                                          {"TILE": 64})))
        assert f"optimization_hints=<default = {{{hint}}}>" in ir, ir
    add = disassemble(reference_bytecode(path, Capture("add_kernel", {"x": ("float32", 1), "y": ("float32", 1)},
                                                       {}, {"TILE": 64})))
    assert "constant <f32: 4.000000e+00>" in add, add  # bias * STEP = 0.5 * 8, folded from the closure


def test_a_kernel_of_a_package_binds_its_sibling_helper_and_imports_only_used_names(tmp_path):
    """The rebuilt module binds the helper and constant taken from a sibling module, and still leaves out a
    cuda.tile import no kernel uses and the host function that launches the kernel."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "utils.py").write_text("import cuda.tile as ct\n\nSCALE = 2\n\n\ndef double(t):\n    return t + t\n")
    text = ("import cuda.tile as ct\nfrom cuda.tile import something_new_in_a_later_release\n"
            "from .utils import SCALE, double\n\n\n@ct.kernel\ndef k(x, TILE: ct.Constant[int]):\n"
            "    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))\n"
            "    ct.store(x, index=(ct.bid(0),), tile=double(t) * SCALE)\n\n\n"
            "def launch(x):\n    return something_new_in_a_later_release(k, x)\n")
    path = tmp_path / "kernels.py"
    path.write_text(text)
    s = sanitize(path, text, available={"RoundingMode"})
    assert s.kernels == ["k"] and not s.problems
    assert s.imports == {"double": (str(tmp_path / "utils.py"), "double")} and "SCALE = 2" in s.source
    assert "something_new" not in s.source and "def launch" not in s.source
