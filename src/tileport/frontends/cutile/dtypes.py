"""cuTile Python's dtypes: its names for them, and its implicit promotion between them."""

from __future__ import annotations

from tileport.model.types import is_float

# cuTile Python dtype attribute names -> model names.
CT_DTYPES = {
    "bool_": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "tfloat32": "tf32",
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
}


_RANK = {"bool": 0, "i8": 1, "i16": 2, "i32": 3, "i64": 4, "u8": 1, "u16": 2, "u32": 3, "u64": 4}
_FLOAT_RANK = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}


def promote(a: str, b: str) -> str | None:
    """cuTile Python's implicit dtype promotion (None where it refuses to promote)."""
    if a == b:
        return a
    if "tf32" in (a, b) or a.startswith("f8") or b.startswith("f8"):
        return None
    if is_float(a) and is_float(b):
        if {a, b} == {"f16", "bf16"}:
            return None
        return a if _FLOAT_RANK[a] > _FLOAT_RANK[b] else b
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    signed_a, signed_b = not a.startswith("u"), not b.startswith("u")
    if "bool" in (a, b):
        return b if a == "bool" else a
    if signed_a != signed_b:
        return None
    return a if _RANK[a] >= _RANK[b] else b
