"""Torch dtype names, as the operator specs and configurations write them, and the model's dtype names."""

TORCH_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
                "int32": "i32", "int64": "i64", "int8": "i8", "int16": "i16", "uint8": "u8", "bool": "bool",
                "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2"}
