"""Exhaustive sweeps and the fixed sample of them that every test run covers.

A sweep over every corpus capture, kernel or architecture is parametrized through `sweep`: the cases in
its sample run in every test run; the others carry the `slow` marker and run with `pytest --slow`
(without it they are deselected, and pytest's summary counts them as deselected, never as passed).
The sample is a rule over the cases (e.g. the first capture of each kernel), so it is the same on
every machine and grows with the corpus.
"""

from __future__ import annotations

from typing import Callable, Iterable

import pytest

SLOW = pytest.mark.slow


def sweep(params: Iterable, in_sample: Callable[[object], bool]) -> list:
    """`params` (pytest.param objects) with the `slow` marker on every case outside the sample."""
    return [p if in_sample(p) else pytest.param(*p.values, marks=[*p.marks, SLOW], id=p.id) for p in params]


def first_of_each(key: Callable[[object], object]) -> Callable[[object], bool]:
    """A sample rule: the first case of each group (`key(param)` names the group)."""
    seen: set = set()

    def in_sample(param) -> bool:
        group = key(param)
        if group in seen:
            return False
        seen.add(group)
        return True

    return in_sample
