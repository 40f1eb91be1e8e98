"""Triton language constructs beyond loads and stores: atomics, constexpr dtypes and strings, tl.dot's input
precision. Checked on the kernel model and on the generated Rust (no GPU, no cargo)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import walk
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"


def translated(tmp_path: Path, body: str, configs=None):
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path, translate_file(str(path), configs, naming=RUST_NAMING)


def ops(kernel, kind: str):
    return [st.op for st in walk(kernel.body) if getattr(st, "op", None) is not None and st.op.kind == kind]


# ---------------------------------------------------------------- atomics

ATOMICS = """
    @triton.jit
    def dw_kernel(x_ptr, dw_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + tl.program_id(0) * n + offs, mask=mask, other=0.0)
        tl.atomic_add(dw_ptr + offs, x, mask=mask, sem="relaxed")

    @triton.jit
    def total_kernel(x_ptr, total_ptr, lock_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.atomic_add(total_ptr, tl.sum(x))
        old = tl.atomic_xchg(lock_ptr, x.max(0), scope="cta")
        tl.store(total_ptr + 1, old)
        tl.atomic_cas(lock_ptr + 1, 0.0, old, sem="acquire")
"""


def test_atomics_lower_to_model_atomics_with_mask_sem_and_scope(tmp_path):
    _, tr = translated(tmp_path, ATOMICS)
    assert not tr.diagnostics, tr.diagnostics
    k = {k.base_name: k for k in tr.module.kernels}
    (add,) = ops(k["dw_kernel"], "atomic_rmw")
    assert (add.attr("mode"), add.attr("memory_order"), add.attr("memory_scope")) == ("add", "relaxed", "device")
    assert add.attr("has_mask") and len(add.args) == 4  # array, value, offsets, mask
    assert len(add.ty.shape) == 1  # one old value per pointer
    assert "dw_ptr" not in k["dw_kernel"].views  # addressed element-wise: the 1-D buffer
    rmw = ops(k["total_kernel"], "atomic_rmw")
    assert [(o.attr("mode"), o.attr("memory_order"), o.attr("memory_scope")) for o in rmw] == [
        ("add", "acq_rel", "device"), ("xchg", "acq_rel", "block")]  # Triton's defaults: acq_rel, gpu
    assert all(o.ty.shape == () and not o.attr("has_mask") for o in rmw)  # a scalar pointer: one element
    (cas,) = ops(k["total_kernel"], "atomic_cas")
    assert cas.attr("memory_order") == "acquire"
    # xchg / cas have no f16/bf16 form in cutile-rs: the kernel is kept for f32 pointers only
    assert {p.ty.dtype for p in k["total_kernel"].array_params} == {"f32"}


def test_atomics_in_rust_carry_the_mask_and_the_result(tmp_path):
    path, _ = translated(tmp_path, ATOMICS)
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    text = r.files["src/kern.rs"]
    dw = text[text.index("fn dw_kernel"):text.index("fn total_kernel")]
    assert "atomic::AddF" in dw and "ordering::Relaxed" in dw and "scope::Device" in dw
    call = dw[dw.index("atomic_rmw_tko("):]
    assert "Some(dw_ptr_old_mask)" in call[:call.index(")")+200]  # the source's mask, and'ed with the bounds
    total = text[text.index("fn total_kernel"):]
    assert "atomic::Xchg" in total and "scope::TileBlock" in total and "atomic_cas_tko(" in total


def test_atomic_without_a_float_form_is_a_located_dtype_diagnostic(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, n):
            tl.atomic_max(x_ptr, 1.0)
    """)
    (d,) = tr.diagnostics
    assert d.construct == "dtype" and d.loc.line == 6 and "tl.atomic_max" in d.message
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, n):
            tl.atomic_add(x_ptr, 1, sem="seq_cst")
    """)
    (d,) = tr.diagnostics
    assert d.construct == "tl.atomic_add" and "sem='seq_cst'" in d.message
