"""The decode half of tileport.gpu.sdpa_compare on CPU: its cases, byte counts, split sweep and
summary (the timing itself is GPU-only)."""

from __future__ import annotations

from tileport.gpu import sdpa_compare as sc
from tileport.ops import plan_cache
from tileport.ops.specs import _attention as A


def test_decode_cases_are_at_least_64k_tokens():
    assert all(b * s >= 65536 for b, s in sc.DECODE_CASES)
    assert sc.kv_bytes(1, 1) == 2 * sc.HEADS_KV * sc.HEAD_DIM * 2


def test_split_sweep_starts_at_the_plans_setting_and_restores_it(monkeypatch):
    cleared = []
    monkeypatch.setattr(plan_cache, "clear", lambda: cleared.append(1))
    assert sc.DECODE_SWEEP[0] == A.DECODE_BLOCKS_PER_SM
    before = A.DECODE_BLOCKS_PER_SM
    splits = A.decode_splits(16, 8, 8192, 132)[0]
    with sc._BlocksPerSm(8):
        assert A.DECODE_BLOCKS_PER_SM == 8
        assert A.decode_splits(16, 8, 8192, 132)[0] > splits  # the plan reads the setting
    assert A.DECODE_BLOCKS_PER_SM == before and len(cleared) == 2


def test_decode_summary_names_the_fastest_and_the_parity():
    first = sc.DECODE_SWEEP[0]
    rec = {"columns": {"sdpa_flash_attention": {"median_us": 100.0},
                       "sdpa_cudnn_attention": {"error": "x"},
                       f"cutile@{first}": {"median_us": 80.0},
                       f"cutile-rs@{first}": {"median_us": 88.0},
                       "cutile@8": {"median_us": 70.0}, "cutile-rs@8": {"error": "y"}}}
    sc._decode_summary(rec)
    assert rec["fastest_sdpa"] == "sdpa_flash_attention"
    assert rec["best_cutile"] == "cutile@8" and rec["best_cutile-rs"] == f"cutile-rs@{first}"
    assert rec["parity_rs_over_cutile"] == [88.0 / 80.0]
    assert rec["columns"][f"cutile@{first}"]["t_over_fastest_sdpa"] == 0.8


def test_kernel_breakdown_groups_trace_kernels_by_name():
    events = [{"cat": "kernel", "ph": "X", "name": "partial", "dur": d,
               "args": {"grid": [1, 512, 1], "block": [128, 1, 1], "registers per thread": 184}}
              for d in (10.0, 12.0)]
    events += [{"cat": "kernel", "ph": "X", "name": "combine", "dur": 5.0, "args": {}},
               {"cat": "cuda_runtime", "ph": "X", "name": "cudaLaunchKernel", "dur": 3.0}]
    got = sc.kernels_of_trace(events, reps=2)
    assert [k["name"] for k in got] == ["partial", "combine"]
    assert got[0]["per_rep"] == 1 and got[0]["median_us"] == 11.0
    assert got[0]["grid"] == [1, 512, 1] and got[0]["registers per thread"] == 184
    assert got[1]["per_rep"] == 0.5 and got[1]["block"] is None
