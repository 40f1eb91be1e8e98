"""SEMANTIC_EQUIV rules: each on real cuTile Python programs that spell one computation two ways,
and a near-miss for each that must not be treated as equivalent."""

from __future__ import annotations

from pathlib import Path

import pytest

import tir_export
from tileport.tileir import diff, read_module
from tileport.tileir.attrs import Dense, DictAttr, Hints
from tileport.tileir.equiv import RULES
from tileport.tileir.model import clone_module, walk
from tileport.tileir.rules import Severity, Status

DOC = Path(__file__).resolve().parents[2] / "docs" / "tileir.md"

# rule id -> (program in the normal form, program in the other spelling)
SPELLINGS = {
    "ceil_div": ("ceil_div_a", "ceil_div_b"),            # ct.cdiv(n, T)  vs  (n + T - 1) // T
    "min_max_select": ("min_a", "min_b"),                # ct.minimum     vs  ct.where(t < n, t, n)
    "index_space_shape": ("tiles_a", "tiles_b"),         # ct.num_tiles   vs  ct.cdiv(shape, BK)
}


def _read(case: str, version: str = "13.4", gpu: str | None = None):
    return read_module(tir_export.case(case, version, gpu))


def test_every_rule_is_tested_and_documented():
    assert {r.id for r in RULES} == set(SPELLINGS) | {"hint_key"}
    doc = DOC.read_text()
    for r in RULES:
        assert f"`{r.id}`" in doc


def _notes(report):
    return [f for f in report.findings if f.status == Status.SEMANTIC_EQUIV]


@pytest.mark.parametrize("rule_id", sorted(SPELLINGS))
def test_equivalent_spellings_pass(rule_id):
    a, b = SPELLINGS[rule_id]
    for ref, gen in ((a, b), (b, a)):
        report = diff(_read(ref), _read(gen))
        assert report.verdict == "PASS", report.to_markdown()
        notes = _notes(report)
        assert len(notes) == 1 and rule_id in notes[0].message
        assert notes[0].severity == Severity.INFO
    assert not _notes(diff(_read(a), _read(a)))


def test_hint_key_rule():
    report = diff(_read("matmul"), _read("matmul", "13.2", "sm_90"))
    assert report.verdict == "PASS"
    assert {(f.category, f.rule) for f in _notes(report)} == {("entry_hints", "semantic_equiv"),
                                                              ("memory_hints", "semantic_equiv")}


def _set_int_constant(module, user: str, old: int, new: int):
    """Change the i32 constant `old` used by the first `user` op into `new`."""
    m = clone_module(module)
    op = next(op for op in walk(m.entries[0]) if op.name == user)
    for v in op.operands:
        value = v.op.attributes.get("value") if v.op is not None else None
        if v.op.name == "constant" and isinstance(value, Dense) and value.data == old.to_bytes(4, "little"):
            v.op.attributes["value"] = Dense(None, new.to_bytes(4, "little"))
            return m
    raise LookupError(old)


def test_ceil_div_near_miss():
    # (n + T - 2) // T is not a ceil-div.
    bad = _set_int_constant(_read("ceil_div_b"), "subi", 1, 2)
    report = diff(_read("ceil_div_a"), bad)
    assert report.verdict == "FAIL" and not _notes(report)


def test_min_select_near_miss():
    # where(t < n, n, t) is a max.
    gen = _read("min_b")
    select = next(op for op in walk(gen.entries[0]) if op.name == "select")
    select.operands[1], select.operands[2] = select.operands[2], select.operands[1]
    report = diff(_read("min_a"), gen)
    assert report.verdict == "FAIL"
    assert any(f.category == "math" and f.severity == Severity.CRITICAL for f in report.findings)


def test_index_space_shape_near_miss():
    # ceil-div of the tensor dim by 32 while the partition's tile is 64 wide.
    report = diff(_read("tiles_a"), _set_int_constant(_read("tiles_b"), "divi", 64, 32))
    assert report.verdict == "FAIL"
    assert any(f.category == "constant" and f.severity == Severity.CRITICAL for f in report.findings)


def test_hint_key_near_miss():
    # An sm_90 entry beats "default": different values there are a real difference.
    gen = _read("matmul")
    f = gen.entries[0]
    f.hints = Hints(f.hints.by_arch + (("sm_90", DictAttr((("occupancy", 4),))),))
    report = diff(_read("matmul"), gen)
    assert report.verdict == "FAIL"
    assert any(x.category == "entry_hints" and x.severity == Severity.CRITICAL for x in report.findings)
