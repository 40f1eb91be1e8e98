"""The mutation suite on real ports (fast subset; the full run is `python3 -m eval.mutate`).

For a few corpus kernels, both sides are captured once per test session (the port through the
cargo-built cdylib), every semantic mutation must be flagged CRITICAL or WARN and every benign
rewrite must PASS. The second checker (the NumPy interpreter running reference and mutated port)
fills its column for every row: no benign rewrite DIFFERs, no mutation is caught by neither, and
value-changing mutations DIFFER. `irdiff --manifest` gives the command line the parameter roles
`verify` uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import mutate as M
from tileport.tileir.cli import irdiff

pytestmark = pytest.mark.cargo

REPO = Path(__file__).resolve().parents[2]
FAST_KERNELS = ["gelu_tanh_kernel", "matmul_kernel", "rms_norm_kernel", "silu_and_mul_kernel",
                "softmax_gather_kernel"]


@pytest.fixture(scope="session")
def cases(library):
    return {c.kernel: c for c in M.corpus_cases(library, FAST_KERNELS)}


@pytest.fixture(scope="session")
def outcomes(cases):
    return {k: M.evaluate(c, M.mutations(c.label, c.generated)) for k, c in cases.items()}


def test_unmutated_ports_have_no_critical(cases):
    assert sorted(cases) == FAST_KERNELS
    for case in cases.values():
        assert case.diff(case.generated).counts()["CRITICAL"] == 0, case.label


@pytest.mark.parametrize("kernel", FAST_KERNELS)
def test_semantic_mutations_flagged_and_benign_rewrites_pass(outcomes, kernel):
    results = outcomes[kernel]
    assert sum(o.semantic for o in results) >= 5 and sum(not o.semantic for o in results) == len(M.BENIGN)
    wrong = [(o.cls, o.description, o.differ, o.finding) for o in results if not o.ok]
    assert not wrong


def test_fast_subset_covers_every_mutation_class(outcomes):
    seen = {o.cls for results in outcomes.values() for o in results if o.semantic}
    assert seen == set(M.CLASSES)


def test_interpreter_fills_the_second_checker_column(outcomes):
    rows = [o for r in outcomes.values() for o in r]
    assert {o.second_checker for o in rows} <= {"DIFFER", "AGREE", "ERROR"} and None not in \
        {o.second_checker for o in rows}
    assert all(o.second_checker_detail for o in rows)
    summary = M.summarize(rows, {})
    assert summary["missed"] == 0 and summary["benign_false_alarms"] == 0
    assert summary["caught_by_neither"] == [] and summary["benign_interpreter_false_alarms"] == []
    assert summary["interpreter_errors"] == []
    assert summary["caught_by_either"] == summary["mutations"] and M.passed(summary)
    json.dumps(summary)


# mutations that change the outputs of every fast kernel they apply to: the interpreter must see it
VALUE_CHANGING = {"dropped_store", "index_plus_one", "loop_bounds", "exp_vs_exp2", "wrong_constant"}


def test_interpreter_catches_value_changing_mutations(outcomes):
    rows = [o for r in outcomes.values() for o in r if o.cls in VALUE_CHANGING]
    assert len(rows) >= 10
    assert [(o.kernel, o.cls, o.second_checker_detail) for o in rows if o.second_checker != "DIFFER"] == []


def test_a_mutation_caught_by_neither_is_reported_and_fails(outcomes):
    row = next(o for r in outcomes.values() for o in r if o.semantic)
    missed = M.Outcome(row.kernel, row.cls, row.description, True, "PASS", "", "AGREE", "AGREE")
    summary = M.summarize([missed], {})
    assert summary["caught_by_neither"] == [f"{row.kernel} {row.cls}: {row.description}"]
    assert not M.passed(summary)
    assert "CAUGHT BY NEITHER" in M.report(summary, [missed.__dict__])
    alarm = M.Outcome(row.kernel, "rename_values", "x", False, "PASS", "", "DIFFER", "y: 1/4 differ")
    assert not M.passed(M.summarize([alarm], {}))


def test_interpreter_errors_are_recorded_not_skipped(cases):
    case = cases["gelu_tanh_kernel"]
    broken = M.clone_module(case.generated)
    next(op for op in M.walk(M.entry(broken)) if op.name in ("exp", "exp2", "tanh", "mulf")).name = "frobnicate"
    verdict, reason = case.interpret(broken)
    assert verdict == "ERROR" and "frobnicate" in reason


def test_irdiff_manifest_gives_the_roles_verify_uses(library, tmp_path, capsys):
    from tileport.capture import generated_bytecode, reference_bytecode
    from tileport.corpus import captures_by_kernel
    from tileport.ops.specs import all_specs
    path, caps = captures_by_kernel(all_specs())["softmax_gather_kernel"]
    ref, gen = tmp_path / "ref.tileirbc", tmp_path / "gen.tileirbc"
    ref.write_bytes(reference_bytecode(path, caps[0]))
    gen.write_bytes(generated_bytecode(library, caps[0])[1])
    out = tmp_path / "r.json"
    assert irdiff(ref, gen, json_out=out) == 1  # strides known only by position: they differ
    assert any(f["category"] == "index" for f in json.loads(out.read_text())["findings"])
    assert irdiff(ref, gen, json_out=out, manifest=REPO / "rust" / "kernels.json",
                  kernel="softmax_gather_kernel") in (0, 2)
    assert json.loads(out.read_text())["counts"]["CRITICAL"] == 0
    assert irdiff(ref, gen, manifest=REPO / "rust") in (0, 2)  # the crate dir; kernel found by entry name
    assert irdiff(ref, gen, manifest=REPO / "rust", kernel="vector_add_kernel") == 1
    assert "no variant whose entry is" in " ".join(capsys.readouterr().out.split())
