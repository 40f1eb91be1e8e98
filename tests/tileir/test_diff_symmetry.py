"""The diff is symmetric: a program diffed against itself is PASS with nothing above INFO, whatever it
assumes and wherever, and diff(a, b) mirrors diff(b, a)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tir_export
import tir_kernels
import tir_mutations
from tileport.cli import app
from tileport.tileir import diff, read_module
from tileport.tileir.attrs import DivBy
from tileport.tileir.model import Op, clone_module, walk
from tileport.tileir.rules import Severity, Status

DATA = Path(__file__).parent / "data"
FILES = sorted(p.relative_to(DATA).as_posix() for p in DATA.rglob("*.tileirbc"))
PAIRS = json.loads((DATA / "pairs.json").read_text())["pairs"]


def _module(source: str):
    """A test program: a bytecode file under data/, or `case:NAME` exported from tir_kernels."""
    if source.startswith("case:"):
        return read_module(tir_export.case(source[5:]))
    return read_module(DATA / source)


def _above_info(report) -> list[tuple]:
    return [(f.severity.value, f.category, f.rule, f.message) for f in report.findings if f.severity != Severity.INFO]


def _assert_self_clean(module) -> None:
    report = diff(module, clone_module(module))
    assert report.verdict == "PASS" and not _above_info(report), _above_info(report)


@pytest.mark.parametrize("source", FILES + [f"case:{c}" for c in sorted(tir_kernels.CASES)])
def test_every_program_diffed_against_itself_passes(source):
    _assert_self_clean(_module(source))


@pytest.mark.parametrize("source", FILES)
def test_irdiff_of_a_file_against_itself_passes(source, tmp_path):
    report = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["irdiff", str(DATA / source), str(DATA / source), "--json", str(report)])
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["verdict"] == "PASS"


@pytest.mark.parametrize("name", sorted(tir_mutations.DEFECTS))
def test_every_planted_defect_program_diffed_against_itself_passes(name):
    program, mutate, _, _ = tir_mutations.DEFECTS[name]
    _assert_self_clean(mutate(read_module(tir_export.case(program))))


# -- assumptions on values no op pairing covers (constants, views of a value, loop arguments, combiners)

def _assumed(module, pick):
    """`module` with `assume div_by<4>` on the value `pick(function)` chooses (its users read it through
    the assumption); None when there is no such value."""
    f = module.entries[0]
    found = next((v for v in pick(f) if any(v in op.operands for op in walk(f))), None)
    if found is None:
        return None
    block, at = (found.owner, 0) if found.op is None else (found.op.parent, found.op.parent.ops.index(found.op) + 1)
    users = [op for op in walk(f) if found in op.operands]
    assume = Op("assume", [found], ["value"], attributes={"predicate": DivBy(4, None, None)}, parent=block)
    out = assume.add_result(found.type)
    block.ops.insert(at, assume)
    for op in users:
        op.operands = [out if x is found else x for x in op.operands]
    return module


def _results_of(*names):
    return lambda f: (op.results[0] for op in walk(f) if op.name in names and op.results)


def _loop_arguments(f):
    return (a for op in walk(f) if op.name in ("for", "loop") for a in op.regions[0].blocks[0].args)


def _combiner_results(f):
    return (o.results[0] for op in walk(f) if op.name in ("reduce", "scan")
            for o in op.regions[0].blocks[0].ops if o.name != "yield" and o.results)


UNPAIRED = {"constant": _results_of("constant"), "reshape": _results_of("reshape", "broadcast"),
            "loop_argument": _loop_arguments, "combiner": _combiner_results}
ASSUMED = [(case, where) for case in ("gather_scatter", "matmul", "misc") for where in sorted(UNPAIRED)
           if _assumed(read_module(tir_export.case(case)), UNPAIRED[where]) is not None]


@pytest.mark.parametrize("case, where", ASSUMED)
def test_an_assumption_matches_itself_wherever_it_is(case, where):
    _assert_self_clean(_assumed(read_module(tir_export.case(case)), UNPAIRED[where]))


@pytest.mark.parametrize("case, where", ASSUMED)
def test_an_assumption_one_side_lacks_is_reported_both_ways(case, where):
    plain = read_module(tir_export.case(case))
    assumed = _assumed(read_module(tir_export.case(case)), UNPAIRED[where])
    forward, backward = diff(assumed, plain), diff(plain, assumed)
    _assert_mirrored(forward, backward)
    for report in (forward, backward):
        assert [f for f in report.findings if f.category == "assume" and f.severity != Severity.INFO], \
            _above_info(report)


# -- diff(a, b) mirrors diff(b, a)

# Rules named for a direction: what the same difference is called seen from the other side. The reference
# is the specification (losing its padding or alignment is CRITICAL, adding them is not), so only these
# may differ in name and severity between diff(a, b) and diff(b, a).
_DIRECTED = {"ptr_div_by_gained": "ptr_div_by_lost", "padding_refined": "padding", "arg_to_const": "const_to_arg",
             "extra": "missing"}
_UNDIRECTED_STATUS = {Status.EXTRA: Status.MISSING}


def _differences(report) -> set[tuple]:
    """The differences found, each named without its direction."""
    return {(f.category, _DIRECTED.get(f.rule, f.rule), _UNDIRECTED_STATUS.get(f.status, f.status))
            for f in report.findings if f.status != Status.MATCH}


def _assert_mirrored(forward, backward) -> None:
    assert _differences(forward) == _differences(backward), (_above_info(forward), _above_info(backward))
    directed = {f.rule for r in (forward, backward) for f in r.findings} & {*_DIRECTED, *_DIRECTED.values()}
    if not directed:
        assert forward.verdict == backward.verdict


@pytest.mark.parametrize("pair", PAIRS, ids=[p["name"] for p in PAIRS])
def test_recorded_pairs_diff_the_same_both_ways(pair):
    a = _module(f"case:{pair['reference_case']}" if "reference_case" in pair else pair["reference"])
    b = _module(pair["generated"])
    target = pair.get("target", "sm_90")
    _assert_mirrored(diff(a, b, target=target), diff(b, a, target=target))


@pytest.mark.parametrize("name", sorted(tir_mutations.DEFECTS))
def test_planted_defects_diff_the_same_both_ways(name):
    program, mutate, _, _ = tir_mutations.DEFECTS[name]
    ref = read_module(tir_export.case(program))
    _assert_mirrored(diff(ref, mutate(ref)), diff(mutate(ref), ref))
