"""Language-tail constructs and semantic slips of real-world cuTile files (translation level, fast).

Their IR diffs against cuTile Python are in tests/wild/test_compile_unattended.py (kernels in
tests/wild/data/unattended.py).
"""

from __future__ import annotations

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
