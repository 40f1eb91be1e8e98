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
