"""Triton constructs of real kernel libraries: `while` loops (a runtime test evaluated before each iteration,
carried variables updated in place), libdevice rounding. Checked on the kernel model and the generated Rust."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import While, walk
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"

WHILE = """
    @triton.jit
    def search_kernel(bounds_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        lo = tl.full((BLOCK,), 0, tl.int32)
        hi = lo + n
        steps = n
        while steps > 0:
            mid = (lo + hi + 1) // 2
            after = offs >= tl.load(bounds_ptr + mid)
            lo = tl.where(after, mid, lo)
            hi = tl.where(after, hi, mid - 1)
            steps = steps // 2
        tl.store(out_ptr + offs, lo)

    @triton.jit
    def drain_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        total = 0.0
        go = tl.max(x) > 0.0
        while go:
            total += tl.max(x)
            x = tl.where(x == tl.max(x), 0.0, x)
            go = tl.max(x) > 0.0
        tl.store(out_ptr, total)
"""


def _translated(tmp_path: Path, body: str):
    path = tmp_path / "loops.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path, translate_file(str(path), None, naming=RUST_NAMING)


def test_while_loops_carry_their_variables(tmp_path):
    _, tr = _translated(tmp_path, WHILE)
    assert not tr.diagnostics, tr.diagnostics
    k = {k.base_name: k for k in tr.module.kernels}
    (search,) = [st for st in walk(k["search_kernel"].body) if isinstance(st, While)]
    assert set(search.carried) >= {"lo", "hi", "steps"}  # carried: the test and the body read them
    assert search.test is not None  # a runtime test, evaluated each time round
    (drain,) = [st for st in walk(k["drain_kernel"].body) if isinstance(st, While)]
    assert {"total", "x", "go"} <= set(drain.carried)
    path, _ = _translated(tmp_path, WHILE)
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    assert r.files["src/loops.rs"].count("while {") == 2


def test_a_while_flag_set_in_the_body_is_a_runtime_bool(tmp_path):
    _, tr = _translated(tmp_path, """
        @triton.jit
        def spin_kernel(x_ptr, out_ptr):
            done = False
            while not done:
                done = tl.load(x_ptr) > 0
            tl.store(out_ptr, 1)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (loop,) = [st for st in walk(tr.module.kernels[0].body) if isinstance(st, While)]
    assert loop.test is not None and loop.carried == ("done",)


def test_a_loop_updates_its_own_copy_of_a_shared_value(tmp_path):
    """`steps = n` then `steps //= 2` in a loop or branch: `n` keeps its value (the update is not in place)."""
    path = tmp_path / "shared.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def halve_kernel(out_ptr, n, c):
            steps = n
            for i in range(3):
                steps = steps // 2
            rest = n
            if c > 0:
                rest = rest - 1
            tl.store(out_ptr, steps + rest + n)
    """).lstrip("\\n"))
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    text = r.files["src/shared.rs"]
    assert "let mut steps: i32 = n;" in text and "let mut rest: i32 = n;" in text
    assert "\n            n = " not in text  # the parameter is never reassigned


def test_libdevice_round_is_half_away_from_zero_and_trunc_toward_zero(tmp_path):
    path = tmp_path / "rounding.py"
    path.write_text(HEADER + textwrap.dedent("""
        from triton.language.extra import libdevice

        @triton.jit
        def round_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(out_ptr + offs, libdevice.round(x) + libdevice.trunc(x))
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    fns = [st.op.attr("fn") for st in walk(k.body) if getattr(st, "op", None) is not None and st.op.kind == "unary"]
    assert fns == ["floor", "ceil", "abs", "floor", "ceil"]  # round: trunc, |x - trunc| >= 0.5; then trunc
    halves = [st.op for st in walk(k.body) if getattr(st, "op", None) is not None and st.op.kind == "compare"
              and st.op.attr("op") == ">="]
    assert len(halves) == 1
    assert set(*k.dtype_vars.values()) == {"f32", "f16", "bf16"}  # the result keeps the argument's dtype


def test_values_cast_to_a_pointers_element_type_then_packed_make_it_an_integer_pointer(tmp_path):
    """`.to(out_ptr.dtype.element_ty)` then `lo | (hi << 4)`: out_ptr holds integers (no float type-checks)."""
    path = tmp_path / "pack.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def pack_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
            out_dtype: tl.constexpr = out_ptr.dtype.element_ty
            x = tl.load(x_ptr + tl.arange(0, 2 * BLOCK))
            q = tl.where(x >= 0, 1, 9).to(out_dtype)
            lo, hi = tl.split(q.reshape((BLOCK, 2)))
            tl.store(out_ptr + tl.arange(0, BLOCK), lo | (hi << 4))
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    types = {p.name: p.ty.dtype for p in k.array_params}
    assert types["out_ptr"] == "i32" and types["x_ptr"] != "i32"
    assert any("out_ptr" in n and "integers" in n for n in k.notes)


def test_an_unconfigured_cumsum_has_one_entry_per_element_dtype(tmp_path):
    """The scan's identity is a literal of the element type (a generic one rendered `0E`): no one generic
    entry holds it, so each float dtype gets its own (bf16 scans in f32, as Triton's)."""
    path = tmp_path / "scan.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0))
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    assert sorted(k.name for k in tr.module.kernels) == ["k_bf16", "k_f16", "k_f32"]
    assert all(not k.dtype_vars for k in tr.module.kernels)
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    assert "0E" not in r.files["src/scan.rs"]
    # no f16 literal exists in Rust's stable types nor in the DSL: the f16 scan's identity is a bound scalar
    assert "0f16" not in r.files["src/scan.rs"] and ": f16 = convert_scalar(0.0f32);" in r.files["src/scan.rs"]


def test_loaded_offsets_make_an_index_array_through_floor_division_and_scalar_strides(tmp_path):
    """Offsets loaded from an unconfigured pointer (cu_seqlens) bound a loop after `//` and scale a stride:
    the pointer holds integers, and the stride, taken for a float while they were assumed floats, is an int."""
    path = tmp_path / "offsets.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def rows_kernel(cu_q, x_ptr, out_ptr, topk, stride_m, BLOCK_N: tl.constexpr):
            b = tl.program_id(0)
            q_start = tl.load(cu_q + b)
            row = q_start + tl.program_id(1)
            visible = tl.load(cu_q + b + 1) - q_start
            limit = tl.minimum(topk, ((visible + BLOCK_N - 1) // BLOCK_N) * BLOCK_N)
            acc = tl.zeros([BLOCK_N], tl.float32)
            for start in range(0, limit, BLOCK_N):
                acc += tl.load(x_ptr + row * stride_m + start + tl.arange(0, BLOCK_N))
            tl.store(out_ptr + row * stride_m + tl.arange(0, BLOCK_N), acc)
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    types = {p.name: p.ty for p in k.params}
    assert types["cu_q"].dtype == "i64"
    assert types["stride_m"].dtype == "i32" and types["topk"].dtype == "i32"


PACKED_MATMUL = """
    @triton.jit
    def packed_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        a_ptrs = a_ptr + offs[:, None] * K + offs[None, :]
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.int32)
        for i in range(4):
            b_ptrs = b_ptr + offs[:, None] * BLOCK + offs[None, :]
            for j in range(0, tl.cdiv(K, BLOCK)):
                a = tl.load(a_ptrs)
                b = (tl.load(b_ptrs) >> (2 * i)) & 3
                acc += tl.dot(a, b.to(tl.int8), out_dtype=tl.int32)
                a_ptrs += BLOCK
                b_ptrs += BLOCK * BLOCK
        tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)
"""


def test_a_pointer_reset_each_outer_iteration_and_integer_dot_operands(tmp_path):
    """`b_ptrs = b_ptr + ..` at the top of the outer loop, advanced in the inner one, was "reassigned inside a
    loop"; the operands of a dot into int32 come from pointers that hold i8 (the integers Tile IR's mma takes)."""
    path = tmp_path / "packed.py"
    path.write_text(HEADER + textwrap.dedent(PACKED_MATMUL).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    types = {p.name: p.ty.dtype for p in k.array_params}
    assert types["a_ptr"] == "i8" and types["b_ptr"] == "i8" and types["c_ptr"] == "i32"
    assert any("`a_ptr`" in n and "i8" in n for n in k.notes)
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]


def test_a_pointer_reset_in_a_loop_and_read_after_it_is_a_located_diagnostic(tmp_path):
    path = tmp_path / "after.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def after_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            p = x_ptr
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for i in range(n):
                p = x_ptr + i * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(p)
            tl.store(out_ptr + tl.arange(0, BLOCK), acc + tl.load(p))
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    (d,) = tr.diagnostics
    assert d.construct == "pointer" and d.loc.line == 12 and "after the loop" in d.message, d


def test_a_constexpr_no_launch_gives_takes_its_signature_default(tmp_path):
    """`sem: tl.constexpr = "release"` (an atomic's ordering) with no launch or configuration giving it: it
    cannot be a runtime value, so its entry is for the default, the value of every launch that omits it."""
    path = tmp_path / "lock.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def locked_add(x_ptr, lock_ptr, value, sem: tl.constexpr = "release"):
            while tl.atomic_cas(lock_ptr, 0, 1, sem=sem) == 1:
                pass
            tl.store(x_ptr, tl.load(x_ptr) + value)
            tl.atomic_xchg(lock_ptr, 0)
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert k.pinned == {"sem": "release"}
    (cas,) = [st.op for st in walk(k.body) if getattr(st, "op", None) is not None and st.op.kind == "atomic_cas"]
    assert cas.attr("memory_order") == "release"


def _is_store(st) -> bool:
    return getattr(st, "op", None) is not None and ("store" in st.op.kind or "scatter" in st.op.kind)


def _stores_at_top(kernel) -> int:
    return sum(1 for st in kernel.body.stmts if _is_store(st))


def test_an_early_return_inside_a_branch_skips_the_rest_of_the_kernel(tmp_path):
    """`if IS_VARLEN: ..; if n < 0: return` (a folded branch) and `if a: (if b: return) ..` (a runtime one):
    the return ends the kernel, so the statements after the outer `if` run only where it does not (they were
    out of reach of the rewrite: "undefined name `bos`", or run after a return)."""
    path = tmp_path / "early.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.heuristics({"IS_VARLEN": lambda args: args["cu"] is not None})
        @triton.jit
        def varlen_kernel(x_ptr, cu, out_ptr, T, IS_VARLEN: tl.constexpr, BLOCK: tl.constexpr):
            i = tl.program_id(0)
            if IS_VARLEN:
                n = tl.load(cu + i)
                if n < 0:
                    return
                bos = n
            else:
                bos = i * T
            offs = bos + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))

        @triton.jit
        def nested_kernel(x_ptr, out_ptr, a, b):
            if a > 0:
                if b > 0:
                    return
                tl.store(x_ptr, 1.0)
            tl.store(out_ptr, 2.0)
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    k = {k.name: k for k in tr.module.kernels}
    assert set(k) == {"varlen_kernel_is_varlen0", "varlen_kernel_is_varlen1", "nested_kernel"}
    assert _stores_at_top(k["varlen_kernel_is_varlen0"]) == 1
    assert _stores_at_top(k["varlen_kernel_is_varlen1"]) == 0  # under the `if n < 0` that returns
    nested = k["nested_kernel"]
    assert _stores_at_top(nested) == 0
    assert len([st for st in walk(nested.body) if _is_store(st)]) == 3  # x (a > 0, b <= 0), out there, and out where a <= 0


def test_an_unsupported_call_is_named_before_its_arguments_are_read(tmp_path):
    """`tl.inline_asm_elementwise(asm=ASM, ..)` with ASM built by a host function: the diagnostic names the
    inline assembly, not the host function (its arguments are never computed)."""
    path = tmp_path / "asm.py"
    path.write_text(HEADER + textwrap.dedent("""
        def _make_asm(n):
            return "mov.b32 $0, $1;" * n

        ASM: tl.constexpr = tl.constexpr(_make_asm(1))

        @triton.jit
        def asm_kernel(x_ptr, BLOCK: tl.constexpr):
            x = tl.load(x_ptr + tl.arange(0, BLOCK))
            y = tl.inline_asm_elementwise(asm=ASM, constraints="=r,r", args=[x], dtype=tl.float32, is_pure=True,
                                          pack=1)
            tl.store(x_ptr + tl.arange(0, BLOCK), y)
    """).lstrip("\\n"))
    (d,) = translate_file(str(path), None, naming=RUST_NAMING).diagnostics
    assert d.construct == "tl.inline_asm_elementwise" and d.loc.line == 13, d


def test_increments_under_constexpr_flags_numbers_in_helpers_and_float_of_a_constexpr(tmp_path):
    """`if USE_G: p_g += H` at the top of a loop (a flag the heuristics give) advances like a top-level
    increment (it was "reassigned inside a loop or branch"); a helper's `x.to(tl.float32)` on a number
    (`exp(1.0)`) takes it as a 0-d tensor; `float(BT)` and `~n` of a constexpr without values compute
    at run time."""
    path = tmp_path / "recurrent.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def exp(x):
            return tl.exp(x.to(tl.float32))

        @triton.heuristics({"USE_G": lambda args: args["g"] is not None})
        @triton.jit
        def recurrent_kernel(x, g, o, T, H: tl.constexpr, BT: tl.constexpr, USE_G: tl.constexpr):
            p_x = x + tl.arange(0, H)
            p_g = g + tl.arange(0, H)
            p_o = o + tl.arange(0, H)
            levels = (tl.log2(float(BT))).to(tl.int32)
            h = tl.zeros([H], dtype=tl.float32) + exp(1.0) + levels + (~levels)
            for t in range(T):
                h += tl.load(p_x)
                if USE_G:
                    h *= tl.load(p_g)
                tl.store(p_o, h)
                p_x += H
                p_o += H
                if USE_G:
                    p_g += H
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    assert not tr.diagnostics, tr.diagnostics
    assert sorted(k.name for k in tr.module.kernels) == ["recurrent_kernel_use_g0", "recurrent_kernel_use_g1"]
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]


def test_a_pointer_each_runtime_branch_sets(tmp_path):
    """A pointer both branches of a runtime `if` set was undefined after it: into one array, its offset is
    joined (the accesses gather); into a different array in each branch (`if modality == 1: gate_ptr =
    image_gate_ptr elif ..`), reading it is a located diagnostic naming the choice."""
    path = tmp_path / "choose.py"
    path.write_text(HEADER + textwrap.dedent("""
        @triton.jit
        def same_kernel(x_ptr, out_ptr, c, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            if c > 0:
                p = x_ptr + offs
            else:
                p = x_ptr + BLOCK + offs
            tl.store(out_ptr + offs, tl.load(p))

        @triton.jit
        def three_kernel(a_ptr, b_ptr, d_ptr, out_ptr, c, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            if c == 0:
                p = a_ptr
            elif c == 1:
                p = b_ptr
            else:
                p = d_ptr
            tl.store(out_ptr + offs, tl.load(p + offs))
    """).lstrip("\\n"))
    tr = translate_file(str(path), None, naming=RUST_NAMING)
    (d,) = tr.diagnostics
    assert d.kernel == "three_kernel" and d.construct == "pointer" and d.loc.line == 23, d
    assert "different array in each branch of the `if` on line 17" in d.message
    (k,) = tr.module.kernels
    assert k.name == "same_kernel" and any(st.op.kind == "gather" for st in walk(k.body)
                                           if getattr(st, "op", None) is not None)
