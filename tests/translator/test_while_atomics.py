"""`while` loops and atomics (translation level, fast).

Their IR diffs against cuTile Python are in tests/wild/test_compile_unattended.py (kernels in
tests/wild/data/unattended.py), their GPU differential in tests/wild/test_unattended_gpu.py.
"""

from __future__ import annotations

import pytest

from tp_helpers import entry_text, module_text, run, write_kernels


def _translate(tmp_path, body: str) -> str:
    path = write_kernels(tmp_path, body)
    report = run(path)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    (result,) = report.results
    return entry_text(module_text(report, path), result.entries[0] if hasattr(result, "entries") else "k")


def test_while_loop_carries_what_its_test_and_body_update(tmp_path):
    """`while` was refused ("`while` loops are not supported yet")."""
    body = _translate(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            acc = ct.zeros((TILE,), dtype=ct.float32)
            i = 0
            while i < n:
                acc = acc + ct.load(x, index=(i,), shape=(TILE,))
                i += 1
            ct.store(y, index=(0,), tile=acc)
    """)
    assert "let mut i: i32 = 0i32;" in body and "let mut acc:" in body, body
    assert "while {" in body and "i < n" in body and "i = i + 1i32;" in body, body


def test_while_with_break_and_a_test_only_the_body_writes(tmp_path):
    """`seen` is only written in the body, but the next test reads it: it is loop-carried."""
    body = _translate(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            seen = 0
            while seen < n:
                t = t * 0.5
                seen = n
                if ct.max(t) > 8.0:
                    break
            ct.store(y, index=(0,), tile=t)
    """)
    assert "let mut seen: i32 = 0i32;" in body, body
    assert "seen < n" in body and "seen = n;" in body and "break;" in body, body


def test_while_true_is_a_loop_and_while_false_is_dropped(tmp_path):
    body = _translate(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            i = 0
            while True:
                i += 1
                if i >= n:
                    break
            while False:
                i += 7
            ct.store(y, index=(i,), tile=ct.load(x, index=(0,), shape=(TILE,)))
    """)
    assert "loop {" in body and "break;" in body, body
    assert "7i32" not in body and "while" not in body, body


def test_stores_in_a_while_loop_carry_their_tokens(tmp_path):
    """cuTile orders a loop's stores through loop-carried tokens (no parallel store in a `while`)."""
    body = _translate(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            i = ct.bid(0)
            while i < n:
                t = ct.load(y, index=(i,), shape=(TILE,))
                ct.store(y, index=(i,), tile=t * 2.0)
                i += ct.num_blocks(0)
    """)
    assert "y_last_op" in body and "y_last_store" in body, body


def _atomic_body(tmp_path, call: str, dtype: str = "int32") -> str:
    path = write_kernels(tmp_path, f"""
        @ct.kernel
        def k(x, cnt, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            lane = ct.arange(TILE, dtype=ct.int32)
            old = {call}
            ct.store(x, index=(ct.bid(0),), tile=old)
    """)
    report = run(path, {"k": [{"x": dtype, "cnt": dtype, "TILE": 128}]})
    assert report.ok, [str(r.diagnostic) for r in report.results]
    return entry_text(module_text(report, path), "k")


@pytest.mark.parametrize("call,mode", [
    ("ct.atomic_add(cnt, lane, t)", "atomic::Add,"), ("ct.atomic_max(cnt, (lane,), t)", "atomic::Max,"),
    ("ct.atomic_min(cnt, lane, t)", "atomic::Min,"), ("ct.atomic_and(cnt, lane, t)", "atomic::And,"),
    ("ct.atomic_or(cnt, lane, t)", "atomic::Or,"), ("ct.atomic_xor(cnt, lane, t)", "atomic::Xor,"),
    ("ct.atomic_xchg(cnt, lane, t)", "atomic::Xchg,"),
])
def test_atomic_rmw_lowers_to_atomic_rmw_tko_with_cutile_defaults(tmp_path, call, mode):
    """Atomics were refused ("not supported by the translator"); cuTile's defaults are AcqRel, device scope."""
    body = _atomic_body(tmp_path, call)
    assert "atomic_rmw_tko(" in body and mode in body, body
    assert "ordering::AcqRel, scope::Device, Some(" in body, body  # bounds mask, as gather/scatter
    assert "offset_tile(" in body, body


def test_atomic_modes_follow_the_element_type_and_keywords(tmp_path):
    body = _atomic_body(tmp_path, "ct.atomic_add(cnt, lane, t, memory_order=ct.MemoryOrder.RELAXED, "
                                  "memory_scope=ct.MemoryScope.BLOCK)", "float32")
    assert "atomic::AddF, ordering::Relaxed, scope::TileBlock" in body, body
    body = _atomic_body(tmp_path, "ct.atomic_max(cnt, lane, t, check_bounds=False)", "int64")
    assert "atomic::Max, ordering::AcqRel, scope::Device, None, Some(" in body, body  # no bounds mask


def test_atomic_cas_lowers_to_atomic_cas_tko(tmp_path):
    body = _atomic_body(tmp_path, "ct.atomic_cas(cnt, lane, 0, t)")
    assert "atomic_cas_tko(" in body and "ordering::AcqRel, scope::Device" in body, body


def test_an_acq_rel_atomic_orders_every_array_and_later_accesses_wait_for_it(tmp_path):
    """cuTile's token order: a releasing atomic joins the last op of every array; after an acquiring one,
    each memory operation's input token joins it."""
    body = _atomic_body(tmp_path, "ct.atomic_add(cnt, lane, t)")
    atomic_line = next(line for line in body.splitlines() if "atomic_rmw_tko(" in line)
    token = atomic_line.rsplit("Some(", 1)[1].split(")")[0]
    joined = next(line for line in body.splitlines() if f"let {token}: Token = join_tokens(" in line)
    assert "joined_tok" in joined, joined  # the load of x (its last op) is among the joined tokens
    store_line = next(line for line in body.splitlines() if "store_view" in line)
    store_token = store_line.split("Some(")[1].split(")")[0]
    store_join = next(line for line in body.splitlines() if f"let {store_token}: Token = join_tokens(" in line)
    assert "cnt_tok" in store_join, store_join


def test_a_row_of_counters_by_atomic_add_gather_and_scatter(tmp_path):
    """A block's own row of a 2-D counter array (moe_align's counts / offsets): a scalar row index broadcast
    against a tile of columns, a scalar update, both dimensions bounds-checked (an out-of-range column is
    skipped), and the gather / scatter of the same row after the atomic wait for it."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(ids, cnt, TILE: ConstInt):
            row = ct.bid(0)
            t = ct.load(ids, index=(row,), shape=(TILE,))
            ct.atomic_add(cnt, (row, t), 1)
            before = ct.gather(cnt, (row, t))
            ct.scatter(cnt, (row, t), before + 1, mask=t > 0)
    """)
    report = run(path, {"k": [{"ids": "int32", "cnt": "int32", "TILE": 64}]})
    assert report.ok, [str(r.diagnostic) for r in report.results]
    body = entry_text(module_text(report, path), "k")
    lines = body.splitlines()
    atomic = next(i for i, line in enumerate(lines) if "atomic_rmw_tko(" in line)
    head = "\n".join(lines[:atomic])
    assert "scalar_to_tile(row)" in head and "constant(1i32, shape![TILE])" in head, body
    assert head.count("predicate::LessThan") == 2 and "= cnt_stride0;" in head, body  # row and column in bounds
    assert "atomic::Add, ordering::AcqRel, scope::Device, Some(cnt_old_in), " in lines[atomic], body
    gather = next(line for line in lines if "load_ptr_tko_tpad(" in line)
    scatter = next(line for line in lines if "store_ptr_tko(" in line)
    assert gather.endswith("Some(cnt_tok), Latency::<0>) };"), gather  # waits for the atomic's token
    assert "Some(cnt_scatter_mask)" in scatter, scatter  # the user mask and-ed with both bounds


def test_bitwise_atomics_take_the_array_dtype_exactly(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, cnt, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.atomic_or(cnt, ct.arange(TILE, dtype=ct.int32), ct.astype(t, ct.int64))
    """)
    report = run(path, {"k": [{"x": "int32", "cnt": "int32", "TILE": 128}]})
    (result,) = report.results
    assert not result.ok and "must have the array's dtype" in result.diagnostic.message, result.diagnostic


def test_pack_to_bytes_flattens_then_packs_to_u8(tmp_path):
    """ct.pack_to_bytes was refused ("not supported by the translator"); cuTile reshapes to 1-D, then packs."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TM: ConstInt, TN: ConstInt):
            t = ct.load(x, index=(ct.bid(0), 0), shape=(TM, TN))
            ct.store(y, index=(ct.bid(0),), tile=ct.pack_to_bytes(t))
    """)
    report = run(path, {"k": [{"x": "float16", "y": "uint8", "TM": 16, "TN": 32}]})
    assert report.ok, [str(r.diagnostic) for r in report.results]
    body = entry_text(module_text(report, path), "k")
    assert ".reshape(shape![TM_X_TN])" in body, body
    assert "Tile<u8, { [TM_X_TN_X_2] }> = pack(" in body, body


def test_pack_to_bytes_of_bytes_is_a_bitcast_and_bool_is_refused(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=ct.pack_to_bytes(t))
    """)
    report = run(path, {"k": [{"x": "int8", "y": "uint8", "TILE": 128}]})
    assert report.ok, [str(r.diagnostic) for r in report.results]
    body = entry_text(module_text(report, path), "k")
    assert "pack(" not in body and "bitcast(" in body, body
    report = run(path, {"k": [{"x": "bool", "y": "uint8", "TILE": 128}]})
    (result,) = report.results
    assert not result.ok and "not bool" in result.diagnostic.message, result.diagnostic


def test_a_while_over_a_flag_the_body_sets_runs_on_a_runtime_flag(tmp_path):
    """`going = True; while going: ...; going = False` would fold to an endless `loop` (the test read the
    constant before the body ran); the flag is a runtime bool the body sets."""
    body = _translate(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            going = True
            while going:
                t = t * 0.5
                going = False
            ct.store(y, index=(0,), tile=t)
    """)
    assert "let mut going: bool = true;" in body and "going = false;" in body, body
    assert "loop {" not in body and "while going {" in body, body


def test_a_while_test_that_stays_a_constant_the_body_changes_is_refused(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            shape = (1, 2)
            while len(shape) < 3:
                shape = (1, 2, 3)
            ct.store(y, index=(0,), tile=t)
    """)
    (result,) = run(path).results
    assert not result.ok and result.diagnostic.construct == "while", result.diagnostic
    assert "compile-time value that the body reassigns" in result.diagnostic.message, result.diagnostic


def test_an_if_that_stores_in_one_branch_and_loads_in_the_other_yields_the_store_token(tmp_path):
    """Regression: the branches' effects were merged with the else branch winning ({y: store} | {y: load} ->
    load), so the `if` did not yield y's last store and the load after it waited only for the store before
    the `if` (cuTile takes the maximum effect: both of y's tokens are yielded)."""
    body = _translate(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            if n > 0:
                ct.store(y, index=(0,), tile=t)
            else:
                ct.store(x, index=(1,), tile=ct.load(y, index=(1,), shape=(TILE,)))
            ct.store(x, index=(0,), tile=ct.load(y, index=(0,), shape=(TILE,)))
    """)
    assert "let mut y_last_store: Token" in body, body


def test_unpack_from_bytes_unpacks_a_u8_tile(tmp_path):
    """ct.unpack_from_bytes was refused ("not supported by the translator"); cuTile: Tile IR `unpack`."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            b = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=ct.unpack_from_bytes(b, ct.float16))
    """)
    report = run(path, {"k": [{"x": "uint8", "y": "float16", "TILE": 256}]})
    assert report.ok, [str(r.diagnostic) for r in report.results]
    body = entry_text(module_text(report, path), "k")
    assert "Tile<f16, { [TILE_DIV_2] }> = unpack(" in body, body
    report = run(path, {"k": [{"x": "float16", "y": "float16", "TILE": 256}]})
    (result,) = report.results
    assert not result.ok and "1-D uint8 tile" in result.diagnostic.message, result.diagnostic
