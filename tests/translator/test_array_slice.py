"""`Array.slice(axis, start, stop)` (the kernels cutile-stencil generates), at translation level (fast).

Its IR diff against cuTile Python is `slice_kernel` in tests/wild/test_compile_unattended.py.
"""

from __future__ import annotations

import pytest

from tp_helpers import entry_text, has_line, launcher_text, module_text, run, write_kernels

STENCIL = """
    @ct.kernel
    def k(u, out, TX: ConstInt, HX: ConstInt):
        nx = u.shape[0] - 2 * HX
        left = u.slice(axis=0, start=HX - 1, stop=HX - 1 + nx)
        right = u.slice(axis=0, start=HX + 1, stop=HX + 1 + nx)
        o = out.slice(axis=0, start=HX, stop=HX + nx)
        t = ct.load(left, index=(ct.bid(0),), shape=(TX,)) + ct.load(right, index=(ct.bid(0),), shape=(TX,))
        ct.store(o, index=(ct.bid(0),), tile=t)
"""


def _translated(tmp_path, body: str, configs=None) -> tuple[str, object]:
    path = write_kernels(tmp_path, body)
    report = run(path, configs)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    return module_text(report, path), report


def test_a_slice_is_a_tensor_view_at_the_offset_pointer(tmp_path):
    text, _ = _translated(tmp_path, STENCIL, {"k": [{"u": "float32", "out": "float32", "TX": 128, "HX": 4}]})
    body = entry_text(text, "k_hx4")
    # the offset: start * stride (the last stride is 1) as 0-d tiles, a multiply cutile-rs does not fold, widened
    assert has_line(body, "let u_off_start: Tile<i32, { [] }> = scalar_to_tile(3i32);"), body
    assert has_line(body, "let u_off_elems: Tile<i32, { [] }> = muli_fixed(u_off_start, u_off_stride, overflow::None);")
    assert has_line(body, "let u_off: Tile<u64, { [] }> = exti(u_off_elems);")
    assert has_line(body, "let u_at: PointerTile<*mut f32, { [] }> = u_base.offset_tile(u_off);")
    # cuTile Python's alignment: gcd(16 (the base), 3 * 4 bytes) = 4; 5 * 4 -> 4; 4 * 4 -> 16
    assert has_line(body, "let u_aligned: PointerTile<*mut f32, { [] }> = unsafe { assume_div_by::<_, 4>(u_at) };")
    assert has_line(body, "let out_aligned: PointerTile<*mut f32, { [] }> = unsafe { assume_div_by::<_, 16>(out_at) };")
    # the view: extent stop - start, assumed non-negative, the array's token
    assert body.count("make_tensor_view(") == 3, body
    assert "make_tensor_view(out_aligned, o_shape, o_strides, out.token())" in body
    # views of views are borrowed by their partition views, made where they are used
    assert "make_partition_view(&left, shape![TX]" in body
    assert "let mut o_out: PartitionMut<f32, { [TX] }> = unsafe { o.partition_full_mut(shape![TX]) };" in body
    assert "pub fn muli_fixed<" in text  # the shim the multiply needs


def test_slice_alignment_differs_per_dtype_so_the_entries_split(tmp_path):
    configs = {"k": [{"u": dt, "out": dt, "TX": 128, "HX": 4} for dt in ("float32", "float16")]}
    text, report = _translated(tmp_path, STENCIL, configs)
    (result,) = report.results
    assert sorted(result.entries) == ["k_hx4_f16", "k_hx4_f32"], result.entries
    assert "assume_div_by::<_, 4>(u_at)" in entry_text(text, "k_hx4_f32")
    assert "assume_div_by::<_, 2>(u_at)" in entry_text(text, "k_hx4_f16")
    assert any(n.startswith("the alignment of `Array.slice` views differs per element type") for n in result.notes)


def test_slice_start_from_a_constant_without_values_becomes_a_runtime_parameter(tmp_path):
    """No values: the constant is a typed runtime parameter and the view is aligned as its element size."""
    text, report = _translated(tmp_path, STENCIL)
    (result,) = report.results
    assert result.ok and all(e.startswith("k_") for e in result.entries), result.entries
    body = entry_text(text, result.entries[0])
    assert "HX: i32" in body and "assume_div_by::<_, 4>(u_at)" in body, body


def test_a_view_of_a_view_makes_only_the_view_in_use(tmp_path):
    text, _ = _translated(tmp_path, """
        @ct.kernel
        def k(u, out, n, TX: ConstInt, TY: ConstInt):
            v = u.slice(axis=0, start=n, stop=u.shape[0]).slice(axis=1, start=2, stop=u.shape[1])
            ct.store(out, index=(ct.bid(0), ct.bid(1)), tile=ct.load(v, index=(ct.bid(0), ct.bid(1)), shape=(TX, TY)))
    """, {"k": [{"u": "float32", "out": "float32", "n": "int32", "TX": 16, "TY": 64}]})
    body = entry_text(text, "k")
    assert body.count("make_tensor_view(") == 1, body
    # the row offset multiplies by the row stride (a launcher-passed argument), the column offset by 1;
    # the second offset starts from the first offset's pointer, which gets no alignment assumption (no view
    # is made of it) but carries its alignment: gcd(16, 4 bytes (a runtime start)), then gcd(4, 2 * 4) = 4 as
    # captured; a row stride of 16 bytes makes it gcd(16, 2 * 4) = 8, so the launcher computes it (a generic)
    assert "scalar_to_tile(u_stride0)" in body and "= u_at.offset_tile(u_slice_off);" in body, body
    assert body.count("assume_div_by") == 1 and "assume_div_by::<_, U_SLICE_ALIGNED>(u_slice_at)" in body, body
    assert "Array::<{ [-1, 1] }> { dims: &[v_s0] }" in body and "(u_stride0: i32, u: &Tensor<" in body.splitlines()[0]
    assert "params.push(u.strides[0] as i32);" in launcher_text(text, "tileport_k")


@pytest.mark.parametrize("call, message", [
    ("u.slice(axis=n, start=0, stop=4)", "axis must be a constant integer"),
    ("u.slice(axis=2, start=0, stop=4)", "axis 2 out of range for rank 1"),
    ("u.slice(axis=0, start=4, stop=2)", "stop must be greater than or equal to start"),
    ("u.slice(axis=0, start=-1, stop=2)", "start must be non-negative"),
    ("u.slice(axis=0, start=0.5, stop=2)", "start must be an integer"),
])
def test_slice_misuse_is_a_located_diagnostic(tmp_path, call, message):
    path = write_kernels(tmp_path, f"""
        @ct.kernel
        def k(u, out, n):
            v = {call}
            ct.store(out, index=(0,), tile=ct.load(v, index=(0,), shape=(4,)))
    """)
    report = run(path, {"k": [{"u": "float32", "out": "float32", "n": "int32"}]})
    (result,) = report.results
    assert not result.ok and message in result.diagnostic.message, str(result.diagnostic)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "v = u.slice" in text)
    assert result.diagnostic.loc.line == line, str(result.diagnostic)


def test_accesses_through_views_of_one_array_are_ordered_as_that_arrays(tmp_path):
    """cuTile Python orders a store through one view after a load through another view of the same array."""
    text, _ = _translated(tmp_path, """
        @ct.kernel
        def k(x, TILE: ConstInt):
            n = x.shape[0] - 1
            src = x.slice(axis=0, start=1, stop=1 + n)
            dst = x.slice(axis=0, start=0, stop=n)
            ct.store(dst, index=(ct.bid(0),), tile=ct.load(src, index=(ct.bid(0),), shape=(TILE,)))
    """, {"k": [{"x": "float32", "TILE": 128}]})
    body = entry_text(text, "k")
    assert "join_tokens(&[" in body and "store_view_raw(&dst_view" in body, body


def test_gather_through_a_view_is_refused_with_a_location(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            v = x.slice(axis=0, start=1, stop=x.shape[0])
            ct.store(y, index=(0,), tile=ct.gather(v, ct.arange(TILE, dtype=ct.int32)))
    """)
    report = run(path, {"k": [{"x": "float32", "y": "float32", "TILE": 128}]})
    (result,) = report.results
    assert not result.ok and "ct.gather on an `Array.slice` view" in result.diagnostic.message
    assert result.diagnostic.loc.line == 9, str(result.diagnostic)


def test_a_views_extent_is_read_from_its_slice_and_a_rebound_view_is_sliced_again(tmp_path):
    """`v.shape[0]` of a view is its `stop - start` (cuTile makes no tensor view to read it), and `v = v.slice(..)`
    slices the view bound last."""
    text, _ = _translated(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            v = x.slice(axis=0, start=1, stop=x.shape[0])
            v = v.slice(axis=0, start=2, stop=v.shape[0])
            ct.store(y, index=(ct.bid(0),), tile=ct.load(v, index=(ct.bid(0),), shape=(TILE,)))
    """, {"k": [{"x": "float32", "y": "float32", "TILE": 64}]})
    body = entry_text(text, "k")
    assert body.count("make_tensor_view(") == 1 and "v.shape()" not in body, body
    assert has_line(body, "let v_n: i32 = x_n - 2i32;") and "= x_at.offset_tile(v_off);" in body, body


def test_a_view_reassigned_in_a_branch_is_a_located_diagnostic(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            v = x.slice(axis=0, start=1, stop=x.shape[0])
            if n > 3:
                v = x.slice(axis=0, start=2, stop=x.shape[0])
            ct.store(y, index=(ct.bid(0),), tile=ct.load(v, index=(ct.bid(0),), shape=(TILE,)))
    """)
    report = run(path, {"k": [{"x": "float32", "y": "float32", "n": "int32", "TILE": 64}]})
    (result,) = report.results
    d = result.diagnostic
    assert not result.ok and d.construct == "array.slice" and "cannot be reassigned" in d.message, str(d)
    assert d.loc.line == next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "start=1" in t)  # the view reassigned


def test_a_loop_invariant_view_is_made_before_the_loop(tmp_path):
    """cuTile Python hoists a view whose bounds do not change in the loop; one that depends on the index stays."""
    text, _ = _translated(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            acc = ct.zeros((TILE,), dtype=ct.float32)
            for i in range(n):
                v = x.slice(axis=0, start=3, stop=x.shape[0])
                w = x.slice(axis=0, start=i * TILE, stop=x.shape[0])
                acc = acc + ct.load(v, index=(i,), shape=(TILE,)) + ct.load(w, index=(0,), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=acc)
    """, {"k": [{"x": "float32", "y": "float32", "n": "int32", "TILE": 64}]})
    body = entry_text(text, "k")
    loop = body.index("for i in ")
    assert body.index("let v: Tensor<") < loop < body.index("let w: Tensor<"), body
