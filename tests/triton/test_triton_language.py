"""Triton language constructs beyond loads and stores: atomics, constexpr dtypes and strings, tl.dot's input
precision. Checked on the kernel model and on the generated Rust (no GPU, no cargo)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.base import KernelConfig
from tileport.frontends.triton import translate_file
from tileport.model.ir import If, walk
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"


def translated(tmp_path: Path, body: str, configs=None, name: str = "kern"):
    path = tmp_path / f"{name}.py"
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
    r = translate([str(path)], None, faithful=True)
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


# ---------------------------------------------------------------- constexpr dtypes and strings

MODES = """
    @triton.jit
    def loss_kernel(x_ptr, y_ptr, n, X_dtype: tl.constexpr, reduction: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        if reduction == "mean":
            x = x / n
        tl.store(y_ptr + offs, (x * 2.0).to(X_dtype), mask=offs < n)
"""


def test_dtype_and_string_constexprs_are_specialization_values(tmp_path):
    _, tr = translated(tmp_path, MODES)
    assert not tr.diagnostics, tr.diagnostics
    entries = {k.name: k for k in tr.module.kernels}
    # a mode compared with strings takes those strings; a dtype takes each float element type (Triton's names)
    assert sorted(entries) == [f"loss_kernel_x_dtype{d}_reductionmean" for d in ("bf16", "fp16", "fp32")]
    for k in entries.values():
        assert "X_dtype" not in {p.name for p in k.params} and "reduction" not in {p.name for p in k.params}
        named = {"bf16": "bf16", "fp16": "f16", "fp32": "f32"}[k.pinned["X_dtype"]]
        assert {str(p.ty.dtype) for p in k.array_params} <= {named, "E"}, k.name
    # a configured value (any spelling) selects one entry
    _, tr = translated(tmp_path, MODES, {"loss_kernel": _cfg({"X_dtype": "torch.bfloat16", "reduction": "sum"})})
    assert [k.pinned for k in tr.module.kernels] == [{"X_dtype": "bf16", "reduction": "sum"}]


def _cfg(values: dict):
    from types import SimpleNamespace
    return SimpleNamespace(configs=(values,), pinned={}, ranks={})


def test_string_specializations_reach_the_launcher_as_codes(tmp_path):
    import json
    path, _ = translated(tmp_path, MODES)
    r = translate([str(path)], None, faithful=True)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    spec = next(e for e in json.loads(r.files["kernels.json"])["entries"] if e["kernel"] == "loss_kernel")
    params = {p["name"]: p for p in spec["params"]}
    assert params["X_dtype"]["codes"] == {"bf16": 0, "fp16": 1, "fp32": 2}
    assert params["reduction"]["codes"] == {"mean": 0}
    launchers = "".join(v for v in r.files.values() if 'extern "C" fn' in v)
    assert "if x_dtype == 1 && reduction == 0 {" in launchers  # fp16, mean


def test_constexpr_dtype_without_a_value_is_a_located_diagnostic(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, DT: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            alias = DT
            tl.store(x_ptr + offs, tl.zeros((BLOCK,), alias))
    """)
    (d,) = tr.diagnostics  # used through an alias: not known as a dtype, so no values to take
    assert d.construct == "specialization" and d.loc.line == 8 and "constexpr(s) DT need values" in d.message, d
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, DT: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.full((BLOCK,), 1, DT))
    """)
    assert not tr.diagnostics and len(tr.module.kernels) == 3  # a positional dtype is a dtype


def test_the_runtime_passes_string_constants_by_their_code():
    from types import SimpleNamespace
    from tileport.runtime.library import Entry
    spec = {"symbol": "s", "kernel": "k", "params": [
        {"name": "x", "kind": "scalar", "dtype": "i32"},
        {"name": "X_dtype", "kind": "const", "type": "int", "selects_entry": True, "codes": {"bf16": 0, "fp16": 1}},
        {"name": "reduction", "kind": "const", "type": "int", "selects_entry": True, "codes": {"mean": 0}}]}
    entry = Entry(SimpleNamespace(dll=object(), path=Path("lib.so")), spec)

    class TritonDtype:  # str(tl.float16) == "fp16"
        def __str__(self):
            return "fp16"

    assert entry.bind((3, TritonDtype()), {"reduction": "sum"}) == {"x": 3, "X_dtype": 1, "reduction": -1}


# ---------------------------------------------------------------- tl.dot's input precision

def _dot_kernel(call: str) -> str:
    return f"""
        @triton.jit
        def k(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tile = offs[:, None] * BLOCK + offs[None, :]
            a = tl.load(a_ptr + tile).to(tl.float32)
            b = tl.load(b_ptr + tile).to(tl.float32)
            tl.store(c_ptr + tile, {call})
    """


def _mma_inputs(tr) -> list[tuple]:
    (k,) = tr.module.kernels
    return [(str(o.args[0].ty.dtype), str(o.args[1].ty.dtype)) for o in ops(k, "mma")]


def test_f32_dot_inputs_are_tf32_as_in_triton(tmp_path):
    for call in ("tl.dot(a, b)", "tl.dot(a, b, allow_tf32=True)", "tl.dot(a, b, input_precision='tf32')"):
        _, tr = translated(tmp_path, _dot_kernel(call))
        assert _mma_inputs(tr) == [("tf32", "tf32")], call
        assert any("tf32" in n for n in tr.module.kernels[0].notes)
    for call in ("tl.dot(a, b, allow_tf32=False)", "tl.dot(a, b, input_precision='ieee')"):
        _, tr = translated(tmp_path, _dot_kernel(call))
        assert _mma_inputs(tr) == [("f32", "f32")], call
    _, tr = translated(tmp_path, _dot_kernel("tl.dot(a, b, input_precision='tf32x3')"))
    assert _mma_inputs(tr) == [("tf32", "tf32")] * 3  # hi.lo, lo.hi, hi.hi
    _, tr = translated(tmp_path, _dot_kernel("tl.dot(a, b, input_precision='bf16x9')"))
    (d,) = tr.diagnostics
    assert d.construct == "tl.dot" and "bf16x9" in d.message


def test_generic_dot_inputs_are_tf32_for_the_f32_arm_only(tmp_path):
    _, tr = translated(tmp_path, _dot_kernel("tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile))"))
    (k,) = tr.module.kernels
    (mma,) = ops(k, "mma")
    arms = dict(k.dtype_vars)
    assert arms[mma.args[0].ty.dtype] == tuple("tf32" if v == "f32" else v for v in arms[_element_type(k)])


def _element_type(kernel):
    return next(p.ty.dtype for p in kernel.array_params)


# ---------------------------------------------------------------- split / join

def test_split_and_join_are_extracts_and_a_concatenation(tmp_path):
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            pairs = tl.load(x_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :])
            re, im = tl.split(pairs)
            out = tl.join(re * 2.0, im + 1.0)
            tl.store(y_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], out)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    ex = ops(k, "extract")
    assert [o.attr("shape") for o in ex] == [("BLOCK_", 1)] * 2 or [len(o.attr("shape")) for o in ex] == [2, 2]
    assert [o.args[2].value for o in ex] == [0, 1]
    (cat,) = ops(k, "cat")
    assert cat.attr("axis") == 1 and cat.ty.shape[1] == 2
    r = translate([str(path)], None, faithful=True)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            a, b = tl.split(tl.load(x_ptr + tl.arange(0, BLOCK)))
            tl.store(x_ptr + tl.arange(0, BLOCK), a)
    """, name="bad")
    (d,) = tr.diagnostics
    assert d.construct == "tl.split" and d.loc.line == 6


# ---------------------------------------------------------------- pointers: element-wise accesses, branches

def test_a_pointer_also_gathered_is_flat_everywhere(tmp_path):
    """Regression: a pointer read through a view and through a gather was a 2-D view whose gather bounded
    its flat offsets by the first dimension's extent."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, idx_ptr, y_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + pid * n + offs, mask=offs < n, other=0.0)
            g = tl.load(x_ptr + tl.load(idx_ptr + offs))
            tl.store(y_ptr + pid * n + offs, x + g, mask=offs < n)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    x = next(p for p in k.params if p.name == "x_ptr")
    assert x.ty.rank == 1 and "x_ptr" not in k.views
    assert [o.args[0].name for o in ops(k, "load")] == ["idx_ptr"]  # x_ptr: gathers only
    assert len(ops(k, "gather")) == 2


def test_a_pointer_moved_in_a_runtime_branch_is_joined_after_it(tmp_path):
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, ref_ptr, y_ptr, n, beta, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + pid * n + offs, mask=offs < n, other=0.0)
            if beta != 0.0:
                ref_ptr += pid * n
                x += beta * tl.load(ref_ptr + offs, mask=offs < n, other=0.0)
            tl.store(ref_ptr + offs, x, mask=offs < n)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    (branch,) = [st for st in k.body.stmts if type(st).__name__ == "If"]
    for blk in (branch.then, branch.orelse):  # each branch assigns the offset declared before the `if`
        assert [st.name for st in blk.stmts if getattr(st, "update", False)][-1:] == ["ref_ptr_off"]
    (scatter,) = ops(k, "scatter")
    assert scatter.args[0].name == "ref_ptr"
    r = translate([str(path)], None, faithful=True)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            p = x_ptr
            if n > 0:
                p = y_ptr
            tl.store(p + tl.arange(0, BLOCK), 1.0)
    """, name="two")
    (d,) = tr.diagnostics
    assert d.construct == "pointer" and d.loc.line == 7 and "different arrays" in d.message


def test_a_called_jit_function_that_stores_is_a_helper(tmp_path):
    """Regression: a jit function that stores looked like a kernel, and the kernels calling it found no
    such name; a pointer plus an offset parameter is the pointer's side (named like one)."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def _apply(x_ptr, base, offs):
            tl.store(x_ptr + base + offs, tl.load(x_ptr + base + offs) * 2.0)

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            _apply(x_ptr, tl.program_id(0) * n, tl.arange(0, BLOCK))

        def launch(x, n):
            k[(1,)](x, n, BLOCK=128)
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert [k.name for k in tr.module.kernels] == ["k"]


def test_pointer_element_types_from_use_index_through_where_and_int_stores(tmp_path):
    """Loaded values reaching a pointer offset through tl.where / tl.reshape index that pointer (i64); a pointer
    the kernel stores (or atomically adds) i32 tiles into holds i32 (unconfigured); a configured one keeps its
    dtype."""
    body = """
        @triton.jit
        def hist(idx_ptr, counts_ptr, zero_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            ids = tl.reshape(tl.load(idx_ptr + offs, mask=offs < n, other=-1), [BLOCK])
            safe = tl.where(offs < n, ids, 0)
            tl.atomic_add(counts_ptr + safe, tl.full([BLOCK], 1, dtype=tl.int32), mask=offs < n)
            tl.store(zero_ptr + offs, tl.zeros([BLOCK], tl.int32))
    """
    _, tr = translated(tmp_path, body)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert {p.name: str(p.ty.dtype) for p in k.array_params} == {"idx_ptr": "i64", "counts_ptr": "i32",
                                                                 "zero_ptr": "i32"}
    assert any("`counts_ptr`: assumed to hold i32" in n for n in k.notes)
    _, tr = translated(tmp_path, body, {"hist": _cfg({"idx_ptr": "i64", "counts_ptr": "float32",
                                                      "zero_ptr": "float32"})}, name="cfg")
    (k,) = tr.module.kernels
    assert {p.name: str(p.ty.dtype) for p in k.array_params}["counts_ptr"] == "f32"


def test_cumsum_dtype_argument_casts_first(tmp_path):
    """Regression: tl.cumsum(x, dtype=...) ignored the dtype (and a generic input then had no lowering)."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0, dtype=tl.float32))
    """)
    assert not tr.diagnostics, tr.diagnostics
    (scan,) = ops(tr.module.kernels[0], "scan_sum")
    assert scan.ty.dtype == "f32"


def test_a_variable_both_branches_define_is_assigned_by_each(tmp_path):
    """Regression: the variable declared before the `if` took the name each branch gave its own value, so the
    branches assigned their value to itself (`z = z`) and the declared one stayed zero."""
    path, _ = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, n, BK: tl.constexpr):
            offs = tl.arange(0, BK)
            x = tl.load(x_ptr + offs)
            if n > 3:
                z = x * 2
            else:
                z = x + 1
            tl.store(y_ptr + offs, z)
    """)
    text = translate([str(path)], None).files["src/kern.rs"]
    assert "let mut z_1: Tile<E, { [BK] }>" in text and text.count("z_1 = z;") == 2
    assert "z = z;" not in text


def test_helpers_return_from_branches(tmp_path):
    """`if FLAG: return x` (folded) and `if n > 4: return ..` (a runtime branch) before the helper's end: the rest
    is the other branch and the helper's value is one variable both paths set."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def pick(x, n, LINEAR: tl.constexpr):
            if LINEAR:
                return x
            if n > 4:
                return x * 2.0
            y = x + 1.0
            return y * y

        @triton.jit
        def k(x_ptr, n, LINEAR: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, pick(tl.load(x_ptr + offs), n, LINEAR))
    """)
    assert not tr.diagnostics, tr.diagnostics
    k = {k.name: k for k in tr.module.kernels}
    assert sorted(k) == ["k_linear0", "k_linear1"]
    assert not ops(k["k_linear1"], "binary") and len(ops(k["k_linear0"], "binary")) == 3


def test_a_return_inside_a_helper_loop_is_a_located_diagnostic(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def first(x_ptr, n):
            for i in range(n):
                if tl.load(x_ptr + i) > 0:
                    return i
            return n

        @triton.jit
        def k(x_ptr, n):
            tl.store(x_ptr, first(x_ptr, n))
    """)
    (d,) = tr.diagnostics
    assert d.construct == "return" and "inside a loop of a helper" in d.message and d.loc.line == 8


MIXED_DOT = """
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        acc16 = tl.zeros([BM, BN], dtype=tl.float16)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
            acc = tl.dot(a, b, acc)
            acc16 += tl.dot(a, b, out_dtype=tl.float16)
            acc = tl.dot(a.to(tl.float8e4nv), b.to(tl.float8e4nv), acc)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16) + acc16)
"""


def test_dots_of_narrow_floats_into_f32_or_f16_accumulators(tmp_path):
    """f16 and fp8 operands accumulate in f32 (the default, or the given accumulator's type) or in f16
    (`out_dtype=tl.float16`), as Tile IR's mmaf takes them."""
    path, tr = translated(tmp_path, MIXED_DOT, {"k": KernelConfig(({"a_ptr": "f16", "b_ptr": "f16", "c_ptr": "f16"},))})
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert [(str(o.args[0].ty.dtype), str(o.ty.dtype)) for o in ops(k, "mma")] == [
        ("f16", "f32"), ("f16", "f16"), ("f8e4m3fn", "f32")]
    text = translate([str(path)], None, configs={str(path): {"k": KernelConfig(
        ({"a_ptr": "f16", "b_ptr": "f16", "c_ptr": "f16"},))}}).files["src/kern.rs"]
    assert "Tile<f8e4m3fn, { [BM, BK] }> = convert_tile(" in text


def test_a_dot_without_a_tile_ir_form_is_a_located_dtype_diagnostic(tmp_path):
    """bf16 operands have no f16 accumulator in Tile IR: the bf16 configuration is refused where the dot is."""
    _, tr = translated(tmp_path, MIXED_DOT, {"k": KernelConfig(({"a_ptr": "bf16", "b_ptr": "bf16",
                                                                  "c_ptr": "bf16"},))})
    (d,) = tr.diagnostics
    assert d.construct == "dtype" and d.message == (
        "tl.dot of bf16 operands into a f16 accumulator: Tile IR's mma has no such form (it accumulates bf16 in f32)")
    assert d.loc.line == 15
    _, tr = translated(tmp_path, MIXED_DOT)  # unconfigured: the generic keeps the element types that have it
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert {p.ty.dtype for p in k.array_params} == {"f16"}


def test_and_or_fold_known_operands_and_test_the_others(tmp_path):
    """Regression: `IS_RMS and HAS_X` with the first folded to False made a bool literal an operand of an i32 `&`
    (an internal model error). Every operand is lowered (entries keep one signature), known ones decide or drop
    out, runtime ones are tested for truth."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, n, FLAG: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            if FLAG and n:
                x = x * 2
            if (not FLAG) or n > 3:
                x = x + 1
            tl.store(x_ptr + offs, x)
    """)
    assert not tr.diagnostics, tr.diagnostics
    k = {k.name: k for k in tr.module.kernels}
    assert sorted(k) == ["k_flag0", "k_flag1"]
    assert sum(isinstance(st, If) for st in walk(k["k_flag0"].body)) == 0  # False and n; True or ..: folded
    assert sum(isinstance(st, If) for st in walk(k["k_flag1"].body)) == 2


def test_products_and_sums_of_bool_tiles_are_and_and_xor(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            o = tl.arange(0, B)
            m = (o[:, None] >= o[None, :]) * (o[None, :] < n)
            x = tl.load(x_ptr + o[:, None] * B + o[None, :])
            tl.store(x_ptr + o[:, None] * B + o[None, :], x * m)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert [o.attr("op") for o in ops(k, "binary") if str(o.ty.dtype) == "bool"] == ["and"]


def test_a_choice_between_pointers_into_one_array(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(eta, o, T, H, BT: tl.constexpr):
            i_t = tl.program_id(0)
            p_last = eta + (T - 1) * H if i_t == tl.cdiv(T, BT) - 1 else eta + (i_t * BT + BT - 1) * H
            tl.store(o + i_t, tl.load(p_last))
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    (g,) = ops(k, "gather") + ops(k, "load")
    assert g.args[0].name == "eta" and ops(k, "select")


def test_block_pointer_element_types_and_constexpr_dot_precisions(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(a_ptr, c_ptr, N, B: tl.constexpr, DOT_PRECISION: tl.constexpr):
            p_a = tl.make_block_ptr(a_ptr, (N, N), (N, 1), (0, 0), (B, B), (1, 0))
            p_c = tl.make_block_ptr(c_ptr, (N, N), (N, 1), (0, 0), (B, B), (1, 0))
            a = tl.load(p_a, boundary_check=(0, 1))
            c = tl.dot(a, a, input_precision=DOT_PRECISION)
            tl.store(p_c, c.to(p_c.dtype.element_ty), boundary_check=(0, 1))
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert sorted(k.name for k in tr.module.kernels) == [f"k_dot_precision{p}" for p in ("ieee", "tf32", "tf32x3")]


def test_swizzle2d_renumbers_block_ids_in_integer_arithmetic(tmp_path):
    """tl.swizzle2d(i, j, size_i, size_j, size_g) on block ids: (first row of the group + ij % rows,
    ij // rows) of ij = i * size_j + j within groups of size_g rows, the last group's rows being what is left."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):
            pid_m, pid_n = tl.swizzle2d(tl.program_id(0), tl.program_id(1), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP)
            o_m = pid_m * BM + tl.arange(0, BM)
            o_n = pid_n * BN + tl.arange(0, BN)
            mask = (o_m[:, None] < M) & (o_n[None, :] < N)
            x = tl.load(x_ptr + o_m[:, None] * stride + o_n[None, :], mask=mask, other=0.0)
            tl.store(y_ptr + o_m[:, None] * stride + o_n[None, :], x, mask=mask)
    """)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    names = [o.attr("op") for o in ops(k, "binary")]
    assert names.count("min") == 1 and names.count("floordiv") == 2 and names.count("mod") == 2, names
    assert k.views["x_ptr"] == {"strides": ["stride", "1"], "extents": ["M", "N"]}
