"""Constexprs that steer code with no values known (no configuration, no autotune config): a port exists for
every value a launch may pass. Float constexprs are typed runtime parameters that promote as Triton's constants;
int tests run at run time on the const generic; values the file's launches give make entries (no GPU, no
cargo)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import If, walk
from tileport.model.types import ConstT, ScalarT
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"


def translated(tmp_path: Path, body: str):
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path, translate_file(str(path), None, naming=RUST_NAMING)


def ops(kernel, kind: str):
    return [st.op for st in walk(kernel.body) if getattr(st, "op", None) is not None and st.op.kind == kind]


def param_types(kernel) -> dict:
    return {p.name: p.ty for p in kernel.params}


FLOAT_CONSTEXPRS = """
    @triton.jit
    def k(x_ptr, y_ptr, n, eps: tl.constexpr, p: tl.constexpr = 2.5, BLOCK: tl.constexpr = 128):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        y = x * eps + p
        tl.store(y_ptr + offs, y, mask=offs < n)
"""


def test_float_constexprs_without_values_are_weak_runtime_f32(tmp_path):
    path, tr = translated(tmp_path, FLOAT_CONSTEXPRS)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    types = param_types(k)
    # `eps` by its name, `p` by its default: no Rust const generic holds a float
    assert types["eps"] == ScalarT("f32") and types["p"] == ScalarT("f32") and types["BLOCK"] == ConstT("int")
    assert "constexpr `eps` is passed at run time (f32): no values are known" in k.notes
    # like Triton's constants they adopt the tile's dtype: an f16 tile times eps stays f16 (no f32 product)
    (mul,) = [o for o in ops(k, "binary") if o.attr("op") == "mul"]
    assert str(mul.ty.dtype) == "E" and len(k.dtype_vars) == 1
    text = translate([str(path)], None).files["src/kern.rs"]
    assert "eps: f32, p: f32" in text and "const BLOCK: i32" in text


def test_float_constexpr_values_from_launches_make_entries(tmp_path):
    _, tr = translated(tmp_path, FLOAT_CONSTEXPRS + """

    def launch(x, y, n):
        k[(1,)](x, y, n, 1e-6)
        k[(1,)](x, y, n, eps=1e-5, BLOCK=256)
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert sorted(k.name for k in tr.module.kernels) == ["k_eps1em05", "k_eps1em06"]
    assert all(param_types(k)["p"] == ScalarT("f32") and "eps" not in param_types(k) for k in tr.module.kernels)


def test_int_constexpr_tests_run_at_run_time_on_the_const_generic(tmp_path):
    """`MODE` is compared and also used as a number, `K == K_POW2` compares a tile size: neither has values,
    both stay const generics and their tests are runtime branches."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, MODE: tl.constexpr, K: tl.constexpr, K_POW2: tl.constexpr):
            IS_POW2: tl.constexpr = K == K_POW2
            offs = tl.program_id(0) * K_POW2 + tl.arange(0, K_POW2)
            if IS_POW2:
                x = tl.load(x_ptr + offs)
            else:
                x = tl.load(x_ptr + offs, mask=tl.arange(0, K_POW2) < K, other=0.0)
            if MODE == 2:
                x = x * MODE
            elif not MODE:
                x = -x
            tl.store(y_ptr + offs, x)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert all(param_types(k)[c] == ConstT("int") for c in ("MODE", "K", "K_POW2"))
    assert sum(isinstance(st, If) for st in walk(k.body)) == 3
    assert any("constexpr `MODE`: no values are known, its tests run at run time" in n for n in k.notes)
    text = translate([str(path)], None).files["src/kern.rs"]
    assert "const MODE: i32, const K: i32, const K_POW2: i32" in text


def test_a_flag_passed_to_a_helper_takes_both_values(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def act(x, GELU: tl.constexpr):
            if GELU:
                return x * tl.sigmoid(1.702 * x)
            return x

        @triton.jit
        def k(x_ptr, USE_GELU: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, act(tl.load(x_ptr + offs), USE_GELU))
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert sorted(k.name for k in tr.module.kernels) == ["k_use_gelu0", "k_use_gelu1"]


def test_a_variable_one_branch_of_a_constexpr_test_defines_is_declared(tmp_path):
    """Triton folds `if K > 64:`, so `b_h2` defined under it is read only under the same test; tested at run
    time, it is declared before the `if` (zero in the other branch) and carried through the loop."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, T, K: tl.constexpr, BK: tl.constexpr):
            offs = tl.arange(0, BK)
            if K > 64:
                b_h2 = tl.zeros([BK], dtype=tl.float32)
            for t in range(T):
                if K > 64:
                    b_h2 += tl.load(x_ptr + t * BK + offs)
            if K > 64:
                tl.store(y_ptr + offs, b_h2)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert param_types(k)["K"] == ConstT("int")
    text = translate([str(path)], None).files["src/kern.rs"]
    assert "let mut b_h2_1: Tile<f32, { [BK] }>" in text and text.count("b_h2_1 = ") == 3  # both arms, the loop


def test_a_variable_only_one_branch_of_a_runtime_test_defines_is_undefined_after_it(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, n, BK: tl.constexpr):
            offs = tl.arange(0, BK)
            if n > 64:
                y = tl.load(x_ptr + offs)
            tl.store(x_ptr + offs, y)
    """)
    (d,) = tr.diagnostics
    assert d.construct == "name" and "`y`" in d.message and d.loc.line == 9


def test_an_int_named_or_used_constexpr_next_to_a_float_literal_stays_an_int(tmp_path):
    """`n_cols` is a count by name and use; `BLOCK_SCALE` (a float by its last word) is an arange bound and a tile
    shape: integers."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, s_ptr, n_cols: tl.constexpr, BLOCK: tl.constexpr, BLOCK_SCALE: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            inv = 1.0 / n_cols
            for i in range(tl.cdiv(n_cols, BLOCK)):
                tl.store(x_ptr + i * BLOCK + offs, tl.load(x_ptr + i * BLOCK + offs) * inv)
            s = tl.zeros([BLOCK_SCALE], tl.float32) + tl.arange(0, BLOCK_SCALE) * 0.5
            tl.store(s_ptr + tl.arange(0, BLOCK_SCALE), s)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert param_types(k)["n_cols"] == ConstT("int") and param_types(k)["BLOCK_SCALE"] == ConstT("int")


def test_a_pointer_one_branch_of_a_constexpr_test_defines_is_declared(tmp_path):
    """Five flags: four make 16 entries (MAX_ENTRIES), the fifth's tests run at run time, and `z_ptr_row` defined
    under `if RETURN_Z:` is used under the same test later."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, z_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, D: tl.constexpr,
              RETURN_Z: tl.constexpr, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            x = tl.load(x_ptr + row * BLOCK + tl.arange(0, BLOCK))
            s = tl.sum(x)
            if A:
                s += 1.0
            if B:
                s += 2.0
            if C:
                s += 3.0
            if D:
                s += 4.0
            if RETURN_Z:
                z_ptr_row = z_ptr + row
            if RETURN_Z:
                tl.store(z_ptr_row, s)
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert len(tr.module.kernels) == 16
    for k in tr.module.kernels:
        assert sum(isinstance(st, If) for st in walk(k.body)) == 2
        assert [o.args[0].name for o in ops(k, "store") + ops(k, "scatter")] == ["z_ptr"]
        assert "constexpr `RETURN_Z`: no values are known, its tests run at run time (the value is still a const " \
               "generic)" in k.notes


def test_the_arguments_of_asserts_and_prints_are_not_computed(tmp_path):
    """Triton checks static asserts while compiling and drops device asserts and prints: the port computes none of
    their arguments (an interleave, which has no lowering, in a print is no diagnostic)."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, M: tl.constexpr, N: tl.constexpr):
            BLOCK: tl.constexpr = M * N
            tl.static_assert(BLOCK <= 32768)
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.device_assert(tl.sum(x) > 0, "positive")
            tl.device_print("pairs", tl.interleave(x, x))
            tl.store(x_ptr + offs, x + 1)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert not ops(k, "compare") and not ops(k, "reduce")


def test_a_dtype_constexpr_past_the_entry_cap_is_still_specialized(tmp_path):
    """Three flags make 8 entries; the dtype constexpr met next cannot go without values (no dtype is known at
    run time), so each flag entry takes the three float dtypes."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, X_dtype: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs).to(tl.float32)
            if A:
                x += 1.0
            if B:
                x += 2.0
            if C:
                x += 3.0
            tl.store(x_ptr + offs, x.to(X_dtype))
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert len(tr.module.kernels) == 24 and all("x_dtype" in k.name for k in tr.module.kernels)


def test_a_string_constexpr_past_the_entry_cap_is_still_specialized(tmp_path):
    """Four flags make 16 entries; `ACTIVATION == "swish"` cannot be tested at run time (a string), so the cap
    gives way rather than the kernel."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, D: tl.constexpr, ACTIVATION: tl.constexpr,
              BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs).to(tl.float32)
            if A:
                x += 1.0
            if B:
                x += 2.0
            if C:
                x += 3.0
            if D:
                x += 4.0
            if ACTIVATION == "swish":
                x = x * tl.sigmoid(x)
            elif ACTIVATION == "relu":
                x = tl.maximum(x, 0.0)
            tl.store(x_ptr + offs, x)
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert len(tr.module.kernels) == 32 and all("activation" in k.name for k in tr.module.kernels)


def test_a_constexpr_tested_for_truth_is_a_flag_whatever_its_name(tmp_path):
    """`USE_G_GAMMA` ends in a float word, but `if USE_G or USE_G_GAMMA:` tests it: a flag (two entries)."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, USE_G: tl.constexpr, USE_G_GAMMA: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            if USE_G or USE_G_GAMMA:
                x = x * USE_G_GAMMA
            tl.store(x_ptr + offs, x)
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert all(not any(p.name == "USE_G_GAMMA" and p.ty == ScalarT("f32") for p in k.params)
               for k in tr.module.kernels)


def test_float_arithmetic_on_int_constexprs_is_a_double_at_run_time(tmp_path):
    """`0.5 * (BC - 1) * SHIFT`: a Python float of tile-size constexprs with no values known; the product is
    computed in f64 on the const generics and rounded once to the tile's dtype, as Triton folds it."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, n, BC: tl.constexpr, SHIFT: tl.constexpr):
            offs = tl.program_id(0) * BC + tl.arange(0, BC)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x - 0.5 * (BC - 1) * SHIFT, mask=offs < n)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert param_types(k)["BC"] == ConstT("int") and param_types(k)["SHIFT"] == ConstT("int")
    products = [o for o in ops(k, "binary") if o.attr("op") == "mul"]
    assert [str(o.ty.dtype) for o in products] == ["f64", "f64"]
    text = translate([str(path)], None).files["src/kern.rs"]
    assert "0.5f64 * " in text and "const BC: i32, const SHIFT: i32" in text


def test_launch_path_holds_the_generics_of_the_largest_entry(tmp_path):
    """A kernel whose launch pushes more generic arguments than the template's 64 (many rank-2 arrays and
    constexprs): the crate's launch path is sized for it; a crate within the bound keeps the template's text."""
    arrays = [f"a{i}" for i in range(24)]
    consts = [f"C{i}: tl.constexpr" for i in range(8)]
    body = "\n".join(f"    tl.store({a} + o2, tl.load({a} + o2) * C{i % 8})" for i, a in enumerate(arrays))
    path = tmp_path / "wide.py"
    path.write_text(HEADER + f"""@triton.jit
def wide({', '.join(arrays)}, s, {', '.join(consts)}, B: tl.constexpr):
    o = tl.arange(0, B)
    o2 = o[:, None] * s + o[None, :]
{body}
""")
    tr = translate([str(path)], None)
    assert tr.ok, [r.diagnostic for r in tr.results]
    assert "pub const MAX_GENERICS: usize = 64;" not in tr.files["src/support.rs"]
    bound = int(re.search(r"pub const MAX_GENERICS: usize = (\d+);", tr.files["src/support.rs"]).group(1))
    assert bound > 64
    narrow = translate([str(translated(tmp_path, FLOAT_CONSTEXPRS)[0])], None)
    assert "pub const MAX_GENERICS: usize = 64;" in narrow.files["src/support.rs"]


REVERSED = """
    @triton.jit
    def k(x_ptr, y_ptr, T, D, BD: tl.constexpr):
        o_d = tl.program_id(0) * BD + tl.arange(0, BD)
        mask = o_d < D
        p_x = x_ptr + (T - 1) * D + o_d
        p_y = y_ptr + (T - 1) * D + o_d
        acc = tl.zeros([BD], dtype=tl.float32)
        for i in range(T - 1, -1, -1):
            acc += tl.load(p_x, mask=mask, other=0.0).to(tl.float32) * i
            tl.store(p_y, acc.to(p_y.dtype.element_ty), mask=mask)
            p_x -= D
            p_y = p_y - D
"""


def test_a_loop_counting_down_walks_its_pointers_back(tmp_path):
    """`range(T - 1, -1, -1)` with `p -= D`: a forward loop over the iteration count (Rust ranges step
    forwards only), the variable `T - 1 - iteration`, and the pointers rows `T - 1 - iteration` of a [T, D]
    view."""
    path, tr = translated(tmp_path, REVERSED)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    (loop,) = [st for st in walk(k.body) if type(st).__name__ == "For"]
    assert str(loop.start) == "CDim(dim=0)" and str(loop.step) == "CDim(dim=1)"
    assert k.views["x_ptr"]["strides"] == ["D", "1"] and k.views["y_ptr"]["strides"] == ["D", "1"]
    text = translate([str(path)], None).files["src/kern.rs"]
    assert "step_by" not in text and "x_ptr: &Tensor<E, { [-1, -1] }>" in text
