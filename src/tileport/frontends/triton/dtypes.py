"""Triton's implicit dtype promotion between two operands (its documented type-promotion rules)."""

from __future__ import annotations

from tileport.model.types import is_float

_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
_INT_BITS = {"bool": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}


def promote(a: str, b: str) -> str | None:
    """The dtype Triton computes `a op b` in (None where the model has no such dtype: fp8, tf32)."""
    if a == b:
        return a
    if a not in _FLOAT_BITS and a not in _INT_BITS or b not in _FLOAT_BITS and b not in _INT_BITS:
        return None
    if is_float(a) and is_float(b):
        if {a, b} == {"f16", "bf16"}:
            return "f32"  # neither holds the other
        return a if _FLOAT_BITS[a] >= _FLOAT_BITS[b] else b
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    if "bool" in (a, b):
        return b if a == "bool" else a
    wa, wb = _INT_BITS[a], _INT_BITS[b]
    if a.startswith("u") == b.startswith("u") or wa != wb:
        return a if wa > wb else b  # the wider one; C's rule when the widths differ
    return a if a.startswith("u") else b  # same width, mixed signedness: unsigned
