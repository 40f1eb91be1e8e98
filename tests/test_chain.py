"""The CPU proof of every corpus port, end to end (what CI runs for real):
translate -> cargo build -> Tile IR both sides -> cubins for sm_80/sm_90/sm_100 -> IR diff."""

from __future__ import annotations

import pytest

from tileport.cache import DiskCache, default_root
from tileport.corpus import captures_by_kernel
from tileport.ops.specs import all_specs
from tileport.capture.verify import verify_all

pytestmark = pytest.mark.cargo
SAME_SASS_AT_LEAST = 41  # of 51 captures: bench/results/2026-12-01-cpu-verify-sass.json


@pytest.fixture(scope="module")
def results(library, tmp_path_factory):
    items = [(path, c) for _k, (path, caps) in captures_by_kernel(all_specs()).items() for c in caps]
    # Cubins of bytes that an earlier test (port's stage B, the corpus compile) compiled come from the
    # session's capture cache (conftest: $TILEPORT_CACHE_DIR); the SASS is disassembled here either way.
    return verify_all(library, items, tmp_path_factory.mktemp("verify"), jobs=2, cache=DiskCache(default_root()))


def test_every_capture_is_clean(results):
    assert len(results) >= 45
    bad = [(r.capture, r.verdict, r.error, r.findings[:2]) for r in results
           if r.error or r.critical or r.verdict not in ("PASS", "PASS_WITH_NOTES")]
    assert not bad


def test_both_sides_compile_for_every_architecture(results):
    for r in results:
        assert r.cubins_ref == {"sm_80": True, "sm_90": True, "sm_100": True}, r.capture
        assert r.cubins_gen == {"sm_80": True, "sm_90": True, "sm_100": True}, r.capture


def test_machine_code_is_compared_on_every_architecture(results):
    """Every capture's SASS is disassembled on both sides and compared instruction by instruction
    (tileport.sass); the same stream means the port runs the reference's instructions."""
    for r in results:
        assert set(r.sass) == {"sm_80", "sm_90", "sm_100"}, r.capture
        for arch, stats in r.sass.items():
            assert "error" not in stats and min(stats["instructions"]) > 0, (r.capture, arch, stats)
    same = [r for r in results if all(r.sass_same.values())]
    print(f"same instruction stream on every architecture: {len(same)}/{len(results)}")
    assert len(same) >= SAME_SASS_AT_LEAST


def test_every_corpus_kernel_was_captured(results):
    kernels = {r.kernel for r in results}
    assert kernels == set(captures_by_kernel(all_specs()))


def test_verify_counts_findings_without_match_lines(monkeypatch):
    """MATCH lines of the IR diff are INFO-severity records of agreement, not findings to count."""
    from types import SimpleNamespace

    from tileport.capture import verify
    from tileport.capture import SideCapture
    from tileport.ops.spec import Capture
    from tileport.tileir import DiffReport, Finding, Owner, Severity, Status

    def finding(status, severity, category):
        return Finding(category, "rule", status, severity, Owner.KERNEL, f"{category} message", "")
    findings = [finding(Status.MATCH, Severity.INFO, "ops"), finding(Status.MATCH, Severity.INFO, "types"),
                finding(Status.DIFFERS, Severity.WARN, "hints"), finding(Status.DIFFERS, Severity.INFO, "names")]
    report = DiffReport("ref", "gen", "sm_90", findings)
    monkeypatch.setattr(verify, "frontend_for", lambda path: SimpleNamespace(name="cutile"))
    monkeypatch.setattr(verify, "frontend_reference", lambda frontend, path, capture: b"ref")
    monkeypatch.setattr(verify, "generated_bytecode", lambda lib, capture: ("", b"gen"))
    monkeypatch.setattr(verify, "capture_side", lambda bc, d, stem, archs, cache: SideCapture(bc, ""))
    monkeypatch.setattr(verify, "diff_port", lambda lib, capture, ref, gen: report)
    res = verify.verify_capture(None, None, Capture("k", {}), None)
    assert (res.verdict, res.critical, res.warn, res.info, res.error) == ("PASS_WITH_NOTES", 0, 1, 1, "")
    assert res.findings == ["WARN hints: hints message"]
