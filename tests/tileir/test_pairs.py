"""Reference/generated pairs from data/pairs.json: where generated (cutile-rs) programs plug in.

The pairs there now are real cutile-rs 0.5.0 output (data/cutile_rs/README.md) against cuTile
Python twins of the same kernels.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import tir_export
from tileport.tileir import diff, read_module
from tileport.tileir.report import SCHEMA_PATH
from tileport.tileir.rules import Severity

DATA = Path(__file__).parent / "data"
PAIRS = json.loads((DATA / "pairs.json").read_text())["pairs"]


def _reference(pair):
    if "reference_case" in pair:
        return read_module(tir_export.case(pair["reference_case"]))
    return read_module(DATA / pair["reference"])


@pytest.mark.parametrize("pair", PAIRS, ids=[p["name"] for p in PAIRS])
def test_pair(pair):
    report = diff(_reference(pair), read_module(DATA / pair["generated"]),
                  target=pair.get("target", "sm_90"))
    jsonschema.validate(json.loads(report.to_json()), json.loads(SCHEMA_PATH.read_text()))
    assert report.verdict == pair["verdict"], report.to_markdown()
    found = sorted(f"{f.category}/{f.rule}" for f in report.findings
                   for _ in range(f.count) if f.severity == Severity.CRITICAL)
    assert found == sorted(pair.get("critical", [])), report.to_markdown()
