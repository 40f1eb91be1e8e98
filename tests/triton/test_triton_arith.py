"""Triton's f32 arithmetic in the port: `tl.exp` is ex2.approx.f32(x * log2e) and `/` on f32 tiles is
div.full.f32 (Triton's lowering), so the port asks for the same (`exp` rounding approx, `divf` rounding
full); tl.div_rn and tl.fdiv(.., ieee_rounding=True) stay IEEE, and other dtypes keep the precise forms."""

from __future__ import annotations

import textwrap

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import Let, walk

SOURCE = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def arith_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs).to(tl.float32)
        h = tl.load(x_ptr + offs)
        a = tl.exp(x) / tl.sum(x, axis=0)
        b = tl.div_rn(x, a) + tl.fdiv(x, a, ieee_rounding=True) + tl.fdiv(x, a) + tl.sigmoid(x)
        tl.store(y_ptr + offs, (a + b + tl.exp(h).to(tl.float32) / 3.0).to(y_ptr.dtype.element_ty))
""")


def ops(tmp_path):
    path = tmp_path / "arith.py"
    path.write_text(SOURCE)
    tr = translate_file(str(path), naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    return [s.op for s in walk(k.body) if isinstance(s, Let)], k


def test_exp_and_division_round_as_triton(tmp_path):
    lets, k = ops(tmp_path)
    exps = [(str(op.ty.dtype), op.attr("rounding")) for op in lets if op.kind == "unary" and op.attr("fn") == "exp"]
    # tl.exp(x) on f32, sigmoid's exp(-x) on f32: approx; tl.exp of the input dtype (generic E): precise
    assert sorted(exps, key=str) == sorted([("f32", "approx"), ("f32", "approx"), ("E", None)], key=str), exps
    divs = [op.attr("rounding") for op in lets if op.kind == "binary" and op.attr("op") == "div"]
    # `/` (x2: a, the / 3.0), fdiv(x, a), sigmoid's 1 / (1 + e): full; div_rn and fdiv(ieee_rounding=True): IEEE
    assert sorted(map(str, divs)) == sorted(["full"] * 4 + ["None"] * 2), divs
