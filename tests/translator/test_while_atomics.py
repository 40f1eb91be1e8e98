"""`while` loops and atomics (translation level, fast).

Their IR diffs against cuTile Python are in tests/wild/test_compile_unattended.py (kernels in
tests/wild/data/unattended.py), their GPU differential in tests/wild/test_unattended_gpu.py.
"""

from __future__ import annotations

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
