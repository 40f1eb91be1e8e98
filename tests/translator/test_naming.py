"""Identifiers: the model's Naming applies the rules, the emitter supplies the reserved words."""

from __future__ import annotations

from tileport.emit.rust.names import RUST_NAMING
from tileport.model.naming import Naming


def test_naming_renames_reserved_and_non_identifiers():
    naming = Naming(lambda: frozenset({"exp", "loop"}))
    assert naming.ident("exp") == "exp_" and naming.ident("x") == "x"
    assert naming.ident("my-kernel") == "my_kernel" and naming.ident("2d") == "k_2d"
    taken = {"x"}
    assert [naming.fresh("x", taken), naming.fresh("x", taken), naming.fresh("loop", taken)] == ["x_1", "x_2", "loop_"]
    assert taken == {"x", "x_1", "x_2", "loop_"}


def test_the_reserved_set_is_read_once_on_first_use():
    calls = []
    naming = Naming(lambda: calls.append(1) or frozenset())
    assert not calls
    naming.ident("a"), naming.ident("b")
    assert calls == [1]


def test_rust_naming_reserves_keywords_and_every_function_the_lowering_calls():
    for word in ("let", "type", "exp", "reduce_sum", "lt_tile", "join_tokens", "divf_full", "Tile"):
        assert word in RUST_NAMING.reserved, word
    assert RUST_NAMING.ident("type") == "type_"
