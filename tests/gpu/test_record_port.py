"""On a GPU: `tileport record` on a driver program of ours (tests/pipeline/data/rp_driver.py, three
kernel files with ct.launch calls), then the differential test and parity of the ports against their
source cuTile kernels on the recorded launches (`python -m tileport.gpu.launch_check record`).

The port library is built where cargo is (`bash scripts/record-port-bundle.sh bundle`: the crate in
.device/rp-crate/, the library as $TILEPORT_DEVICE_EXTRA/librp_port.so or $TILEPORT_RP_LIB); a
missing bundle fails the test. Results go to $TILEPORT_RESULTS_DIR (default out/record-port-gpu):
`launches.json` (the recorded spec), `gpu-evidence-launches.json` (the evidence `tileport port
--launches launches.json --gpu-results DIR` grades to DONE: `scripts/record-port-bundle.sh grade DIR`)
and `record-port-summary.json`. Where cargo and the CPU toolchain are present too, the last test runs
`tileport port --launches` itself through D and E.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tileport.launches import load_spec

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "pipeline" / "data"
FILES = [str(DATA / f) for f in ("rp_scale.py", "rp_rowsum.py", "rp_take.py")]
RESULTS = Path(os.environ.get("TILEPORT_RESULTS_DIR") or REPO / "out" / "record-port-gpu")


def _bundle() -> tuple[Path, Path]:
    crate = REPO / ".device" / "rp-crate"
    lib = Path(os.environ.get("TILEPORT_RP_LIB") or Path(os.environ.get("TILEPORT_DEVICE_EXTRA", "/nonexistent"))
               / "librp_port.so")
    if not (crate / "kernels.json").is_file() or not lib.is_file():
        pytest.fail(f"the port bundle is missing ({crate}, {lib}): run `bash scripts/record-port-bundle.sh bundle` "
                    "where cargo is, and carry .device")
    return crate, lib


def _summary(**kw) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "record-port-summary.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(kw)
    path.write_text(json.dumps(data, indent=1, default=str))


@pytest.fixture(scope="module")
def recorded() -> Path:
    """`tileport record` of the driver, once per session, into a fresh spec."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    spec = RESULTS / "launches.json"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "record", "--out", str(spec), "--",
                           sys.executable, str(DATA / "rp_driver.py")], capture_output=True, text=True, timeout=600)
    _summary(record={"rc": proc.returncode, "stdout": proc.stdout[-4000:], "stderr": proc.stderr[-4000:]})
    assert proc.returncode == 0 and "driver done" in proc.stdout, proc.stdout + proc.stderr
    return spec


def _comparable(records) -> list:
    """What must match the expected spec: kernel, grid, every argument but the random value ranges."""
    out = []
    for r in records:
        args = [{k: v for k, v in a.to_dict().items() if k != "range"} for a in r.args]
        out.append((r.kernel, Path(r.file).name, r.grid, json.dumps(args, sort_keys=True), r.count))
    return out


def test_record_captures_every_launch_of_the_driver(recorded):
    records = load_spec(recorded)
    expected = load_spec(DATA / "rp_launches.json")
    _summary(recorded=[r.label for r in records])
    assert _comparable(records) == _comparable(expected)
    take = next(r for r in records if r.kernel == "take_kernel")
    lo, hi = next(a.range for a in take.args if a.name == "idx")
    assert 0 <= lo <= hi <= 4999


def test_ports_match_their_source_kernels_and_are_timed(recorded):
    crate, lib = _bundle()
    spec = recorded
    proc = subprocess.run([sys.executable, "-m", "tileport.gpu.launch_check", "record", "--spec", str(spec),
                           "--crate", str(crate), "--lib", str(lib), "--out", str(RESULTS), *FILES],
                          capture_output=True, text=True, timeout=900)
    evidence = RESULTS / "gpu-evidence-launches.json"
    assert evidence.is_file(), proc.stdout + proc.stderr
    doc = json.loads(evidence.read_text())
    cases = [{k: r.get(k) for k in ("launch", "ok", "err_over_tol", "error")} for r in doc["check"]]
    times = [{"launch": r["launch"], **r["times_us"], **({"errors": r["errors"]} if r.get("errors") else {})}
             for r in (doc["bench"] or {}).get("records", [])]
    ratios = [t["cutile-rs"] / t["cutile"] for t in times if "cutile-rs" in t and "cutile" in t]
    _summary(correct=cases, timing=times, problems=doc["problems"], parity_ratios=ratios,
             launch_check_stdout=proc.stdout[-4000:], launch_check_stderr=proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(cases) == 5 and all(c["ok"] for c in cases), cases
    assert len(ratios) == 5, times


@pytest.mark.skipif(shutil.which("cargo") is None, reason="tileport port needs cargo for stage B (not on the H200: "
                    "grade there with `scripts/record-port-bundle.sh grade DIR` instead)")
def test_port_with_recorded_launches_reaches_done(recorded):
    spec = recorded
    out = RESULTS / "port"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "port", *FILES, "--launches", str(spec),
                           "--out", str(out)], capture_output=True, text=True, timeout=1800)
    summary = json.loads((out / "summary.json").read_text())
    _summary(port=summary)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {k["kernel"]: k["terminal"] for k in summary["kernels"]} == {
        "scale_kernel": "DONE", "row_sum_kernel": "DONE", "take_kernel": "DONE"}
