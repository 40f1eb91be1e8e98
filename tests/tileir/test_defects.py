"""Planted defects: each real program with one change must fail with exactly that finding."""

from __future__ import annotations

import pytest

import tir_export
import tir_mutations
from tileport.tileir import diff, read_module
from tileport.tileir.rules import Severity


@pytest.mark.parametrize("name", sorted(tir_mutations.DEFECTS))
def test_planted_defect_is_found(name):
    program, mutate, category, rule = tir_mutations.DEFECTS[name]
    ref = read_module(tir_export.case(program))
    report = diff(ref, mutate(ref))
    critical = [(f.category, f.rule) for f in report.findings if f.severity == Severity.CRITICAL]
    assert critical == [(category, rule)], report.to_markdown()
    assert report.verdict == "FAIL" and report.exit_code == 1
    finding = next(f for f in report.findings if f.severity == Severity.CRITICAL)
    assert finding.message and finding.action and finding.owner in ("kernel", "host")
    assert finding.ref is not None or finding.gen is not None or category == "entry_hints"


@pytest.mark.parametrize("name", sorted(tir_mutations.DEFECTS))
def test_defect_is_found_in_both_directions(name):
    """Diffing the mutated program as the reference finds the same category. All but one stay
    CRITICAL; a port that assumes *more* pointer alignment than the reference is a WARN (the
    launcher must guarantee it)."""
    program, mutate, category, _ = tir_mutations.DEFECTS[name]
    ref = read_module(tir_export.case(program))
    report = diff(mutate(ref), ref)
    expected = Severity.WARN if name == "lost_pointer_div_by" else Severity.CRITICAL
    assert category in {f.category for f in report.findings if f.severity == expected}
    assert report.verdict == ("PASS_WITH_NOTES" if expected == Severity.WARN else "FAIL")
