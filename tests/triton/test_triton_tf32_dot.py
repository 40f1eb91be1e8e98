"""`tl.dot` of f32 tiles in tf32 (Triton's default input precision): Triton hands the f32 bits to the tensor
cores unconverted (`mma.sync`/`wgmma` .tf32 read only the top 19 bits), so the port drops the low 13
mantissa bits of each input before the tf32 mma; rounding them to nearest instead differs by up to one tf32
ulp per product, which a dot of large terms that cancel shows."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import Let, Lit, Ref, walk
from tileport.model.ops import OpKind

SOURCE = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def tf32_dot_truncation_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        m = tl.arange(0, BM)
        n = tl.arange(0, BN)
        k = tl.arange(0, BK)
        a = tl.load(a_ptr + m[:, None] * BK + k[None, :]).to(tl.float32)
        b = tl.load(b_ptr + k[:, None] * BN + n[None, :]).to(tl.float32)
        tl.store(c_ptr + m[:, None] * BN + n[None, :], tl.dot(a, b))
""")


def _tf32(x: np.ndarray, truncate: bool) -> np.ndarray:
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    if not truncate:
        bits = bits + 0xFFF + ((bits >> 13) & 1)
    return (bits & 0xFFFFE000).astype(np.uint32).view(np.float32)


def test_mma_inputs_keep_the_top_19_bits(tmp_path):
    path = tmp_path / "dot.py"
    path.write_text(SOURCE)
    tr = translate_file(str(path), naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    lets = {s.name: s.op for s in walk(k.body) if isinstance(s, Let)}
    (mma,) = [op for op in lets.values() if op.kind == OpKind.MMA]
    for operand in mma.args[:2]:
        conv = lets[operand.name]  # f32 -> tf32 of the masked bits
        assert conv.kind == OpKind.ASTYPE and str(operand.ty.dtype) == "tf32"
        masked = lets[lets[conv.args[0].name].args[0].name]  # bitcast back to f32 of `bits & mask`
        assert masked.kind == OpKind.BINARY and masked.attr("op") == "and", masked
        mask = [a for a in masked.args if not isinstance(a, Ref) or a.name not in lets
                or lets[a.name].kind != OpKind.BITCAST]
        values = {a.value if isinstance(a, Lit) else lets[a.name].args[0].value for a in mask}
        assert values == {-(1 << 13)}, values


@pytest.mark.cargo
def test_port_drops_the_low_bits_in_the_interpreter(tmp_path):
    """The port's Tile IR in the interpreter equals a dot of truncated inputs, not of rounded ones."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    from tileport.capture import generated_bytecode
    from tileport.ops.spec import Capture
    from tileport.runtime.library import KernelLibrary, build
    from tileport.tileir import read_module
    from tileport.tileir.interp import Array, run_kernel
    from tileport.translate import translate

    src = tmp_path / "dot.py"
    src.write_text(SOURCE)
    crate = tmp_path / "crate"
    assert translate([str(src)], crate, crate="tileport_tf32_dot").ok
    shutil.copy(Path(__file__).resolve().parents[2] / "rust" / "Cargo.lock", crate / "Cargo.lock")
    lib = KernelLibrary(build(crate, "dev"), crate / "kernels.json")
    bm, bn, bk = 16, 16, 32
    cap = Capture("tf32_dot_truncation_kernel", {"a_ptr": ("float32", 2), "b_ptr": ("float32", 2),
                                                 "c_ptr": ("float32", 2)}, {}, {"BM": bm, "BN": bn, "BK": bk})
    module = read_module(generated_bytecode(lib, cap)[1])
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((bm, bk)) * 8).astype(np.float32)
    b = rng.standard_normal((bk, bn)).astype(np.float32)
    out = run_kernel(module, [("a_ptr", Array(a, "f32")), ("b_ptr", Array(b, "f32")),
                              ("c_ptr", Array(np.zeros((bm, bn), np.float32), "f32"))], grid=(1, 1, 1))["c_ptr"]
    truncated, rounded = (_tf32(a, t).astype(np.float64) @ _tf32(b, t).astype(np.float64) for t in (True, False))
    np.testing.assert_allclose(out, truncated, rtol=1e-5, atol=1e-4)
    assert np.abs(out - rounded).max() > 1e-3  # the two tf32 conversions are told apart on these inputs
