"""The wild corpus's GPU plumbing on the CPU: drivers, the device step without a GPU, per-kernel rows from
a spec and evidence, the spec-to-file mapping and the table (the GPU part is `scripts/h200.sh wild`)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from eval import wild_gpu
from tileport.launches import LaunchArg, LaunchRecord, write_spec


def _spec(path: Path, file: str = "/gpu/site/pkg/ops/norm.py") -> Path:
    arr = LaunchArg("x", "array", "float32", [64, 128], [128, 1])
    recs = [LaunchRecord("cutile", "norm_kernel", file, (4, 1, 1), [arr, LaunchArg("T", "const", value=128)]),
            LaunchRecord("cutile", "norm_kernel", file, (8, 1, 1), [arr, LaunchArg("T", "const", value=64)]),
            LaunchRecord("cutile", "other_kernel", file, (1, 1, 1), [arr])]
    write_spec(path, recs)
    return path


def _evidence(path: Path) -> Path:
    key = "launch:norm.norm_kernel"
    path.write_text(json.dumps({
        "check": [{"op": key, "kernel": "norm_kernel", "launch": "a", "ok": True},
                  {"op": key, "kernel": "norm_kernel", "launch": "b", "ok": True},
                  {"op": "launch:norm.other_kernel", "kernel": "other_kernel", "launch": "c", "ok": False,
                   "error": "`x`: 3 elements differ"}],
        "bench": {"records": [{"op": key, "kernel": "norm_kernel", "times_us": {"cutile": 10.0, "cutile-rs": 11.0}},
                              {"op": key, "kernel": "norm_kernel", "times_us": {"cutile": 10.0, "cutile-rs": 9.0}}]},
        "problems": {}}))
    return path


def test_rows_say_correct_and_parity_per_kernel(tmp_path):
    rows = wild_gpu.kernel_rows(_spec(tmp_path / "s.json"), _evidence(tmp_path / "e.json"))
    by = {r["kernel"]: r for r in rows}
    assert by["norm_kernel"]["launches"] == 2 and by["norm_kernel"]["checked"] == 2
    assert by["norm_kernel"]["correct"] is True and by["norm_kernel"]["parity"] == 1.0  # median of 1.1 and 0.9
    assert by["other_kernel"]["correct"] is False and "3 elements differ" in by["other_kernel"]["failures"][0]
    assert by["other_kernel"]["parity"] is None


def test_no_evidence_is_never_correct(tmp_path):
    rows = wild_gpu.kernel_rows(_spec(tmp_path / "s.json"), None)
    assert rows and not any(r["correct"] for r in rows) and all(r["checked"] == 0 for r in rows)


def test_table_renders_every_kernel_and_driver(tmp_path):
    doc = {"date": "d", "gpu": "H200", "check": "ok",
           "kernels": wild_gpu.kernel_rows(_spec(tmp_path / "s.json"), _evidence(tmp_path / "e.json")),
           "record": {"drivers": {"pkg": {"rc": 0, "cases": {"a": {"ok": True}, "b": {"ok": False,
                                                                                       "error": "ImportError: cupy"}}}}}}
    md = wild_gpu.render(doc)
    assert "correct on every recorded launch: **1/2**" in md
    assert "| norm.py | `norm_kernel` | 2 | 2 | yes | 1.00 |" in md
    assert "pkg: 1/2 cases ran (rc 0); b: ImportError: cupy" in md


def test_spec_files_map_to_the_local_package_sources(tmp_path):
    root = tmp_path / "src" / "pkg"
    (root / "pkg" / "ops").mkdir(parents=True)
    (root / "pkg" / "ops" / "norm.py").write_text("")
    targets = wild_gpu.kernel_files(_spec(tmp_path / "s.json"), {"pkg": root})
    assert targets == [f"{root / 'pkg' / 'ops' / 'norm.py'}::norm_kernel", f"{root / 'pkg' / 'ops' / 'norm.py'}::other_kernel"]


def test_device_step_without_launches_or_library_says_why(tmp_path, monkeypatch):
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    (drivers / "common.py").write_text("")
    (drivers / "fake_driver.py").write_text(
        "import json, os\n"
        "json.dump({'cases': {'one': {'ok': False, 'error': 'ImportError: no GPU package'}}},"
        " open(os.environ['WILD_DRIVER_OUT'], 'w'))\nprint('fake: driver done')\n")
    monkeypatch.setattr(wild_gpu, "DRIVERS", drivers)
    doc = wild_gpu.device(tmp_path / "out", bundle=tmp_path / "no-bundle")
    assert doc["install"] == "no wheels bundled"
    assert doc["record"]["drivers"]["fake"]["cases"]["one"]["ok"] is False
    assert doc["check"].startswith("no launch recorded") and doc["kernels"] == []
    assert json.loads((tmp_path / "out" / "wild-gpu.json").read_text())["check"] == doc["check"]


def test_device_step_keeps_the_record_when_the_check_never_ends(tmp_path, monkeypatch):
    """A time limit kills the step during the differential test: wild-gpu.json already holds the drivers'
    record (on the H200 the stencil driver's 15/15 cases were lost that way)."""
    from tileport.gpu import launch_check

    def recorded(out, site, bundle):
        write_spec(out / "wild-launches.json", [])
        return {"spec": str(out / "wild-launches.json"), "drivers": {"fake": {"cases": {"one": {"ok": True}}}}}

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # stands for the time limit's signal
    monkeypatch.setattr(wild_gpu, "record_drivers", recorded)
    monkeypatch.setattr(wild_gpu, "_library", lambda bundle, out: out / "libwild_port.so")
    monkeypatch.setattr(launch_check, "record_evidence", killed)
    with pytest.raises(KeyboardInterrupt):
        wild_gpu.device(tmp_path / "out", bundle=tmp_path / "no-bundle")
    doc = json.loads((tmp_path / "out" / "wild-gpu.json").read_text())
    assert doc["record"]["drivers"]["fake"]["cases"] == {"one": {"ok": True}}
    assert doc["check"].startswith("not finished")


def test_drivers_call_the_packages_own_host_functions():
    drivers = wild_gpu.drivers()
    assert {wild_gpu.package_of(d) for d in drivers} >= {"bastile", "cutile_gpt"}
    for d in drivers:
        if d.name in wild_gpu.GENERATED_DRIVERS:  # generated files, no package: tests/wild/test_stencil_driver.py
            assert "run_cases" in d.read_text() and "load_generated" in d.read_text()
            continue
        tree = ast.parse(d.read_text())
        imported = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert wild_gpu.package_of(d) in imported, f"{d.name} does not import its package"
        assert d.stem not in imported, f"{d.name} would shadow the package it drives"
        assert "run_cases" in d.read_text()


def test_only_the_driven_packages_wheels_travel(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("bastile-0.1.3-py3-none-any.whl", "cutile_gpt-0.2.1-py3-none-any.whl",
                 "cutile_stencil-0.3.0-py3-none-any.whl"):
        (wheels / name).write_bytes(b"PK")
    copied = wild_gpu.copy_wheels(wheels, tmp_path / "bundle")
    assert copied == ["bastile-0.1.3-py3-none-any.whl", "cutile_gpt-0.2.1-py3-none-any.whl"]
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == copied


def test_every_driver_adds_to_one_spec(tmp_path, monkeypatch):
    """Regression: each driver's `record` replaced the spec, so only the last driver's launches survived."""
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    for name in ("a_driver.py", "b_driver.py"):
        (drivers / name).write_text("")
    monkeypatch.setattr(wild_gpu, "DRIVERS", drivers)
    out = tmp_path / "out"
    out.mkdir()
    (out / "wild-launches.json").write_text("{stale}")
    commands = []

    def fake_run(cmd, *_, **kw):
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wild_gpu, "run_tool", fake_run)
    wild_gpu.record_drivers(out, tmp_path / "site")
    assert len(commands) == 2 and all("--append" in c for c in commands)
    assert not (out / "wild-launches.json").exists()  # the stale spec of an earlier run is not appended to


def test_a_port_that_stopped_says_why_in_the_table(tmp_path):
    """A kernel with no check result (here: cuTile cannot compile the source on its launch) names the stage
    that stopped it and why, instead of an empty `why not` cell."""
    stopped = {"terminal": "STOPPED", "route": [{"stage": "A", "verdict": "FAIL_FIXABLE",
                                                 "reason": "cuTile Python cannot compile k[float32](N=768)\nmore"}]}
    assert wild_gpu.stopped_why(stopped) == "A FAIL_FIXABLE: cuTile Python cannot compile k[float32](N=768)"
    assert wild_gpu.stopped_why({"terminal": "DONE", "route": [{"stage": "E", "verdict": "DONE"}]}) == ""
    rows = wild_gpu.kernel_rows(_spec(tmp_path / "s.json"), None)
    rows[0]["port_why"] = wild_gpu.stopped_why(stopped)
    md = wild_gpu.render({"kernels": rows})
    assert "| no | - | - / - | A FAIL_FIXABLE: cuTile Python cannot compile k[float32](N=768) |" in md


def test_wild_drivers_selects_packages(monkeypatch):
    monkeypatch.setenv("WILD_DRIVERS", "cutile_gpt")
    assert [wild_gpu.package_of(d) for d in wild_gpu.drivers()] == ["cutile_gpt"]
    monkeypatch.delenv("WILD_DRIVERS")
    assert {"bastile", "cutile_gpt", "stencil"} <= {wild_gpu.package_of(d) for d in wild_gpu.drivers()}
