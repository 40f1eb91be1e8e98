"""The GPU measurement commands on a machine without a GPU: a one-line reason and exit 2, no file."""

from __future__ import annotations

import pytest

from tileport.gpu import bench, callcost
from tileport.ops.backends import cuda_unavailable_reason


@pytest.mark.parametrize("main", [callcost.main, bench.main], ids=["callcost", "bench"])
def test_refuses_without_a_gpu(main, tmp_path, capsys):
    if cuda_unavailable_reason() is None:
        pytest.skip("a CUDA GPU is visible: the refusal path does not apply")
    out = tmp_path / "r.json"
    assert main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU: " in err and cuda_unavailable_reason() in err
    assert not out.exists()


def _cost(rs, eager, raw):
    cases = {"tileport_cutile_rs": {"host_us": rs}, "torch_eager": {"host_us": eager}, "c_abi_prepared": {"host_us": raw}}
    return {"vector_add": {"cases": {k: v for k, v in cases.items() if v["host_us"] is not None}}}


def test_call_cost_summary_holds_the_targets():
    s = callcost.summary(_cost(9.0, 10.0, 4.0))
    assert s["op_target_met"] and s["c_abi_target_met"] and s["cutile_rs_op_host_us"] == 9.0
    assert not callcost.summary(_cost(11.0, 10.0, 4.0))["op_target_met"]  # slower than torch eager
    assert not callcost.summary(_cost(16.0, 20.0, 4.0))["op_target_met"]  # above 15 µs
    assert not callcost.summary(_cost(9.0, 10.0, 6.0))["c_abi_target_met"]
    missing = callcost.summary(_cost(None, 10.0, None))  # a case that failed is no pass
    assert not missing["op_target_met"] and not missing["c_abi_target_met"]
