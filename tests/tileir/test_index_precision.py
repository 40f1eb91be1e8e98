"""Index expressions, arithmetic precision, merged extracts and cause order (issue 14 items 2, 3, 6).

Real reference programs of the product corpus, each with one change planted by the mutation
suite's own mutators (eval.mutate): the diff must report exactly the expected CRITICAL
rule. No cargo needed: the reference is diffed against its mutated self.
"""

from __future__ import annotations

import pytest

import tir_mutations
from tileport.ops.capture_ref import reference_bytecode
from tileport.ops.specs import all_specs
from tileport.tileir import diff, read_module
from eval import mutate as M
from tileport.tileir.model import clone_module, walk
from tileport.tileir.rules import Severity

_CACHE: dict[str, bytes] = {}


def _reference(spec: str, label_part: str):
    key = f"{spec}:{label_part}"
    if key not in _CACHE:
        s = all_specs()[spec]
        cap = next(c for c in s.captures if label_part in c.label)
        _CACHE[key] = reference_bytecode(s, cap)
    return read_module(_CACHE[key])


def _critical(report) -> list[tuple[str, str]]:
    return [(f.category, f.rule) for f in report.findings if f.severity == Severity.CRITICAL]


def _planted(module, pick, change):
    """A copy of `module` with `change(function, op)` applied to the first op `pick` selects."""
    m = clone_module(module)
    f = M.entry(m)
    op = next(o for o in walk(f) if pick(o))
    assert change(f, op), "the mutation found no site"
    return m


def _store(op):
    return op.name == "store_view_tko"


def _load_a(op):  # the first view load of the matmul: A[bm, k]
    return op.name == "load_view_tko"


MATMUL_INDEX_CASES = {
    "store_at_rb_plus_1": (_store, M._index_plus_one),
    "block_id_instead_of_loop_variable": (_load_a, M._bid_for_iv),
    "load_a_at_bn_k": (_load_a, M._other_tile_index),
    "store_transposed": (_store, M._transpose),
    "swizzle_subtraction_swapped": (M._address_subi, M._swap_operands),
}


@pytest.mark.parametrize("name", sorted(MATMUL_INDEX_CASES))
def test_wrong_index_is_critical(name):
    ref = _reference("matmul", "float16")
    pick, change = MATMUL_INDEX_CASES[name]
    report = diff(ref, _planted(ref, pick, change))
    assert _critical(report) and set(_critical(report)) == {("index", "differs")}, report.to_markdown()
    top = report.sorted_findings()[0]
    assert top.gen is not None and " in ref, " in top.message


def test_index_message_names_the_expressions():
    ref = _reference("matmul", "float16")
    report = diff(ref, _planted(ref, _store, M._index_plus_one))
    (finding,) = [f for f in report.findings if f.category == "index"]
    assert finding.message.startswith("store_view_tko: index 0 is ")
    ref_text, gen_text = finding.message.split(" is ", 1)[1].split(" in ref, ")
    assert gen_text == f"{ref_text} +1 in gen"


def test_equal_index_spelled_differently_is_not_a_difference():
    """(bm + 1) - 1 is bm: the polynomial normal form folds it."""
    ref = _reference("matmul", "float16")

    def plus_minus_one(f, op):
        M._index_plus_one(f, op)
        i = op.operand_roles.index("index")
        one = M._one_like(op.operands[i])
        sub = M._int_binary("subi", op.operands[i], one.results[0])
        M.insert_before(op, [one, sub])
        op.operands[i] = sub.results[0]
        return "index + 1 - 1"

    report = diff(ref, _planted(ref, _store, plus_minus_one))
    assert report.verdict == "PASS", report.to_markdown()


def test_gather_offsets_are_compared():
    ref = _reference("softmax_gather", "float16")
    report = diff(ref, _planted(ref, lambda op: op.name == "offset", M._offset_plus_one))
    assert set(_critical(report)) == {("index", "differs")}, report.to_markdown()


def test_arithmetic_in_a_narrower_type_is_critical():
    """x*x in f16 then upcast, where the reference squares in f32 (was INFO cast/not_needed)."""
    ref = _reference("rms_norm", "float16")
    report = diff(ref, _planted(ref, lambda op: op.name == "mulf" and M._f32_arith(op), M._lower_precision))
    assert _critical(report) == [("precision", "narrower")], report.to_markdown()


def test_wrong_extract_index_is_critical():
    """Two extracts made identical are merged by CSE; the one left over is still compared."""
    ref = _reference("silu_and_mul", "float16")
    mutated = _planted(ref, M._extract, M._wrong_extract_index)
    report = diff(ref, mutated)
    assert ("index", "differs") in _critical(report), report.to_markdown()
    assert diff(mutated, ref).verdict == "FAIL"


def test_dropped_store_leads_the_findings():
    """A dropped store comes before the alignment assumption it also loses."""
    ref = _reference("vector_add", "float32")
    gen = tir_mutations.drop_pointer_div_by(_planted(ref, lambda op: op.name.startswith("store"), M._drop_store))
    report = diff(ref, gen)
    order = [f.category for f in report.sorted_findings()]
    assert order[0] == "memory_count" and "assume" in order, order


def test_a_second_view_for_one_access_is_compared():
    """The port gives one of three loads its own view with another padding: the view pair
    matches the other loads' view, so the access itself must report it."""
    ref = _reference("softmax_online", "float16")

    def own_view(f, load):
        view = load.operand("view").op
        t = view.results[0].type
        copy = M.new_op(view.name, view.operands, view.operand_roles, [t], **view.attributes)
        M.insert_before(load if load.parent is view.parent else view, [copy])
        copy.results[0].type = type(t)(t.tile, t.tensor_view, t.dim_map, "zero")
        load.operands[load.operand_roles.index("view")] = copy.results[0]
        return "own view"

    report = diff(ref, _planted(ref, lambda op: op.name == "load_view_tko", own_view))
    assert _critical(report) == [("partition_view", "padding")], report.to_markdown()
