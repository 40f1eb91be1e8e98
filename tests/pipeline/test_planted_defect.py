"""A planted translator defect (Options.planted, the `plant` fixture: drops flush_to_zero in B(1)'s
swiglu kernel) routes A -> B -> D -> C -> B(2) and ends with the defect reported in C's verdict.

Stages A, B and C run for real. D's outcome comes from a labeled fixture
(fixtures/gpu_failure_swiglu.json: a synthetic GPU correctness failure), made evidence for exactly
the build B(1) produced by filling in that build's fingerprint. The external agent tests use a real
program (agent_restore_ftz.py) that edits the generated kernel file.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import FIXTURES, HERE, route, verdict

from tileport.pipeline import resolve_targets
from tileport.pipeline.verdicts import Stage

pytestmark = pytest.mark.cargo
KEY = "swiglu_kernel"
SWIGLU = "src/tileport/ops/kernels/swiglu.py::swiglu_kernel"


def _through_b(tmp_path, pipeline, planted):
    out = tmp_path / "out"
    res, _ = pipeline(resolve_targets([SWIGLU]), out, until=Stage.B, planted=planted)
    assert route(res[KEY]) == ["A PASS", "B COMPILED"] and res[KEY].terminal == "PAUSED"
    b1 = verdict(out, KEY, "B")
    assert b1["details"]["plant"]["defect"] == "ftz" and not b1["details"]["from_translator"]
    assert not b1["details"]["diff_clean"] and not b1["details"]["critical_structural"]
    assert {(f["category"], f["rule"]) for f in b1["details"]["critical_pending"]} == {("math", "flush_to_zero")}
    fixture = json.loads((FIXTURES / "gpu_failure_swiglu.json").read_text())
    assert fixture["provenance"]["synthetic"] and "FIXTURE" in fixture["provenance"]["note"]
    fixture["provenance"]["fingerprints"] = {"swiglu": b1["details"]["fingerprints"]["swiglu"]}
    fixture["provenance"]["components"] = {"swiglu": b1["details"]["components"]["swiglu"]}
    path = tmp_path / "gpu" / "gpu-failure.json"
    path.parent.mkdir()
    path.write_text(json.dumps(fixture))
    return out, path


def test_planted_defect_routes_a_b_d_c_b2_and_is_reported(tmp_path, pipeline, plant):
    out, fixture = _through_b(tmp_path, pipeline, plant(KEY, "ftz"))
    res, _ = pipeline(resolve_targets([SWIGLU]), out, resume=True, gpu_results=[fixture], planted=plant(KEY, "ftz"))
    o = res[KEY]
    assert route(o)[:5] == ["A PASS", "B COMPILED", "D FAIL/kernel", "C FAIL_FIXABLE/kernel", "B(2) COMPILED"]
    assert [r["reused"] for r in o.route[:2]] == [True, True]  # A and B ran (for real) in the first call
    # the defect is reported by C, with where it is
    c = verdict(out, KEY, "C")
    assert c["owner"] == "kernel" and "math/flush_to_zero" in c["reason"] and "swiglu.rs:" in c["reason"]
    report = (out / KEY / "C" / "diff_report.md").read_text()
    assert report.startswith("VERDICT: FAIL_FIXABLE") and "owner: kernel" in report and "flush_to_zero" in report
    # B(2) (no agent: a fresh translation) is the translator's own output again, and clean
    b2 = verdict(out, KEY, "B2")
    assert b2["details"]["from_translator"] and b2["details"]["diff_clean"] and b2["details"]["plant"] is None
    # the fixture described B(1)'s build only: for B(2)'s build it is stale, so D(2) cannot grade it
    assert route(o)[5] == "D(2) BLOCKED/env"
    assert "another build" in verdict(out, KEY, "D2")["reason"]
    assert o.terminal == "BLOCKED_ENV"
    final = json.loads((out / KEY / "final.json").read_text())
    assert next(c for c in final["checks"] if c["check"].startswith("IR diff clean"))["ok"]


def test_external_agent_repairs_the_kernel_and_the_validator_decides(tmp_path, pipeline, plant):
    out, fixture = _through_b(tmp_path, pipeline, plant(KEY, "ftz"))
    agent = f"{sys.executable} {HERE / 'agent_restore_ftz.py'}"
    res, _ = pipeline(resolve_targets([SWIGLU]), out, resume=True, gpu_results=[fixture], agent_cmd=agent,
                      planted=plant(KEY, "ftz"))
    o = res[KEY]
    assert route(o)[:5] == ["A PASS", "B COMPILED", "D FAIL/kernel", "C FAIL_FIXABLE/kernel", "B(2) COMPILED"]
    b2 = verdict(out, KEY, "B2")
    ag = b2["agent"]
    assert ag["exit_code"] == 0 and ag["changed"] == ["B2/kernel.rs"] and b2["details"]["agent_edited"]
    # the agent's edit restored exactly the translator's output; the diff is clean; the validator accepted it
    assert b2["details"]["from_translator"] and b2["details"]["diff_clean"] and b2["validator"]["ok"]
    prompt = (out / KEY / ag["prompt"]).read_text()
    assert "flush_to_zero" in prompt and str(out / KEY / "B2" / "kernel.rs") in prompt
    assert "What the validator will check" in prompt and "C/verdict.json" in prompt
    assert "restored ftz::Enabled" in (out / KEY / ag["log"]).read_text()


def test_agent_output_the_validator_rejects(tmp_path, pipeline, plant):
    out, fixture = _through_b(tmp_path, pipeline, plant(KEY, "ftz"))
    agent = f"{sys.executable} {HERE / 'agent_restore_ftz.py'} --vandalize"
    res, _ = pipeline(resolve_targets([SWIGLU]), out, resume=True, gpu_results=[fixture], agent_cmd=agent,
                      planted=plant(KEY, "ftz"))
    o = res[KEY]
    assert route(o) == ["A PASS", "B COMPILED", "D FAIL/kernel", "C FAIL_FIXABLE/kernel", "B(2) FAIL_FIXABLE"]
    b2 = verdict(out, KEY, "B2")
    assert b2["validator"] == {"ok": False, "errors": b2["validator"]["errors"], "repaired": True}
    assert any("entry `swiglu_kernel` is not defined" in e for e in b2["validator"]["errors"])
    # the repair run told the agent why its first attempt was rejected
    assert "The validator rejected" in (out / KEY / b2["agent"]["prompt"]).read_text()
    assert o.terminal == "STOPPED"


def test_host_defect_routes_d_to_d2_and_an_agent_repairs_the_launcher(tmp_path, pipeline, plant):
    agent = f"{sys.executable} {HERE / 'agent_restore_ftz.py'} --fix-symbol"
    res, _ = pipeline(resolve_targets([SWIGLU]), tmp_path, agent_cmd=agent, planted=plant(KEY, "ffi"))
    o = res[KEY]
    assert route(o) == ["A PASS", "B COMPILED", "D FAIL/host", "D(2) BLOCKED/env", "E BLOCKED/env"]
    d1 = verdict(tmp_path, KEY, "D")
    assert "declares the C symbol (tileport_swiglu_kernel)" in d1["reason"]
    d2 = verdict(tmp_path, KEY, "D2")
    assert d2["agent"]["changed"] == ["D2/ffi.rs"] and d2["details"]["host_checks_ok"]
    assert "GPU" in d2["reason"]  # host side repaired; correctness still needs a GPU
    assert o.terminal == "BLOCKED_ENV" and o.ok
