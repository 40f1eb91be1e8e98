"""Reports: the JSON schema, markdown, the terminal view, verdicts and the severity table."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

import tir_export
import tir_mutations
from tileport.tileir import diff, read_module
from tileport.tileir.report import SCHEMA_PATH
from tileport.tileir.rules import RULES, Severity

DOC = Path(__file__).resolve().parents[2] / "docs" / "tileir.md"


def _reports():
    softmax = read_module(tir_export.case("softmax"))
    matmul = read_module(tir_export.case("matmul"))
    yield "PASS", diff(softmax, softmax)
    yield "PASS", diff(matmul, read_module(tir_export.case("matmul", "13.2", "sm_90")))
    yield "FAIL", diff(softmax, tir_mutations.drop_flush_to_zero(softmax))
    yield "FAIL", diff(softmax, read_module(tir_export.case("vec_add")))
    yield "PASS_WITH_NOTES", diff(tir_mutations.drop_pointer_div_by(softmax), softmax)


@pytest.mark.parametrize("expected, report", list(_reports()))
def test_report_outputs(expected, report):
    schema = json.loads(SCHEMA_PATH.read_text())
    data = json.loads(report.to_json())
    jsonschema.validate(data, schema)
    assert data["verdict"] == report.verdict == expected
    assert report.exit_code == {"PASS": 0, "PASS_WITH_NOTES": 2, "FAIL": 1}[expected]
    md = report.to_markdown()
    assert md.startswith(f"# Tile IR diff: {expected}")
    console = Console(record=True, width=160)
    console.print(report)
    text = console.export_text()
    assert expected in text
    for f in report.findings:
        if f.severity == Severity.CRITICAL:
            assert f.message in md and f"{f.category}/{f.rule}" in text


def test_severity_table_is_documented():
    doc = DOC.read_text()
    for (category, rule), r in RULES.items():
        assert f"| {category} | {rule} | {r.severity} |" in doc, (category, rule)
