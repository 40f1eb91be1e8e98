"""The side-by-side timers' bookkeeping on CPU: the alternating order of repetitions and the split of the
profiler's kernel events into each function's repetitions (the timers themselves run on the GPU only)."""

from __future__ import annotations

import pytest

from tileport.gpu.timing import TimingError, alternating_order, split_repetitions

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


def test_repetitions_alternate_forward_and_backward():
    assert alternating_order(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert alternating_order(["a"], 2) == ["a", "a"]
    order = alternating_order(["a", "b"], 7)
    assert order.count("a") == order.count("b") == 7


def test_each_function_gets_the_sum_of_its_own_kernels():
    order = alternating_order(["rs", "py"], 4)
    found = split_repetitions(_events(order, {"rs": [("k1", 2.0), ("k2", 1.0)], "py": [("k", 4.5)]}), FLUSH, order)
    assert found["rs"] == ([3.0] * 4, 2)
    assert found["py"] == ([4.5] * 4, 1)


def test_a_repetition_without_kernels_or_a_missing_one_fails():
    order = alternating_order(["rs", "py"], 2)
    with pytest.raises(TimingError, match="empty: 2"):
        split_repetitions(_events(order, {"rs": [("k", 1.0)], "py": []}), FLUSH, order)
    with pytest.raises(TimingError, match="expected 4 repetitions"):
        split_repetitions(_events(order[:3], {"rs": [("k", 1.0)], "py": [("k", 1.0)]}), FLUSH, order)
    with pytest.raises(TimingError):
        split_repetitions([], FLUSH, order)
