"""Typing rules for cuTile Python operations: `ct.<fn>(...)`, tile methods and attributes, operators.

Each `ct` function has one handler (`ct_<name>`, registered in `HANDLERS` by `@handler`). Handlers
check their arguments as cuTile Python does, make broadcasts and casts explicit through the Builder,
and emit model operations. They use the lowerer (`lw`) through its public methods only.

One module per construct family: `base` (the registry, tables, argument checks), `views` (arrays, slices,
alignment), `memory`, `atomics`, `arith`, `reduce`, `shape`, `mma`, and `dispatch` (attributes, subscripts,
calls). Importing this package imports every family, which fills `HANDLERS`.
"""

from __future__ import annotations

from tileport.frontends.cutile.calls import atomics, memory, mma  # noqa: F401 (their handlers register)
from tileport.frontends.cutile.calls.arith import (DTypeCond, as_type, binary, choose_dtype, common_value_type,
                                                   compare, invert, logical_not, negate, unary_fn, where)
from tileport.frontends.cutile.calls.base import HANDLERS
from tileport.frontends.cutile.calls.dispatch import attribute, call, subscript
from tileport.frontends.cutile.calls.mma import matmul
from tileport.frontends.cutile.calls.views import materialize, view_alignment


__all__ = ["HANDLERS", "DTypeCond", "as_type", "attribute", "binary", "call", "choose_dtype", "common_value_type",
           "compare", "invert", "logical_not", "materialize", "matmul", "negate", "subscript", "unary_fn",
           "view_alignment", "where"]
