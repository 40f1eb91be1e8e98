"""The side-by-side timers' bookkeeping on CPU: the alternating order of repetitions and the split of the
profiler's kernel events into each function's repetitions (the timers themselves run on the GPU only)."""

from __future__ import annotations

import pytest

from tileport.gpu.timing import TimingError, balanced_order, split_repetitions

FLUSH = "flush_kernel"


def _events(order, kernels):
    """Profiler events for `order`: a flush, then the kernels (name, µs) of that function's repetition."""
    events, t = [], 0
    for name in order:
        events.append((FLUSH, t, 5_000))
        t += 10_000
        for kernel, us in kernels[name]:
            events.append((kernel, t, int(us * 1000)))
            t += 10_000
    return events


def test_repetitions_follow_every_function_equally_often():
    assert balanced_order(["a", "b", "c"], 3) == ["a", "a", "b", "a", "c", "b", "b", "c", "c"]
    assert balanced_order(["a"], 2) == ["a", "a"]
    assert balanced_order(["a", "b"], 4) == ["a", "a", "b", "b"] * 2  # two: the order A B B A .. up to phase
    for n in range(1, 7):
        names = [f"f{i}" for i in range(n)]
        for reps in (1, n, 3 * n + 1, 500):
            order = balanced_order(names, reps)
            counts = {name: order.count(name) for name in names}
            assert len(set(counts.values())) == 1 and reps <= counts[names[0]] < reps + n
            cycle = order[:n * n]
            pairs = [(cycle[i - 1], cycle[i]) for i in range(len(cycle))]  # cyclic: the cycle repeats
            assert sorted(pairs) == sorted((a, b) for a in names for b in names)
    # in the order it replaced (A B C C B A ..), only B was ever timed right after C
    after_c = balanced_order(["a", "b", "c"], 6)
    assert {after_c[i] for i in range(1, len(after_c)) if after_c[i - 1] == "c"} == {"a", "b", "c"}


def test_each_function_gets_the_sum_of_its_own_kernels():
    order = balanced_order(["rs", "py"], 4)
    found = split_repetitions(_events(order, {"rs": [("k1", 2.0), ("k2", 1.0)], "py": [("k", 4.5)]}), FLUSH, order)
    assert found["rs"] == ([3.0] * 4, 2)
    assert found["py"] == ([4.5] * 4, 1)


def test_a_repetition_without_kernels_or_a_missing_one_fails():
    order = balanced_order(["rs", "py"], 2)
    with pytest.raises(TimingError, match="empty: 2"):
        split_repetitions(_events(order, {"rs": [("k", 1.0)], "py": []}), FLUSH, order)
    with pytest.raises(TimingError, match="expected 4 repetitions"):
        split_repetitions(_events(order[:3], {"rs": [("k", 1.0)], "py": [("k", 1.0)]}), FLUSH, order)
    with pytest.raises(TimingError):
        split_repetitions([], FLUSH, order)
