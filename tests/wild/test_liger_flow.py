"""eval.wild_triton_gpu without a GPU: launch selection for the bundle, the device step's two modes
(record; check, with the triton_check runs replaced by stand-ins), grading of a synthetic device result,
and the `liger` step of scripts/h200.sh (with stand-ins for python3 and nvidia-smi)."""

from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval import wild_triton_gpu as flow
from tileport.launches import LaunchArg, LaunchRecord, load_spec, write_spec

REPO = Path(__file__).resolve().parents[2]
SITE = "/tmp/tileport-out/liger/site/liger_kernel/ops"


def _launch(kernel: str, file: str, dtype: str, block: int = 1024, framework: str = "triton") -> LaunchRecord:
    args = [LaunchArg("X_ptr", "array", dtype, [64, block], [block, 1]),
            LaunchArg("RSTD_ptr", "array", "float32", [64], [1]),
            LaunchArg("n_cols", "scalar", "int32", value=block), LaunchArg("BLOCK_SIZE", "const", value=block)]
    return LaunchRecord(framework, kernel, file, (64, 1, 1), args, options={"num_warps": 4})


def test_package_paths_and_dtype_keys():
    assert flow.package_path(f"{SITE}/rms_norm.py") == "liger_kernel/ops/rms_norm.py"
    assert flow.package_path("/x/liger_kernel/y/liger_kernel/ops/a.py") == "liger_kernel/ops/a.py"
    assert flow.package_path("/home/me/kernels/rms_norm.py") is None
    assert flow.dtype_key(_launch("k", "f.py", "bfloat16")) == "bfloat16+float32"
    assert flow.dtype_key(_launch("k", "f.py", "float32")) == "float32"


def test_selection_keeps_one_launch_per_kernel_and_dtype():
    records = [_launch("_rms_fwd", f"{SITE}/rms_norm.py", "float32"),
               _launch("_rms_fwd", f"{SITE}/rms_norm.py", "float32", block=2048),   # same dtype: left out
               _launch("_rms_fwd", f"{SITE}/rms_norm.py", "bfloat16"),              # another dtype: kept
               _launch("_k", f"{SITE}/backends/_ascend/ops/rms_norm.py", "float32"),  # NPU: left out
               _launch("_k", "/home/me/mine.py", "float32"),                       # not the package: left out
               _launch("_k", f"{SITE}/softmax.py", "float32", framework="cutile")]  # not Triton: left out
    chosen, left = flow.select_launches(records)
    assert [(r.kernel, flow.dtype_key(r), r.args[0].shape[1]) for r in chosen] == [
        ("_rms_fwd", "float32", 1024), ("_rms_fwd", "bfloat16+float32", 1024)]
    assert len(left) == 4 and "one specialization per kernel and dtype" in left[0]["why"]
    assert all("CUDA kernels" in x["why"] for x in left[1:])
    assert flow.recorded_counts(records)["liger_kernel/ops/rms_norm.py::_rms_fwd"] == 3
    chosen, left = flow.select_launches(records, exclude=["_rms_fwd"])
    assert chosen == [] and [x["why"] for x in left[:3]] == ["excluded (--exclude)"] * 3


def test_bundle_manifest_says_what_was_built_and_why_not():
    selected = [_launch("_a", f"{SITE}/a.py", "float32"), _launch("_a", f"{SITE}/a.py", "bfloat16"),
                _launch("_b", f"{SITE}/b.py", "float32"), _launch("_c", f"{SITE}/c.py", "float32")]
    verdicts = {"liger_kernel/ops/a.py::_a": {"verdict": "COMPILED", "reason": ""},
                "liger_kernel/ops/b.py::_b": {"verdict": "BLOCKED",
                                              "reason": "b.py:3:5 [tl.atomic_add] atomics are not supported"},
                "liger_kernel/ops/c.py::_c": {"verdict": "COMPILED", "reason": ""}}
    m = flow.bundle_manifest(selected, {"liger_kernel/ops/a.py::_a": 5}, verdicts, {"_a", "_b"}, [], 1000)
    rows = {r["kernel"]: r for r in m["kernels"]}
    assert rows["_a"]["built"] and rows["_a"]["dtypes"] == ["float32", "bfloat16+float32"]
    assert rows["_a"]["recorded"] == 5 and len(rows["_a"]["launches"]) == 2
    assert not rows["_b"]["built"] and "atomics" in rows["_b"]["why_not"]
    assert not rows["_c"]["built"] and "other than the bundled one" in rows["_c"]["why_not"]


def test_b_verdicts_keep_same_named_kernels_of_two_files_apart(tmp_path):
    """`tileport port` puts a kernel whose name another targeted file has under `<stem>.<kernel>`."""
    targets = [f"{SITE}/a.py::k", f"{SITE}/b.py::k", f"{SITE}/c.py::only"]
    for key, verdict in (("a.k", "COMPILED"), ("b.k", "FAIL_COMPILE"), ("only", "COMPILED")):
        (tmp_path / key / "B").mkdir(parents=True)
        (tmp_path / key / "B" / "verdict.json").write_text(json.dumps({"verdict": verdict, "reason": key}))
    got = flow.b_verdicts(tmp_path, targets)
    assert {k: v["verdict"] for k, v in got.items()} == {
        "liger_kernel/ops/a.py::k": "COMPILED", "liger_kernel/ops/b.py::k": "FAIL_COMPILE",
        "liger_kernel/ops/c.py::only": "COMPILED"}


def test_verdict_of_check_results():
    ok = {"launch": "l", "ok": True}
    bad = {"launch": "l2", "ok": False, "error": "`y`: 3 of 64 elements differ"}
    timed = [{"kernel": "k", "times_us": {"triton": 10.0, "cutile-rs": 12.0}},
             {"kernel": "k", "times_us": {"triton": 10.0, "cutile-rs": 8.0}},
             {"kernel": "k", "times_us": {"triton": 10.0}, "errors": {"cutile-rs": "boom"}}]
    v = flow.verdict({"rc": 0, "check": [ok, ok], "bench": timed})
    assert v["correct"] and v["checked"] == 2 and v["parity"] == 1.0 and v["timed"] == 2
    v = flow.verdict({"rc": 1, "check": [ok, bad], "bench": []})
    assert not v["correct"] and v["failures"] == ["l2: `y`: 3 of 64 elements differ"] and v["parity"] is None
    v = flow.verdict({"rc": 1, "check": [ok], "problems": {"launch:a.k": ["`x`: view has no extent"]}})
    assert not v["correct"] and v["problems"] == ["`x`: view has no extent"]
    v = flow.verdict({"rc": None, "tail": "timed out after 180 s", "check": []})
    assert not v["correct"] and "timed out" in v["failures"][0]
    assert not flow.verdict(None)["correct"]


def _translate_table() -> dict:
    rows = [("a.py", "_a", True, ""), ("b.py", "_b", True, ""), ("c.py", "_c", True, ""), ("d.py", "_d", True, ""),
            ("e.py", "_e", False, "e.py:4:9 [tl.atomic_add] atomics are not supported"), ("f.py", "_f", True, "")]
    kernels = [{"file": f"liger_kernel/ops/{f}", "kernel": k, "role": "kernel", "translate_ok": ok,
                "first_diagnostic": d} for f, k, ok, d in rows]
    kernels.append({"file": "liger_kernel/ops/backends/_ascend/ops/a.py", "kernel": "_npu", "role": "kernel",
                    "translate_ok": True, "first_diagnostic": ""})
    kernels.append({"file": "liger_kernel/ops/a.py", "kernel": "_helper", "role": "helper", "translate_ok": False,
                    "first_diagnostic": ""})
    return {"kernels": kernels}


def _gpu_doc() -> dict:
    def b(k: str, built: bool, why: str = "") -> dict:
        return {"file": f"liger_kernel/ops/{k[1]}.py", "kernel": k, "recorded": 2, "built": built, "why_not": why}
    return {"date": "2026-12-01T22:00:00Z", "gpu": "NVIDIA H200", "package": "liger-kernel==0.8.5", "mode": "check",
            "bundle": {"kernels": [b("_a", True), b("_b", True), b("_c", False, "B FAIL_COMPILE: tileiras"),
                                   b("_f", True)], "left_out": []},
            "kernels": {"liger_kernel/ops/a.py::_a": {"checked": 2, "correct": True, "parity": 1.1, "failures": [],
                                                      "problems": []},
                        "liger_kernel/ops/b.py::_b": {"checked": 2, "correct": False, "parity": None,
                                                      "failures": ["l: `y`: 1 of 8 elements differ"],
                                                      "problems": []}}}


def test_grading_a_synthetic_device_result():
    rows = flow.grade_rows(_translate_table(), _gpu_doc())
    by = {r["kernel"]: r for r in rows}
    assert set(by) == {"_a", "_b", "_c", "_d", "_e", "_f"}  # kernels of the CUDA files only
    assert by["_a"]["correct"] and by["_a"]["parity"] == 1.1 and by["_a"]["why"] == ""
    assert not by["_b"]["correct"] and "elements differ" in by["_b"]["why"]
    assert not by["_c"]["built"] and "FAIL_COMPILE" in by["_c"]["why"]
    assert by["_d"]["recorded"] == 0 and by["_d"]["why"] == "not launched by the driver"
    assert not by["_e"]["translate"] and by["_e"]["why"].startswith("not launched by the driver; translate: e.py:4:9")
    assert by["_f"]["built"] and "not checked" in by["_f"]["why"]
    t = flow.totals(rows)
    assert t == {"kernels": 6, "translate": 5, "recorded": 4, "built": 3, "checked": 2, "h200_verified": 1,
                 "timed": 1, "geomean_parity": 1.1}
    md = flow.render({**_gpu_doc(), "totals": t, "kernels": rows,
                      "driver_cases": {"rms_norm": {"ok": True}, "mlp": {"ok": False, "error": "TypeError: x"}}})
    assert "**GPU-verified** (every bundled launch matches the Liger kernel): **1** of 3 built (2 with a " \
        "launch checked)" in md
    assert "| ops/a.py | `_a` | yes | 2 | yes | 2 | yes | 1.10 |  |" in md
    assert "Driver: 1/2 cases ran; mlp: TypeError: x" in md


def test_grade_writes_the_tables(tmp_path):
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / flow.RESULT).write_text(json.dumps(_gpu_doc()))
    table = tmp_path / "results"
    table.mkdir()
    (table / "wild-triton.json").write_text(json.dumps(_translate_table()))
    assert flow.grade(tmp_path / "gpu", table) == 0
    doc = json.loads((table / "wild-triton-gpu.json").read_text())
    assert doc["totals"]["h200_verified"] == 1 and (table / "wild-triton-gpu.md").read_text().startswith("# Liger")


def _fake_driver(tmp_path: Path) -> Path:
    driver = tmp_path / "liger_driver.py"
    driver.write_text("import json, os\n"
                      "json.dump({'cases': {'rms_norm': {'ok': True}, 'mlp': {'ok': False, 'error': 'no TMA'}}},"
                      " open(os.environ['WILD_DRIVER_OUT'], 'w'))\n")
    return driver


def test_device_without_a_bundle_records_the_driver(tmp_path, monkeypatch):
    monkeypatch.setattr(flow, "DRIVER", _fake_driver(tmp_path))
    doc = flow.device(tmp_path / "out", bundle=tmp_path / "no-bundle", timeout_s=120)
    assert doc["mode"] == "record" and doc["install"] == "no wheels bundled"
    assert doc["record"]["cases"]["mlp"] == {"ok": False, "error": "no TMA"}
    assert doc["record"]["spec"] is None and doc["record"]["rc"] == 1  # the stand-in launches nothing
    assert "no launch was recorded" in doc["record"]["tail"]
    assert "no port bundle" in doc["check"]
    assert json.loads((tmp_path / "out" / flow.RESULT).read_text())["mode"] == "record"


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (tmp_path / "kernels.json").write_text('{"entries": []}')
    flow.pack_files({"crate/kernels.json": tmp_path / "kernels.json"}, bundle / flow.CRATE)
    (bundle / f"{flow.LIB_NAME}.xz").write_bytes(lzma.compress(b"not a library"))
    write_spec(bundle / "launches.json", [])
    kernels = [{"file": f"liger_kernel/ops/{k}.py", "kernel": k, "recorded": 1, "built": built, "why_not": ""}
               for k, built in (("good", True), ("wrong", True), ("unbuilt", False))]
    (bundle / "bundle.json").write_text(json.dumps({"kernels": kernels, "left_out": []}))
    (tmp_path / "pkg" / "liger_kernel" / "ops").mkdir(parents=True)
    for k in ("good", "wrong"):
        (tmp_path / "pkg" / "liger_kernel" / "ops" / f"{k}.py").write_text("# a kernel file\n")
    flow.pack_files({f"liger_kernel/ops/{k}.py": tmp_path / "pkg" / "liger_kernel" / "ops" / f"{k}.py"
                     for k in ("good", "wrong")}, bundle / flow.SOURCES)
    return bundle


def test_device_with_a_bundle_checks_each_kernel_then_times_the_correct_ones(tmp_path, monkeypatch):
    calls = []

    def fake_check(files, bundle, lib, out, timeout_s, bench, budget):
        calls.append(([Path(f).name for f in files], bench))
        assert lib.read_bytes() == b"not a library" and (lib.parent / "crate" / "kernels.json").is_file()
        if bench:
            return {"rc": 0, "tail": "", "check": [], "problems": {},
                    "bench": [{"kernel": "good", "times_us": {"triton": 4.0, "cutile-rs": 5.0}}]}
        ok = "good.py" in files[0]
        return {"rc": 0 if ok else 1, "tail": "", "bench": [], "problems": {},
                "check": [{"launch": "l", "ok": ok, "error": "" if ok else "`y` differs"}]}
    monkeypatch.setattr(flow, "_triton_check", fake_check)
    doc = flow.device(tmp_path / "out", bundle=_bundle(tmp_path), jobs=2, timeout_s=120)
    assert doc["mode"] == "check" and doc["check"] == "ok"
    assert doc["install"] == f"sources of 2 file(s) unpacked from {flow.SOURCES}"
    assert (tmp_path / "out" / "site" / "liger_kernel" / "ops" / "good.py").is_file()
    assert sorted(c for c in calls if not c[1]) == [(["good.py::good"], False), (["wrong.py::wrong"], False)]
    assert calls[-1] == (["good.py::good"], True)  # only the correct kernel is timed, after all checks
    k = doc["kernels"]
    assert k["liger_kernel/ops/good.py::good"]["correct"] and k["liger_kernel/ops/good.py::good"]["parity"] == 1.25
    assert not k["liger_kernel/ops/wrong.py::wrong"]["correct"]
    assert "liger_kernel/ops/unbuilt.py::unbuilt" not in k
    evidence = json.loads((tmp_path / "out" / flow.EVIDENCE).read_text())
    assert len(evidence["check"]) == 2 and len(evidence["bench"]) == 1


def test_a_second_run_carries_the_correct_kernels_and_times_only_the_untimed(tmp_path, monkeypatch):
    """A run cut short times part of the correct kernels: the next run of the same bundle checks only what
    was not found correct and times only what was not timed."""
    calls = []

    def fake_check(files, bundle, lib, out, timeout_s, bench, budget):
        names = [Path(f).name for f in files]
        calls.append((names, bench))
        if bench:
            return {"rc": 0, "tail": "", "check": [], "problems": {},
                    "bench": [{"kernel": n.split("::")[1], "times_us": {"triton": 4.0, "cutile-rs": 3.0}}
                              for n in names]}
        return {"rc": 1, "tail": "", "bench": [], "problems": {},
                "check": [{"launch": "l", "ok": False, "error": "`y` differs"}]}
    monkeypatch.setattr(flow, "_triton_check", fake_check)
    bundle = _bundle(tmp_path)
    previous = tmp_path / "previous.json"
    good = "liger_kernel/ops/good.py::good"
    previous.write_text(json.dumps({"bundle": json.loads((bundle / "bundle.json").read_text()), "date": "d",
                                    "kernels": {good: {"checked": 1, "correct": True, "parity": None, "timed": 0,
                                                       "failures": [], "problems": []}}}))
    doc = flow.device(tmp_path / "out", bundle=bundle, jobs=2, timeout_s=120, previous=previous)
    assert calls == [(["wrong.py::wrong"], False), (["good.py::good"], True)]
    k = doc["kernels"]
    assert k[good]["correct"] and k[good]["carried"] and k[good]["parity"] == 0.75 and k[good]["checked"] == 1
    assert not k["liger_kernel/ops/wrong.py::wrong"]["correct"]
    previous.write_text(json.dumps({"bundle": {"kernels": []}, "kernels": {}}))
    with pytest.raises(SystemExit, match="another bundle"):
        flow.device(tmp_path / "out2", bundle=bundle, jobs=2, timeout_s=120, previous=previous)


# ------------------------------------------------------------------------------------ scripts/h200.sh liger

PYTHON_SHIM = f'''#!/usr/bin/env bash
echo "python3 $*" >> "$SHIM_LOG"
case "$*" in
  *"-m eval.wild_triton_gpu device --out "*)
    out=$5; mkdir -p "$out"
    for f in liger-gpu.json liger-launches.json liger-driver.json; do echo '{{}}' > "$out/$f"; done
    echo "device ran"; exit 0 ;;
esac
exec {sys.executable} "$@"
'''


def _run_step(tmp_path: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "h200.sh", root / "scripts" / "h200.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(PYTHON_SHIM)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H200, 580.00, 143771 MiB'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    out = tmp_path / "OUT"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SHIM_LOG": str(tmp_path / "log"),
           "OUT": str(out), "TILEPORT_DEVICE_EXTRA": str(tmp_path), "TILEPORT_WORK": str(tmp_path / "work"),
           **env_extra}
    proc = subprocess.run(["bash", "scripts/h200.sh", "liger"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, out


def test_h200_liger_step(tmp_path):
    proc, out = _run_step(tmp_path)
    assert "liger rc=0" in proc.stdout and "device ran" in proc.stdout, proc.stdout + proc.stderr
    log = (tmp_path / "log").read_text()
    assert "-m eval.wild_triton_gpu device --out " in log and "--jobs 8" in log and "--record" not in log
    assert sorted(p.name for p in out.iterdir()) == ["gpu.txt", "liger-driver.json", "liger-gpu.json",
                                                    "liger-launches.json", "liger.log"]


def test_h200_liger_step_can_force_a_record_run(tmp_path):
    proc, _out = _run_step(tmp_path, LIGER_RECORD="1", LIGER_JOBS="3")
    log = (tmp_path / "log").read_text()
    assert "--record" in log and "--jobs 3" in log, proc.stdout


@pytest.mark.gpu
def test_liger_ports_on_the_gpu(tmp_path):
    """On a GPU machine with the bundle of `python3 -m eval.wild_triton_gpu bundle DIR` in .device/liger:
    every bundled port matches its Liger kernel on the bundle's launches."""
    if not (flow.BUNDLE / f"{flow.LIB_NAME}.xz").is_file():
        pytest.skip("no Liger port bundle in .device/liger (python3 -m eval.wild_triton_gpu bundle DIR)")
    doc = flow.device(tmp_path, timeout_s=540)
    bad = {k: v["failures"] + v["problems"] for k, v in doc["kernels"].items() if not v["correct"]}
    assert doc["kernels"] and not bad, bad
    assert load_spec(flow.BUNDLE / "launches.json")


def test_grading_a_record_run_counts_its_launches(tmp_path):
    write_spec(tmp_path / flow.SPEC, [_launch("_a", f"{SITE}/a.py", "float32"), _launch("_a", f"{SITE}/a.py",
                                                                                          "bfloat16")])
    (tmp_path / flow.RESULT).write_text(json.dumps({"mode": "record", "record": {"cases": {"x": {"ok": True}}}}))
    table = tmp_path / "results"
    table.mkdir()
    (table / "wild-triton.json").write_text(json.dumps(_translate_table()))
    assert flow.grade(tmp_path, table) == 0
    doc = json.loads((table / "wild-triton-gpu.json").read_text())
    by = {r["kernel"]: r for r in doc["kernels"]}
    assert by["_a"]["recorded"] == 2 and not by["_a"]["built"] and "not built" in by["_a"]["why"]
    assert doc["totals"]["h200_verified"] == 0 and doc["driver_cases"] == {"x": {"ok": True}}


def test_a_kernel_built_on_its_launches_is_graded_by_its_check_not_by_the_unattended_translation():
    table = {"kernels": [{"file": "liger_kernel/ops/a.py", "kernel": "_a", "role": "kernel", "translate_ok": False,
                          "first_diagnostic": "a.py:3:1 [constexpr] the value of DTYPE is needed"}]}
    gpu = {"bundle": {"kernels": [{"file": "liger_kernel/ops/a.py", "kernel": "_a", "recorded": 1, "built": True}]},
           "kernels": {"liger_kernel/ops/a.py::_a": {"checked": 1, "correct": True, "parity": 0.9}}}
    (row,) = flow.grade_rows(table, gpu)
    assert not row["translate"] and row["built"] and row["correct"] and row["why"] == ""
