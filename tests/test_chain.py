"""The CPU proof of the corpus ports, end to end: translate -> cargo build -> Tile IR both sides -> cubins
-> IR diff -> machine code compared instruction by instruction.

Every test run proves the first capture of every corpus kernel on sm_90 and, for a fixed set of kernels
(element-wise, reduction, MMA, attention), on sm_80, sm_90 and sm_100; `pytest --slow` proves every
capture on every architecture. Where a committed verification found the port's machine code equal to
the reference's, it must still be equal.
"""

from __future__ import annotations

import json

import pytest

from tileport.cache import DiskCache, default_root
from tileport.capture import ARCHS
from tileport.corpus import REPO, captures_by_kernel
from tileport.ops.specs import all_specs
from tileport.capture.verify import verify_all

pytestmark = pytest.mark.cargo
KERNELS = captures_by_kernel(all_specs())
EVERY_ARCH_SAMPLE = ("vector_add_kernel", "softmax_tma_kernel", "matmul_kernel", "fmha_fwd_kernel")
SAMPLE_ARCH = "sm_90"
# Committed verifications: per capture and architecture, whether the port's machine code was the reference's.
COMMITTED = ("2026-12-01-cpu-verify-sass.json", "2026-12-03-cpu-verify-sass-attention.json")


def _plan(slow: bool) -> list[tuple[tuple[str, ...], list]]:
    """(architectures, [(kernel file, capture)]) groups to verify."""
    if slow:
        return [(ARCHS, [(path, c) for path, caps in KERNELS.values() for c in caps])]
    every = [(path, caps[0]) for k, (path, caps) in KERNELS.items() if k in EVERY_ARCH_SAMPLE]
    one = [(path, caps[0]) for k, (path, caps) in KERNELS.items() if k not in EVERY_ARCH_SAMPLE]
    return [(ARCHS, every), ((SAMPLE_ARCH,), one)]


@pytest.fixture(scope="module")
def results(request, library, tmp_path_factory):
    # Cubins of bytes that an earlier test (port's stage B, the corpus compile) compiled come from the
    # session's capture cache (conftest: $TILEPORT_CACHE_DIR); the SASS is disassembled here either way.
    out = tmp_path_factory.mktemp("verify")
    return [(archs, r) for archs, items in _plan(request.config.getoption("--slow"))
            for r in verify_all(library, items, out, jobs=2, cache=DiskCache(default_root()), archs=archs)]


def _committed_same() -> dict[str, dict[str, bool]]:
    found = {}
    for name in COMMITTED:
        for c in json.loads((REPO / "bench" / "results" / name).read_text())["captures"]:
            found[c["capture"]] = c["sass_same"]
    return found


def test_every_capture_is_clean(results):
    bad = [(r.capture, r.verdict, r.error, r.findings[:2]) for _, r in results
           if r.error or r.critical or r.verdict not in ("PASS", "PASS_WITH_NOTES")]
    assert not bad


def test_both_sides_compile_for_each_architecture(results):
    for archs, r in results:
        assert r.cubins_ref == dict.fromkeys(archs, True), r.capture
        assert r.cubins_gen == dict.fromkeys(archs, True), r.capture


def test_machine_code_is_compared_and_stays_the_reference_s(results):
    """Every capture's SASS is disassembled on both sides and compared instruction by instruction
    (tileport.sass); the same stream means the port runs the reference's instructions. A capture whose
    committed verification found the same stream on an architecture must find it again."""
    committed = _committed_same()
    lost = []
    for archs, r in results:
        assert set(r.sass) == set(archs), r.capture
        for arch, stats in r.sass.items():
            assert "error" not in stats and min(stats["instructions"]) > 0, (r.capture, arch, stats)
            if committed.get(r.capture, {}).get(arch) and not r.sass_same[arch]:
                lost.append((r.capture, arch))
    same = sum(all(r.sass_same.values()) for _, r in results)
    print(f"same instruction stream on every architecture verified: {same}/{len(results)}")
    assert not lost
    assert any(r.capture in committed for _, r in results)  # the expectation is not vacuous


def test_every_corpus_kernel_was_captured(results):
    assert {r.kernel for _, r in results} == set(KERNELS)
    assert {arch for archs, _ in results for arch in archs} == set(ARCHS)


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
