"""The element type of Triton reductions in the port (Triton 3.6, triton/language/standard.py): tl.max / tl.min
of f16/bf16 reduce in f32 and return f32 (so `x - tl.max(x)` is f32 arithmetic), tl.cumsum of bf16 scans in
f32, tl.sum of f16/bf16 stays in its type, and sums of narrow ints widen to 32 bits keeping signedness (bool
unsigned). Checked on the kernel model and on the generated Rust (no GPU, no cargo)."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import Let, walk
from tileport.translate import translate

SOURCE = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def red_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        m = tl.max(x, axis=0)
        lo = tl.min(x, axis=0)
        s = tl.sum(x, axis=0)
        tl.store(y_ptr + offs, (x - m) + (x - lo) + s)


    @triton.jit
    def scan_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0))


    @triton.jit
    def count_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, tl.sum(x, axis=0) + tl.max(x, axis=0) + tl.cumsum(x, 0))
""")


def kernel(tmp_path, name: str, x_dtypes: tuple[str, ...], y_dtype: str = "float32"):
    path = tmp_path / "red.py"
    path.write_text(SOURCE)
    configs = {name: SimpleNamespace(configs=tuple({"x_ptr": d, "y_ptr": y_dtype} for d in x_dtypes),
                                     pinned={}, ranks={})}
    tr = translate_file(str(path), configs, only=[name], naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    return k


def ops(k, kind: str) -> list:
    return [s.op for s in walk(k.body) if isinstance(s, Let) and s.op.kind == kind]


@pytest.mark.parametrize("x_dtype", ["bfloat16", "float16"])
def test_max_and_min_of_half_floats_reduce_in_f32_and_the_difference_is_f32(tmp_path, x_dtype):
    """Regression: the port kept tl.max / tl.min of a bf16 tile in bf16, so `x - tl.max(x)` (softmax's shift)
    rounded to bf16 where Triton subtracts in f32."""
    half = {"bfloat16": "bf16", "float16": "f16"}[x_dtype]
    k = kernel(tmp_path, "red_kernel", (x_dtype,))
    reduced = {op.attr("fn"): str(op.ty.dtype) for op in ops(k, "reduce")}
    assert reduced == {"max": "f32", "min": "f32", "sum": half}, reduced  # the sum stays in the input type
    subs = [str(op.ty.dtype) for op in ops(k, "binary") if op.attr("op") == "sub"]
    assert subs == ["f32", "f32"], subs


def test_generic_kernel_widens_per_configuration(tmp_path):
    k = kernel(tmp_path, "red_kernel", ("bfloat16", "float32"))
    reduced = {op.attr("fn"): str(op.ty.dtype) for op in ops(k, "reduce")}
    assert reduced == {"max": "f32", "min": "f32", "sum": "E"}, reduced


def test_cumsum_of_bf16_scans_in_f32_and_of_f16_in_f16(tmp_path):
    """Regression: Triton's tl.cumsum promotes bf16 to f32 before scanning; the port scanned in bf16."""
    (scan,) = ops(kernel(tmp_path, "scan_kernel", ("bfloat16",)), "scan_sum")
    assert scan.ty.dtype == "f32"
    (scan,) = ops(kernel(tmp_path, "scan_kernel", ("float16",), "float16"), "scan_sum")
    assert scan.ty.dtype == "f16"


@pytest.mark.parametrize("x_dtype, summed, maxed", [("uint8", "u32", "i32"), ("int8", "i32", "i32"),
                                                     ("int16", "i32", "i32"), ("int32", "i32", "i32")])
def test_narrow_int_reductions_widen_as_triton(tmp_path, x_dtype, summed, maxed):
    """Regression: a u8 sum was widened to i32 (Triton: u32, `_pick_sum_dtype` keeps the signedness)."""
    k = kernel(tmp_path, "count_kernel", (x_dtype,), "int64")
    reduced = {op.attr("fn"): str(op.ty.dtype) for op in ops(k, "reduce")}
    assert reduced == {"sum": summed, "max": maxed}, reduced
    (scan,) = ops(k, "scan_sum")
    assert scan.ty.dtype == summed


def test_rust_reduces_the_max_of_a_generic_tile_in_f32(tmp_path):
    path = tmp_path / "red.py"
    path.write_text(SOURCE)
    r = translate([str(path)], None, faithful=True)
    text = r.files["src/red.rs"]
    body = text[text.index("fn red_kernel"):text.index("fn scan_kernel")] if "fn scan_kernel" in text else \
        text[text.index("fn red_kernel"):]
    assert "let x_f32: Tile<f32, { [BLOCK] }> = convert_tile(x);" in body
    assert "let m: Tile<f32, { [] }> = reduce_max(x_f32, 0i32);" in body
    assert "let s: Tile<E, { [] }> = reduce_sum(x, 0i32);" in body
