"""The mutation suite on real ports (fast subset; the full run is `python3 -m tileport.tileir.mutate`).

For a few corpus kernels, both sides are captured once per test session (the port through the
cargo-built cdylib), every semantic mutation must be flagged CRITICAL or WARN and every benign
rewrite must PASS. `irdiff --manifest` gives the command line the parameter roles `verify` uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tileport.tileir import mutate as M
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


def test_result_table_has_a_column_for_a_second_checker(outcomes):
    summary = M.summarize([o for r in outcomes.values() for o in r], {})
    row = next(iter(outcomes.values()))[0]
    assert row.second_checker is None and "second_checker" in row.__dict__
    assert summary["missed"] == 0 and summary["benign_false_alarms"] == 0
    json.dumps(summary)


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
