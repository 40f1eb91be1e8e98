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
