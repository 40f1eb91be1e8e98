"""The diff of a 2,000-op module must take less than a second."""

from __future__ import annotations

import time

import tir_export
import tir_kernels
import tir_mutations
from tileport.tileir import diff, read_module
from tileport.tileir.model import walk


def test_diff_of_a_2000_op_module_is_fast():
    data = tir_export.export(tir_kernels.unrolled, [("float32", 1), ("float32", 1), 1024, 150])
    ref = read_module(data)
    n_ops = sum(1 for f in ref.functions for _ in walk(f))
    assert n_ops >= 2000
    gen = tir_mutations.duplicate_constants(tir_mutations.rename_values(ref))
    defect = tir_mutations.change_tile_shape(gen, 1024, 512)
    for other, verdict in ((gen, "PASS"), (defect, "FAIL")):
        start = time.perf_counter()
        report = diff(ref, other)
        elapsed = time.perf_counter() - start
        print(f"diff of {n_ops} ops: {elapsed * 1000:.0f} ms ({report.verdict})")
        assert report.verdict == verdict
        assert elapsed < 1.0
