"""`tl.*` calls, methods, attributes and operators of the Triton frontend, typed into model operations.

Each `tl` function has one handler in `TL` (a table, not name lookups); what has no lowering is a
located diagnostic naming the construct. One module per construct family: `base` (tables, argument
binding), `arith`, `reduce`, `mma`, `atomics`, `shape`, and `dispatch` (attributes, subscripts, calls, `TL`).
"""

from __future__ import annotations

from tileport.frontends.triton.calls.arith import (at_run_time, binary, compare, dynamic, materialize_int, to, unary,
                                                   where)
from tileport.frontends.triton.calls.base import NO_OP, TL_DTYPE_NAMES, TL_DTYPES, UNSUPPORTED
from tileport.frontends.triton.calls.dispatch import attribute, call, subscript, tl_call
from tileport.frontends.triton.calls.mma import DOT_PRECISIONS

__all__ = ["attribute", "subscript", "call", "tl_call", "binary", "compare", "unary", "where", "materialize_int", "to",
           "at_run_time", "dynamic", "NO_OP", "UNSUPPORTED", "TL_DTYPE_NAMES", "TL_DTYPES", "DOT_PRECISIONS"]
