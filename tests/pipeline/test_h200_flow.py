"""The H200 flow of `scripts/h200.sh evidence` and `scripts/h200-grade.sh`, without a GPU.

`python -m tileport.pipeline.evidence record` runs here with the GPU parts replaced by fakes that return
records in the real formats (`tileport.gpu.check` / `tileport.gpu.bench.bench_case`): what is recorded
(fingerprints, selection, interrupted runs), the primary ops, the shard summary of the pytest step, and the
whole grading (cargo): the corpus reaches DONE on fresh evidence, and a failing case or a changed kernel
keeps it from DONE.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tileport.corpus import REPO, captures_by_kernel
from tileport.ops import op_names
from tileport.ops.specs import all_specs, get_spec
from tileport.pipeline import evidence
from tileport.pipeline.evidence import EVIDENCE_KIND, EvidenceStore, fingerprint, worktree_reader

SUMMARY = REPO / "scripts" / "pytest-summary.py"


def check_records(op: str, ok: bool = True) -> list[dict]:
    spec = get_spec(op)
    return [{"op": op, "backend": b, "dtype": dt, "shape": list(s), "ok": ok, "error": "" if ok else
             "max |error| 1 exceeds atol 0.001 + rtol 0.001 * |ref| (x9.00)", "seconds": 0.1}
            for dt in spec.dtypes for s in spec.shapes for b in ("cutile", "cutile-rs")]


@pytest.fixture
def fake_gpu(monkeypatch):
    """gpu.check.run_parallel and the benchmark's GPU parts, as fakes; `fails` ops fail their check,
    `interrupt_after` ({"check"|"bench": n}) stops the run like SIGTERM after n ops / cases."""
    from tileport.gpu import bench, check
    state = types.SimpleNamespace(fails=set(), interrupt_after={}, bench_calls=[])

    def run_parallel(ops, jobs, out_dir, backends=("cutile", "cutile-rs")):
        out = []
        for i, op in enumerate(ops):
            if i == state.interrupt_after.get("check"):
                raise KeyboardInterrupt
            recs = check_records(op, op not in state.fails)
            (out_dir / f"check-{op}.json").write_text(json.dumps(recs))
            out += recs
        return out

    def bench_case(spec, dtype, shape, flush, columns, ceil, budget_s):
        if len(state.bench_calls) == state.interrupt_after.get("bench"):
            raise KeyboardInterrupt
        state.bench_calls.append((spec.name, dtype, tuple(shape), tuple(columns), budget_s))
        times = {c: 10.0 for c in columns}
        return {"op": spec.name, "dtype": dtype, "shape": list(shape), "times_us": times, "errors": {}}

    monkeypatch.setattr(check, "run_parallel", run_parallel)
    monkeypatch.setattr(bench, "bench_case", bench_case)
    monkeypatch.setattr(bench, "make_flush", lambda device: (lambda: None))
    monkeypatch.setattr(bench, "environment", lambda: {"gpu": "FAKE GPU", "commit": "fake"})
    monkeypatch.setattr(bench, "ceilings", lambda flush: {"copy_gbps": 1.0})
    torch = types.SimpleNamespace(backends=types.SimpleNamespace(
        cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True))))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delenv("TILEPORT_DEVICE_EXTRA", raising=False)
    return state


def record(out: Path, *args: str) -> tuple[int, dict]:
    rc = evidence.main(["record", "--out", str(out), *args])
    name = "gpu-evidence-check.json" if "--no-bench" in args else "gpu-evidence-bench.json"
    return rc, json.loads((out / name).read_text())


def test_primary_ops_are_the_ops_grading_the_corpus_kernels():
    primary = evidence.corpus_primary_ops()
    assert "softmax" not in primary  # every softmax kernel is graded by its pinned variant's benchmark
    assert set(primary) <= set(op_names())
    kernels = captures_by_kernel(all_specs())
    assert all(any(k in get_spec(op).kernels for op in primary) for k in kernels)  # every kernel is graded
    assert len(primary) < len(op_names())  # variants sharing a kernel are not benchmarked twice


def test_recorded_evidence_is_fresh_for_this_tree_and_says_what_ran(tmp_path, fake_gpu):
    rc, chk = record(tmp_path, "--no-bench", "-j", "16")
    assert rc == 0 and chk["kind"] == EVIDENCE_KIND and not chk["provenance"]["incomplete"]
    assert chk["provenance"]["selection"]["check"] == {"ops": op_names(), "shapes": "every shape of each op spec",
                                                      "jobs": 16}
    rc, ben = record(tmp_path, "--no-check", "--bench-ops", "primary", "--bench-shapes", "1", "--budget", "0.1")
    assert rc == 0 and ben["provenance"]["selection"]["bench"]["shapes"].startswith("the first 1 benchmark shape(s)")
    benched = {}
    for c in fake_gpu.bench_calls:
        benched.setdefault(c[0], set()).add(c[2])
    for op, shapes in benched.items():  # one shape, but every shape of an op whose shape picks the kernel
        spec = get_spec(op)
        assert shapes == {tuple(s) for s in (spec.bench_shapes if len(spec.kernels) > 1 else spec.bench_shapes[:1])}
    assert (1024, 16384) in benched["softmax_tma"]  # the only benchmark shape launching softmax_tma_wide_kernel
    assert {c[0] for c in fake_gpu.bench_calls} == set(evidence.corpus_primary_ops())
    assert all(c[3] == ("cutile", "cutile-rs", "torch") and c[4] == 0.1 for c in fake_gpu.bench_calls)
    assert {(c[0], c[1]) for c in fake_gpu.bench_calls} == {(op, dt) for op in evidence.corpus_primary_ops()
                                                            for dt in get_spec(op).dtypes}  # every dtype
    assert sys.modules["torch"].backends.cuda.matmul.allow_tf32 is True  # restored
    store = EvidenceStore.load([tmp_path])
    for op in ("relu", "softmax_online"):
        now = fingerprint(op, worktree_reader())
        assert store.assess(op, "check", now).status == "fresh"
        assert store.assess(op, "bench", now).status == "fresh"
    assert store.assess("softmax", "bench", fingerprint("softmax", worktree_reader())).status == "none"
    assert evidence.grade_correctness(store.assess("rope", "check", fingerprint("rope", worktree_reader())).records)[
        "verdict"] == "ALL_PASS"


def test_an_interrupted_recording_keeps_finished_ops_only(tmp_path, fake_gpu):
    fake_gpu.interrupt_after = {"check": 2, "bench": 8}
    rc, chk = record(tmp_path, "--no-bench", "relu", "gelu", "rope", "bmm")
    assert rc == 3 and chk["provenance"]["incomplete"] == {"check": ["rope", "bmm"]}
    assert {r["op"] for r in chk["check"]} == {"relu", "gelu"}
    # relu: 3 dtypes x 2 benchmark shapes = 6 cases; the interrupt falls in gelu's, which is dropped whole
    rc, ben = record(tmp_path, "--no-check", "--bench-ops", "relu,gelu")
    assert rc == 3 and ben["provenance"]["incomplete"] == {"bench": ["gelu"]}
    assert [r["op"] for r in ben["bench"]["records"]] == ["relu"] * 6
    raw = json.loads((tmp_path / "bench.raw.json").read_text())
    assert [r["op"] for r in raw["records"]] == ["relu"] * 6 + ["gelu"] * 2  # what ran, for inspection
    store = EvidenceStore.load([tmp_path])
    assert store.assess("gelu", "bench", fingerprint("gelu", worktree_reader())).status == "none"
    assert store.assess("rope", "check", fingerprint("rope", worktree_reader())).status == "none"


def test_interrupt_inside_the_first_benchmark_op_leaves_no_bench_records(tmp_path, fake_gpu):
    fake_gpu.interrupt_after = {"bench": 4}
    rc, ben = record(tmp_path, "--no-check", "--bench-ops", "relu,gelu")  # relu has 6 cases: cut in relu
    assert rc == 3 and ben["provenance"]["incomplete"] == {"bench": ["relu", "gelu"]}
    assert ben["bench"]["records"] == []
    assert EvidenceStore.load([tmp_path]).assess("relu", "bench", fingerprint("relu", worktree_reader())).status == "none"


def test_record_called_directly_writes_what_finished_then_reraises(tmp_path, fake_gpu):
    fake_gpu.interrupt_after = {"check": 1}
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C still stops a caller such as tileport port
        evidence.record(["relu", "gelu"], tmp_path, bench=False)
    doc = json.loads((tmp_path / "gpu-evidence-check.json").read_text())
    assert doc["provenance"]["incomplete"] == {"check": ["gelu"]} and {r["op"] for r in doc["check"]} == {"relu"}


# ------------------------------------------------------------------------------------ pytest shards

def junit(path: Path, passed: int = 0, failed: int = 0, skipped: int = 0) -> None:
    cases = ["<testcase classname='t' name='p%d'/>" % i for i in range(passed)]
    cases += ["<testcase classname='t' name='f%d'><failure message='boom'>x</failure></testcase>" % i
              for i in range(failed)]
    cases += ["<testcase classname='t' name='s%d'><skipped message='no GPU'/></testcase>" % i for i in range(skipped)]
    path.write_text("<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>")


def summarize(d: Path, rcs: dict) -> tuple[int, dict]:
    (d / "rc.txt").write_text("".join(f"{k} rc={v}\n" for k, v in rcs.items()))
    proc = subprocess.run([sys.executable, str(SUMMARY), str(d), str(d / "s.json")], capture_output=True, text=True)
    return proc.returncode, json.loads((d / "s.json").read_text())


def test_pytest_shard_summary_fails_on_failures_timeouts_and_nothing_run(tmp_path):
    junit(tmp_path / "a.xml", passed=3, skipped=1)
    junit(tmp_path / "rest.xml")
    rc, s = summarize(tmp_path, {"a": 0, "rest": 5})
    assert rc == 0 and s["ok"] and s["total"] == {"passed": 3, "failed": 0, "errors": 0, "skipped": 1}
    assert s["skip_reasons"] == {"no GPU": 1}
    junit(tmp_path / "b.xml", passed=1, failed=1)
    rc, s = summarize(tmp_path, {"a": 0, "b": 1})
    assert rc == 1 and s["shards"]["b"]["problems"][0]["message"] == "boom"
    rc, s = summarize(tmp_path, {"a": 124})  # cut by its time limit
    assert rc == 1 and not s["ok"]
    rc, s = summarize(tmp_path, {"a": 0, "missing": 0})  # no junit file
    assert rc == 1 and s["shards"]["missing"] == {"rc": 0, "junit": False}
    junit(tmp_path / "c.xml", skipped=4)
    rc, s = summarize(tmp_path, {"c": 0})  # everything skipped proves nothing
    assert rc == 1


# ------------------------------------------------------------------------------------ grading (cargo)

@pytest.mark.cargo
@pytest.mark.timeout(1800)
def test_h200_grade_takes_the_corpus_to_done_on_fresh_evidence_only(tmp_path, fake_gpu):
    gpu = tmp_path / "fetched"
    fake_gpu.fails = {"gelu"}
    assert record(gpu, "--no-bench", "-j", "4")[0] == 0
    assert record(gpu, "--no-check", "--bench-ops", "primary", "--bench-shapes", "1")[0] == 0
    (gpu / "gpu.txt").write_text("FAKE GPU, 1.0, 1 MiB\n")
    env = {**os.environ, "PORT_OUT": str(tmp_path / "port"), "RESULTS": str(tmp_path / "results"), "NAME": "run"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "h200-grade.sh"), str(gpu)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1700)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # gelu is not at its best state
    summary = json.loads((tmp_path / "results" / "run.json").read_text())
    terminal = {k["key"]: k["terminal"] for k in summary["kernels"]}
    n = len(captures_by_kernel(all_specs()))  # the corpus kernels
    assert len(terminal) == n
    assert terminal.pop("gelu_tanh_kernel") != "DONE"
    assert set(terminal.values()) == {"DONE"}
    md = (tmp_path / "results" / "run.md").read_text()
    assert f"{n - 1}/{n} kernel(s) DONE" in md and "FAKE GPU, 1.0, 1 MiB" in md and "gpu-evidence-bench.json" in md
    assert (tmp_path / "results" / "run.html").is_file() and (tmp_path / "results" / "run-evidence.tar.gz").is_file()
    assert f"h200-grade: {n - 1}/{n} kernel(s) DONE" in proc.stdout


# ------------------------------------------------------------------------------------ scripts/h200.sh

FAKE_PYTHON = r'''#!/usr/bin/env bash
# python3 for scripts/h200.sh: logs each run; fakes pytest and the recorder, runs the rest for real.
log() { echo "$(date +%s.%N) $*" >> "$FAKE_LOG"; }
case "$1 $2" in
  "-m pytest")
    log "start pytest $*"; sleep 0.3
    for a in "$@"; do case $a in --junitxml=*) echo "<testsuites><testsuite><testcase classname='t' name='ok'/></testsuite></testsuites>" > "${a#--junitxml=}";; esac; done
    log "end pytest"; exit 0 ;;
  "-m tileport.pipeline.evidence")
    log "start record $*"
    # the check lasts until every test shard has ended (at most 60 s): were the shards not started beside it, the
    # check would end first, and the test's order assertion fails
    case "$*" in *--no-bench*) n=0
      while [ "$(grep -c 'end pytest' "$FAKE_LOG")" -lt "${FAKE_SHARDS:-0}" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done;; esac
    out=""; prev=""; for a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done
    mkdir -p "$out"; case "$*" in *--no-bench*) part=check;; *) part=bench;; esac
    echo '{}' > "$out/gpu-evidence-$part.json"; log "end record-$part"; exit 0 ;;
esac
exec "$REAL_PYTHON" "$@"
'''


def test_h200_sh_runs_the_tests_beside_the_check_and_benchmarks_alone(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'FAKE GPU, 1.0, 1 MiB'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    log, out = tmp_path / "log", tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(log), "REAL_PYTHON": sys.executable,
           "OUT": str(out), "TILEPORT_DEVICE_EXTRA": str(tmp_path), "PYTHONPATH": str(REPO / "src"),
           "FAKE_SHARDS": str(len(op_names()) + 6)}
    proc = subprocess.run(["bash", "scripts/h200.sh", "evidence", "pytest"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [line.split(" ", 2) for line in log.read_text().splitlines()]
    starts = {}
    for t, what, rest in events:
        if what == "start":
            starts.setdefault("check" if "--no-bench" in rest else "bench" if "--no-check" in rest else "pytest",
                              []).append(float(t))
    ends = [float(t) for t, what, rest in events if what == "end" and rest == "pytest"]
    check_end = next(float(t) for t, what, rest in events if what == "end" and rest == "record-check")
    assert len(starts["pytest"]) == len(op_names()) + 6 == len(ends)  # one shard per op + 6 by file
    assert max(starts["pytest"]) < check_end  # beside the correctness check
    assert starts["bench"][0] > max(ends)  # the benchmark waits for every test
    assert "--bench-ops primary --bench-shapes 1 --budget 0.1" in log.read_text()
    back = sorted(p.name for p in out.iterdir())
    assert back == ["evidence.log", "gpu-evidence-bench.json", "gpu-evidence-check.json", "gpu.txt", "pytest-gpu.json",
                    "pytest-gpu.log", "pytest-gpu.tar.gz"]
    assert json.loads((out / "pytest-gpu.json").read_text())["ok"]
    assert "pytest shards: OK" in proc.stdout
