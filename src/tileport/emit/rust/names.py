"""Rust identifiers: what generated code may not bind, and how source names are made safe.

A generated `let` must not shadow a DSL function the kernel calls later (`let exp = exp(x)` breaks
the next `exp(...)`), and source names that are Rust keywords (`type`, `move`) or not identifiers
(`my-kernels`) must be renamed consistently.
"""

from __future__ import annotations

import functools
import re

from tileport.model.naming import Naming

RUST_KEYWORDS = {
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl",
    "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static",
    "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn",
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
    "yield", "try", "gen", "union",
}
# Types and items the generated modules name.
DSL_TYPES = {"E", "Tile", "Tensor", "Partition", "PartitionMut", "PointerTile", "Shape", "Token", "Latency",
             "ElementType", "Some", "None", "Ok", "Err", "f16", "bf16", "tf32"}


# Functions the emitter spells itself (outside the lowering table).
EMITTER_FUNCTIONS = {"join_tokens", "scalar_to_tile", "tile_to_scalar"}


@functools.cache
def dsl_functions() -> frozenset[str]:
    """Every function the lowering table (its spellings and rows), shims and emitter call."""
    from tileport.emit.rust import lowering
    names: set[str] = set(EMITTER_FUNCTIONS)
    texts: list = [row.template for row in lowering.ROWS]
    for key, value in vars(lowering).items():
        if not key.startswith("__"):
            texts += value.values() if isinstance(value, dict) else [value]
    for text in texts:
        if not isinstance(text, str):
            continue
        if text.isidentifier():
            names.add(text)  # table entries that are bare function names (lt_tile, addf, ...)
        names |= set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)\s*\(", text))
    return frozenset(names | set(lowering.TILE_HELPERS) | set(lowering.MODULE_FNS))  # the generated helpers too


def _reserved() -> frozenset[str]:
    """Names generated code never binds (built on first use: the lowering table is imported lazily)."""
    return frozenset(RUST_KEYWORDS | DSL_TYPES | dsl_functions())


# The Rust target's naming: what the frontends, passes and emitters use to make identifiers.
RUST_NAMING = Naming(_reserved)
rust_ident = RUST_NAMING.ident
fresh_name = RUST_NAMING.fresh


# Module names a source file may not take: the crate's own files (src/support.rs, src/lib.rs, src/main.rs,
# src/tiles.rs)
# and crates the generated code names in paths (`use cutile::...` would resolve to a local module).
RESERVED_MODULES = {"support", "lib", "main", "std", "core", "alloc", "cutile", "cutile_ir", "tiles"}


def module_name(stem: str, taken: set[str]) -> str:
    """The Rust module of the source file `stem`: an ASCII identifier (a `mod` name must be ASCII),
    no keyword, no reserved module, not in `taken` (`k`, then `k_1`, ... for `a/k.py` + `b/k.py`);
    it joins `taken`."""
    base = rust_ident(re.sub(r"[^A-Za-z0-9_]", "_", stem))
    if not base.strip("_"):  # `_` is no identifier
        base = "module"
    if base in RESERVED_MODULES:
        base = f"{base}_"
    name, k = base, 1
    while name in taken or name in RESERVED_MODULES:
        name, k = f"{base.rstrip('_')}_{k}", k + 1
    taken.add(name)
    return name
