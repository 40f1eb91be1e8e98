"""Language-tail constructs and semantic slips of real-world cuTile files (translation level, fast).

Their IR diffs against cuTile Python are in tests/wild/test_compile_unattended.py (kernels in
tests/wild/data/unattended.py).
"""

from __future__ import annotations

import pytest

from tp_helpers import entry_text, has_line, module_text, run, write_kernels


def test_an_if_that_does_nothing_is_dropped_with_its_condition(tmp_path):
    """cuTile Python drops an `if` whose branches do nothing (the port kept `if cond {}`)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            if n > 2:
                pass
            else:
                pass
            ct.store(y, index=(0,), tile=t)
    """)
    report = run(path)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    body = entry_text(module_text(report, path), "k")
    assert "if " not in body and "n > 2" not in body, body


def _diagnostic(tmp_path, body: str):
    path = write_kernels(tmp_path, body)
    report = run(path)
    (result,) = report.results
    assert not result.ok
    return path, result.diagnostic


def _at(path, marker: str) -> tuple[int, int]:
    """(line, col) of the first occurrence of `marker` in the file, both 1-based as diagnostics give them."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if marker in line:
            return i, line.index(marker) + 1
    raise AssertionError(marker)


# Atomics, ct.pack_to_bytes and ct.unpack_from_bytes, once refused with a hint naming their cutile-rs
# counterpart, translate: tests/translator/test_while_atomics.py.


def test_mma_scaled_is_located_and_names_mmaf_scaled(tmp_path):
    path, d = _diagnostic(tmp_path, """
        @ct.kernel
        def k(a, b, sa, sb, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
            ta = ct.load(a, index=(0, 0), shape=(TM, TK))
            tb = ct.load(b, index=(0, 0), shape=(TK, TN))
            xa = ct.load(sa, index=(0, 0), shape=(TM, 1))
            xb = ct.load(sb, index=(0, 0), shape=(1, TN))
            ct.store(c, index=(0, 0), tile=ct.mma_scaled(ta, xa, tb, xb, ct.zeros((TM, TN), dtype=ct.float32)))
    """)
    assert d.construct == "ct.mma_scaled" and "mmaf_scaled" in d.hint, str(d)
    assert "no f8e8m0fnu or f4e2m1fn element types" in d.hint and "f8e8m0fnu scales" in d.hint, str(d)
    assert (d.loc.line, d.loc.col) == _at(path, "ct.mma_scaled"), str(d)


def test_len_of_a_list_of_arrays_parameter_is_located(tmp_path):
    """Grouped GEMM style `for i in range(len(xs))`: was a bare "builtin `len` is not supported here"."""
    path, d = _diagnostic(tmp_path, """
        @ct.kernel
        def k(xs, y, TILE: ConstInt):
            acc = ct.zeros((TILE,), dtype=ct.float32)
            for i in range(len(xs)):
                acc = acc + ct.load(xs[i], index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=acc)
    """)
    assert d.construct == "tuple/list parameter" and "one tensor per parameter" in d.message, str(d)
    assert "separate parameters" in d.hint
    assert (d.loc.line, d.loc.col) == _at(path, "len(xs)"), str(d)


def test_load_of_lower_rank_than_the_array_says_cutile_refuses_it_too(tmp_path):
    """cutile-gpt's attention_tile.py loads shape=(TILE_M, head_dim) from a rank-4 array: cuTile Python 1.7
    refuses it ("Expected shape length to be 4, got 2"); the diagnostic says so and how to write it."""
    path, d = _diagnostic(tmp_path, """
        @ct.kernel
        def k(q, y, TM: ConstInt, D: ConstInt):
            t = ct.load(q, index=(0, 0, ct.bid(0), 0), shape=(TM, D))
            ct.store(y, index=(ct.bid(0), 0), tile=t)
    """)
    assert d.construct == "ct.load" and "rank 2 differs from the array rank 4" in d.message, str(d)
    assert "cuTile Python refuses this too" in d.hint and "all 4 dimensions" in d.hint, str(d)
    assert (d.loc.line, d.loc.col) == _at(path, "ct.load(q"), str(d)


def test_invert_and_shifts_lower_as_cutile_python_does(tmp_path):
    """`~x` was refused ("operator Invert is not supported") and `<<`/`>>` on tiles failed at emission;
    cuTile Python lowers them to xori with all ones, shli (no overflow flag) and shri."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(a, y, TILE: ConstInt):
            x = ct.bitcast(ct.load(a, index=(ct.bid(0),), shape=(TILE,)), ct.int32)
            ct.store(y, index=(ct.bid(0),), tile=ct.bitcast(((~x) << 2) >> 1, ct.float32))
    """)
    report = run(path, {"k": [{"a": "float32", "y": "float32", "TILE": 128}]})
    assert report.ok, [str(r.diagnostic) for r in report.results]
    body = entry_text(module_text(report, path), "k")
    assert "xori(" in body and "-1i32" in body, body
    assert "shli_fixed(" in body and "overflow::None" in body and "shri(" in body, body


def test_indexing_a_list_of_arrays_parameter_is_located(tmp_path):
    """`ct.load(xs[0], ...)`: was a bare "subscript not supported here"."""
    path, d = _diagnostic(tmp_path, """
        @ct.kernel
        def k(xs, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(xs[0], index=(ct.bid(0),), shape=(TILE,)))
    """)
    assert d.construct == "tuple/list parameter" and "one tensor per parameter" in d.message, str(d)
    assert (d.loc.line, d.loc.col) == _at(path, "xs[0]"), str(d)


def test_array_slice_view_has_its_arrays_rank(tmp_path):
    """cutile-stencil's generated kernels load from `u.slice(axis=.., start=.., stop=..)` views only: the
    array's rank comes from the loads of its views (it was "cannot tell the rank of `u`", located at the
    signature). Views themselves translate: tests/translator/test_array_slice.py."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(u, y, TX: ConstInt, HX: ConstInt):
            nx = u.shape[0] - 2 * HX
            v = u.slice(axis=0, start=HX, stop=HX + nx).slice(axis=1, start=0, stop=4)
            t = ct.load(v, index=(ct.bid(0), 0), shape=(TX, 4))
            ct.store(y, index=(ct.bid(0), 0), tile=t)
    """)
    report = run(path)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    assert "u: &Tensor<E, { [U_LEN0, U_LEN1] }>" in module_text(report, path)  # rank 2


def test_generic_dtype_kernel_whose_fma_contraction_differs_per_dtype_says_so(tmp_path):
    """cutile-gpt layernorm.py: `sum_sq_acc += tx * tx` (f32 accumulator, tx of the array dtype) is one fma
    for f32 inputs and mulf + ftof + addf for f16 ones in cuTile Python. The generic port (one body for
    both) matched the f16 reference only, silently: the IR diff found 16 CRITICAL on the f32 probe. The
    translation now states it, with the fused counts per dtype."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, T: ConstInt):
            acc = ct.full((1, T), 0, dtype=ct.float32)
            for j in range(4):
                t = ct.load(x, index=(ct.bid(0), j), shape=(1, T))
                acc += t * t
            ct.store(y, index=(ct.bid(0), 0), tile=acc.astype(y.dtype))
    """)
    (result,) = run(path).results
    assert result.ok, str(result.diagnostic)
    note = next((n for n in result.notes if n.startswith("fma contraction differs per element type")), None)
    assert note is not None, result.notes
    assert "f32: 1" in note and "f16: 0" in note, note


def test_generic_dtype_kernel_with_the_same_fma_contraction_has_no_such_note(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, T: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(T,))
            ct.store(y, index=(ct.bid(0),), tile=t * t + t)
    """)
    (result,) = run(path).results
    assert result.ok and not any("fma contraction" in n for n in result.notes), result.notes
