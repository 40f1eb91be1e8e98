"""In-kernel tensor descriptors (`tl.make_tensor_descriptor` with `.load`/`.store` and the
`tl.load_tensor_descriptor`/`tl.store_tensor_descriptor` forms) lower like bounds-checked block pointers:
partition views of the base pointer's array, tiles of the block shape, zero (or NaN) padding."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"
SCALE = """
@triton.jit
def desc_scale_kernel(x_ptr, y_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[stride_m, 1], block_shape=[BLOCK_M, BLOCK_N])
    y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [stride_m, 1], [BLOCK_M, BLOCK_N])
    x = x_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N])
    y_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], x * 2.0)
"""
MATMUL = """
@triton.jit
def desc_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load_tensor_descriptor(a_desc, [pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc += tl.dot(a, b)
    tl.store_tensor_descriptor(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "desc.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path


def translated(tmp_path: Path, body: str):
    return translate_file(str(write(tmp_path, body)), naming=RUST_NAMING)


def entry(tmp_path: Path, body: str, name: str) -> str:
    report = translate([str(write(tmp_path, body))], None, crate="tileport_desc_tests", faithful=True)
    assert all(r.ok for r in report.results), [str(r.diagnostic) for r in report.results]
    text = report.files["src/desc.rs"]
    start = text.index(f"pub unsafe fn {name}")
    return text[start:text.index("\n    }\n", start)]


def test_descriptor_accesses_are_zero_padded_partition_views(tmp_path):
    tr = translated(tmp_path, SCALE)
    assert tr.diagnostics == []
    (k,) = tr.module.kernels
    assert {p.name: p.ty.rank for p in k.params if p.is_array} == {"x_ptr": 2, "y_ptr": 2}
    notes = " ".join(k.notes)
    assert "`x_ptr`: a 2-D array view [extent M stride stride_m, extent N stride 1]" in notes
    text = entry(tmp_path, SCALE, "desc_scale_kernel")
    assert "load_view_tko" in text and "store_view" in text and "load_ptr_tko" not in text


def test_descriptor_tiles_and_padding_in_rust(tmp_path):
    report = translate([str(write(tmp_path, SCALE))], None, crate="tileport_desc_tests", faithful=True)
    text = report.files["src/desc.rs"]
    assert "padding::Zero" in text  # out-of-bounds elements read as zero, as Triton's descriptors do
    assert "Tile<E, { [BLOCK_M, BLOCK_N] }>" in text


def test_descriptor_loop_and_function_forms(tmp_path):
    tr = translated(tmp_path, MATMUL)
    assert tr.diagnostics == []
    notes = " ".join(tr.module.kernels[0].notes)
    for view in ("`a_ptr`: a 2-D array view [extent M stride K, extent K stride 1]",
                 "`b_ptr`: a 2-D array view [extent K stride N, extent N stride 1]",
                 "`c_ptr`: a 2-D array view [extent M stride N, extent N stride 1]"):
        assert view in notes
    text = entry(tmp_path, MATMUL, "desc_matmul_kernel")
    assert text.count("load_view_tko") == 2 and "store_view" in text and "load_ptr_tko" not in text


def test_nan_padding(tmp_path):
    body = SCALE.replace("block_shape=[BLOCK_M, BLOCK_N])", "block_shape=[BLOCK_M, BLOCK_N], padding_option=\"nan\")")
    report = translate([str(write(tmp_path, body))], None, crate="tileport_desc_tests", faithful=True)
    assert all(r.ok for r in report.results)
    assert "padding::Nan" in report.files["src/desc.rs"]


def diagnostic(tmp_path, body: str):
    tr = translated(tmp_path, body)
    assert len(tr.diagnostics) == 1, tr.diagnostics
    return tr.diagnostics[0]


def test_offsets_not_multiples_of_the_block_are_refused_with_a_location(tmp_path):
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, M, N, BLOCK: tl.constexpr):
            desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BLOCK, BLOCK])
            x = desc.load([tl.program_id(0) * BLOCK + 1, 0])
            desc.store([0, 0], x)
    """)
    assert d.construct == "tensor_descriptor.load" and d.loc.line == 7
    assert "tensor descriptor access is not a partition" in d.message and "multiples of the block shape" in d.message


def test_last_stride_must_be_one(tmp_path):
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, M, N, s, BLOCK: tl.constexpr):
            desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, s], [BLOCK, BLOCK])
            desc.store([0, 0], desc.load([0, 0]))
    """)
    assert d.construct == "tl.make_tensor_descriptor" and d.loc.line == 6 and "last stride" in d.message


def test_wrong_offset_count_and_host_descriptors_are_located(tmp_path):
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, M, N, BLOCK: tl.constexpr):
            desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BLOCK, BLOCK])
            desc.store([0], desc.load([0, 0]))
    """)
    assert d.construct == "tensor_descriptor.store" and "one offset per block dimension" in d.message
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_desc, y_ptr, BLOCK: tl.constexpr):
            x = x_desc.load([0, 0])
            tl.store(y_ptr + tl.arange(0, BLOCK), x)
    """)
    assert d.construct == "tensor descriptor" and d.loc.line == 5 and "x_desc.block_shape" in d.hint  # the param


@pytest.mark.cargo
def test_descriptor_kernels_compile_through_stage_b(tmp_path):
    """`tileport port --until B --no-gpu`: the ports build, and their Tile IR loads zero-padded partition views."""
    src = write(tmp_path, SCALE + "\n" + MATMUL)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "desc_scale_kernel": [{"x_ptr": "float32", "y_ptr": "float32", "BLOCK_M": 32, "BLOCK_N": 64}],
        "desc_matmul_kernel": [{"a_ptr": "float16", "b_ptr": "float16", "c_ptr": "float16", "BLOCK_M": 64,
                                "BLOCK_N": 64, "BLOCK_K": 32}]}))
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "tileport.cli", "port", str(src), "--config", str(config), "--until", "B",
                    "--no-gpu", "--out", str(out)], check=False, capture_output=True, text=True, timeout=600)
    for kernel, loads in (("desc_scale_kernel", 1), ("desc_matmul_kernel", 2)):
        verdict = json.loads((out / kernel / "B" / "verdict.json").read_text())
        assert verdict["verdict"] == "COMPILED", verdict["reason"]
        (ir,) = (out / kernel / "B" / "generated").glob("*.tileir")
        text = ir.read_text()
        assert text.count("load_view_tko") == loads and "padding_value = zero" in text


def test_misused_descriptors_are_located(tmp_path):
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, M, N, BLOCK: tl.constexpr):
            x = tl.load_tensor_descriptor(x_ptr, [0, 0])
            tl.store(x_ptr + tl.arange(0, BLOCK), x)
    """)
    assert d.construct == "tensor_descriptor.load" and d.loc.line == 6 and "is not a tensor descriptor" in d.message
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, M, N, BLOCK: tl.constexpr):
            desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BLOCK, BLOCK])
            for i in range(0, N, BLOCK):
                desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BLOCK, BLOCK], padding_option="nan")
                desc.store([0, i], desc.load([0, i]))
    """)
    assert d.construct == "pointer" and d.loc.line == 8


def test_a_block_pointer_is_no_descriptor(tmp_path):
    # regression: describing a block pointer in a diagnostic was an internal error (`Ptr` has no name)
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, M, N, BLOCK: tl.constexpr):
            bp = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BLOCK, BLOCK), (1, 0))
            tl.store(bp, tl.load_tensor_descriptor(bp, [0, 0]))
    """)
    assert d.construct == "tensor_descriptor.load" and d.loc.line == 7
    assert "a block pointer into `x_ptr` is not a tensor descriptor" in d.message
