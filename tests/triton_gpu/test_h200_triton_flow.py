"""`scripts/h200.sh triton` without a GPU: the step's shell logic with `nvidia-smi` and the two GPU
commands (`tileport.cli record`, `tileport.gpu.triton_check`) replaced by stand-ins on PATH that log
their arguments and write files in the real places; everything else (the corpus list, the spec
comparison) is the real Python. First run: launches recorded only; with a bundle in .device: every
corpus kernel checked on the bundle's spec, the results copied to $OUT."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tileport.launches import spec_document, write_spec
from tileport.ops.triton_kernels import CORPUS

REPO = Path(__file__).resolve().parents[2]

PYTHON_SHIM = f'''#!/usr/bin/env bash
echo "python3 $*" >> "$SHIM_LOG"
case "$*" in
  *"-m tileport.cli record --out "*)
    spec=$5; driver_out=${{10}}
    cp "$SHIM_SPEC" "$spec"; echo '{{"cases": []}}' > "$driver_out"; echo "recorded"; exit 0 ;;
  *"-m tileport.gpu.triton_check record"*)
    out=""; prev=""
    for a in "$@"; do [ "$prev" = "--out" ] && out=$a; prev=$a; done
    echo '{{"kind": "tileport-gpu-evidence"}}' > "$out/gpu-evidence-triton.json"
    echo '{{"kernels_correct": 0}}' > "$out/triton-summary.json"; echo "checked"; exit 0 ;;
esac
exec {sys.executable} "$@"
'''


def _setup(tmp_path: Path, bundle: bool, same_spec: bool = True) -> tuple[Path, dict]:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "h200.sh", root / "scripts" / "h200.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(PYTHON_SHIM)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H200, 580.00, 143771 MiB'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    spec = tmp_path / "spec.json"
    write_spec(spec, [])
    extra = tmp_path / "extra"
    extra.mkdir()
    if bundle:
        (root / ".device" / "triton-crate").mkdir(parents=True)
        (root / ".device" / "triton-crate" / "kernels.json").write_text('{"entries": []}')
        (extra / "libtriton_port.so").write_text("")
        bundled = spec_document([]) if same_spec else {**spec_document([]), "launches": [
            {"framework": "triton", "kernel": "k", "file": "k.py", "grid": [1], "args": []}]}
        (root / ".device" / "triton-launches.json").write_text(json.dumps(bundled))
    out = tmp_path / "OUT"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SHIM_LOG": str(tmp_path / "log"),
           "SHIM_SPEC": str(spec), "OUT": str(out), "TILEPORT_DEVICE_EXTRA": str(extra),
           "TILEPORT_WORK": str(tmp_path / "work"),
           "PYTHONPATH": str(REPO / "src")}
    return root, env


def _run(root: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/h200.sh", "triton"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def test_first_run_records_the_launches_only(tmp_path):
    root, env = _setup(tmp_path, bundle=False)
    proc = _run(root, env)
    assert "triton record rc=0" in proc.stdout, proc.stdout + proc.stderr
    assert "no port bundle in .device" in proc.stdout
    log = (tmp_path / "log").read_text()
    assert "eval/triton_corpus_driver.py --out" in log and "triton_check" not in log
    assert sorted(p.name for p in Path(env["OUT"]).iterdir()) == ["gpu.txt", "triton-driver.json",
                                                                 "triton-launches.json", "triton.log"]


def test_second_run_checks_every_corpus_kernel_on_the_bundles_spec(tmp_path):
    root, env = _setup(tmp_path, bundle=True, same_spec=False)
    proc = _run(root, env)
    assert "triton check rc=0" in proc.stdout, proc.stdout + proc.stderr
    assert "differ from the bundle's" in proc.stdout  # the spec recorded now is not the bundle's
    check = next(line for line in (tmp_path / "log").read_text().splitlines() if "triton_check" in line)
    assert "--spec .device/triton-launches.json --crate .device/triton-crate" in check
    assert f"--lib {env['TILEPORT_DEVICE_EXTRA']}/libtriton_port.so" in check
    assert all(f"{k.path}::{k.kernel}" in check for k in CORPUS)
    out = Path(env["OUT"])
    assert {"triton-evidence.json", "triton-summary.json", "triton-launches.json"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "triton-launches.json").read_text())["launches"][0]["kernel"] == "k"  # the bundle's


def test_same_spec_is_not_reported_as_different(tmp_path):
    root, env = _setup(tmp_path, bundle=True, same_spec=True)
    proc = _run(root, env)
    assert "triton check rc=0" in proc.stdout and "differ from the bundle's" not in proc.stdout, proc.stdout
