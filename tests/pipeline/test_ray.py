"""`tileport port --executor ray` on a Ray cluster the test starts itself (CPU only, `ray.init(num_cpus=2)`, once
for the module): the same verdicts, routes and report as the local executor; a worker killed mid-run costs
only its task's retry; Ray missing is a diagnostic, not a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DATA, run
from typer.testing import CliRunner

from tileport.cli import app
from tileport.pipeline import resolve_targets
from tileport.pipeline.verdicts import Stage

LAUNCHES = DATA / "rp_launches.json"
FILES = [str(DATA / "rp_scale.py"), str(DATA / "rp_take.py"), str(DATA / "rp_rowsum.py")]


@pytest.fixture(scope="module")
def cluster():
    import ray
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plant below travels to the workers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # Ray's note on its own future defaults
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def targets():
    return resolve_targets(FILES, launches=LAUNCHES)


def verdicts(out: Path) -> dict[str, dict]:
    """Every verdict.json of a run, without when it ran and how long it took."""
    found = {}
    for p in sorted(out.glob("*/*/verdict.json")):
        v = json.loads(p.read_text())
        v.pop("started"), v.pop("seconds")
        found[str(p.relative_to(out))] = v
    return found


def routes(out: Path) -> dict[str, list]:
    runs = {}
    for p in sorted(out.glob("*/run.json")):
        r = json.loads(p.read_text())
        runs[p.parent.name] = ([(s["stage"], s["attempt"], s["verdict"], s["fail_class"], s["reused"])
                                for s in r["route"]], r["terminal"], r["final"])
    return runs


def report(out: Path) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC, [\d.]+ s", "<when>", (out / "report.md").read_text())


def same_run(local: Path, remote: Path) -> None:
    assert verdicts(local) and verdicts(remote) == verdicts(local)
    assert routes(remote) == routes(local)
    assert report(remote) == report(local)


def test_same_verdicts_and_report_as_the_local_pool(cluster, tmp_path):
    local, ray_out = tmp_path / "local", tmp_path / "ray"
    by_local, _ = run(targets(), local, until=Stage.A, jobs=2)
    by_ray, _ = run(targets(), ray_out, until=Stage.A, executor="ray")
    assert {k: o.terminal for k, o in by_ray.items()} == {k: "PAUSED" for k in by_local}
    same_run(local, ray_out)
    summary = json.loads((ray_out / "summary.json").read_text())
    assert summary["executor"]["name"] == "ray" and summary["executor"]["cpu_slots"] == 2
    assert summary["executor"]["stage_units"] == 3 and summary["executor"]["nodes"]
    again, _ = run(targets(), ray_out, until=Stage.A, executor="ray", resume=True)  # resumable: nothing re-runs
    assert all(r["reused"] for o in again.values() for r in o.route)
    assert verdicts(ray_out) == verdicts(local)


@dataclass(frozen=True)
class KillOnce:
    """A planted 'defect' that changes nothing but counts its calls in `marker` and, when `kill`, kills the
    process it runs in the first time: the Ray worker running B(1) of its kernel."""

    marker: str
    kill: bool
    name: str = "count"

    def apply(self, text: str) -> tuple[str, str]:
        with open(self.marker, "a") as f:
            f.write(f"{os.getpid()}\n")
        if self.kill and len(Path(self.marker).read_text().split()) == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return text, "unchanged"


def plants(where: Path, kill: str | None) -> dict:
    where.mkdir()
    return {t.kernel: KillOnce(str(where / t.kernel), t.kernel == kill) for t in targets()}


@pytest.mark.cargo
def test_a_killed_worker_costs_only_its_tasks_retry(cluster, tmp_path):
    """The worker running B of row_sum_kernel dies (SIGKILL) once: Ray runs that unit again, the run ends with
    every verdict, and they (with the routes and the report) are those of the local executor."""
    local, ray_out = tmp_path / "local", tmp_path / "ray"
    run(targets(), local, jobs=2, planted=plants(tmp_path / "calls-local", None))
    by_ray, _ = run(targets(), ray_out, executor="ray", planted=plants(tmp_path / "calls-ray", "row_sum_kernel"))
    calls = {p.name: p.read_text().split() for p in (tmp_path / "calls-ray").iterdir()}
    assert len(calls["row_sum_kernel"]) == 2 and calls["row_sum_kernel"][0] != calls["row_sum_kernel"][1]
    assert {k: len(v) for k, v in calls.items() if k != "row_sum_kernel"} == {"scale_kernel": 1, "take_kernel": 1}
    assert all(o.terminal == "BLOCKED_ENV" and o.ok for o in by_ray.values()), {k: o.why for k, o in by_ray.items()}
    same_run(local, ray_out)
    summary = json.loads((ray_out / "summary.json").read_text())
    assert summary["executor"]["stage_units"] == sum(len(o.route) for o in by_ray.values()) == 12
    assert summary["executor"]["crate_units"] == 1


def test_ray_missing_is_a_diagnostic(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    r = CliRunner().invoke(app, ["port", FILES[0], "--launches", str(LAUNCHES), "--executor", "ray",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "pip install 'tileport[ray]'" in r.output and "ray==2.52.1" in r.output
    assert not (tmp_path / "o" / "scale_kernel").exists()
    r = CliRunner().invoke(app, ["port", FILES[0], "--executor", "cluster", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "unknown executor 'cluster'" in r.output
