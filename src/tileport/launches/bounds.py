"""Bounds on what a recording keeps of each kernel, so that a whole test suite gives a spec of bounded size.

A kernel keeps at most `Caps.specializations` distinct specializations (`LaunchRecord.specialization`:
what its framework compiles a separate kernel for) and each of them at most `Caps.launches` distinct
launches (other grids, extents or strides of the same compiled kernel); the first ones seen are kept.
Repeats of a kept launch only add to its count. Nothing is dropped silently: every launch not kept is
counted in the spec's `dropped` entry of its kernel (`spec.Dropped`), with a digest of each specialization
not kept, so that several processes merging into one spec count each dropped specialization once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from tileport.launches.spec import Dropped, LaunchRecord, merge

DEFAULT_SPECIALIZATIONS = 32
DEFAULT_LAUNCHES = 8


@dataclass(frozen=True)
class Caps:
    specializations: int = DEFAULT_SPECIALIZATIONS  # distinct specializations kept per kernel
    launches: int = DEFAULT_LAUNCHES                # distinct launches kept per specialization


@dataclass
class Fill:
    """How full each kernel and specialization of a spec is: a recorder predicts from it which new
    launches its next merge would drop, and counts those in memory instead of writing the spec at once."""
    kept: dict[str, set[str]] = field(default_factory=dict)  # kernel id -> specializations kept
    launches: dict[str, int] = field(default_factory=dict)   # specialization -> distinct launches kept

    def add(self, record: LaunchRecord) -> None:
        spec = record.specialization()
        self.kept.setdefault(record.kernel_id(), set()).add(spec)
        self.launches[spec] = self.launches.get(spec, 0) + 1

    def drops(self, record: LaunchRecord, caps: Caps) -> bool:
        """Whether a launch not yet in the spec would be dropped."""
        spec = record.specialization()
        kept = self.kept.get(record.kernel_id(), set())
        if spec not in kept:
            return len(kept) >= caps.specializations
        return self.launches.get(spec, 0) >= caps.launches


def fill_of(records: list[LaunchRecord]) -> Fill:
    fill = Fill()
    for r in records:
        fill.add(r)
    return fill


def digest(specialization: str) -> str:
    return hashlib.sha256(specialization.encode()).hexdigest()[:16]


def merge_capped(old: list[LaunchRecord], dropped: list[Dropped], new: list[LaunchRecord],
                 caps: Caps) -> tuple[list[LaunchRecord], list[Dropped]]:
    """`new` merged into a spec's records `old` within `caps`; what does not fit is counted in `dropped`
    (records already in `old` are never removed, even beyond smaller caps of a later `--append`)."""
    records = merge(old)
    known = {r.key() for r in records}
    fill = fill_of(records)
    counts = {d.kernel_id(): Dropped(**{**d.__dict__, "specializations": list(d.specializations)}) for d in dropped}
    kept = []
    for r in new:
        if r.key() in known or not fill.drops(r, caps):
            if r.key() not in known:
                known.add(r.key())
                fill.add(r)
            kept.append(r)
            continue
        d = counts.setdefault(r.kernel_id(), Dropped(r.framework, r.kernel, r.file, r.qualname or r.kernel))
        spec = r.specialization()
        if spec in fill.kept.get(r.kernel_id(), set()):
            d.extra_launches += r.count
            continue
        if digest(spec) not in d.specializations:
            d.specializations.append(digest(spec))
        d.launches += r.count
    return merge(records + kept), list(counts.values())


__all__ = ["Caps", "Fill", "fill_of", "merge_capped", "DEFAULT_SPECIALIZATIONS", "DEFAULT_LAUNCHES"]
