"""Function-level comparisons: entry signature, entry optimization hints, assumptions."""

from __future__ import annotations

from typing import Any, Callable

from .attrs import Bounded, DivBy, Hints
from .canon import assume_root
from .compare import Findings, _opt
from .equiv import hint_key_differs
from .match import FunctionIndex, Keys, Matching, describe_role
from .model import Op, Value, walk
from .ops import is_function_arg, is_transparent
from .rules import Status
from .types import PointerType, TileType, is_pointer_tile

_PERF_HINTS = frozenset({"occupancy", "num_cta_in_cga", "num_worker_warps_per_cta"})


def compare_signature(m: Matching, out: Findings) -> None:
    rf, gf = m.ref.function, m.gen.function
    if rf.name != gf.name:
        out.add("signature", "name", Status.DIFFERS, f"entry @{rf.name} in ref, @{gf.name} in gen")
    rp = list(m.ref.pointer_ordinal)
    gp = list(m.gen.pointer_ordinal)
    if len(rp) != len(gp):
        out.add("signature", "tensor_count", Status.DIFFERS,
                f"{len(rp)} tensor (pointer) parameters in ref, {len(gp)} in gen")
    for i, (a, b) in enumerate(zip(rp, gp)):
        ea, eb = _pointee(a), _pointee(b)
        if ea != eb:
            out.add("dtype", "elem_type", Status.DIFFERS,
                    f"tensor parameter #{i}: element type {ea} in ref, {eb} in gen")
    rs = {m.ref.arg_role[a]: a for a in rf.args if a not in m.ref.pointer_ordinal}
    gs = {m.gen.arg_role[a]: a for a in gf.args if a not in m.gen.pointer_ordinal}
    only: dict[tuple, tuple[list[str], list[str]]] = {}
    for role in sorted(set(rs) | set(gs), key=str):
        a, b = rs.get(role), gs.get(role)
        if a is not None and b is not None:
            if a.type != b.type:
                out.add("signature", "scalar_type", Status.DIFFERS,
                        f"scalar parameter {describe_role(role)}: {a.type} in ref, {b.type} in gen")
            continue
        v = a if a is not None else b
        if v in out.covered_args:
            continue  # reported as a constant <-> argument difference
        rule_name = "scalar_args" if role[0] == "scalar" else "shape_args"
        group = only.setdefault((rule_name, role[1]), ([], []))
        group[0 if a is not None else 1].append(f"{v.name} {describe_role(role)}")
    for (rule_name, tensor), (in_ref, in_gen) in only.items():
        where = "before the first tensor" if tensor is None else f"of/after tensor #{tensor}"
        out.add("signature", rule_name, Status.DIFFERS,
                f"parameters {where} only in ref: {', '.join(in_ref) or 'none'}; "
                f"only in gen: {', '.join(in_gen) or 'none'}")


def _pointee(v: Value) -> Any:
    t = v.type
    return t.elem.pointee if isinstance(t, TileType) and isinstance(t.elem, PointerType) else t


def compare_entry_hints(m: Matching, out: Findings) -> None:
    hr, hg = m.ref.function.hints, m.gen.function.hints
    dr = dict(hr.selected.items) if isinstance(hr, Hints) else {}
    dg = dict(hg.selected.items) if isinstance(hg, Hints) else {}
    for key in sorted(set(dr) | set(dg)):
        a, b = dr.get(key), dg.get(key)
        if a != b:
            out.add("entry_hints", "perf_hint" if key in _PERF_HINTS else "other_hint", Status.DIFFERS,
                    f"entry hint {key} = {_opt(a)} in ref, {_opt(b)} in gen")
    if hint_key_differs(hr, hg):
        out.add("entry_hints", "semantic_equiv", Status.SEMANTIC_EQUIV,
                f"entry hints under '{hr.selected_from}' in ref, '{hg.selected_from}' in gen")


def _assumptions(fx: FunctionIndex, m: Matching, strict: Keys, to_ref: Callable[[Op], Op]
                 ) -> dict[Any, tuple[Value, set, Op]]:
    """Assumed predicates per assumed value, keyed alike on both sides: a parameter by its role, the
    result of a paired op by (its reference op, index), any other value (a constant, a loop argument,
    a view of a value, a combiner's op: nothing pairs them) by its strict key, equal for equal
    computations."""
    out: dict[Any, tuple[Value, set, Op]] = {}
    for op in walk(fx.function):
        if op.name != "assume" or not is_transparent(op):
            continue
        v = assume_root(op.operands[0])
        if is_function_arg(v):
            key: Any = ("arg", fx.arg_role[v])
        elif v.op is not None and v.op in m.partner:
            key = ("op", to_ref(v.op), v.index)
        else:
            key = ("value", strict.value(v))
        entry = out.setdefault(key, (v, set(), op))
        entry[1].add(op.attributes["predicate"])
    return out


def _max_div(preds: set) -> int | None:
    divs = [p.divisor for p in preds if isinstance(p, DivBy)]
    return max(divs) if divs else None


def _assumption_order(m: Matching) -> Callable[[tuple], tuple]:
    """A cheap, stable sort key for assumption keys: parameters by role, then op results by the
    op's position in the reference function. (Sorting by `str(key)` rendered the op's dataclass
    repr, which recurses through operands and parent blocks: quadratic or worse in memory.)"""
    position = {op: i for i, op in enumerate(walk(m.ref.function))}

    def key(k: tuple) -> tuple:
        if k[0] == "arg":
            return (0, str(k[1]), 0)
        if k[0] == "value":
            return (2, k[1], 0)
        return (1, position.get(k[1], len(position)), k[2])
    return key


def compare_assumptions(m: Matching, out: Findings) -> None:
    ref = _assumptions(m.ref, m, m.ref_strict, lambda op: op)
    translated = _assumptions(m.gen, m, m.gen_strict, m.partner.__getitem__)
    for key in sorted(set(ref) | set(translated), key=_assumption_order(m)):
        r, g = ref.get(key), translated.get(key)
        value = (r or g)[0]  # type: ignore[index]
        pr, pg = (r[1] if r else set()), (g[1] if g else set())
        if pr == pg:
            continue
        where = (f"parameter {value.name} {describe_role(key[1])}" if key[0] == "arg"
                 else f"result of {value.op.name if value.op else '?'}")
        ref_loc = m.ref.location(r[2]) if r else None
        gen_loc = m.gen.location(g[2]) if g else None
        text = lambda ps: ", ".join(sorted(map(str, ps))) or "none"
        message = f"{where}: {text(pr)} in ref, {text(pg)} in gen"
        dr, dg = _max_div(pr), _max_div(pg)
        if dr != dg:
            if is_pointer_tile(value.type):
                lost = dr is not None and (dg is None or dg < dr)
                out.add("assume", "ptr_div_by_lost" if lost else "ptr_div_by_gained",
                        Status.MISSING if lost else Status.EXTRA, message, ref_loc, gen_loc)
            else:
                out.add("assume", "scalar_div_by", Status.DIFFERS, message, ref_loc, gen_loc)
        others_r = {p for p in pr if not isinstance(p, (DivBy, Bounded))}
        others_g = {p for p in pg if not isinstance(p, (DivBy, Bounded))}
        if others_r != others_g:
            out.add("assume", "other", Status.DIFFERS, message, ref_loc, gen_loc)
        if {p for p in pr if isinstance(p, Bounded)} != {p for p in pg if isinstance(p, Bounded)}:
            out.add("assume", "bounded", Status.DIFFERS, message, ref_loc, gen_loc)
