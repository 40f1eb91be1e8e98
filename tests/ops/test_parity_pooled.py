"""eval/measure/parity_pooled.py's pooling (no GPU): per-process and pooled geomeans of rs/cuTile, their standard
errors, and the split between cases whose port has cuTile Python's machine code and the others."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "eval" / "measure" / "parity_pooled.py"
COMMITTED = SCRIPT.parents[2] / "bench" / "results" / "2026-12-03-h200-parity-pooled.json"


@pytest.fixture(scope="module")
def pooled():
    spec = importlib.util.spec_from_file_location("parity_pooled_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(ratios: dict[str, float]) -> dict:
    records = []
    for key, ratio in ratios.items():
        op, dtype, shape = key.split(":")
        records.append({"op": op, "dtype": dtype, "shape": [int(n) for n in shape.split("x")],
                        "ratio_rs_over_cutile": ratio})
    records.append({"op": "relu", "dtype": "float16", "shape": [8], "errors": {"cutile-rs": "failed"}})
    return {"records": records}


def test_pool_splits_by_machine_code_and_pools_processes(pooled):
    runs = [run({"relu:float16:8": 1.01, "bmm:float32:2x2x2x2": 0.99, "bmm:float16:2x2x2x2": 1.04}),
            run({"relu:float16:8": 1.03, "bmm:float32:2x2x2x2": 0.99, "bmm:float16:2x2x2x2": 1.0})]
    result = pooled.pool(runs)
    assert result["processes"] == 2
    assert result["same_machine_code"]["cases"] == 2 and result["other_machine_code"]["cases"] == 1
    other = result["other_machine_code"]
    assert other["geomean_per_process"] == [1.04, 1.0]
    assert other["pooled_geomean"] == pytest.approx(math.sqrt(1.04), abs=1e-5)
    spread = abs(math.log(1.04)) / 2  # stdev of two values / sqrt(2)
    assert other["standard_error_across_processes"] == pytest.approx(spread, abs=1e-5)
    assert result["per_case"]["relu:float16:8"]["per_process"] == [1.01, 1.03]
    assert result["all"]["cases"] == 3  # the failed case has no ratio and is left out


def test_pool_keeps_only_cases_every_process_timed(pooled):
    runs = [run({"relu:float16:8": 1.0, "gelu:float16:8": 1.1}), run({"relu:float16:8": 1.0})]
    assert sorted(pooled.pool(runs)["per_case"]) == ["relu:float16:8"]


def test_committed_result_is_the_pool_of_its_per_case_ratios():
    data = json.loads(COMMITTED.read_text())
    per_case = data["per_case"]
    assert data["all"]["cases"] == len(per_case) == 89
    for i, reported in enumerate(data["all"]["geomean_per_process"]):
        logs = [math.log(case["per_process"][i]) for case in per_case.values()]
        assert math.exp(sum(logs) / len(logs)) == pytest.approx(reported, abs=2e-5)
