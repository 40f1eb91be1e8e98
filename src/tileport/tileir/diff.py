"""The structural diff of a reference module against a generated one.

Pipeline: canonicalize both modules, apply the SEMANTIC_EQUIV rewrites, pair the kernel entries,
match ops by dataflow (match.py), compare pairs and classify leftovers per category (compare.py,
entry.py), then merge identical findings and add a MATCH line per category with nothing to report.
"""

from __future__ import annotations

import time
from collections import Counter

from . import canon, equiv
from . import ops as K
from .compare import Findings, PairComparer, classify_unpaired
from .entry import compare_assumptions, compare_entry_hints, compare_signature
from .match import FunctionIndex, Matching, match
from .model import Function, Module, walk
from .report import DiffReport, Finding
from .rules import Status

# Categories that get a MATCH line when compared and clean, with the op kinds they cover.
_SUMMARY_KINDS = {
    "memory_family": ("memory",), "memory_count": ("memory",), "memory_hints": ("memory",),
    "partition_view": ("view",), "reduction": ("reduction",), "mma": ("mma",),
    "math": ("arith", "special"), "cast": ("cast",), "loop": ("control",),
}


def prepare(module: Module, target: str) -> Module:
    """Canonical form with the SEMANTIC_EQUIV rewrites applied (what the matcher works on)."""
    out = canon.canonicalize(module, target=target)
    for f in out.functions:
        if equiv.rewrite(f):
            canon.simplify(f)
    return out


def _pair_functions(ref: list[Function], gen: list[Function]) -> tuple[list[tuple[Function, Function]],
                                                                       list[Function], list[Function]]:
    gen_left = list(gen)
    pairs, ref_left = [], []
    for f in ref:
        same = next((g for g in gen_left if g.name == f.name), None)
        if same is not None:
            pairs.append((f, same))
            gen_left.remove(same)
        else:
            ref_left.append(f)
    # Entry symbols differ between frontends (cuTile Python mangles the signature): pair the rest
    # in order.
    n = min(len(ref_left), len(gen_left))
    pairs += list(zip(ref_left[:n], gen_left[:n]))
    return pairs, ref_left[n:], gen_left[n:]


def _merge(findings: list[Finding]) -> list[Finding]:
    merged: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.category, f.rule, f.status, f.message)
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = f
    return list(merged.values())


def _summaries(matchings: list[Matching], findings: list[Finding], out: Findings) -> None:
    reported = {f.category for f in findings}
    compared: Counter = Counter()
    for m in matchings:
        for r, _ in m.pairs:
            compared[K.kind(r)] += 1
    for category, kinds in _SUMMARY_KINDS.items():
        n = sum(compared[k] for k in kinds)
        if n and category not in reported:
            out.add_match(category, f"{n} op pair(s) compared, no difference")
    if matchings:
        for category in ("entry_hints", "signature", "assume", "tile_shape", "dtype"):
            if category not in reported:
                out.add_match(category, "no difference")


def compare_memory_order(m: Matching, out: Findings) -> None:
    """Each paired load/store must wait for the same (paired) memory operations on both sides.

    Memory ops are never weak pairs (the last strong pass pairs them by direction, and a name
    implies the direction), so `m.partner` pairs them as `m.pairs` does.
    """
    ref_order, gen_order = m.ref.function.memory_order, m.gen.function.memory_order
    differing = 0
    for r, g in m.pairs:
        waits_r, waits_g = ref_order.get(r), gen_order.get(g)
        if waits_r is None or waits_g is None:
            continue
        if all(x in m.partner for x in waits_r) and {m.partner[x] for x in waits_r} != set(waits_g):
            differing += 1
            out.add("memory_order", "waits_differ", Status.DIFFERS,
                    f"{r.name}: ordered after {len(waits_r)} memory op(s) in ref, "
                    f"{len(waits_g)} in gen (different token dependencies)",
                    m.ref.location(r), m.gen.location(g))
    if not differing:
        out.add_match("memory_order", "token dependencies of paired loads/stores agree")


def diff(reference: Module, generated: Module, *, target: str = "sm_90",
         generated_arg_roles: dict[int, tuple] | None = None,
         reference_arg_roles: dict[int, tuple] | None = None) -> DiffReport:
    """Compare a generated module against the reference one; see docs/tileir.md.

    `generated_arg_roles` / `reference_arg_roles` declare what scalar parameters of an entry stand
    for (index -> ("stride", tensor ordinal, dim) ...), as the producer passes them (roles.py):
    without them, a shape or stride that no tensor view uses is known only by its position.
    """
    start = time.perf_counter()
    ref, gen = prepare(reference, target), prepare(generated, target)
    out = Findings()
    pairs, ref_only, gen_only = _pair_functions(ref.entries, gen.entries)
    matchings: list[Matching] = []
    for rf, gf in pairs:
        m = match(FunctionIndex.build(rf, reference_arg_roles), FunctionIndex.build(gf, generated_arg_roles))
        matchings.append(m)
        comparer = PairComparer(m, out)
        for r, g in m.pairs:
            comparer.compare(r, g)
        for r, g in m.weak_pairs:
            comparer.frontier(r, g)
        for r, g in m.merged:
            comparer.compare(r, g)
        compare_memory_order(m, out)
        classify_unpaired(m, out)
        compare_assumptions(m, out)
        compare_entry_hints(m, out)
        compare_signature(m, out)
    for f in ref_only:
        out.add("function", "missing", Status.MISSING, f"entry @{f.name} only in ref")
    for f in gen_only:
        out.add("function", "extra", Status.EXTRA, f"entry @{f.name} only in gen")
    findings = _merge(out.items)
    summary = Findings()
    _summaries(matchings, findings, summary)
    stats = {
        "ref_ops": sum(1 for f in ref.functions for _ in walk(f)),
        "gen_ops": sum(1 for f in gen.functions for _ in walk(f)),
        "paired_ops": sum(len(m.pairs) for m in matchings),
        "unpaired_ref_ops": sum(len(m.ref_only) for m in matchings),
        "unpaired_gen_ops": sum(len(m.gen_only) for m in matchings),
        "seconds": round(time.perf_counter() - start, 4),
    }
    label = lambda mod: ", ".join(f.name for f in mod.entries) or "(no entry)"
    return DiffReport(label(reference), label(generated), target, findings + summary.items, stats)

