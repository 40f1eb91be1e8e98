"""Verdict records against verdict.schema.json: the per-stage enums, the fields some verdicts require."""

from __future__ import annotations

import json

import pytest

from tileport.pipeline.verdicts import SCHEMA_PATH, VERDICTS, Stage, Verdict, check_file, schema_errors


def v(stage: str, verdict: str, **kw) -> dict:
    return Verdict(kernel="k", stage=stage, verdict=verdict, **kw).to_dict()


def test_schema_is_a_valid_json_schema():
    import jsonschema
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text()))


def test_stage_enums_are_the_architecture_table():
    assert {s: [str(x) for x in e] for s, e in VERDICTS.items()} == {
        Stage.A: ["PASS", "FAIL_FIXABLE", "BLOCKED"],
        Stage.B: ["COMPILED", "FAIL_COMPILE", "FAIL_FIXABLE", "BLOCKED"],
        Stage.C: ["PASS", "PASS_WITH_NOTES", "FAIL_FIXABLE", "FAIL_COMPILER_BUG", "BLOCKED"],
        Stage.D: ["ALL_PASS", "FAIL", "FAIL_FIXABLE", "BLOCKED"],  # FAIL_FIXABLE: no launches to test on
        Stage.E: ["DONE", "INVESTIGATE", "BLOCKED"],
        Stage.F: ["FIXABLE", "ALIGNED", "BLOCKED"],
    }


@pytest.mark.parametrize("stage", list(Stage))
def test_each_stage_accepts_exactly_its_verdicts(stage):
    everything = {str(x) for e in VERDICTS.values() for x in e}
    for verdict in everything:
        extra: dict = {}
        if stage == Stage.D and verdict in ("FAIL", "BLOCKED"):
            extra["fail_class"] = "kernel"
        if stage == Stage.C and verdict == "FAIL_FIXABLE":
            extra["owner"] = "kernel"
        if stage == Stage.E and verdict in ("DONE", "INVESTIGATE"):
            extra["details"] = {"geomean_ratio": 1.0, "reference_backend": "cutile"}
        if stage == Stage.B and verdict == "COMPILED":
            extra["details"] = {"variants": [], "ir_diff": {}}
        if stage == Stage.B and verdict in ("FAIL_FIXABLE", "BLOCKED"):
            extra["reason"] = "why"
        errors = schema_errors(v(str(stage), verdict, **extra))
        allowed = verdict in {str(x) for x in VERDICTS[stage]}
        assert (not errors) == allowed, (stage, verdict, errors)


def test_required_companions():
    assert schema_errors(v("D", "FAIL"))  # a D failure needs its class
    assert not schema_errors(v("D", "FAIL", fail_class="host"))
    assert schema_errors(v("C", "FAIL_FIXABLE"))  # a C FAIL_FIXABLE needs its owner
    assert schema_errors(v("E", "DONE"))  # a grade needs its geomean ratio
    assert schema_errors(v("E", "DONE", details={"geomean_ratio": -1, "reference_backend": "cutile"}))
    assert schema_errors(v("B", "COMPILED"))  # COMPILED needs its variants and IR diff
    assert schema_errors(v("B", "BLOCKED"))  # an unsupported kernel needs its diagnostic or reason
    assert not schema_errors(v("B", "BLOCKED", diagnostics=[{"message": "m", "file": "f.py", "line": 3, "col": 5}]))
    assert schema_errors(v("A", "PASS", fail_class="env"))  # only BLOCKED (and D) carry a class
    assert not schema_errors(v("E", "BLOCKED", fail_class="env"))
    assert schema_errors(v("A", "PASS", attempt=3))
    assert schema_errors({**v("A", "PASS"), "surprise": 1})


def test_roundtrip_and_write_refuses_invalid(tmp_path):
    good = Verdict(kernel="k", stage="D", verdict="BLOCKED", fail_class="env", reason="no GPU")
    good.write(tmp_path / "verdict.json")
    assert check_file(tmp_path / "verdict.json") == []
    assert Verdict.load(tmp_path / "verdict.json") == good
    assert good.is_env_block
    with pytest.raises(ValueError):
        Verdict(kernel="k", stage="D", verdict="DONE").write(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{not json")
    assert check_file(tmp_path / "junk.json") and check_file(tmp_path / "missing.json")


def test_e_validator_checks_line_1_of_the_report_against_the_verdict(tmp_path):
    """performance.md's `VERDICT: X` line must be verdict.json's verdict (as for C, D and F's reports)."""
    from tileport.pipeline import stage_e
    from tileport.pipeline.context import KernelContext, Options, Session, Target
    session = Session(Options(out=tmp_path, cache_dir=tmp_path / "cache"), [])
    ctx = KernelContext(session, Target("k", "k", tmp_path / "k.py", {}, [], "default"), stage=Stage.E)
    ctx.verdict("BLOCKED", "no GPU", fail_class="env").write(ctx.dir / "verdict.json")
    (ctx.dir / "performance.md").write_text("VERDICT: BLOCKED\n\nreason: no GPU\n")
    assert stage_e.validate(ctx) == []
    (ctx.dir / "performance.md").write_text("VERDICT: INVESTIGATE\n\nreason: no GPU\n")
    assert stage_e.validate(ctx) == ["performance.md says INVESTIGATE, verdict.json BLOCKED"]
