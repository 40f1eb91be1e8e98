"""Affine integer expressions over program ids, scalars, constants and `tl.arange`s.

Triton addresses memory with pointer arithmetic. Every integer value the frontend builds also gets,
where it can, a polynomial form: a sum of monomials `coef * f1 * f2 ...` whose factors are runtime
scalars (`("v", name)`), constant parameters (`("c", name)`, `("d", expr)`) and aranges
(`("a", uid, size, axis_from_end)`). From the pointer's polynomial `block_access` recovers the
cuTile-style access: an N-D array view (one dimension per arange axis, plus one per extra runtime
stride), the tile index along each dimension and the tile shape; a bounds mask `offs < n` gives the
view's extent along its axis. Anything else is not block-structured and stays a gather/scatter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tileport.model.types import Dim, DimOp, Sym

Factor = tuple
Monomial = tuple  # sorted factors
Poly = dict  # Monomial -> int coefficient


def const(n: int) -> Poly:
    return {(): n} if n else {}


def factor(f: Factor) -> Poly:
    return {(f,): 1}


def dim_poly(d: Dim) -> Poly:
    if isinstance(d, int):
        return const(d)
    if isinstance(d, Sym):
        return factor(("c", d.name))
    if isinstance(d, DimOp) and d.op in ("+", "-", "*"):
        a, b = dim_poly(d.lhs), dim_poly(d.rhs)
        return add(a, b) if d.op == "+" else sub(a, b) if d.op == "-" else mul(a, b)
    return factor(("d", d))


def add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + c
        if out[m] == 0:
            del out[m]
    return out


def scale(a: Poly, k: int) -> Poly:
    return {m: c * k for m, c in a.items()} if k else {}


def sub(a: Poly, b: Poly) -> Poly:
    return add(a, scale(b, -1))


def mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            out = add(out, {tuple(sorted(ma + mb, key=repr)): ca * cb})
    return out


def is_arange(f: Factor) -> bool:
    return f[0] == "a"


def remap_axes(a: Poly, mapping: Mapping[int, int]) -> Poly:
    """Renumber arange axes (`axis_from_end` old -> new), as `x[:, None]` does."""
    def fix(f):
        return ("a", f[1], f[2], mapping[f[3]]) if is_arange(f) else f
    return {tuple(sorted((fix(f) for f in m), key=repr)): c for m, c in a.items()}


def aranges(p: Poly) -> set[Factor]:
    return {f for m in p for f in m if is_arange(f)}


def divide(p: Poly, d: Dim) -> Poly | None:
    """p / d when every monomial is divisible by `d`, else None."""
    if isinstance(d, int):
        if d == 0 or any(c % d for c in p.values()):
            return None
        return {m: c // d for m, c in p.items()}
    f = ("c", d.name) if isinstance(d, Sym) else ("d", d)
    out: Poly = {}
    for m, c in p.items():
        if f not in m:
            return None
        rest = list(m)
        rest.remove(f)
        out[tuple(rest)] = c
    return out


def key(p: Poly) -> str:
    """A canonical text of `p` (to compare strides between accesses)."""
    def term(m, c):
        names = "*".join(_fs(f) for f in m)
        return names if c == 1 and names else f"{c}*{names}" if names else str(c)
    return " + ".join(term(m, c) for m, c in sorted(p.items(), key=repr)) or "0"


def _fs(f: Factor) -> str:
    return str(f[1]) if f[0] != "a" else f"arange{f[1]}"


# ---------------------------------------------------------------- masks

@dataclass(frozen=True)
class Bound:
    """`start + arange < bound` (one conjunct of a mask)."""

    arange: Factor
    start: tuple  # Poly items (hashable)
    bound: tuple


def remap_bound(b: Bound, mapping: Mapping[int, int]) -> Bound:
    ar = b.arange
    return Bound(("a", ar[1], ar[2], mapping[ar[3]]), b.start, b.bound)


def bound_of(lhs: Poly, rhs: Poly) -> Bound | None:
    """`lhs < rhs` as a Bound, when lhs is `start + arange` (coefficient 1) and rhs has no arange."""
    if aranges(rhs):
        return None
    ar = [m for m in lhs if any(is_arange(f) for f in m)]
    if len(ar) != 1 or len(ar[0]) != 1 or lhs[ar[0]] != 1:
        return None
    start = {m: c for m, c in lhs.items() if m != ar[0]}
    return Bound(ar[0][0], tuple(start.items()), tuple(rhs.items()))


# ---------------------------------------------------------------- block accesses

def _without(m: Monomial, k: Monomial) -> Monomial | None:
    """m / k for monomials (None when k does not divide m)."""
    rest = list(m)
    for f in k:
        if f not in rest:
            return None
        rest.remove(f)
    return tuple(rest)


def _axis_of(m: Monomial, stride_m: Monomial, axis_keys: dict) -> int | None:
    """The tile axis a constant-offset monomial belongs to: the axis with the longest stride that divides it
    and takes all its parameter factors (the others are extra dimensions of the view)."""
    best = None
    for a, k in axis_keys.items():
        if _without(m, k) is not None and set(stride_m) <= set(k):
            if best is None or len(k) > len(axis_keys[best]):
                best = a
    return best


def _is_stride_factor(f: Factor, params: set[str]) -> bool:
    return (f[0] == "v" and f[1] in params) or f[0] in ("c", "d")


def _stride_and_index(m: Monomial, params: set[str]) -> tuple[Monomial, Monomial]:
    """An extra dimension's term split into stride (scalar parameters and constexprs: `bh * (n_splits *
    HEAD_DIM)` is row `bh` of a row-major [.., n_splits, HEAD_DIM] buffer) and index (program ids, loop
    indices, values derived from them)."""
    stride = tuple(f for f in m if _is_stride_factor(f, params))
    return stride, tuple(f for f in m if not _is_stride_factor(f, params))


def _nested_stride(m: Monomial, axis_key: Monomial, outer: list[Monomial]) -> Monomial | None:
    """The stride of a term `i * C * axis_stride` (C constexprs) when it is a dimension of its own nested
    inside an outer one, else None (it stays a tile start along its axis).

    `(bh * n_splits + split) * HEAD_DIM + arange(HEAD_DIM)` flattens a [.., n_splits, HEAD_DIM] buffer:
    the outer stride `n_splits * HEAD_DIM` is a multiple of `HEAD_DIM`, so `split` indexes a dimension of
    stride `HEAD_DIM` and the tile axis keeps extent HEAD_DIM (as a tile start, the axis would have to
    reach `n_splits * HEAD_DIM` elements under rows `n_splits * HEAD_DIM` apart, which no view of the
    caller's tensor gives). Without such an outer stride (`pid * BLOCK + arange(BLOCK)`, a loop over
    column blocks under a row stride) the term is a tile start."""
    rest = _without(m, axis_key)
    consts = tuple(f for f in rest if f[0] in ("c", "d"))
    if not consts:
        return None
    stride = tuple(sorted(consts + axis_key, key=repr))
    for o in outer:
        left = _without(o, stride)
        if left:  # a strict multiple: the outer stride has factors beyond C * axis_stride
            return stride
    return None


def _fold_borrows(extra: dict[Monomial, Poly]) -> None:
    """`x + (T - 1 - t) * D` reads row `T - 1 - t` of a [T, D] buffer, not row `-1 - t` of the slab `1` of
    stride `T * D` (no view holds a negative index): a constant index along a stride that is another
    dimension's stride times scalar parameters moves into that dimension's index where the latter has
    negative terms."""
    for outer in sorted(extra, key=len, reverse=True):
        index = extra.get(outer)
        if index is None or set(index) != {()} or index[()] <= 0:
            continue
        for inner in extra:
            rest = _without(outer, inner) if inner != outer else None
            if rest and all(f[0] == "v" for f in rest) and any(c < 0 for c in extra[inner].values()):
                extra[inner] = add(extra[inner], {rest: index[()]})
                del extra[outer]
                break


@dataclass
class BlockAccess:
    """A partition-view access: array dims (extra dims first, then the tile axes), their strides,
    the tile shape and tile index along each, and the extent a bounds mask gives (None: unbounded)."""

    strides: list[Poly]
    tile: list[Dim]
    index: list[Poly]
    extents: list[Poly | None]
    axes: list[int]  # tile axis (of the pointer's shape) of each array dim; -1 for extra dims


def block_access(p: Poly, shape: tuple, params: set[str], bounds: list[Bound] | None) -> BlockAccess | None:
    """The partition-view form of pointer offsets `p` of tile `shape`, or None (a gather then).

    `params`: scalar parameter names (they are strides); `bounds`: the mask's conjuncts (None: no mask;
    a mask that is not a conjunction of bounds must not come here)."""
    rank = len(shape)
    per_axis: dict[int, tuple[Factor, Poly]] = {}
    rest: Poly = {}
    for m, c in p.items():
        ars = [f for f in m if is_arange(f)]
        if not ars:
            rest[m] = c
            continue
        if len(ars) != 1:
            return None
        ar = ars[0]
        axis = rank - 1 - ar[3]
        if axis < 0:
            return None
        others = tuple(f for f in m if f != ar)
        prev = per_axis.get(axis)
        if prev is not None and prev[0] != ar:
            return None  # two aranges along one axis
        per_axis[axis] = (ar, add(prev[1] if prev else {}, {others: c}))
    for axis, d in enumerate(shape):
        if axis not in per_axis and d != 1:
            return None  # broadcast along an axis without an arange
    axis_keys = {}
    for axis, (ar, stride) in per_axis.items():
        if len(stride) != 1:
            return None
        (m, c), = stride.items()
        if c != 1 or not all((f[0] == "v" and f[1] in params) or f[0] in ("c", "d") for f in m):
            return None  # strides are scalar parameters or constexprs
        axis_keys[axis] = m
    starts: dict[int, Poly] = {a: {} for a in per_axis}
    extra: dict[Monomial, Poly] = {}
    on_axis = []
    for m, c in rest.items():
        stride_m = tuple(f for f in m if f[0] == "v" and f[1] in params)
        axis = _axis_of(m, stride_m, axis_keys)
        if axis is not None:
            on_axis.append((m, c, axis))
        else:
            stride_m, other = _stride_and_index(m, params)
            extra[stride_m] = add(extra.get(stride_m, {}), {other: c})
    _fold_borrows(extra)
    outer = list(extra)
    for m, c, axis in on_axis:
        nested = _nested_stride(m, axis_keys[axis], outer)
        if nested is not None:
            extra[nested] = add(extra.get(nested, {}), {_without(m, nested): c})
        else:
            starts[axis] = add(starts[axis], {_without(m, axis_keys[axis]): c})
    out = BlockAccess([], [], [], [], [])
    for stride_m in extra:  # in source order: `base + z * stride_z + h * stride_h + ...` is (Z, H, ...)
        out.strides.append({stride_m: 1})
        out.tile.append(1)
        out.index.append(extra[stride_m])
        out.extents.append(None)
        out.axes.append(-1)
    used = set()
    for axis in sorted(per_axis):
        ar, _ = per_axis[axis]
        index = divide(starts[axis], ar[2])
        if index is None:
            return None
        extent = None
        for i, b in enumerate(bounds or []):
            if b.arange == ar:
                if extent is not None:
                    return None
                extent = add(sub(dict(b.bound), dict(b.start)), starts[axis])
                if any(f[0] == "a" or (f[0] == "v" and f[1] not in params) for m in extent for f in m):
                    return None  # the launch must be able to compute the extent from the parameters
                used.add(i)
        out.strides.append({axis_keys[axis]: 1})
        out.tile.append(ar[2])
        out.index.append(index)
        out.extents.append(extent)
        out.axes.append(axis)
    if bounds and len(used) != len(bounds):
        return None  # a conjunct about something else than this pointer's axes
    if not out.strides:  # the parameter itself (`tl.load(ptr)`): element 0 of a 1-D view
        return BlockAccess([const(1)], [1], [{}], [None], [-1])
    return out
