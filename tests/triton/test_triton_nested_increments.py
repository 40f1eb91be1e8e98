"""A pointer that a nested loop advances and the enclosing loop never resets (`for part: for j: p += step`)
carries on from one iteration of the enclosing loop to the next: each one starts `trips(inner) * step`
further on. Where that advance cannot be modelled (the inner trip count changes with the outer index) the
increment is a located diagnostic, never a pointer that restarts at every outer iteration."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import For, Let, Ref, walk
from tileport.model.ops import OpKind

SOURCE = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def split_sum_kernel(x_ptr, y_ptr, out_ptr, n, stride_xk, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
        offs_m = tl.arange(0, BLOCK_M)
        offs_k = tl.arange(0, BLOCK_K)
        x_ptrs = x_ptr + offs_m[:, None] * n + offs_k[None, :] * stride_xk
        acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
        for part in range(4):
            y_ptrs = y_ptr + offs_m[:, None] * BLOCK_K + offs_k[None, :]
            for j in range(0, tl.cdiv(n // 4, BLOCK_K)):
                acc += tl.load(x_ptrs).to(tl.float32) * (part + 1) + tl.load(y_ptrs).to(tl.float32)
                x_ptrs += BLOCK_K * stride_xk
                y_ptrs += BLOCK_M * BLOCK_K
        tl.store(out_ptr + offs_m[:, None] * BLOCK_K + offs_k[None, :], acc)
""")

BLOCK_POINTER = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def split_block_ptr_kernel(x_ptr, out_ptr, n, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
        x_bp = tl.make_block_ptr(x_ptr, (BLOCK_M, n), (n, 1), (0, 0), (BLOCK_M, BLOCK_K), (1, 0))
        acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
        for part in range(4):
            for j in range(2):
                acc += tl.load(x_bp).to(tl.float32) * (part + 1)
                x_bp = tl.advance(x_bp, (0, BLOCK_K))
        tl.store(out_ptr + tl.arange(0, BLOCK_M)[:, None] * BLOCK_K + tl.arange(0, BLOCK_K)[None, :], acc)
""")

TRIANGULAR = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def triangular_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x_ptrs = x_ptr + offs
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(4):
            for j in range(i):
                acc += tl.load(x_ptrs)
                x_ptrs += BLOCK
        tl.store(out_ptr + offs, acc)
""")


def _translate(tmp_path, source: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return translate_file(str(path), naming=RUST_NAMING)


def _deps(kernel, names: set[str]) -> set[str]:
    """The values `names` are computed from, transitively (through the kernel's lets)."""
    lets = {s.name: s.op for s in walk(kernel.body) if isinstance(s, Let)}
    todo, seen = list(names), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        op = lets.get(n)
        todo += [a.name for a in (op.args if op is not None else ()) if isinstance(a, Ref)]
    return seen


@pytest.mark.parametrize("source", [SOURCE, BLOCK_POINTER], ids=["pointer", "block_pointer"])
def test_inner_loop_pointer_starts_where_the_last_outer_iteration_left_it(tmp_path, source):
    tr = _translate(tmp_path, source, "nested")
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    outer = next(s for s in walk(k.body) if isinstance(s, For))
    (x_load,) = [s.op for s in walk(k.body) if isinstance(s, Let) and s.op.kind == OpKind.LOAD
                 and s.op.args[0] == Ref("x_ptr", s.op.args[0].ty)]
    index = {a.name for a in x_load.args[1:] if isinstance(a, Ref)}
    assert outer.index in _deps(k, index), "x_ptr's tile index ignores the outer loop: it restarts every iteration"


def test_an_advance_that_changes_with_the_outer_loop_is_a_diagnostic(tmp_path):
    tr = _translate(tmp_path, TRIANGULAR, "triangular")
    assert len(tr.diagnostics) == 1, [str(d) for d in tr.diagnostics]
    d = tr.diagnostics[0]
    assert d.construct == "pointer" and "x_ptrs" in str(d) and d.loc.line == 14, str(d)


@pytest.mark.cargo
def test_port_matches_numpy_in_the_interpreter(tmp_path):
    """The port's Tile IR, run by the interpreter, against the kernel's semantics written with NumPy."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    from tileport.capture import generated_bytecode
    from tileport.ops.spec import Capture
    from tileport.runtime.library import KernelLibrary, build
    from tileport.tileir import read_module
    from tileport.tileir.interp import Array, Scalar, run_kernel
    from tileport.translate import translate

    src = tmp_path / "nested.py"
    src.write_text(SOURCE)
    crate = tmp_path / "crate"
    assert translate([str(src)], crate, crate="tileport_nested_increments").ok
    shutil.copy(Path(__file__).resolve().parents[2] / "rust" / "Cargo.lock", crate / "Cargo.lock")
    lib = KernelLibrary(build(crate, "dev"), crate / "kernels.json")
    bm, bk, trips = 16, 16, 2
    n = 4 * bk * trips
    cap = Capture("split_sum_kernel", {"x_ptr": ("float32", 2), "y_ptr": ("float32", 2), "out_ptr": ("float32", 2)},
                  {"n": "int32", "stride_xk": "int32"}, {"BLOCK_M": bm, "BLOCK_K": bk})
    module = read_module(generated_bytecode(lib, cap)[1])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((bm, n)).astype(np.float32)
    y = rng.standard_normal((trips * bm, bk)).astype(np.float32)
    out = run_kernel(module, [("x_ptr", Array(x, "f32")), ("y_ptr", Array(y, "f32")),
                              ("out_ptr", Array(np.zeros((bm, bk), np.float32), "f32")),
                              ("n", Scalar(n, "i32")), ("stride_xk", Scalar(1, "i32"))], grid=(1, 1, 1))["out_ptr"]
    ref = sum(x[:, (part * trips + j) * bk:(part * trips + j + 1) * bk] * (part + 1) + y[j * bm:(j + 1) * bm]
              for part in range(4) for j in range(trips))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
