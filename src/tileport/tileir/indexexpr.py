"""Index expressions: where a memory op or an extract reads or writes, as a normal form.

Each index operand (a view load/store's tile indices, a gather/scatter's pointer tile and mask, an
extract's indices, a tensor view's dynamic shape and strides) becomes an integer polynomial over
*atoms*: block ids, block counts, loop induction variables, kernel parameters (by role), and the
results of ops that are not affine (divi, remi, mini, select, cmpi, iota, loads, ...), whose own
operands are normalized the same way. addi / subi / muli / offset / negi fold into the polynomial
(commutative sums and products, constants folded); assume, reshape, broadcast and integer width
casts are looked through. Two index operands compare equal when their normal forms are equal.

Atoms that name a loop or a memory op name the *reference's* op: on the generated side a loop
induction variable is that of the paired reference loop, so `[bm, k]` and `[bn, k]` or a block id
used instead of the loop variable differ, while value names and op order never matter.
"""

from __future__ import annotations

from typing import Callable

from . import ops as K
from .attrs import TypedInt, constant_value
from .match import const_key
from .model import Op, Value
from .types import ScalarType, TileType

# A polynomial: ((monomial, coefficient), ...) sorted; a monomial is a sorted tuple of atom ids.
Poly = tuple
_MAX_TERMS = 64
_LOOKED_THROUGH = frozenset({"exti", "trunci", "ptr_to_ptr"})
# Predicates with their operands swapped: a > b is b < a.
_SWAPPED = {"greater_than": "less_than", "greater_than_or_equal": "less_than_or_equal"}
# Attributes that do not change which element is addressed.
_IGNORED_ATTRS = frozenset({"overflow", "optimization_hints"})


def const(c: int) -> Poly:
    return (((), c),) if c else ()


def _from_terms(terms: dict) -> Poly:
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def add(p: Poly, q: Poly, sign: int = 1) -> Poly:
    terms = dict(p)
    for m, c in q:
        terms[m] = terms.get(m, 0) + sign * c
    return _from_terms(terms)


def mul(p: Poly, q: Poly) -> Poly | None:
    """The product, or None when it would have more than _MAX_TERMS terms."""
    if len(p) * len(q) > _MAX_TERMS:
        return None
    terms: dict = {}
    for m1, c1 in p:
        for m2, c2 in q:
            m = tuple(sorted(m1 + m2))
            terms[m] = terms.get(m, 0) + c1 * c2
    return _from_terms(terms)


class Atoms:
    """The atom table shared by both sides of a comparison (ids and their readable text)."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.text: list[str] = []
        # Atoms that depend on an op only one side has (a missing or extra loop, load, ...):
        # a difference in them is reported where that op is, not as an index difference.
        self.unpaired: list[bool] = []

    def atom(self, key: tuple, text: str, unpaired: bool = False) -> Poly:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.text)
            self.text.append(text)
            self.unpaired.append(unpaired)
        return (((i,), 1),)

    def depends_on_unpaired(self, p: Poly) -> bool:
        return any(self.unpaired[i] for mono, _ in p for i in mono)

    def render(self, p: Poly) -> str:
        if not p:
            return "0"
        parts = []
        for mono, c in sorted(p, key=lambda t: (-len(t[0]), t[0])):
            names = "*".join(self.text[i] for i in mono)
            if not names:
                parts.append(f"{c:+d}")
            elif c == 1:
                parts.append(f"+{names}")
            elif c == -1:
                parts.append(f"-{names}")
            else:
                parts.append(f"{c:+d}*{names}")
        text = " ".join(parts)
        return text[1:] if text.startswith("+") else text


class IndexNormalizer:
    """Normal forms of the values of one function.

    `op_id(op)` names a loop, `if` or memory op by the reference op it stands for (its partner on
    the generated side): ("ref", n), or (side, n) with side "refonly" / "gen" for an op without a
    partner; `arg_role(v)` names a scalar parameter.
    """

    def __init__(self, atoms: Atoms, op_id: Callable[[Op], tuple], arg_role: Callable[[Value], tuple],
                 pointer_ordinal: dict[Value, int]):
        self.atoms = atoms
        self.op_id = op_id
        self.arg_role = arg_role
        self.pointer_ordinal = pointer_ordinal
        self.memo: dict[Value, Poly] = {}

    def of(self, v: Value, depth: int = 0) -> Poly:
        v = self._through(v)
        p = self.memo.get(v)
        if p is None:
            p = self._normalize(v, depth) if depth < 200 else self.atoms.atom(("deep", id(v)), "?")
            self.memo[v] = p
        return p

    @staticmethod
    def _through(v: Value) -> Value:
        for _ in range(256):
            op = v.op
            if op is None or not (K.is_transparent(op) or (op.name in _LOOKED_THROUGH and op.operands)):
                return v
            v = op.operands[0]
        return v

    def _normalize(self, v: Value, depth: int) -> Poly:
        a = self.atoms
        if K.is_function_arg(v):
            if v in self.pointer_ordinal:
                return a.atom(("ptr", self.pointer_ordinal[v]), f"tensor#{self.pointer_ordinal[v]}")
            role = self.arg_role(v)
            return a.atom(("arg", role), _role_text(role))
        op = v.op
        if op is None:
            return self._block_arg(v, depth)
        name = op.name
        if name == "constant":
            c = _int_splat(op)
            if c is not None:
                return const(c)
            return a.atom(("const", const_key(op)), "const")
        if name == "get_tile_block_id":
            return a.atom(("bid", v.index), f"bid.{'xyz'[v.index]}")
        if name == "get_num_tile_blocks":
            return a.atom(("nbid", v.index), f"num_blocks.{'xyz'[v.index]}")
        operands = [self.of(x, depth + 1) for x in op.operands]
        if name in ("addi", "offset") and len(operands) == 2:
            return add(operands[0], operands[1])
        if name == "subi" and len(operands) == 2:
            return add(operands[0], operands[1], -1)
        if name == "negi" and len(operands) == 1:
            return add((), operands[0], -1)
        if name == "muli" and len(operands) == 2:
            p = mul(operands[0], operands[1])
            if p is not None:
                return p
        if name == "cmpi" and len(operands) == 2:
            folded = _fold_compare(op.attributes, operands)
            if folded is not None:
                return folded
        if name in K.LOOPS or name == "if" or K.is_memory(op) or op.regions:
            key = self.op_id(op)
            return a.atom(("res", key, v.index), f"{name}{_tag(key)}.{v.index}", key[0] != "ref")
        return self._opaque(op, v.index, operands)

    def _block_arg(self, v: Value, depth: int) -> Poly:
        owner = v.owner
        parent = owner.parent if owner is not None else None  # type: ignore[union-attr]
        if parent is None:
            return self.atoms.atom(("barg", id(v)), "?")
        key = self.op_id(parent)
        if parent.name == "for" and v.index == 0:
            return self.atoms.atom(("iv", key), f"iv{_tag(key)}", key[0] != "ref")
        init = K.loop_init(v)
        if init is not None:
            p = self.of(init, depth + 1)
            return self.atoms.atom(("iter", key, p), f"iter{_tag(key)}({self.atoms.render(p)})",
                                   key[0] != "ref" or self.atoms.depends_on_unpaired(p))
        return self.atoms.atom(("barg", key, v.index), f"{parent.name}{_tag(key)}.arg{v.index}",
                               key[0] != "ref")

    def _opaque(self, op: Op, index: int, operands: list[Poly]) -> Poly:
        name = op.name
        attrs = dict(op.attributes)
        if name == "cmpi" and attrs.get("comparison_predicate") in _SWAPPED:
            attrs["comparison_predicate"] = _SWAPPED[attrs["comparison_predicate"]]
            operands = operands[::-1]
        if name in K.COMMUTATIVE:
            operands = sorted(operands)
        attr_key = tuple(sorted((k, x) for k, x in attrs.items() if k not in _IGNORED_ATTRS))
        shape = tuple(d for d in op.results[index].type.shape if d != 1) \
            if isinstance(op.results[index].type, TileType) else ()
        key = (name, attr_key, shape, index, tuple(operands))
        args = ", ".join(self.atoms.render(p) for p in operands)
        return self.atoms.atom(key, f"{name}({args})", any(map(self.atoms.depends_on_unpaired, operands)))


# cmpi of two constants: cuTile Python folds it when it builds the IR (`x % N`'s divisor-sign test with a
# constant N), cutile-rs leaves `cmpi 256, 0` to the compiler; both are the same constant.
_PREDICATES: dict[str, Callable[[int, int], bool]] = {
    "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b,
    "less_than": lambda a, b: a < b, "less_than_or_equal": lambda a, b: a <= b,
    "greater_than": lambda a, b: a > b, "greater_than_or_equal": lambda a, b: a >= b,
}


def _fold_compare(attrs: dict, operands: list[Poly]) -> Poly | None:
    """The constant a comparison of two constants is, or None (unsigned order of a negative: not folded)."""
    values = [_constant_of(p) for p in operands]
    predicate = _PREDICATES.get(attrs.get("comparison_predicate"))
    if predicate is None or None in values:
        return None
    signed = attrs.get("signedness") == "signed"
    if not signed and any(v < 0 for v in values) and attrs.get("comparison_predicate") not in ("equal", "not_equal"):
        return None
    return const(int(predicate(*values)))


def _constant_of(p: Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and p[0][0] == ():
        return p[0][1]
    return None


def _int_splat(op: Op) -> int | None:
    t = op.results[0].type
    if not (isinstance(t, TileType) and isinstance(t.elem, ScalarType) and t.elem.is_int):
        return None
    values = constant_value(t, op.attributes["value"])
    if len(values) != 1:
        return None
    x = values[0]
    x = x.value if isinstance(x, TypedInt) else x
    return int(x) if isinstance(x, int) else None  # bool is an int


def _tag(key: tuple) -> str:
    """`@12` for reference op #12 (pre-order); `@ref12` / `@gen12` for an op only that side has."""
    side, n = key
    return f"@{n}" if side == "ref" else f"@{side}{n}"


def _role_text(role: tuple) -> str:
    if role[0] in ("shape", "stride"):
        return f"{role[0]}{role[2]}(tensor#{role[1]})"
    if role[0] == "scalar":
        return f"scalar{role[2]}(after tensor#{role[1]})" if role[1] is not None else f"scalar{role[2]}"
    return str(role)
