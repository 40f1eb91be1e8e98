"""`tileport port` on kernels outside the operator library, with launches: D and E test the port
against its SOURCE cuTile kernel on the recorded (or inferred) launches. The GPU is simulated by a
numpy device (the real harness, `tileport.gpu.launch_check`, with fake kernels), so the whole flow
runs on the CPU: the spec configures A/B; without a GPU, D/E end BLOCKED(env); evidence recorded "on a
GPU machine" (`record_evidence`, the same fingerprints as on the H200) takes the run to DONE; a
changed launch makes it stale; a wrong port fails D (class kernel); no launches at all is FAIL_FIXABLE
with the hint to record them (it was BLOCKED(env), as if a GPU could help)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DATA, route, verdict

from tileport.gpu import launch_check
from tileport.pipeline import resolve_targets
from tileport.pipeline.context import Session

pytestmark = pytest.mark.cargo

FILES = [str(DATA / "rp_scale.py"), str(DATA / "rp_take.py")]


def spec(n=1000):
    return {"format": "tileport-launches", "version": 1, "launches": [
        {"framework": "cutile", "kernel": "scale_kernel", "file": "/gpu-machine/rp_scale.py", "grid": [4],
         "args": [{"name": "x", "kind": "array", "dtype": "float16", "shape": [n], "strides": [1]},
                  {"name": "y", "kind": "array", "dtype": "float16", "shape": [n], "strides": [1]},
                  {"name": "alpha", "kind": "scalar", "dtype": "float32", "value": 0.5},
                  {"name": "TILE", "kind": "const", "value": 256}]},
        {"framework": "cutile", "kernel": "take_kernel", "file": "/gpu-machine/rp_take.py", "grid": [7],
         "args": [{"name": "src", "kind": "array", "dtype": "float32", "shape": [5000], "strides": [1]},
                  {"name": "idx", "kind": "array", "dtype": "int32", "shape": [777], "strides": [1],
                   "range": [0, 4999]},
                  {"name": "out", "kind": "array", "dtype": "float32", "shape": [777], "strides": [1]},
                  {"name": "TILE", "kind": "const", "value": 128}]}]}


def scale(x, y, alpha, tile):
    y[:] = x * alpha


def take(src, idx, out, tile):
    out[:] = src[idx]


KERNELS = {"scale_kernel": scale, "take_kernel": take}


class FakeGPU:
    """Stands in for TorchDevice: numpy buffers, Python kernels for both sides (`port` overrides)."""

    port: dict = {}

    def __init__(self, source_kernels, port_library, budget_s=0.2):
        self.source = {}

    def make(self, arg, host):
        base = host.astype(np.float64) if arg.dtype.startswith(("float", "bfloat")) else host.copy()
        return base, np.lib.stride_tricks.as_strided(base, arg.shape, [s * base.itemsize for s in arg.strides])

    def clone(self, arg, handle):
        base = handle[0].copy()
        return base, np.lib.stride_tricks.as_strided(base, arg.shape, [s * base.itemsize for s in arg.strides])

    def value(self, handle):
        return handle[1]

    def to_host(self, arg, handle):
        return np.array(handle[1])

    def run_source(self, plan, values):
        KERNELS[plan.kernel](*values)

    def run_port(self, plan, values):
        self.port.get(plan.kernel, KERNELS[plan.kernel])(*values)

    def sync(self):
        pass

    def time_us(self, fn):
        fn()
        return 10.0

    def name(self):
        return "simulated GPU"


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setattr(launch_check, "TorchDevice", FakeGPU)
    FakeGPU.port = {}
    return FakeGPU


def test_recorded_launches_take_the_port_to_done_through_gpu_evidence(tmp_path, pipeline, fake_gpu):
    sp = tmp_path / "launches.json"
    sp.write_text(json.dumps(spec()))
    out = tmp_path / "out"
    res, _ = pipeline(resolve_targets(FILES, launches=sp), out, native_gpu=False)
    for k in ("scale_kernel", "take_kernel"):
        assert route(res[k]) == ["A PASS", "B COMPILED", "D BLOCKED/env", "E BLOCKED/env"], route(res[k])
        assert res[k].ok  # the best state without a GPU
    a = json.loads((out / "scale_kernel" / "A" / "analysis.json").read_text())
    assert a["config_source"] == f"launches:spec:{sp}"
    assert [c["constants"] for c in a["configurations"]] == [{"TILE": 256}]
    assert a["configurations"][0]["arrays"] == {"x": ["float16", 1], "y": ["float16", 1]}
    d = verdict(out, "take_kernel", "D")
    assert "launch_check record" in d["reason"] and d["details"]["evidence"]["launch_source"] == f"spec:{sp}"

    # "on the GPU machine": the harness records evidence for the crate B built
    crate = verdict(out, "scale_kernel", "B")["details"]["library"]
    ev = launch_check.record_evidence(FILES, sp, crate["crate"], crate["library"], tmp_path / "gpu")
    doc = json.loads(ev.read_text())
    assert [r["ok"] for r in doc["check"]] == [True, True] and not doc["problems"]

    res, _ = pipeline(resolve_targets(FILES, launches=sp), out, native_gpu=False, resume=True,
                      gpu_results=[tmp_path / "gpu"])
    for k in ("scale_kernel", "take_kernel"):
        assert route(res[k]) == ["A PASS", "B COMPILED", "D ALL_PASS", "E DONE"], route(res[k])
        assert res[k].route[0]["reused"] and not res[k].route[2]["reused"]
        final = json.loads((out / k / "final.json").read_text())
        assert final["passed"] and not final["missing"]
    e = verdict(out, "take_kernel", "E")
    assert e["details"]["geomean_ratio"] == 1.0 and e["details"]["reference_backend"] == "cutile"

    # another launch (a different length): the evidence no longer describes it
    sp.write_text(json.dumps(spec(n=1024)))
    res, _ = pipeline(resolve_targets(FILES, launches=sp), out, native_gpu=False, resume=True,
                      gpu_results=[tmp_path / "gpu"])
    assert route(res["scale_kernel"]) == ["A PASS", "B COMPILED", "D BLOCKED/env", "E BLOCKED/env"]
    d = verdict(out, "scale_kernel", "D")
    assert "recorded for another build" in d["reason"]
    assert "launches" in d["details"]["evidence"]["launch:rp_scale.scale_kernel"]["changed"]
    assert route(res["take_kernel"])[2] == "D ALL_PASS"  # its launches did not change


def test_on_a_gpu_d_runs_the_differential_test_and_catches_a_wrong_port(tmp_path, pipeline, fake_gpu, monkeypatch):
    monkeypatch.setattr(Session, "gpu", lambda self: (True, ""))

    def wrong(x, y, alpha, tile):
        y[:] = x * alpha
        y[-1] = 0.0  # the ragged last tile is lost
    fake_gpu.port = {"scale_kernel": wrong}
    sp = tmp_path / "launches.json"
    sp.write_text(json.dumps(spec()))
    res, _ = pipeline(resolve_targets(FILES, launches=sp), tmp_path / "out")
    assert route(res["take_kernel"]) == ["A PASS", "B COMPILED", "D ALL_PASS", "E DONE"]
    assert route(res["scale_kernel"])[:3] == ["A PASS", "B COMPILED", "D FAIL/kernel"]
    d = verdict(tmp_path / "out", "scale_kernel", "D")
    assert "`y`: max |error|" in d["reason"] and d["details"]["evidence"]["native"] == "D/gpu-evidence-launches.json"


def test_inferred_launches_are_picked_up_without_a_spec(tmp_path, pipeline, fake_gpu, monkeypatch):
    monkeypatch.setattr(Session, "gpu", lambda self: (True, ""))
    res, _ = pipeline(resolve_targets([f"{DATA / 'rp_scale.py'}::scale_kernel"]), tmp_path / "out")
    assert route(res["scale_kernel"]) == ["A PASS", "B COMPILED", "D ALL_PASS", "E DONE"]
    d = verdict(tmp_path / "out", "scale_kernel", "D")
    assert d["reason"].startswith("launches (inferred)")
    a = json.loads((tmp_path / "out" / "scale_kernel" / "A" / "analysis.json").read_text())
    assert a["configurations"][0]["arrays"] == {"x": ["float32", 1], "y": ["float32", 1]}


def test_no_launches_is_fail_fixable_with_the_hint(tmp_path, pipeline):
    src = tmp_path / "copy_k.py"
    src.write_text("import cuda.tile as ct\n\n\n@ct.kernel\ndef copy_k(x, y):\n"
                   "    t = ct.load(x, index=(ct.bid(0),), shape=(128,))\n    ct.store(y, index=(ct.bid(0),), tile=t)\n\n\n"
                   "def run(x, y):\n    ct.launch(None, (x.shape[0] // 128,), copy_k, (x, y))\n")
    res, _ = pipeline(resolve_targets([str(src)]), tmp_path / "out", native_gpu=False)
    o = res["copy_k"]
    assert route(o) == ["A PASS", "B COMPILED", "D FAIL_FIXABLE"] and o.terminal == "STOPPED" and not o.ok
    d = verdict(tmp_path / "out", "copy_k", "D")
    assert d["fail_class"] is None and "tileport record" in d["reason"] and "--launches" in d["reason"]
    diag = d["diagnostics"][0]
    assert (diag["line"], diag["construct"]) == (11, "ct.launch") and "parameter `x` of `run`" in diag["message"]
    assert "FAIL_FIXABLE (-)" in (tmp_path / "out" / "report.md").read_text()
