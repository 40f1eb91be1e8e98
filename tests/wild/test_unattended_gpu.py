"""On a GPU: the ports of the language-tail construct kernels (tests/wild/data/unattended.py) against their
source cuTile kernels, on the launches of tests/wild/data/unattended_launches.json (random inputs shaped as
given; `python -m tileport.gpu.launch_check record`, no benchmark).

The port library is built where cargo is (`bash scripts/unattended-gpu-bundle.sh`: the crate in
.device/ua-crate/, the library as $TILEPORT_DEVICE_EXTRA/libua_port.so or $TILEPORT_UA_LIB); a missing
bundle fails the test. Results go to $TILEPORT_RESULTS_DIR (default out/unattended-gpu):
`gpu-evidence-launches.json` and `unattended-gpu-summary.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileport.launches import load_spec

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "wild" / "data"
SPEC = DATA / "unattended_launches.json"
RESULTS = Path(os.environ.get("TILEPORT_RESULTS_DIR") or REPO / "out" / "unattended-gpu")


def _bundle() -> tuple[Path, Path]:
    crate = REPO / ".device" / "ua-crate"
    lib = Path(os.environ.get("TILEPORT_UA_LIB") or Path(os.environ.get("TILEPORT_DEVICE_EXTRA", "/nonexistent"))
               / "libua_port.so")
    if not (crate / "kernels.json").is_file() or not lib.is_file():
        pytest.fail(f"the port bundle is missing ({crate}, {lib}): run `bash scripts/unattended-gpu-bundle.sh` "
                    "where cargo is, and carry .device")
    return crate, lib


def test_construct_ports_match_cutile_python_on_the_gpu():
    crate, lib = _bundle()
    kernels = sorted({launch.kernel for launch in load_spec(SPEC)})
    files = [f"{DATA / 'unattended.py'}::{k}" for k in kernels]
    RESULTS.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "tileport.gpu.launch_check", "record", *files, "--spec", str(SPEC),
                           "--crate", str(crate), "--lib", str(lib), "--out", str(RESULTS), "--no-bench"],
                          capture_output=True, text=True, timeout=1200)
    evidence = RESULTS / "gpu-evidence-launches.json"
    data = json.loads(evidence.read_text()) if evidence.is_file() else {}
    checks = data.get("check", [])
    summary = {"rc": proc.returncode, "stdout": proc.stdout[-4000:], "stderr": proc.stderr[-4000:],
               "kernels": kernels, "checked": len(checks), "ok": sum(1 for c in checks if c.get("ok")),
               "failures": [c for c in checks if not c.get("ok")]}
    (RESULTS / "unattended-gpu-summary.json").write_text(json.dumps(summary, indent=1, default=str))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(checks) == len(load_spec(SPEC)) and all(c["ok"] for c in checks), summary["failures"]
