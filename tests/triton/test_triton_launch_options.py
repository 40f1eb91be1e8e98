"""Triton launch options in the port (`frontends/triton/launch_options.py`): the launches' num_warps become the
entry's `num_worker_warps` hint (4 or 8, what tileiras 13.4 compiles), from the recorded launches through
`tileport port --launches`; matrix-multiply kernels and kernels without launches get none."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.base import KernelConfig
from tileport.frontends.triton import translate_file
from tileport.frontends.triton.launch_options import worker_warps
from tileport.launches.spec import parse_spec
from tileport.pipeline.targets import file_targets

SOURCE = """
import triton
import triton.language as tl


@triton.jit
def row_kernel(y_ptr, x_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row * stride + cols, x * 2.0, mask=cols < n_cols)


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))
"""
ROW = {"y_ptr": "f32", "x_ptr": "f32", "BLOCK": 2048}
MM = {"a_ptr": "f16", "b_ptr": "f16", "c_ptr": "f32", "BM": 64, "BN": 64, "BK": 32}


def write(tmp_path: Path) -> Path:
    path = tmp_path / "rows.py"
    path.write_text(textwrap.dedent(SOURCE).lstrip("\n"))
    return path


def warps(tmp_path: Path, kernel: str, config: dict, *options: dict):
    cfg = {kernel: KernelConfig((config,), launch_options=tuple(options))}
    tr = translate_file(str(write(tmp_path)), cfg, [kernel], naming=RUST_NAMING)
    assert tr.diagnostics == [], [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    return k.hints.get("num_worker_warps")


def test_num_warps_map_to_the_worker_warps_tileiras_compiles():
    assert worker_warps([{"num_warps": 8}]) == 8
    assert worker_warps([{"num_warps": 4}, {"num_warps": 32}]) == 8  # the largest, at most 8
    assert worker_warps([{}]) == 4  # Triton's default
    assert worker_warps([{"num_warps": 2}]) is None  # tileiras 13.4 compiles no fewer than 4
    assert worker_warps([]) is None


def test_launch_options_reach_the_entry_hint(tmp_path):
    assert warps(tmp_path, "row_kernel", ROW, {"num_warps": 16, "num_stages": 2}) == 8
    assert warps(tmp_path, "row_kernel", ROW, {"num_warps": 4}) == 4
    assert warps(tmp_path, "row_kernel", ROW) is None
    assert warps(tmp_path, "mm_kernel", MM, {"num_warps": 8}) is None


def test_recorded_options_reach_the_translator(tmp_path):
    path = write(tmp_path)
    array = {"kind": "array", "dtype": "float32", "shape": [4, 2048], "strides": [2048, 1]}
    record = {"framework": "triton", "kernel": "row_kernel", "file": str(path), "grid": [4, 1, 1],
              "options": {"num_warps": 8},
              "args": [{"name": "y_ptr", **array}, {"name": "x_ptr", **array},
                       {"name": "stride", "kind": "scalar", "dtype": "int32", "value": 2048},
                       {"name": "n_cols", "kind": "scalar", "dtype": "int32", "value": 2048},
                       {"name": "BLOCK", "kind": "const", "value": 2048}]}
    records = parse_spec({"format": "tileport-launches", "version": 1, "launches": [record]})
    (target,) = file_targets(path, "row_kernel", spec_records=records)
    assert target.configs["row_kernel"].launch_options == ({"num_warps": 8},)
