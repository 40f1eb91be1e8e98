"""Names the Triton frontend binds: every value the kernel reads is bound (a `let`, a parameter)."""

from __future__ import annotations

import re
import textwrap

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import Ref, walk
from tileport.passes.uses import atoms_of, taken_names
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"


def unbound_reads(kernel) -> set[str]:
    bound = taken_names(kernel) | {p.ident for p in kernel.params}
    return {a.name for st in walk(kernel.body) for a in atoms_of(st) if isinstance(a, Ref)} - bound


def test_an_alias_of_a_rebound_variable_does_not_rename_its_value(tmp_path):
    """Regression: `x = x.to(f32)` left the cast a renameable temporary bound to `x`; `x_f = x` then renamed the
    cast's `let` to `x_f`, and the later reads of `x` named a value no `let` binds (cargo: "cannot find value
    `x_f32` in this scope")."""
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def k(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            x = x.to(tl.float32)
            x_f = x
            tl.store(y_ptr + offs, x * 2.0)
            tl.store(z_ptr + offs, x_f)
    """).lstrip("\n"))
    tr = translate_file(str(path), naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    [kernel] = tr.module.kernels
    assert not unbound_reads(kernel)


def test_a_parameter_updated_in_a_branch_gets_a_mutable_copy(tmp_path):
    """Regression: a scalar parameter reassigned after an early return (the rest of the kernel is a branch) was
    assigned in place, and Rust refuses ("cannot assign to immutable argument"); `x = x.to(<its dtype>)` was
    such an assignment too (of itself)."""
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def k(x_ptr, scale, softcap, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            if pid * BLOCK >= n:
                return
            softcap = softcap.to(tl.float32)
            if n > 100:
                scale = scale * 2.0
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(x_ptr + offs, x * scale + softcap, mask=offs < n)
    """).lstrip("\n"))
    report = translate([str(path)], None, faithful=True)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    text = report.files["src/kern.rs"]
    body = text[text.index("pub unsafe fn k"):text.index('extern "C"')]
    assert "let mut scale: f32 = scale;" in body and "softcap = softcap" not in body
    assert not re.search(r"\blet mut softcap\b", body)
