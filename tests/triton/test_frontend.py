"""The Triton frontend on our own kernels (tests/triton/data): translation, the lowering of pointer
arithmetic to partition views or gathers, and located diagnostics for what is not supported."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.frontends.registry import frontend_for
from tileport.translate import translate

DATA = Path(__file__).parent / "data"
KERNELS = {
    "basic.py": ["add_kernel", "row_softmax_kernel", "masked_matmul_kernel", "gather_kernel"],
    "ops.py": ["gelu_libdevice_kernel", "silu_relu_kernel", "layer_norm_kernel", "rms_norm_row_kernel",
               "rope_heads_kernel", "grouped_matmul_kernel", "block_ptr_matmul_kernel", "mha_fwd_kernel",
               "cumsum_argmax_kernel", "scale_kernel", "tf32_dot_kernel"],
}
HEADER = "import triton\nimport triton.language as tl\n\n"


@pytest.fixture(scope="module")
def report():
    paths = [str(DATA / f) for f in KERNELS]
    return translate(paths, None, crate="tileport_triton_tests", faithful=True)


def kernels_of(file: str):
    return {k.base_name: k for k in translate_file(str(DATA / file), naming=RUST_NAMING).module.kernels}


def entry(report, file: str, name: str) -> str:
    text = report.files[f"src/{Path(file).stem}.rs"]
    start = text.index(f"pub unsafe fn {name}")
    return text[start:text.index("\n    }\n", start)]


def test_every_own_kernel_translates(report):
    results = {r.kernel: r for r in report.results}
    assert sorted(results) == sorted(k for ks in KERNELS.values() for k in ks)
    bad = {k: str(r.diagnostic) for k, r in results.items() if not r.ok}
    assert not bad, bad
    assert results["scale_kernel"].entries == ["scale_kernel_even_n0", "scale_kernel_even_n1"]


@pytest.mark.parametrize("name", KERNELS["ops.py"] + ["add_kernel", "row_softmax_kernel", "masked_matmul_kernel"])
def test_block_structured_accesses_are_partition_views(report, name):
    file = "ops.py" if name in KERNELS["ops.py"] else "basic.py"
    names = [name] if name != "scale_kernel" else ["scale_kernel_even_n0", "scale_kernel_even_n1"]
    for n in names:
        text = entry(report, file, n)
        assert "load_view_tko" in text or "store_view" in text, n
        assert "load_ptr_tko" not in text and "store_ptr_tko" not in text, n


def test_data_dependent_addresses_become_gathers(report):
    text = entry(report, "basic.py", "gather_kernel")
    assert "load_ptr_tko_tpad(" in text and "cast_mut(x_ptr.as_ptr())" in text  # x_ptr + idx: a masked gather
    assert "load_view_tko(&idx_ptr_view" in text  # the index load itself is a block


def test_views_and_their_extents():
    k = kernels_of("basic.py")
    ranks = {p.name: p.ty.rank for p in k["row_softmax_kernel"].params if p.is_array}
    assert ranks == {"out_ptr": 2, "in_ptr": 2}
    notes = " ".join(k["masked_matmul_kernel"].notes)
    assert "a_ptr`: a 2-D array view [extent M stride stride_am, extent K stride stride_ak]" in notes
    gather = {p.name: (p.ty.dtype, p.ty.rank) for p in k["gather_kernel"].params if p.is_array}
    assert gather["idx_ptr"] == ("i64", 1) and gather["x_ptr"][1] == 1
    attn = {p.name: p.ty.rank for p in kernels_of("ops.py")["mha_fwd_kernel"].params if p.is_array}
    assert attn == {"q_ptr": 4, "k_ptr": 4, "v_ptr": 4, "o_ptr": 4}


def test_grouped_ordering_keeps_block_views():
    """pid_m from `%`/`//` of program ids is an opaque index: still a partition view (regression: names
    reused after a loop kept the affine form of their earlier value and forced gathers)."""
    k = kernels_of("ops.py")["grouped_matmul_kernel"]
    assert {p.name: p.ty.rank for p in k.params if p.is_array} == {"a_ptr": 2, "b_ptr": 2, "c_ptr": 2}


def translate_text(tmp_path: Path, body: str):
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path, translate_file(str(path), naming=RUST_NAMING)


def test_mask_that_is_not_a_bounds_check_is_a_masked_scatter(tmp_path):
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x, mask=x > 0)
            z = tl.load(x_ptr + offs, mask=offs < n, other=1.5)
            tl.store(y_ptr + offs, z, mask=offs < n)
    """)
    assert not tr.diagnostics, tr.diagnostics
    r = translate([str(path)], None, faithful=True)
    text = r.files["src/kern.rs"]
    assert "store_ptr_tko" in text  # mask x > 0
    # other=1.5 is no padding mode: the view pads with zero, 1.5 is selected where the mask is false
    assert "load_ptr_tko_tpad" not in text and "select(" in text


def diagnostic(tmp_path: Path, body: str):
    _, tr = translate_text(tmp_path, body)
    assert len(tr.diagnostics) == 1, tr.diagnostics
    d = tr.diagnostics[0]
    assert d.loc is not None and d.loc.line > 0 and d.construct != "internal", d
    return d


@pytest.mark.parametrize("body, construct, line", [
    ("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.histogram(offs, BLOCK))
    """, "tl.histogram", 7),
    ("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            i = 0
            while i < n:
                i += 1
            else:
                i = 2
            tl.store(x_ptr, i)
    """, "while-else", 7),
    ("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), y)
    """, "name", 6),
    ("""
        @triton.jit
        def k(desc, out_ptr, BLOCK: tl.constexpr):
            t = desc.load([0, 0])
            tl.store(out_ptr + tl.arange(0, BLOCK), t)
    """, "tensor descriptor", 5),  # a host-side descriptor without a block shape: located at the parameter
    ("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, n)
            tl.store(x_ptr + offs, 1.0)
    """, "constexpr", 6),
])
def test_unsupported_constructs_are_located_diagnostics(tmp_path, body, construct, line):
    d = diagnostic(tmp_path, body)
    assert d.construct == construct, d
    assert d.loc.line == line, d
    assert d.kernel == "k"


def test_syntax_error_and_no_kernels(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(HEADER + "@triton.jit\ndef k(x:\n")
    tr = translate_file(str(bad), naming=RUST_NAMING)
    assert [d.construct for d in tr.diagnostics] == ["syntax"] and tr.diagnostics[0].loc.line == 5
    empty = tmp_path / "empty.py"
    empty.write_text(HEADER + "X = 1\n")
    assert [d.construct for d in translate_file(str(empty), naming=RUST_NAMING).diagnostics] == ["kernel"]


def test_translate_dispatches_triton_files(tmp_path):
    cutile = tmp_path / "ct.py"
    cutile.write_text("import cuda.tile as ct\n")
    assert frontend_for(str(DATA / "basic.py")).name == "triton"
    assert frontend_for(str(cutile)).name == "cutile"


def test_triton_frontend_imports_no_cutile_frontend_module():
    pkg = Path(__file__).resolve().parents[2] / "src" / "tileport" / "frontends" / "triton"
    for f in pkg.glob("*.py"):
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.ImportFrom):
                assert not (n.module or "").startswith("tileport.frontends.cutile"), f


def test_scalar_parameter_dtypes():
    """Unannotated scalars: i32 (sizes, strides, compared values), f32 when named or used as a real number
    (`slope` multiplies a float tile: Triton passes the Python float as f32)."""
    k = kernels_of("ops.py")
    dts = {p.name: p.ty.dtype for p in k["silu_relu_kernel"].params if not p.is_array and not p.is_const}
    assert dts == {"n": "i32", "slope": "f32"}
    dts = {p.name: p.ty.dtype for p in k["layer_norm_kernel"].params if not p.is_array and not p.is_const}
    assert dts == {"stride": "i32", "n_cols": "i32", "eps": "f32"}
    assert any("`slope`: assumed f32" in n for n in k["silu_relu_kernel"].notes)


def test_pointer_increment_mid_body_and_runtime_step(tmp_path):
    """A pointer read after its increment sees the next iteration's address; a loop with a runtime step
    still counts iterations (regression: the increment was applied from the loop's top for the whole
    body, and a non-affine step counted no iteration)."""
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, n, step, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            p = x_ptr + offs
            q = y_ptr + offs
            for i in range(0, n, step):
                a = tl.load(p)
                p += BLOCK
                b = tl.load(p)
                tl.store(q, a + b)
                q += BLOCK
    """)
    assert not tr.diagnostics, tr.diagnostics
    text = translate([str(path)], None, faithful=True).files["src/kern.rs"]
    body = text[text.index("for i in"):]
    loads = [line for line in body.splitlines() if "load_view_tko(" in line]
    assert len(loads) == 2 and loads[0].split("[")[-1] != loads[1].split("[")[-1], loads
    assert "i_iter" in body  # (i - 0) // step: the iteration number


def test_continue_in_a_loop_that_advances_pointers_is_refused(tmp_path):
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            p = x_ptr + tl.arange(0, BLOCK)
            for i in range(n):
                if i == 3:
                    continue
                tl.store(p, 1.0)
                p += BLOCK
    """)
    assert d.construct == "pointer" and d.loc.line == 7


def test_mask_axes_follow_new_axes(tmp_path):
    """`mask[:, None]` bounds axis 0: with the same arange on both axes, the extent goes to axis 0 only
    (regression: the mask kept its 1-D axis and bounded the last axis of the tile)."""
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, n, stride, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            rows = offs < n
            x = tl.load(x_ptr + offs[:, None] * stride + offs[None, :], mask=rows[:, None], other=0.0)
            tl.store(x_ptr + offs[:, None] * stride + offs[None, :], x + 1.0, mask=rows[:, None])
    """)
    assert not tr.diagnostics, tr.diagnostics
    (kernel,) = tr.module.kernels
    assert kernel.views["x_ptr"] == {"strides": ["stride", "1"], "extents": ["n", None]}


def test_scalar_pointer_and_infinite_scalar(tmp_path):
    """`tl.load(ptr)` is element 0 of a 1-D view (regression: a rank-0 view, rejected by cutile-rs); an
    infinite scalar start value is a 0-d constant tile (regression: `let m: f32 = f32::NEG_INFINITY`)."""
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(a_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            alpha = tl.load(a_ptr)
            m = -float("inf")
            for i in range(0, n, BLOCK):
                offs = i + tl.arange(0, BLOCK)
                m = tl.maximum(m, tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), 0))
            tl.store(y_ptr, m * alpha)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (kernel,) = tr.module.kernels
    assert kernel.views["a_ptr"] == {"strides": ["1"], "extents": [None]}
    text = translate([str(path)], None, faithful=True).files["src/kern.rs"]
    assert "f32 = f32::NEG_INFINITY" not in text and "constant(f32::NEG_INFINITY, shape![])" in text
    assert "[]," not in text.replace(" ", "")


def test_entries_share_one_signature(tmp_path):
    """Every entry of a specialized kernel is lowered with the same decisions (regression: a constexpr made
    a runtime value while lowering a later entry left the earlier entries with it as a const generic)."""
    _, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, FLAG: tl.constexpr, M: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            if FLAG:
                if M > 3:
                    tl.store(x_ptr + offs, 1.0)
            else:
                tl.store(x_ptr + offs, 2.0)
    """)
    assert not tr.diagnostics, tr.diagnostics
    signatures = {tuple((p.name, str(p.ty)) for p in k.params) for k in tr.module.kernels}
    assert [k.name for k in tr.module.kernels] == ["k_flag0", "k_flag1"]
    assert len(signatures) == 1, signatures


def test_early_return_and_integer_scalar_casts(tmp_path):
    """`if c: return` at the kernel's top level makes the rest the other branch, and `pid.to(tl.int64)`
    converts through a 0-d tile (regressions: cutile-rs rejected a nested `return` and scalar i32 -> i64)."""
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, flags_ptr, n, stride, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            if tl.load(flags_ptr + row) == 0:
                return
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)
    """)
    assert not tr.diagnostics, tr.diagnostics
    text = translate([str(path)], None, faithful=True).files["src/kern.rs"]
    assert "return" not in text.split("pub unsafe fn k")[1].split("\n    }\n")[0]
    assert "convert_scalar" not in text and "exti(" in text
    d = diagnostic(tmp_path, """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            for i in range(n):
                if i == 2:
                    return
                tl.store(x_ptr + i, 1.0)
    """)
    assert d.construct == "return" and d.loc.line == 8


def test_int64_scalar_division(tmp_path):
    """`row % seq_len` on an i64 program id runs on 0-d tiles (regression: the model's scalar // and % are
    i32 only, and the kernel failed in the emitter)."""
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, seq_len, stride, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            pos = row % seq_len
            blk = row // seq_len
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + pos * stride + blk + offs, 1.0)
    """)
    assert not tr.diagnostics, tr.diagnostics
    r = translate([str(path)], None, faithful=True)
    assert r.ok, [str(x.diagnostic) for x in r.results]
    text = r.files["src/kern.rs"]
    assert "remi(" in text and "divi(" in text


def test_scalar_negation(tmp_path):
    """`-scale` of a runtime scalar is `0 - scale` (regression: cutile-rs's IR export rejects `-x` of a
    non-constant scalar)."""
    path, tr = translate_text(tmp_path, """
        @triton.jit
        def k(x_ptr, scale, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) * -scale)
    """)
    assert not tr.diagnostics, tr.diagnostics
    text = translate([str(path)], None, faithful=True).files["src/kern.rs"]
    assert "= -scale" not in text and "0.0f32 - scale" in text
