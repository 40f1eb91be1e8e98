"""The op catalogue (tileport.model.ops) and the Rust lowering rows (tileport.emit.rust.lowering) agree,
and a malformed operation (a misspelled kind, an undeclared attribute, a value of the wrong type) fails
where it is built, naming its kind."""

from __future__ import annotations

import importlib.util

import pytest

from tileport.emit.rust import lowering as L
from tileport.model import ops
from tileport.model.ir import Lit, Loc, Op, Ref
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ScalarT, TileT

LOC = Loc("k.py", 3, 4)
F32 = TileT("f32", (16,))


def test_every_lowered_kind_is_declared_and_every_declared_kind_is_lowered():
    assert L.lowered_kinds() - set(ops.CATALOGUE) == set(), "lowered but not declared"
    # gather/scatter/atomics never reach the emitter: the pointer pass lowers them to pointer-tile operations
    assert set(ops.CATALOGUE) - L.lowered_kinds() == {"gather", "scatter", "atomic_rmw", "atomic_cas"}, \
        "declared but not lowered"


def test_the_lowering_spells_only_declared_values():
    """The declared domains hold every value a frontend gives; the Rust tables spell some (the rest is
    refused by a row), never an undeclared one."""
    assert set(L.ROUNDING) <= set(ops.ROUNDING_MODES)
    assert set(L.FTZ) == set(L.NAN) == set(L.TMA) == set(ops.FLAGS)
    assert set(L.PADDING) == set(ops.PADDING_MODES)
    assert set(L.REDUCE) == set(ops.REDUCE_FNS)
    assert set(L.PREDICATE) == set(L.COMPARE_TILE) == set(ops.COMPARISONS)
    assert {key.split(":")[0] for key in L.UNARY} <= set(ops.UNARY_FNS)
    binary = {**L.FLOAT_OPERATOR, **L.FLOAT_MODED, **L.FLOAT_FN, **L.BOOL_FN, **L.INT_OPERATOR, **L.INT_FN}
    assert set(binary) | set(L.SCALAR_FN) | set(L.SCALAR_OPERATOR) <= set(ops.BINARY_OPS)


def test_the_frontend_gives_only_declared_values():
    from tileport.frontends.cutile.calls import arith, base
    assert set(base.ROUNDING.values()) <= set(ops.ROUNDING_MODES)
    assert {name.lower() for name in base.ENUMS["PaddingMode"]} == set(ops.PADDING_MODES)
    assert set(arith._OP_NAMES.values()) <= set(ops.BINARY_OPS)
    assert set(base.UNARY_MATH) | {"abs", "negative", "not"} <= set(ops.UNARY_FNS)
    assert set(base.REDUCE_FNS) == set(ops.REDUCE_FNS)
    assert set(base.COMPARE_FNS.values()) == set(ops.COMPARISONS)


def test_the_rust_target_spells_every_element_dtype_of_the_model():
    from tileport.model.types import DTYPES
    assert set(L.RUST_DTYPE) == set(DTYPES)  # fp8 included (tile element types, not array ones)


def test_rows_name_a_template_a_method_or_a_refusal():
    for row in L.ROWS:
        assert [row.template, row.method, row.refuse].count(None) == 2, row


def tile(name: str, ty=F32) -> Ref:
    return Ref(name, ty)


@pytest.mark.parametrize("build, message", [
    (lambda: Op("frobnicate", (), F32, LOC), "`frobnicate` at k.py:3:4 is not a declared operation kind"),
    (lambda: Op("binary", (tile("a"),), F32, LOC, (("op", "add"),)), "`binary` at k.py:3:4 takes 2 operand(s), got 1"),
    (lambda: Op("binary", (tile("a"), tile("b")), F32, LOC), "`binary` at k.py:3:4 lacks attribute(s) op"),
    (lambda: Op("binary", (tile("a"), tile("b")), F32, LOC, (("op", "add"), ("colour", 1))),
     "undeclared attribute(s) colour"),
    (lambda: Op("binary", (tile("a"), tile("b")), F32, LOC, (("op", "add"), ("rounding", "sideways"))),
     "attribute rounding='sideways' is not one of"),
    (lambda: Op("binary", (tile("a"), tile("b", TileT("f16", (16,)))), F32, LOC, (("op", "add"),)),
     "operands and result differ in element type"),
    (lambda: Op("load", (Lit(0, ScalarT("i32")), Lit(0, ScalarT("i32"))), F32, LOC, (("shape", (16,)),)),
     "`load` at k.py:3:4 operand 0 is ScalarT, expected ArrayT"),
    (lambda: Op("store", (Ref("y", ArrayT("f32", 1)), tile("t"), Lit(0, ScalarT("i32"))), F32, LOC),
     "`store` at k.py:3:4 result is TileT, expected NoneType"),
    (lambda: Op("compare", (tile("a"), tile("b")), F32, LOC, (("op", "<"),)), "compares operands of one element type"),
    (lambda: Op("laod", (Ref("x", ArrayT("f32", 1)),), F32, LOC),
     "`laod` at k.py:3:4 is not a declared operation kind"),
    (lambda: Op(OpKind.BID, (), ScalarT("i32"), LOC, (("axis", "0"),)), "attribute axis='0' is str, expected int"),
    (lambda: Op(OpKind.RESHAPE, (tile("a"),), F32, LOC, (("shape", [16]),)),
     "attribute shape=[16] is list, expected tuple"),
    (lambda: Op(OpKind.RESHAPE, (tile("a"),), F32, LOC, (("shape", (16.0,)),)),
     "attribute shape=(16.0,) holds float, expected DimOp/Sym/int"),
    (lambda: Op(OpKind.UNARY, (tile("a"),), F32, LOC, (("fn", "exp"), ("ftz", "yes"))),
     "attribute ftz='yes' is not one of"),
    (lambda: Op(OpKind.REDUCE, (tile("a"),), F32, LOC, (("axis", 0), ("fn", "exp"))),
     "attribute fn='exp' is not one of"),
    (lambda: Op(OpKind.BID, (), ScalarT("i32"), LOC, (("axis", 0), ("axis", 1))), "repeats an attribute"),
])
def test_a_malformed_operation_fails_where_it_is_built(build, message):
    with pytest.raises(ops.ModelError, match="kernel model: operation") as e:
        build()
    assert message in str(e.value)


def test_a_wellformed_operation_builds():
    op = Op("binary", (tile("a"), tile("b")), F32, LOC, (("op", "add"), ("rounding", None)))
    assert op.attr("op") == "add"
    assert op.kind is OpKind.BINARY, "a kind's name is taken for its OpKind"


def test_the_kind_enum_is_the_catalogue():
    assert [k.value for k in OpKind] == [d.kind for d in ops.CATALOGUE.values()]
    assert OpKind.ATOMIC_CAS_PTR == "atomic_cas_ptr" and f"{OpKind.YIELD}" == "yield"


def test_a_misspelled_kind_in_a_module_level_row_fails_at_import(tmp_path):
    module = tmp_path / "my_rows.py"
    module.write_text("from tileport.emit.rust.lowering import Row\nfrom tileport.model.ops import OpKind\n"
                      "ROWS = [Row(OpKind.UNARY, template='{x}'), Row(OpKind.LAOD, template='{x}')]\n")
    spec = importlib.util.spec_from_file_location("my_rows", module)
    with pytest.raises(AttributeError, match="LAOD"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    with pytest.raises(ValueError, match="'laod' is not a valid OpKind"):
        L.Row("laod", template="{x}")
    assert L.Row("load", method="load").kind is OpKind.LOAD


def test_every_attribute_a_kind_declares_has_a_type():
    ops._check_declarations(list(ops.CATALOGUE.values()))
    with pytest.raises(ops.ModelError, match="`k` names attribute.s. colour"):
        ops._check_declarations([ops.OpDecl("k", (), ops.SCALAR, attrs=frozenset({"colour"}))])



def test_a_backend_row_put_first_overrides_the_default():
    from tileport.emit.rust.kernel import KernelEmitter
    from tileport.model.ir import Block, Kernel, Let
    a = tile("a")
    op = Op("unary", (a,), F32, LOC, (("fn", "exp"),))
    kernel = Kernel("k", [], Block([Let("y", op)]), LOC, dtype_vars={})
    assert KernelEmitter(kernel).expr(op, "y") == ([], "exp(a)")
    mine = L.by_kind([L.Row("unary", {"fn": "exp"}, "fast_exp({x})"), *L.ROWS])
    assert KernelEmitter(kernel, rows=mine).expr(op, "y") == ([], "fast_exp(a)")


@pytest.mark.parametrize("expr, construct, message", [
    ("ct.add(t, t, rounding_mode=ct.RoundingMode.RA)", "binary", "`add` with rounding_mode=nearest_away"),
    ("ct.sqrt(t, rounding_mode=ct.RoundingMode.RZI)", "unary", "ct.sqrt with rounding_mode=nearest_int_to_zero"),
    ("ct.mul(t, t, rounding_mode=ct.RoundingMode.RA) + t", "binary", "`mul` with rounding_mode=nearest_away"),
    ("ct.add(ct.mul(t, t, rounding_mode=ct.RoundingMode.RA), t, rounding_mode=ct.RoundingMode.RA)", "fma",
     "fma with rounding_mode=nearest_away"),
])
def test_a_rounding_mode_cutile_rs_cannot_spell_is_refused_where_it_is_written(tmp_path, expr, construct, message):
    """Once a KeyError (an internal error): the modes cuTile Python has and cutile-rs 0.5.0 lacks are refused."""
    from tp_helpers import run, write_kernels
    path = write_kernels(tmp_path, f"""
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile={expr})
        """)
    d = run(path, {"k": [{"x": "f32", "y": "f32", "TILE": 64}]}).results[0].diagnostic
    assert d is not None and d.construct == construct and message in d.message and "not supported" in d.message
    assert d.loc.line == 9
