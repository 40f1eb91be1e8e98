"""Canonicalization: what it removes, merges and renames, and that the result stays valid SSA."""

from __future__ import annotations

import pytest

import tir_export
import tir_kernels
import tir_mutations
from tileport.tileir import canonicalize, read_module, to_text
from tileport.tileir.attrs import Bounded, DivBy
from tileport.tileir.diff import prepare
from tileport.tileir.model import Block, Function, Op, Value, walk
from tileport.tileir.types import is_token


def _check_ssa(f: Function) -> None:
    """Every operand is defined before its use, in an enclosing scope."""
    def visit(block: Block, scope: set[Value]) -> None:
        scope = scope | set(block.args)
        for op in block.ops:
            for v in op.operands:
                assert v in scope, f"{op.name} uses a value not in scope"
            for region in op.regions:
                for b in region.blocks:
                    visit(b, scope)
            scope |= set(op.results)
    visit(f.body, set())


def _module(case: str):
    return read_module(tir_export.case(case))


@pytest.mark.parametrize("case", sorted(tir_kernels.CASES))
def test_canonical_form_is_valid_and_stable(case):
    module = _module(case)
    before = to_text(module)
    canon = canonicalize(module)
    assert to_text(module) == before, "canonicalize must not change its input"
    for f in canon.functions + prepare(module, "sm_90").functions:
        _check_ssa(f)
    assert to_text(canonicalize(canon)) == to_text(canon), "canonicalization is idempotent"


@pytest.mark.parametrize("case", sorted(tir_kernels.CASES))
def test_tokens_and_dead_constants_are_removed(case):
    canon = canonicalize(_module(case))
    f = canon.entries[0]
    used = {id(v) for op in walk(f) for v in op.operands}
    for op in walk(f):
        assert op.name not in ("make_token", "join_tokens")
        assert not any(is_token(v.type) for v in op.operands + op.results)
        if op.name == "constant":
            assert id(op.results[0]) in used
    kept = canonicalize(_module(case), ignore_tokens=False)
    assert any(op.name == "make_token" for op in walk(kept.entries[0]))


def test_duplicated_constants_merge():
    grew = 0
    for case in tir_kernels.CASES:
        module = _module(case)
        dup = tir_mutations.duplicate_constants(module)
        count = lambda m: sum(op.name == "constant" for op in walk(m.entries[0]))
        grew += count(dup) > count(module)
        assert to_text(canonicalize(dup)) == to_text(canonicalize(module))
    assert grew >= 2


def test_hint_keys_and_default_hints():
    new = canonicalize(read_module(tir_export.case("matmul")))
    old = canonicalize(read_module(tir_export.case("matmul", "13.2", "sm_90")))
    assert new.entries[0].hints == old.entries[0].hints
    assert new.entries[0].hints.selected_from == "default"
    assert old.entries[0].hints.selected_from == "sm_90"
    assert dict(new.entries[0].hints.by_arch) .keys() == {"sm_90"}
    loads = [op for op in walk(new.entries[0]) if op.name == "load_view_tko"]
    # latency=2 stays; allow_tma=True is the default and `<default = {}>` means nothing.
    assert [dict(op.hints.by_arch[0][1].items) for op in loads if op.hints] == [{"latency": 2}, {"latency": 2}]
    other = canonicalize(read_module(tir_export.case("matmul")), target="sm_100")
    assert other.entries[0].hints.by_arch[0][0] == "sm_100"


def _add_assumes(module, predicates):
    """Put assume ops with `predicates` (in this order) on the first scalar parameter."""
    f = module.entries[0]
    arg = next(a for a in f.args if not a.type.elem.__class__.__name__ == "PointerType")
    first_user = next(op for op in walk(f) if arg in op.operands)
    prev = arg
    new_ops = []
    for p in predicates:
        op = Op("assume", [prev], ["value"], attributes={"predicate": p}, parent=first_user.parent)
        prev = op.add_result(arg.type)
        new_ops.append(op)
    block = first_user.parent
    i = block.ops.index(first_user)
    block.ops[i:i] = new_ops
    first_user.operands = [prev if v is arg else v for v in first_user.operands]
    return module


def test_assume_chains_are_normalized():
    a = _add_assumes(read_module(tir_export.case("vec_add")), [DivBy(4), Bounded(0, None)])
    b = _add_assumes(read_module(tir_export.case("vec_add")), [Bounded(0, None), DivBy(4), DivBy(4)])
    ca, cb = to_text(canonicalize(a)), to_text(canonicalize(b))
    assert ca == cb
    assert ca.count("div_by<4>") == 1 and ca.index("div_by<4>") < ca.index("bounded<0, ?>")


def test_memory_order_follows_continue_nested_in_if():
    """A `continue` inside an `if` still carries tokens to the loop's next iteration: the store to
    y in the `if` waits for the previous iteration's store to y."""
    bc = tir_export.export(tir_kernels.continue_in_if, [("float32", 1), ("float32", 1),
                                                         ("scalar", "int32"), 128])
    f = canonicalize(read_module(bc)).entries[0]
    stores = [op for op in walk(f) if op.name == "store_view_tko"]
    nested = next(op for op in stores if op.parent.parent.name == "if")
    last = next(op for op in stores if op is not nested)
    loads = [op for op in walk(f) if op.name == "load_view_tko"]
    assert f.memory_order[nested] == [nested]
    assert set(f.memory_order[last]) == {loads[0], last}
    assert f.memory_order[loads[0]] == [last]


def test_values_are_renamed_by_definition_order():
    f = canonicalize(tir_mutations.rename_values(_module("softmax"))).entries[0]
    assert [a.name for a in f.args] == [f"%arg{i}" for i in range(len(f.args))]
    names = []
    for op in walk(f):  # an op's results, then its regions' block arguments, then nested ops
        names += [r.name for r in op.results]
        names += [a.name for region in op.regions for b in region.blocks for a in b.args]
    assert names == [f"%{i}" for i in range(len(names))]


VEC_ADD = """\
// Tile IR bytecode 13.4
entry @vec_add_Kt2_A1f32_1t1_p16_A1f32_1t1_p16_A1f32_1t1_p16_I1024(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<ptr<f32>>, %arg7: tile<i32>, %arg8: tile<i32>) optimization_hints=<sm_90 = {}> {
  %0 = assume %arg0 {predicate = div_by<16>} : tile<ptr<f32>>
  %1 = assume %arg3 {predicate = div_by<16>} : tile<ptr<f32>>
  %2 = assume %arg6 {predicate = div_by<16>} : tile<ptr<f32>>
  %3 = assume %arg1 {predicate = bounded<0, ?>} : tile<i32>
  %4 = make_tensor_view base %0, dynamicShape %3 : tensor_view<?xf32, strides=[1]>
  %5 = assume %arg4 {predicate = bounded<0, ?>} : tile<i32>
  %6 = make_tensor_view base %1, dynamicShape %5 : tensor_view<?xf32, strides=[1]>
  %7 = assume %arg7 {predicate = bounded<0, ?>} : tile<i32>
  %8 = make_tensor_view base %2, dynamicShape %7 : tensor_view<?xf32, strides=[1]>
  %9, %10, %11 = get_tile_block_id : tile<i32>, tile<i32>, tile<i32>
  %12 = make_partition_view %4 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
  %13 = load_view_tko view %12, index %9 {inbounds = [false], memory_ordering_semantics = weak} : tile<1024xf32>
  %14 = make_partition_view %6 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
  %15 = load_view_tko view %14, index %9 {inbounds = [false], memory_ordering_semantics = weak} : tile<1024xf32>
  %16 = addf %13, %15 {flush_to_zero = false, rounding_mode = nearest_even} : tile<1024xf32>
  %17 = make_partition_view %8 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
  store_view_tko tile %16, view %17, index %9 {inbounds = [false], memory_ordering_semantics = weak}
  return
}
"""


def test_canonical_text_golden():
    """The canonical rendering is stable (reports and golden files depend on it)."""
    assert to_text(canonicalize(_module("vec_add"))) == VEC_ADD
