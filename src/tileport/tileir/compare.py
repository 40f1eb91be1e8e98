"""Per-category comparison of matched ops, and classification of unmatched ones.

A difference is reported once, where it arises: an op's own attributes and result types on its
pair; a constant or parameter where a paired op uses it (a leaf); a structurally different input
only at the frontier (the paired consumer whose input producers are not paired with each other).
Element-type differences are reported only on ops that define an element type (loads, casts, MMA,
iota); elsewhere they follow from an operand.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from . import ops as K
from .attrs import LOAD_STORE_HINT_DEFAULTS, TypedFloat, TypedInt, render, render_constant
from .equiv import hint_key_differs
from .indexexpr import Atoms, IndexNormalizer
from .match import (Matching, combiner_ops, combiner_signature, const_key, describe_role, producer,
                    scalar_key)
from .model import Op, Value
from .report import Finding, Location
from .rules import Owner, Severity, Status, rule
from .types import (GatherScatterViewType, PartitionViewType, StridedViewType, TensorViewType,
                    TileType, is_pointer_tile)


class Findings:
    def __init__(self) -> None:
        self.items: list[Finding] = []
        self._seen: set[tuple] = set()
        # Parameters already explained by a constant <-> argument finding (the signature
        # comparison does not report them again).
        self.covered_args: set[Value] = set()

    def add(self, category: str, rule_name: str, status: Status, message: str,
            ref: Location | None = None, gen: Location | None = None) -> None:
        r = rule(category, rule_name)
        self.items.append(Finding(category, rule_name, status, r.severity, r.owner, message,
                                  r.action, ref, gen))

    def add_match(self, category: str, message: str) -> None:
        """A MATCH line: the category was compared and nothing differs (not a table rule)."""
        self.items.append(Finding(category, "match", Status.MATCH, Severity.INFO, Owner.KERNEL,
                                  message, "None."))

    def once(self, key: tuple) -> bool:
        """True the first time `key` is seen (deduplicates a difference seen from several ops)."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


_ATTR_RULES = {
    "rounding_mode": ("math", "rounding"), "rounding": ("math", "rounding"),
    "flush_to_zero": ("math", "flush_to_zero"), "propagate_nan": ("math", "propagate_nan"),
    "comparison_predicate": ("math", "predicate"), "comparison_ordering": ("math", "predicate"),
    "signedness": ("math", "signedness"), "overflow": ("math", "overflow"),
    "memory_ordering_semantics": ("memory_semantics", "ordering"),
    "memory_scope": ("memory_semantics", "ordering"), "inbounds": ("memory_semantics", "inbounds"),
    "mode": ("memory_semantics", "atomic_mode"),
    "dim": ("reduction", "axis"), "identities": ("reduction", "identity"),
    "reverse": ("reduction", "reverse"), "fast_acc": ("mma", "flags"),
    "signedness_lhs": ("mma", "flags"), "signedness_rhs": ("mma", "flags"),
    "unsignedCmp": ("loop", "unsigned_cmp"), "str": ("other_ops", "print"),
}
_DTYPE_DEFINING = frozenset({"memory", "cast", "mma"})


def _attr_rule(op: Op, name: str) -> tuple[str, str]:
    k = K.kind(op)
    if k == "cast":
        return ("cast", "differs")
    if k == "mma" and name.startswith("signedness"):
        return ("mma", "flags")
    return _ATTR_RULES.get(name, ("other_ops", "attributes"))


def _attr_equal(a: Any, b: Any) -> bool:
    """Attribute equality where typed numbers compare by value (an f32 and an f16 -inf identity
    are the same identity; the element type difference is reported where it arises)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_attr_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (TypedFloat, TypedInt)) and isinstance(b, (TypedFloat, TypedInt)):
        return scalar_key(a) == scalar_key(b)
    return a == b


def _shape(shape: tuple) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _squeezed(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)


def index_roles(op: Op) -> frozenset[str]:
    """The operand roles of `op` that say which elements it addresses (compared as index
    expressions, see indexexpr.py)."""
    if K.is_memory(op):
        return _PTR_INDEX_ROLES if K.family(op) == "ptr" else _VIEW_INDEX_ROLES
    if op.name in ("extract", "insert"):
        return _EXTRACT_INDEX_ROLES
    if op.name in K.VIEW_OPS:
        return _VIEW_OP_INDEX_ROLES
    return frozenset()


_VIEW_INDEX_ROLES = frozenset({"index"})
_PTR_INDEX_ROLES = frozenset({"source", "destination", "pointers", "mask"})
_EXTRACT_INDEX_ROLES = frozenset({"indices"})
_VIEW_OP_INDEX_ROLES = frozenset({"dynamicShape", "dynamicStrides"})


def _precision(t: Any) -> tuple[int, int] | None:
    """(significand bits, exponent bits) of a float element type, (bits, 0) of an integer one."""
    if not hasattr(t, "is_float"):
        return None
    if t.is_float:
        return _FLOAT_PRECISION.get(t.name)
    return (t.bits, 0) if t.is_int else None


_FLOAT_PRECISION = {"f64": (52, 11), "f32": (23, 8), "tf32": (10, 8), "f16": (10, 5), "bf16": (7, 8),
                    "f8E4M3FN": (3, 4), "f8E5M2": (2, 5), "f8E5M3FNU": (3, 5), "f4E2M1FN": (1, 2),
                    "f8E8M0FNU": (0, 8)}
_PRECISION_KINDS = frozenset({"arith", "special", "reduction"})


class PairComparer:
    def __init__(self, m: Matching, out: Findings):
        self.m = m
        self.out = out
        # Index expressions of both sides share one atom table; loops, ifs and loads are named by
        # the reference op they stand for.
        self.atoms = Atoms()
        self.ref_index = IndexNormalizer(self.atoms, self._ref_op_id, m.ref.arg_role.__getitem__,
                                         m.ref.pointer_ordinal)
        self.gen_index = IndexNormalizer(self.atoms, self._gen_op_id, m.gen.arg_role.__getitem__,
                                         m.gen.pointer_ordinal)
        # Generated values of another element type than their reference partner (a precision
        # difference is reported where it arises, not at every op downstream).
        self.retyped: set[Value] = set()

    def _ref_op_id(self, op: Op) -> tuple:
        return ("ref" if op in self.m.partner else "refonly", self.m.ref.order.get(op, -1))

    def _gen_op_id(self, op: Op) -> tuple:
        partner = self.m.partner.get(op)
        if partner is not None and partner in self.m.ref.order:
            return ("ref", self.m.ref.order[partner])
        return ("gen", self.m.gen.order.get(op, -1))

    def loc(self, r: Op | None, g: Op | None) -> tuple[Location | None, Location | None]:
        return (self.m.ref.location(r) if r is not None else None,
                self.m.gen.location(g) if g is not None else None)

    def add(self, category: str, rule_name: str, message: str, r: Op | None, g: Op | None,
            status: Status = Status.DIFFERS) -> None:
        ref, gen = self.loc(r, g)
        self.out.add(category, rule_name, status, message, ref, gen)

    # -- one pair -------------------------------------------------------------------------------

    def compare(self, r: Op, g: Op) -> None:
        if r.equiv_rule != g.equiv_rule:
            rules = " / ".join(x for x in (r.equiv_rule, g.equiv_rule) if x)
            self.add("math", "semantic_equiv", f"{r.name}: equivalent spellings ({rules})", r, g,
                     Status.SEMANTIC_EQUIV)
        if K.is_memory(r) and K.is_memory(g):
            self._hint_key_note(r, g)
        self._placement(r, g)
        if r in self.m.strict_equal:
            return
        if K.is_memory(r) and K.is_memory(g):
            if not self._memory(r, g):
                return
        elif r.name != g.name:
            self._renamed(r, g)
            return
        self._indices(r, g)
        self._attributes(r, g)
        self._results(r, g)
        if K.kind(r) == "mma":
            self._mma(r, g)
        elif K.kind(r) == "reduction":
            self._reduction(r, g)
        elif r.name in K.LOOPS:
            self._loop(r, g)
        self._operands(r, g)

    def _hint_key_note(self, r: Op, g: Op) -> None:
        hr, hg = r.hints, g.hints
        if hint_key_differs(hr, hg):
            self.add("memory_hints", "semantic_equiv",
                     f"{r.name}: hints under '{hr.selected_from}' vs '{hg.selected_from}'", r, g,
                     Status.SEMANTIC_EQUIV)

    def _renamed(self, r: Op, g: Op) -> None:
        k = K.kind(r)
        category, rule_name = {"mma": ("mma", "kind"), "cast": ("cast", "differs"),
                               "reduction": ("reduction", "combiner")}.get(k, ("other_ops", "attributes"))
        self.add(category, rule_name, f"{r.name} vs {g.name}", r, g)

    def _placement(self, r: Op, g: Op) -> None:
        lr, lg = self.m.ref.loop_of.get(r), self.m.gen.loop_of.get(g)
        if lr is None and lg is None:
            return
        if lr is not None and lg is not None and self.m.partner.get(lr) is lg:
            return
        if (lr is not None and lr not in self.m.partner) or (lg is not None and lg not in self.m.partner):
            return  # the loop itself is missing/extra: reported there
        if r.name in K.LOOPS or K.kind(r) in ("memory", "mma", "reduction"):
            where = lambda loop: "top level" if loop is None else f"inside {loop.name}"
            self.add("loop", "nesting" if r.name in K.LOOPS else "placement",
                     f"{r.name}: {where(lr)} in ref, {where(lg)} in gen", r, g)

    def _memory(self, r: Op, g: Op) -> bool:
        """Memory-specific checks; False when the rest of the pair comparison does not apply."""
        if K.family(r) != K.family(g):
            self.add("memory_family", "family_changed",
                     f"{K.direction(r)}: {K.family(r)} access ({r.name}) in ref, "
                     f"{K.family(g)} access ({g.name}) in gen", r, g)
            return False
        if self.m.ref.tensor_of.get(r) != self.m.gen.tensor_of.get(g):
            self.add("memory_semantics", "tensor",
                     f"{r.name} accesses tensor parameter #{self.m.ref.tensor_of.get(r)} in ref, "
                     f"#{self.m.gen.tensor_of.get(g)} in gen", r, g)
        if r.name != g.name:
            self.add("other_ops", "attributes", f"{r.name} vs {g.name}", r, g)
            return False
        self._accessed_view(r, g)
        if K.family(r) == "ptr" and (r.operand("mask") is None) != (g.operand("mask") is None):
            masked = lambda op: "masked" if op.operand("mask") is not None else "unmasked"
            self.add("memory_semantics", "mask", f"{r.name}: {masked(r)} in ref, {masked(g)} in gen", r, g)
        hr = r.hints.selected if r.hints else None
        hg = g.hints.selected if g.hints else None
        keys = sorted({k for k, _ in (hr.items if hr else ())} | {k for k, _ in (hg.items if hg else ())})
        for key in keys:
            default = LOAD_STORE_HINT_DEFAULTS.get(key)
            a = hr.get(key, default) if hr else default
            b = hg.get(key, default) if hg else default
            if a != b:
                name = key if key in ("allow_tma", "latency") else "other_hint"
                self.add("memory_hints", name, f"{r.name}: {key} = {_opt(a)} in ref, {_opt(b)} in gen", r, g)
        return True

    def _accessed_view(self, r: Op, g: Op) -> None:
        """The view a paired load/store goes through, where the two views are not a pair compared
        on their own (the port made a second view for some of the accesses)."""
        va, vb = r.operand("view"), g.operand("view")
        if va is None or vb is None:
            return
        pa, pb = K.root(va).op, K.root(vb).op
        if pa is not None and self.m.partner.get(pa) is pb:
            return
        ta, tb = va.type, vb.type
        if isinstance(ta, (PartitionViewType, GatherScatterViewType, StridedViewType)) and type(ta) is type(tb):
            self._view(r, g, ta, tb)

    def _indices(self, r: Op, g: Op) -> None:
        """Each index operand as an expression over block ids, loop variables, parameters and
        constants (indexexpr.py): a different expression addresses other elements."""
        for role in sorted(index_roles(r)):
            va, vb = r.operands_with(role), g.operands_with(role)
            if len(va) != len(vb):
                continue  # another rank: reported as a shape difference
            for i, (a, b) in enumerate(zip(va, vb)):
                ea, eb = self.ref_index.of(a), self.gen_index.of(b)
                if ea != eb and not (self.atoms.depends_on_unpaired(ea) or self.atoms.depends_on_unpaired(eb)):
                    where = f"{role} {i}" if len(va) > 1 else role
                    self.add("index", "differs", f"{r.name}: {where} is {self.atoms.render(ea)} in ref, "
                                                 f"{self.atoms.render(eb)} in gen", r, g)

    def _attributes(self, r: Op, g: Op) -> None:
        skip = {"optimization_hints", "value"}
        for name in sorted((set(r.attributes) | set(g.attributes)) - skip):
            a, b = r.attributes.get(name), g.attributes.get(name)
            if not _attr_equal(a, b):
                category, rule_name = _attr_rule(r, name)
                self.add(category, rule_name,
                         f"{r.name}: {name} = {_opt(a)} in ref, {_opt(b)} in gen", r, g)

    def _results(self, r: Op, g: Op) -> None:
        m = self.m
        if len(r.results) != len(g.results):
            category, rule_name = (("loop", "iter_values") if r.name in K.LOOPS else
                                   ("reduction", "operands") if K.kind(r) == "reduction" else
                                   ("other_ops", "attributes"))
            self.add(category, rule_name, f"{r.name}: {len(r.results)} results in ref, "
                                          f"{len(g.results)} in gen", r, g)
        plumbing = r in m.ref.address_only and g in m.gen.address_only
        for a, b in zip(r.results, g.results):
            ta, tb = a.type, b.type
            if isinstance(ta, TileType) and isinstance(tb, TileType):
                if ta.shape != tb.shape and not plumbing:
                    unit = _squeezed(ta.shape) == _squeezed(tb.shape)
                    self.add("tile_shape", "unit_dims" if unit else "shape",
                             f"tile {_shape(ta.shape)} in ref, {_shape(tb.shape)} in gen", r, g)
                if ta.elem != tb.elem and not plumbing and K.kind(r) in _PRECISION_KINDS:
                    self._arith_precision(r, g, ta.elem, tb.elem, b)
                elif ta.elem != tb.elem and not plumbing and \
                        (K.kind(r) in _DTYPE_DEFINING or r.name == "iota"):
                    self.retyped.add(b)
                    category, rule_name = {"cast": ("cast", "differs"),
                                           "mma": ("mma", "accumulator_type")}.get(
                        K.kind(r), ("dtype", "elem_type"))
                    self.add(category, rule_name, f"{r.name}: element type {ta.elem} in ref, "
                                                  f"{tb.elem} in gen", r, g)
            elif isinstance(ta, (PartitionViewType, GatherScatterViewType, StridedViewType)) \
                    and type(ta) is type(tb):
                self._view(r, g, ta, tb)
            elif isinstance(ta, TensorViewType) and isinstance(tb, TensorViewType):
                self._tensor_view(r, g, ta, tb)
            elif type(ta) is not type(tb):
                self.add("other_ops", "attributes", f"{r.name}: result {ta} in ref, {tb} in gen", r, g)

    def _arith_precision(self, r: Op, g: Op, ea: Any, eb: Any, gen_value: Value) -> None:
        """An arithmetic op computing in another element type than its reference partner: CRITICAL
        when narrower (x*x in f16 then upcast, where the reference squares in f32), WARN otherwise;
        reported once, where the other type starts (not on the ops that follow from it)."""
        inherited = any(K.root(v) in self.retyped for v in g.operands)
        self.retyped.add(gen_value)
        if inherited:
            return
        pa, pb = _precision(ea), _precision(eb)
        narrower = pa is not None and pb is not None and (pb[0] < pa[0] or pb[1] < pa[1])
        self.add("precision", "narrower" if narrower else "other_type",
                 f"{r.name}: computes in {ea} in ref, {eb} in gen", r, g)

    def _view(self, r: Op, g: Op, ta: Any, tb: Any) -> None:
        if ta.tile != tb.tile:
            self.add("tile_shape", "shape", f"tile {_shape(ta.tile)} in ref, {_shape(tb.tile)} in gen", r, g)
        if ta.padding != tb.padding:
            # Without a padding value the reference leaves out-of-bounds elements undetermined;
            # a port that pads anyway only defines them.
            self.add("partition_view", "padding_refined" if ta.padding is None else "padding",
                     f"{r.name}: padding_value = {_opt(ta.padding)} in ref, {_opt(tb.padding)} in gen", r, g)
        if getattr(ta, "dim_map", None) != getattr(tb, "dim_map", None):
            self.add("partition_view", "dim_map",
                     f"{r.name}: dim_map {list(ta.dim_map)} in ref, {list(tb.dim_map)} in gen", r, g)
        for layout in ("sparse_dim", "traversal_strides"):  # gather/scatter and strided views
            if getattr(ta, layout, None) != getattr(tb, layout, None):
                self.add("partition_view", "layout", f"{r.name}: {layout} {getattr(ta, layout)} in ref, "
                                                     f"{getattr(tb, layout)} in gen", r, g)

    def _tensor_view(self, r: Op, g: Op, ta: TensorViewType, tb: TensorViewType) -> None:
        if ta.elem != tb.elem:
            self.add("dtype", "elem_type", f"{r.name}: element type {ta.elem} in ref, {tb.elem} in gen", r, g)
        if (ta.shape, ta.strides) != (tb.shape, tb.strides):
            self.add("partition_view", "tensor_view",
                     f"{r.name}: {ta} in ref, {tb} in gen (static shape/stride pattern)", r, g)

    def _mma(self, r: Op, g: Op) -> None:
        for i, role in ((0, "lhs"), (1, "rhs")):
            if i < len(r.operands) and i < len(g.operands):
                ta, tb = r.operands[i].type, g.operands[i].type
                if isinstance(ta, TileType) and isinstance(tb, TileType) and ta.elem != tb.elem:
                    self.add("mma", "operand_type",
                             f"{r.name}: {role} element type {ta.elem} in ref, {tb.elem} in gen", r, g)

    def _reduction(self, r: Op, g: Op) -> None:
        if combiner_signature(r) != combiner_signature(g):
            self.add("reduction", "combiner",
                     f"{r.name}: combiner ({combiner_ops(r)}) in ref, ({combiner_ops(g)}) in gen", r, g)
        if len(r.operands) != len(g.operands):
            self.add("reduction", "operands",
                     f"{r.name}: {len(r.operands)} operands in ref, {len(g.operands)} in gen", r, g)

    def _loop(self, r: Op, g: Op) -> None:
        nr, ng = len(r.operands_with("initValues")), len(g.operands_with("initValues"))
        if nr != ng:
            self.add("loop", "iter_values", f"{r.name}: {nr} loop-carried values in ref, {ng} in gen", r, g)

    # -- operands: leaves and dataflow frontier --------------------------------------------------

    def _aligned_operands(self, r: Op, g: Op) -> list[tuple[str, Value, Value]]:
        if r.name != g.name or len(r.operands) != len(g.operands):
            return []
        gops = list(g.operands)
        if r.name in K.COMMUTATIVE and len(gops) == 2:
            lr = [self.m.ref_loose.value(v) for v in r.operands]
            lg = [self.m.gen_loose.value(v) for v in gops]
            if lr[0] != lg[0] and lr[0] == lg[1] and lr[1] == lg[0]:
                gops.reverse()
        return list(zip(r.operand_roles, r.operands, gops))

    def frontier(self, r: Op, g: Op) -> None:
        """For a weak pair: report only an input computed differently (see Matching.weak_pairs)."""
        if not (r in self.m.ref.address_only and g in self.m.gen.address_only):
            self._operands(r, g, leaves=False)

    def _operands(self, r: Op, g: Op, leaves: bool = True) -> None:
        memory = K.is_memory(r)
        indices = index_roles(r)
        for role, a, b in self._aligned_operands(r, g):
            if role in indices:
                continue  # compared as index expressions (_indices)
            ra, rb = K.root(a), K.root(b)
            if leaves and self._leaf(r, g, role, ra, rb):
                continue
            if memory and role in K.ADDRESS_ROLES:
                continue  # addressing is compared through the memory op and its view
            if self.m.ref_loose.value(a) == self.m.gen_loose.value(b):
                continue
            pa, pb = producer(self.m.ref_loose, a), producer(self.m.gen_loose, b)
            if pa is not None and pb is not None and self.m.partner.get(pa) is pb:
                continue  # the difference is further upstream and reported there
            if not self.out.once(("dataflow", id(r), role)):
                continue
            describe = lambda p: "a parameter or constant" if p is None else p.name
            if r.name in K.LOOPS and role in K.LOOP_BOUND_ROLES:
                self.add("loop", "step" if role == "step" else "bounds",
                         f"{r.name}: {role} computed differently ({describe(pa)} in ref, "
                         f"{describe(pb)} in gen)", r, g)
            else:
                self.add("math", "dataflow",
                         f"{r.name}: operand '{role}' computed differently ({describe(pa)} in ref, "
                         f"{describe(pb)} in gen)", r, g)

    def _leaf(self, r: Op, g: Op, role: str, a: Value, b: Value) -> bool:
        """Compare constants and scalar parameters used by a pair; True if both were leaves."""
        ca = a.op is not None and a.op.name == "constant"
        cb = b.op is not None and b.op.name == "constant"
        pa = K.is_function_arg(a) and not is_pointer_tile(a.type)
        pb = K.is_function_arg(b) and not is_pointer_tile(b.type)
        if not ((ca or pa) and (cb or pb)):
            return False
        if ca and cb:
            va, vb = const_key(a.op), const_key(b.op)  # type: ignore[arg-type]
            if va != vb and self.out.once(("const", id(a), id(b))):
                category, rule_name = self._leaf_context(r, role)
                self.add(category, rule_name,
                         f"{r.name}: '{role}' is {_const_text(a)} in ref, {_const_text(b)} in gen", r, g)
        elif ca and pb:
            self.out.covered_args.add(b)
            if self.out.once(("const_to_arg", id(a), id(b))):
                self.add("constant_arg", "const_to_arg",
                         f"{r.name}: '{role}' is the constant {_const_text(a)} in ref, a runtime "
                         f"argument ({b.name}) in gen", r, g)
        elif pa and cb:
            self.out.covered_args.add(a)
            if self.out.once(("arg_to_const", id(a), id(b))):
                self.add("constant_arg", "arg_to_const",
                         f"{r.name}: '{role}' is a runtime argument ({a.name}) in ref, the constant "
                         f"{_const_text(b)} in gen", r, g)
        else:
            role_a, role_b = self.m.ref.arg_role[a], self.m.gen.arg_role[b]
            # Only roles of the same kind say which parameter is meant: a tensor dimension
            # compares with a tensor dimension; positional roles only with positional ones.
            comparable = (role_a[0] == "scalar") == (role_b[0] == "scalar")
            if comparable and role_a != role_b and self.out.once(("arg", id(a), id(b))):
                self.add("argument", "different",
                         f"{r.name}: '{role}' is parameter {a.name} {describe_role(role_a)} in ref, "
                         f"{b.name} {describe_role(role_b)} in gen", r, g)
        return True

    @staticmethod
    def _leaf_context(op: Op, role: str) -> tuple[str, str]:
        if K.is_memory(op) and role == "paddingValue":
            return ("partition_view", "padding")
        if op.name in K.LOOPS and role in K.LOOP_BOUND_ROLES:
            return ("loop", "step" if role == "step" else "bounds")
        return ("constant", "value")


def _opt(v: Any) -> str:
    return "absent" if v is None else render(v)


def _const_text(v: Value) -> str:
    assert v.op is not None
    return render_constant(v.type, v.op.attributes["value"])


# -- unmatched ops -------------------------------------------------------------------------------

def classify_unpaired(m: Matching, out: Findings) -> None:
    arith: dict[str, Counter] = {"ref": Counter(), "gen": Counter()}
    special: dict[str, Counter] = {"ref": Counter(), "gen": Counter()}
    address: Counter = Counter()
    sides = (("ref", m.ref_only, m.ref, Status.MISSING), ("gen", m.gen_only, m.gen, Status.EXTRA))
    for side, ops, fx, status in sides:
        for op in ops:
            k = K.kind(op)
            loc = fx.location(op)
            ref_loc, gen_loc = (loc, None) if side == "ref" else (None, loc)
            verb = "only in ref" if side == "ref" else "only in gen"
            missing_or_extra = "missing" if side == "ref" else "extra"
            if k == "memory":
                out.add("memory_count", missing_or_extra, status,
                        f"{op.name} ({K.direction(op)} of tensor parameter #{fx.tensor_of.get(op)}) {verb}",
                        ref_loc, gen_loc)
            elif k == "view" or op in fx.address_only:
                address[side] += 1
            elif k == "mma":
                out.add("mma", missing_or_extra, status, f"{op.name} {verb}", ref_loc, gen_loc)
            elif k == "reduction":
                out.add("reduction", missing_or_extra, status, f"{op.name} {verb}", ref_loc, gen_loc)
            elif k == "control":
                out.add("loop", missing_or_extra, status, f"{op.name} {verb}", ref_loc, gen_loc)
            elif k == "cast":
                if _cast_not_needed(m, op, side):
                    out.add("cast", "not_needed", status,
                            f"{op.name} {verb}: the other side's value already has type "
                            f"{op.results[0].type}", ref_loc, gen_loc)
                else:
                    out.add("cast", missing_or_extra, status, f"{op.name} {verb}", ref_loc, gen_loc)
            elif k == "special":
                special[side][op.name] += 1
            elif k == "arith":
                arith[side][op.name] += 1
            elif op.name == "print_tko":
                out.add("other_ops", "print", status, f"{op.name} {verb}", ref_loc, gen_loc)
            else:
                out.add("other_ops", missing_or_extra, status, f"{op.name} {verb}", ref_loc, gen_loc)
    for name in sorted(set(special["ref"]) | set(special["gen"])):
        nr, ng = special["ref"][name], special["gen"][name]
        if nr != ng:
            out.add("math", "special_count", Status.MISSING if nr > ng else Status.EXTRA,
                    f"{name}: {nr} unmatched in ref, {ng} in gen")
    for name in sorted(set(arith["ref"]) | set(arith["gen"])):
        nr, ng = arith["ref"][name], arith["gen"][name]
        if nr != ng:
            out.add("math", "arith_count_small" if abs(nr - ng) <= 2 else "arith_count",
                    Status.MISSING if nr > ng else Status.EXTRA,
                    f"{name}: {nr} unmatched in ref, {ng} in gen")
    for side in ("ref", "gen"):
        if address[side]:
            out.add("address", "differs", Status.MISSING if side == "ref" else Status.EXTRA,
                    f"{address[side]} address/index/view op(s) only in {side}")


def _cast_not_needed(m: Matching, cast: Op, side: str) -> bool:
    """The cast only adapts to a type difference upstream: where its value is used by a paired op,
    the other side already has a value of the cast's result type."""
    fx = m.ref if side == "ref" else m.gen
    target = cast.results[0].type
    stack, seen = [cast.results[0]], set()
    found = False
    while stack:
        v = stack.pop()
        for user, pos in fx.users.get(v, []):
            if K.is_transparent(user):
                if user not in seen:
                    seen.add(user)
                    stack.extend(user.results)
                continue
            partner = m.partner.get(user)
            if partner is None or pos >= len(partner.operands):
                return False
            t = K.root(partner.operands[pos]).type
            if not (isinstance(t, TileType) and isinstance(target, TileType) and t.elem == target.elem):
                return False
            found = True
    return found
