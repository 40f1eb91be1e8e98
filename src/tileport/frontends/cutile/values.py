"""Compile-time values of the cuTile frontend and their folding (no user code runs)."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any

from tileport.model import types as T
from tileport.model.ir import Ref
from tileport.model.types import Sym


@dataclass(frozen=True)
class CV:
    """A compile-time value: int/float/bool/str/None, a symbolic Dim, a dtype, an enum or a tuple."""

    value: Any

    @property
    def is_dim(self) -> bool:
        return isinstance(self.value, (Sym, T.DimOp)) or (isinstance(self.value, int)
                                                          and not isinstance(self.value, bool))


@dataclass(frozen=True)
class DTypeVal:
    dtype: T.DType


@dataclass(frozen=True)
class EnumVal:
    enum: str  # PaddingMode, RoundingMode, ...
    member: str


@dataclass(frozen=True)
class Helper:
    node: ast.FunctionDef
    module: Any = field(default=None, compare=False)  # the ScannedModule it is defined in


@dataclass(frozen=True, eq=False)
class SourceModule:
    """A module of the kernel's package, bound to a name (`from ..runtime import tl_extra as ext`)."""

    module: Any  # its ScannedModule


@dataclass(frozen=True)
class ModuleRef:
    name: str  # "ct" for cuda.tile, "math"


Value = Any  # Ref | CV | tuple | Helper | ModuleRef | DTypeVal | EnumVal


MATH = {"sqrt": math.sqrt, "log": math.log, "log2": math.log2, "exp": math.exp, "tanh": math.tanh,
         "pi": math.pi, "e": math.e, "inf": math.inf}


BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
           ast.MatMult: "@"}


PY_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
       "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "&": lambda a, b: a & b,
       "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b}


# Folded integers are bounded: no kernel constant needs more than 64 bits, and an unbounded `10 ** 10 ** 10`
# or `1 << 2 ** 40` would take minutes or all memory.
MAX_FOLD_BITS = 256


class ConstFoldError(ValueError):
    """A compile-time expression that cannot (or must not) be evaluated."""

    def __init__(self, message: str, node: ast.AST | None = None, hint: str = ""):
        super().__init__(message)
        self.node, self.hint = node, hint


class NotConstant(ConstFoldError):
    """An expression that is not of constant form at all (a module-level alias such as `fexp = ct.exp`)."""


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float))  # bool is an int, as in Python


def fold(op: str, a: Any, b: Any) -> int | float:
    """`a op b` on compile-time numbers, bounded in size; ConstFoldError instead of any Python error."""
    if not (is_number(a) and is_number(b)) or op not in PY_OPS:
        raise ConstFoldError(f"`{op}` of {type(a).__name__} and {type(b).__name__} is not a numeric constant")
    big = ConstFoldError(f"the value of `{a!r} {op} {b!r}` exceeds {MAX_FOLD_BITS} bits",
                         hint="constants must fit the kernel's integer types")
    if op == "**" and isinstance(a, int) and isinstance(b, int) and abs(a) > 1 and \
            b * (abs(a).bit_length() - 1) > MAX_FOLD_BITS:
        raise big
    if op == "<<" and isinstance(b, int) and b > MAX_FOLD_BITS:
        raise big
    try:
        out = PY_OPS[op](a, b)
    except ZeroDivisionError:
        raise ConstFoldError(f"`{a!r} {op} {b!r}` divides by zero") from None
    except OverflowError:
        raise ConstFoldError(f"`{a!r} {op} {b!r}` overflows a float") from None
    except (ValueError, TypeError) as e:
        raise ConstFoldError(f"`{a!r} {op} {b!r}` fails: {e}") from None
    return checked(out, big)


def checked(out: Any, big: ConstFoldError) -> int | float:
    if isinstance(out, int) and out.bit_length() > MAX_FOLD_BITS:
        raise big
    if not is_number(out):  # (-8) ** 0.5 is complex
        raise ConstFoldError(f"{out!r} is not a real number")
    return out


def call_math(name: str, args: list[Any]) -> float:
    """`math.<name>(*args)` on compile-time numbers; ConstFoldError instead of any Python error."""
    fn = MATH.get(name)
    if not callable(fn):
        raise ConstFoldError(f"math.{name} is not supported in constants")
    if not all(is_number(a) for a in args):
        raise ConstFoldError(f"math.{name} of a non-number")
    call = f"math.{name}({', '.join(map(repr, args))})"
    try:
        return fn(*args)
    except OverflowError:
        raise ConstFoldError(f"`{call}` overflows a float") from None
    except (ValueError, TypeError) as e:
        raise ConstFoldError(f"`{call}` fails: {e}") from None


def describe(v: Value) -> str:
    if isinstance(v, Ref):
        return str(v.ty)
    if isinstance(v, CV):
        return f"constant {v.value!r}"
    if isinstance(v, tuple):
        return "a tuple"
    return type(v).__name__
