"""Typed construction of kernel-model operations: broadcasting, promotion and implicit casts.

Frontends call these helpers instead of creating `Op`s by hand, so every frontend makes the same
implicit conversions explicit in the same way (as Tile IR does: reshape + broadcast, then casts).
Dtypes may be generic (`DVar`); promotion is decided over every configuration in use and must come
out the same for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.model import types as T
from tileport.model.ir import Atom, Block, CDim, Do, Let, Lit, Loc, Op, Ref, Stmt, sym_names
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import DType, DVar, Dim, ScalarT, TileT


@dataclass
class DTypeSpace:
    """Concrete values of each generic dtype, one per configuration in use."""

    vectors: dict[DVar, tuple[str, ...]] = field(default_factory=dict)

    def values(self, dt: DType) -> tuple[str, ...]:
        return T.concrete_dtypes(dt, self.vectors)

    def generic(self, vec: tuple[str, ...]) -> DType:
        """The dtype with these values per configuration: a concrete one, an existing generic, or a new
        generic derived from the others (no array carries it; the launcher sets it per dtype arm)."""
        if len(set(vec)) == 1:
            return vec[0]
        for d, v in self.vectors.items():
            if v == vec:
                return d
        var = DVar(f"E{len(self.vectors) + 1}")
        self.vectors[var] = vec
        return var

    def lift(self, fn: Callable[..., str | None], *dts: DType, what: str, loc: Loc) -> DType:
        """Apply a dtype function across configurations; the result must be uniform."""
        vecs = [d for d in dts if isinstance(d, DVar)]
        if not vecs:
            out = fn(*dts)
            if out is None:
                raise Diagnostic(f"{what}: no implicit conversion between {', '.join(map(str, dts))}", loc,
                                 "dtype", "insert an explicit ct.astype")
            return out
        n = len(self.vectors[vecs[0]])
        results = []
        for i in range(n):
            concrete = [self.vectors[d][i] if isinstance(d, DVar) else d for d in dts]
            r = fn(*concrete)
            if r is None:
                raise Diagnostic(f"{what}: no implicit conversion between {', '.join(concrete)}", loc,
                                 "dtype", "insert an explicit ct.astype")
            results.append(r)
        res = tuple(results)
        if len(set(res)) == 1:
            return res[0]
        for d in vecs:
            if self.vectors[d] == res:
                return d
        raise Diagnostic(f"{what}: the result dtype depends on the element types in a way a single "
                         f"generic kernel cannot express ({', '.join(res)})", loc, "dtype",
                         "cast explicitly with ct.astype, or translate each dtype configuration separately")


def same_dim(a: Dim, b: Dim) -> bool:
    return a == b


# A kernel larger than this is refused: inlined helpers can grow exponentially (each calling the next twice),
# and the passes, the emitter and the formatter would take minutes on it. Corpus kernels have a few hundred.
MAX_KERNEL_OPS = 20_000


class Builder:
    """Emits typed operations into the current block."""

    def __init__(self, file: str, dspace: DTypeSpace, const_values: list[dict[str, Any]], naming: Naming,
                 promotion: Callable[[str, str], str | None]):
        self.file = file
        self.naming = naming  # the target's identifiers (its reserved words)
        self.promotion = promotion  # the language's implicit promotion of two dtypes (None: refused)
        self.dspace = dspace
        self.const_values = const_values  # one dict per configuration in use
        self.blocks: list[Block] = []
        self.scope_names: list[set[str]] = []  # identifiers bound in each open block
        self.temps: set[str] = set()  # names of values not (yet) bound to a source variable
        self.op_count = 0
        # first candidate of a base -> how many of its candidates are known to be taken (lowered on release):
        # without it, naming n values of one base costs O(n^2) and large kernels take minutes.
        self.name_skip: dict[str, int] = {}

    # ---- blocks and names
    def push(self) -> Block:
        b = Block()
        self.blocks.append(b)
        self.scope_names.append(set())
        return b

    def resume(self, block: Block, names: set[str]) -> None:
        """Re-open a block popped earlier (`names`: its scope names then), to append to it."""
        self.blocks.append(block)
        self.scope_names.append(names)

    def pop(self) -> Block:
        self.scope_names.pop()
        self.name_skip.clear()
        return self.blocks.pop()

    def release(self, name: str) -> None:
        """`name` is no longer bound in the current block: it is again the first free candidate of its base."""
        self.scope_names[-1].discard(name)
        stem, _, index = name.rpartition("_")
        for first in self.name_skip:
            if first == name:
                self.name_skip[first] = 0
            elif index.isdigit() and (first.rstrip("_") or first) == stem:
                self.name_skip[first] = min(self.name_skip[first], int(index))

    def emit(self, stmt: Stmt) -> None:
        self.blocks[-1].stmts.append(stmt)

    def scope_names_outside(self) -> set[str]:
        """Identifiers bound in the enclosing blocks (the block being built excluded)."""
        return set().union(*self.scope_names) if self.scope_names else set()

    def visible(self, name: str) -> bool:
        return any(name in s for s in self.scope_names)

    def fresh(self, hint: str) -> str:
        """An identifier not visible in any open block (so nothing outer is shadowed by accident)."""
        base = hint if hint.isidentifier() and not hint.startswith("__") and hint != "_" else "t"
        first = next(self.naming.candidates(base))
        stem = first.rstrip("_") or first  # the names `candidates` yields after `first`: stem_1, stem_2, ...
        i = self.name_skip.get(first, 0)
        while True:
            name = first if i == 0 else f"{stem}_{i}"
            if not self.visible(name) and name not in self.naming.reserved:
                break
            i += 1
        self.name_skip[first] = i
        self.scope_names[-1].add(name)
        return name

    def value(self, kind: OpKind, args: tuple[Atom, ...], ty, loc: Loc, hint: str = "t", **attrs) -> Ref:
        """Emit `let <fresh> = kind(args)` and return a reference to it."""
        self.count_op(loc)
        op = Op(kind, args, ty, loc, tuple(sorted(attrs.items())))
        name = self.fresh(hint)
        self.temps.add(name)
        self.emit(Let(name, op))
        return Ref(name, ty)

    def effect(self, kind: OpKind, args: tuple[Atom, ...], loc: Loc, **attrs) -> None:
        self.count_op(loc)
        self.emit(Do(Op(kind, args, None, loc, tuple(sorted(attrs.items())))))

    def count_op(self, loc: Loc) -> None:
        self.op_count += 1
        if self.op_count > MAX_KERNEL_OPS:
            raise Diagnostic(f"the kernel grows beyond {MAX_KERNEL_OPS} operations (inlined helpers included)",
                             loc, "size", "call helpers fewer times, or split the kernel")

    # ---- dtypes
    def promote(self, a: DType, b: DType, loc: Loc, what: str = "arithmetic") -> DType:
        return self.dspace.lift(self.promotion, a, b, what=what, loc=loc)

    def require(self, dt: DType, pred: Callable[[str], bool], what: str, loc: Loc) -> None:
        for v in self.dspace.values(dt):
            if not pred(v):
                raise Diagnostic(f"{what} (got {v})", loc, "dtype")

    def is_float(self, dt: DType) -> bool:
        return all(T.is_float(v) for v in self.dspace.values(dt))

    def cast(self, x: Ref, dtype: DType, loc: Loc, rounding: str | None = None) -> Ref:
        ty = x.ty
        if ty.dtype == dtype and rounding is None:
            return x
        new_ty = TileT(dtype, ty.shape) if isinstance(ty, TileT) else ScalarT(dtype)
        return self.value(OpKind.ASTYPE, (x,), new_ty, loc, hint=f"{x.name}_{_dt_name(dtype)}",
                          dtype=dtype, rounding=rounding)

    # ---- shapes
    def check_dims_equal(self, a: Dim, b: Dim, loc: Loc, what: str) -> None:
        if same_dim(a, b):
            return
        syms = sym_names(a) | sym_names(b)
        if syms and self.const_values and all(
                T.eval_dim(a, c) == T.eval_dim(b, c) for c in self.const_values if syms <= c.keys()):
            raise NeedsSpecialization(frozenset(syms), f"{what}: {a} and {b} are equal only for the "
                                                       "constant values in use", loc)
        raise Diagnostic(f"{what}: shape mismatch, {a} vs {b}", loc, "shape")

    def broadcast_shape(self, a: T.Shape, b: T.Shape, loc: Loc) -> T.Shape:
        n = max(len(a), len(b))
        a = (1,) * (n - len(a)) + tuple(a)
        b = (1,) * (n - len(b)) + tuple(b)
        out = []
        for da, db in zip(a, b):
            if da == 1:
                out.append(db)
            elif db == 1 or same_dim(da, db):
                out.append(da)
            else:
                self.check_dims_equal(da, db, loc, "broadcast")
        return tuple(out)

    def to_tile(self, x: Atom, dtype: DType, shape: T.Shape, loc: Loc) -> Ref:
        """Make `x` a tile of exactly `dtype` and `shape` (splat, cast, reshape, broadcast)."""
        if isinstance(x, Lit) and isinstance(x.value, float):
            # cuTile Python materializes a float literal as a 0-d constant, reshaped and broadcast.
            lit = Lit(x.value, ScalarT(dtype))
            return self.value(OpKind.SPLAT, (lit,), TileT(dtype, shape), loc, hint="c", shape=shape)
        if isinstance(x, (Lit, CDim)):
            # ... and an integer or bool literal as a splat constant.
            lit = Lit(x.value, ScalarT(dtype)) if isinstance(x, Lit) else x
            return self.value(OpKind.FULL, (lit,), TileT(dtype, shape), loc, hint="c", dtype=dtype, shape=shape)
        if isinstance(x.ty, ScalarT):
            s = self.cast(x, dtype, loc)
            return self.value(OpKind.SPLAT, (s,), TileT(dtype, shape), loc, hint=f"{x.name}_tile", shape=shape)
        t = self.cast(x, dtype, loc)
        src = t.ty.shape
        if tuple(src) == tuple(shape):
            return t
        if len(src) < len(shape):
            padded = (1,) * (len(shape) - len(src)) + tuple(src)
            t = self.value(OpKind.RESHAPE, (t,), TileT(dtype, padded), loc, hint=f"{x.name}_r", shape=padded)
            src = padded
        if tuple(src) != tuple(shape):
            for ds, dd in zip(src, shape):
                if ds != 1 and not same_dim(ds, dd):
                    self.check_dims_equal(ds, dd, loc, "broadcast")
            t = self.value(OpKind.BROADCAST, (t,), TileT(dtype, tuple(shape)), loc, hint=f"{x.name}_b",
                           shape=tuple(shape))
        return t


def _dt_name(dt: DType) -> str:
    return dt.name.lower() if isinstance(dt, DVar) else dt


def lit_dtype(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "i32"
    return "f32"


def weak_result_dtype(b: Builder, tile_dt: DType, lit: Any) -> DType:
    """A Python literal adopts the other operand's dtype unless its category is higher."""
    if isinstance(lit, bool):
        return tile_dt
    if isinstance(lit, float) and not b.is_float(tile_dt):
        return "f32"
    return tile_dt
