"""The parts of tileport.gpu.callcost that run without a GPU: the binding comparison against a stub
with a launcher's C signature, and the summary of the graph / torch.compile checks."""

from __future__ import annotations

import json
import shutil

import pytest

from tileport.gpu import callcost


def test_binding_cost_times_every_binding(tmp_path, monkeypatch):
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler to build the stub")
    monkeypatch.setattr(callcost, "BINDING_CALLS", 200)
    monkeypatch.setattr(callcost, "BINDING_ROUNDS", 3)
    out = tmp_path / "binding.json"
    assert callcost.main(["--only", "binding", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert {"ctypes_argtypes", "ctypes_prepared"} <= rec.keys()
    assert all(rec[k]["host_us"] > 0 for k in ("ctypes_argtypes", "ctypes_prepared"))
    assert rec["cheapest"] in rec


def test_binding_cost_records_a_missing_compiler(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    rec = callcost.binding_cost()
    assert "no C compiler" in rec["error"]


def test_summary_reports_each_check_mode():
    cost = {"vector_add": {"cases": {"tileport_cutile_rs": {"host_us": 9.0}, "torch_eager": {"host_us": 10.0},
                                     "c_abi_prepared": {"host_us": 4.0}}}}
    graph = {"global": {"ok": True}, "relaxed": {"ok": False, "error": "capture invalidated"}}
    s = callcost.summary(cost, graph, {"default": {"ok": True}})
    assert s["graph_ok"] == {"global": True, "relaxed": False}
    assert s["compile_ok"] == {"default": True}
    assert "graph_ok" not in callcost.summary(cost)


def test_every_check_mode_can_be_run_alone():
    assert set(callcost.ONLY) == {"binding", "python", "graph_c_abi:global", "graph:global", "graph:thread_local", "graph:relaxed",
                                  "compile:default", "compile:reduce-overhead"}


def test_a_failing_check_is_recorded_not_raised(tmp_path, monkeypatch):
    def broken(mode):
        raise RuntimeError(f"capture invalidated ({mode})")
    monkeypatch.setitem(callcost.CHECKS, "graph", (broken, ("global",)))
    out = tmp_path / "check.json"
    assert callcost.run_one("graph", "global", out) == 1
    rec = json.loads(out.read_text())
    assert rec == {"ok": False, "mode": "global", "error": "RuntimeError: capture invalidated (global)"}


def test_a_check_whose_process_fails_is_recorded(monkeypatch):
    from tileport.ops.backends import cuda_unavailable_reason
    if cuda_unavailable_reason() is None:
        pytest.skip("a CUDA GPU is visible: the check process would run")
    rec = callcost.check_in_subprocess("graph", "relaxed")
    assert rec["ok"] is False and rec["mode"] == "relaxed"
    assert rec["error"].startswith("exit 2: ") and "needs a CUDA GPU" in rec["error"]


def test_summary_splits_the_c_abi_call_into_floors_and_ours():
    cases = {"c_abi_prepared": {"host_us": 9.5}, "binding_floor": {"host_us": 1.0}, "driver_args": {"host_us": 3.0},
             "driver_noop": {"host_us": 2.5}}
    s = callcost.summary({"vector_add": {"cases": cases}})
    assert s["c_abi_floors_us"] == {"binding_floor": 1.0, "binding_floor_replay": None, "driver_noop": 2.5,
                                    "driver_args": 3.0}
    assert s["c_abi_case"] == "c_abi_prepared" and s["c_abi_ours_us"] == pytest.approx(5.5)
    # the op path's prepared launch, over its own binding floor, when measured
    replay = dict(cases, c_abi_replay={"host_us": 6.0}, binding_floor_replay={"host_us": 0.5})
    s = callcost.summary({"vector_add": {"cases": replay}})
    assert s["c_abi_case"] == "c_abi_replay" and s["c_abi_host_us"] == 6.0
    assert s["c_abi_ours_us"] == pytest.approx(2.5) and s["c_abi_target_met"] is False
    missing = callcost.summary({"vector_add": {"cases": {"c_abi_prepared": {"host_us": 9.5},
                                                        "driver_args": {"error": "no libcuda"}}}})
    assert "c_abi_ours_us" not in missing and missing["c_abi_floors_us"]["driver_args"] is None


def test_noop_ptx_declares_both_floor_kernels():
    assert ".entry noop_0 {" in callcost.NOOP_PTX
    assert callcost.NOOP_PTX.count(".param .u64") == callcost.FLOOR_PARAMS


def test_floor_cases_record_what_cannot_be_set_up(monkeypatch):
    monkeypatch.setattr(callcost, "driver_floor_cases", lambda: (_ for _ in ()).throw(OSError("no libcuda.so.1")))
    cases = callcost._floor_cases()
    for name in callcost.DRIVER_CASES:
        with pytest.raises(RuntimeError, match="no libcuda"):
            cases[name]()
    if shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"):
        assert cases["binding_floor"]() == 0  # the stub returns 0


def test_floor_table_puts_the_cases_side_by_side_cheapest_first():
    cases = {"torch_eager": {"host_us": 11.0}, "driver_call": {"host_us": 0.2}, "c_abi_prepared": {"host_us": 4.5},
             "driver_noop": {"host_us": 2.5}, "tileport_cutile_rs": {"host_us": 10.0},
             "ct_launch": {"error": "no cuda.tile"}, "py_call_key": {"host_us": 1.0}}
    table = callcost.floor_table(cases)
    assert list(table) == ["driver_call", "driver_noop", "c_abi_prepared", "tileport_cutile_rs", "torch_eager"]
    s = callcost.summary({"vector_add": {"cases": cases}})
    assert s["floors_us"] == table
    assert s["shares_us"] == {"op_compiled": pytest.approx(5.5), "launch_over_call": pytest.approx(2.3)}
    replay = dict(cases, c_abi_replay={"host_us": 3.5}, tileport_cutile_rs_python={"host_us": 12.0})
    s = callcost.summary({"vector_add": {"cases": replay}})
    assert s["shares_us"] == {"op_python": pytest.approx(8.5), "op_compiled": pytest.approx(6.5),
                              "replay_saves": pytest.approx(1.0), "launch_over_call": pytest.approx(2.3)}
    assert s["cutile_rs_op_python_host_us"] == 12.0 and s["fastcall"]  # which path the op call took, said


def test_python_breakdown_times_every_layer_on_cpu(tmp_path, monkeypatch):
    """--only python: every layer of the cached cutile-rs op call, on CPU tensors with the stub
    library (needs torch and a C compiler); the op call costs more than any one of its layers."""
    pytest.importorskip("torch", reason="torch is not installed")
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler to build the stub library")
    monkeypatch.setattr(callcost, "PY_CALLS", 20)
    monkeypatch.setattr(callcost, "PY_ROUNDS", 3)
    from tileport.ops import api, plan_cache
    default = api._default
    out = tmp_path / "python.json"
    assert callcost.main(["--only", "python", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    us = {k: v["host_us"] for k, v in rec["host_us"].items()}
    assert set(us) == set(callcost.PY_CASES) and all(v > 0 for v in us.values())
    assert us["op_backend"] > max(us["call_key"], us["launch"], us["alloc_output"])
    assert api._default is default and plan_cache.size() == 0  # the default backend restored, no plan left


DRIVER_FLOOR_PROBE = """
import ctypes, json, sys
fake = ctypes.CDLL(sys.argv[1])
fake.cuCtxSetCurrent(ctypes.c_void_p(0x1234))  # a current context, as torch's would be
fake.fake_cuda_last_launch.restype = ctypes.POINTER(ctypes.c_uint64)
from tileport.gpu import callcost
cases = callcost.driver_floor_cases(stream_handle=0, device=0)  # torch's default stream has handle 0
streams = []
for name in callcost.DRIVER_CASES:
    cases[name]()
    streams.append(fake.fake_cuda_last_launch()[7])
print(json.dumps({"cases": sorted(cases), "streams": streams}))
"""


@pytest.mark.cargo
def test_driver_floors_run_on_the_default_stream(library, tmp_path):
    """Regression: on torch's default stream (handle 0) every driver floor case failed to set up
    (ctypes.c_void_p(0).value is None, and the empty launch's stream argument was built from it).
    On the fake CUDA driver: each floor case runs, and the launches go to stream 0."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fake_driver import build_fake_driver

    from tileport import toolchain
    fake = build_fake_driver(tmp_path)
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(library.path), TILEPORT_JIT_CACHE="0",
               PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    proc = subprocess.run([sys.executable, "-c", DRIVER_FLOOR_PROBE, str(fake)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["cases"] == sorted(callcost.DRIVER_CASES)
    assert out["streams"][1:] == [0, 0, 0]  # driver_noop, driver_args, c_abi_empty (driver_call launches nothing)
