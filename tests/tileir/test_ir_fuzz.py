"""Fast fuzz run of the Tile IR reader and differ (the long run: eval/fuzz_ir.py).

A few hundred corrupted real bytecode files go through read -> canonicalize -> to_text -> diff ->
report in this process: each must end in a `BytecodeError` or a clean report, within 10 s, and the
whole run must not grow the process's memory by more than a bounded amount.
"""

from __future__ import annotations

import importlib.util
import json
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tileport.tileir import BytecodeError, read_module

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "eval" / "fuzz_ir.py"
N_CASES = 400
HANG_S = 10


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_ir", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # our own script, not user code
    return module


fuzz_ir = _load_fuzzer()


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@pytest.fixture(scope="module")
def seed_list():
    return fuzz_ir.seeds(versions=(("13.4", None),), corpus=False)


def test_seeds_are_real_and_read(seed_list):
    assert len(seed_list) >= 20
    for name, data in seed_list:
        assert read_module(data).entries, name


def test_every_mutator_corrupts(seed_list):
    rng = random.Random(1)
    data = dict(seed_list)["softmax@13.4"]
    for name, mutator in fuzz_ir.MUTATORS.items():
        changed = sum((mutator(rng, data, data) if name == "splice" else mutator(rng, data)) != data
                      for _ in range(20))
        assert changed >= 15, name


def test_check_reports_a_traceback_as_a_defect(seed_list, monkeypatch):
    """The harness must be able to fail: an untyped exception of the reader is a traceback."""
    import tileport.tileir as tileir

    def broken(data):
        raise KeyError("planted")
    monkeypatch.setattr(tileir, "read_module", broken)
    rec = fuzz_ir.check(seed_list[0][1], None)
    assert rec["outcome"] == "traceback" and rec["stage"] == "read" and "KeyError" in rec["error"]
    monkeypatch.setattr(tileir, "read_module", lambda data: (_ for _ in ()).throw(BytecodeError("x", 3)))
    assert fuzz_ir.check(seed_list[0][1], None)["outcome"] == "typed_error"


def test_fuzz_reader_and_differ(seed_list):
    rng = random.Random(20261201)
    originals = {name: read_module(data) for name, data in seed_list}
    outcomes: dict[str, int] = {}
    defects = []
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    old = signal.signal(signal.SIGALRM, _alarm)
    start = time.perf_counter()
    try:
        for i in range(N_CASES):
            seed_name, how, data = fuzz_ir.mutate(rng, seed_list)
            signal.alarm(HANG_S)
            try:
                rec = fuzz_ir.check(data, originals[seed_name])
            except _Hang:
                rec = {"outcome": "hang", "error": f"more than {HANG_S} s"}
            finally:
                signal.alarm(0)
            if rec["outcome"] == "traceback" and "_Hang" in rec.get("error", ""):
                rec = {"outcome": "hang", "error": f"more than {HANG_S} s"}
            outcomes[rec["outcome"]] = outcomes.get(rec["outcome"], 0) + 1
            if rec["outcome"] not in ("ok", "typed_error") or rec["warnings"]:
                defects.append((i, seed_name, how, rec))
    finally:
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - start
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    print(f"{N_CASES} corrupted files in {elapsed:.1f} s: {outcomes}, peak RSS +{grown_mib:.0f} MiB")
    assert not defects, defects[:5]
    # Both paths were exercised: refused files, and files that read and went through the diff.
    assert outcomes.get("typed_error", 0) > N_CASES // 2 and outcomes.get("ok", 0) > 10, outcomes
    assert grown_mib < 300
    assert elapsed < 30


def test_long_run_script_writes_its_figures(tmp_path):
    out = tmp_path / "fuzz.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--n", "40", "--no-corpus", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    assert figures["files"] == 40
    assert figures["typed_errors"] + figures["read_and_diffed"] == 40
    for key in ("warnings", "tracebacks", "hangs", "crashes", "max_rss_mib", "seconds", "commit"):
        assert key in figures
    assert figures["tracebacks"] == figures["hangs"] == figures["crashes"] == 0
    assert figures["max_rss_mib"] > 0
