"""GPU evidence: the record formats it reads, grading (D classes, E faster reference) and staleness."""

from __future__ import annotations

import json

from tileport.corpus import REPO
from tileport.pipeline.evidence import (EVIDENCE_KIND, EvidenceStore, classify_failure, commit_reader, components,
                                        fingerprint, grade_correctness, grade_performance, op_components,
                                        worktree_reader)

BENCH = REPO / "bench" / "results"


def check(op, backend, ok=True, error="", dtype="float32", shape=(7,)):
    return {"op": op, "backend": backend, "dtype": dtype, "shape": list(shape), "ok": ok, "error": error}


def bench(op, rs, cutile, torch=None, dtype="float32", shape=(7,)):
    t = {"cutile-rs": rs, "cutile": cutile}
    if torch is not None:
        t["torch"] = torch
    return {"op": op, "dtype": dtype, "shape": list(shape), "times_us": t, "errors": {}}


def test_reads_the_committed_h200_results_and_says_they_are_stale():
    store = EvidenceStore.load([BENCH])
    assert len(store.files) >= 3 and not store.errors
    fp = fingerprint("bmm", worktree_reader())
    a = store.assess("bmm", "check", fp)
    assert a.status == "stale" and a.records  # shown, never graded as fresh
    assert "commit" in a.reason
    # check-run2 is a bare list without a commit: it cannot be attributed to any build
    assert any(p.commit is None and p.source.endswith("check-run2.json") for p, _, _ in store.groups)
    b = store.assess("matmul", "bench", fingerprint("matmul", worktree_reader()))
    assert b.records and b.provenance.commit  # bench runs carry their commit (runs.<run>.environment)


def test_record_formats(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([check("relu", "cutile-rs")]))
    (tmp_path / "env.json").write_text(json.dumps({"environment": {"commit": "abc"}, "records": [check("relu", "cutile")]}))
    (tmp_path / "runs.json").write_text(json.dumps({
        "environment": {"commit": "r0"}, "runs": {"r1": {"environment": {"commit": "r1"}}},
        "records": [dict(bench("relu", 1, 1), run="r1"), bench("relu", 2, 2)]}))
    (tmp_path / "ev.json").write_text(json.dumps({"kind": EVIDENCE_KIND, "provenance": {"commit": "c", "fingerprints": {}},
                                                  "check": [check("gelu", "cutile-rs")], "bench": {"records": []}}))
    (tmp_path / "x.raw.json").write_text(json.dumps([check("relu", "cutile-rs")]))  # raw output: not evidence
    (tmp_path / "bad.json").write_text("{")
    store = EvidenceStore.load([tmp_path, tmp_path / "nope"])
    commits = sorted(str(p.commit) for p, _, _ in store.groups)
    assert commits == ["None", "abc", "c", "r0", "r1"]
    assert len(store.errors) == 2  # bad.json and the missing path
    assert not any(f.endswith(".raw.json") for f in store.files)


def test_fingerprint_freshness(tmp_path):
    fp, comps = fingerprint("relu", worktree_reader())
    assert set(comps) == set(op_components("relu"))
    assert "rust/src/relu.rs" in comps and "src/tileport/ops/kernels/relu.py" in comps
    doc = {"kind": EVIDENCE_KIND, "provenance": {"fingerprints": {"relu": fp}, "components": {"relu": comps}},
           "check": [check("relu", "cutile-rs")], "bench": None}
    store = EvidenceStore()
    store.add(doc, "mem")
    assert store.assess("relu", "check", (fp, comps)).status == "fresh"
    other = dict(comps, **{"rust/src/relu.rs": "0" * 16})
    a = store.assess("relu", "check", ("different", other))
    assert a.status == "stale" and a.changed == ["rust/src/relu.rs"]
    assert store.assess("gelu", "check", (fp, comps)).status == "none"


def test_commit_freshness_uses_git():
    import pytest

    from tileport.pipeline.evidence import commit_exists
    if not commit_exists("HEAD"):
        pytest.skip("not a git checkout: commit-attributed evidence cannot be checked here")
    head = components("relu", commit_reader("HEAD"))
    store = EvidenceStore()
    store.add({"environment": {"commit": "HEAD"}, "records": [check("relu", "cutile-rs")]}, "mem")
    assert store.assess("relu", "check", ("fp", head)).status == "fresh"
    changed = dict(head, **{"rust/src/relu.rs": "changed"})
    a = store.assess("relu", "check", ("fp", changed))
    assert a.status == "stale" and "rust/src/relu.rs" in a.reason
    store = EvidenceStore()
    store.add({"environment": {"commit": "f" * 40}, "records": [check("relu", "cutile-rs")]}, "mem")
    assert "not in this repository" in store.assess("relu", "check", ("fp", head)).reason


def test_grade_correctness_classes():
    g = grade_correctness([check("k", "cutile"), check("k", "cutile-rs")])
    assert g["verdict"] == "ALL_PASS" and g["passed"] == 1
    g = grade_correctness([check("k", "cutile"), check("k", "cutile-rs", False, "max |error| 3 exceeds atol")])
    assert (g["verdict"], g["fail_class"]) == ("FAIL", "kernel") and g["failures"][0]["reference_ok"] is True
    g = grade_correctness([check("k", "cutile-rs", False, "ShapeError: y: expected rank 2")])
    assert g["fail_class"] == "host"
    assert classify_failure({"error": "RankError: Specified launch grid does not match inferred tensor partition grid"}) == "kernel"
    assert grade_correctness([check("k", "cutile")])["verdict"] == "BLOCKED"


def test_grade_performance_uses_the_faster_reference():
    recs = [bench("k", 10, 10, 20), bench("k", 11, 10, 30)]
    g = grade_performance(recs)
    assert g["reference_backend"] == "cutile" and g["verdict"] == "DONE"
    assert abs(g["geomean_ratio"] - (1.0 * 1.1) ** 0.5) < 1e-6
    g = grade_performance([bench("k", 10, 20, 8)])  # torch is faster: the port is graded against it
    assert g["reference_backend"] == "torch" and g["verdict"] == "INVESTIGATE" and g["geomean_ratio_vs_cutile"] == 0.5
    assert grade_performance([{"op": "k", "times_us": {"cutile": 1}, "errors": {"cutile-rs": "boom"}}])["verdict"] == "BLOCKED"
