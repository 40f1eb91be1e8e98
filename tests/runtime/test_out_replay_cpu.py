"""A cached plan's `out=` replay checks aliasing from per-plan extents (regression: the replay
recomputed every tensor's memory span, a Python sum over its shape, for every pair of tensors on
every call, which made `op(..., out=y)` slower than `op(...)`). No torch: tensors are stand-ins."""

from __future__ import annotations

import time

import pytest

from tileport.ops import plan_cache
from tileport.runtime.abi import AliasingError


class FakeTensor:
    """What the replay reads of a tensor: data pointer, shape, strides, element size."""

    def __init__(self, ptr: int, shape: tuple, stride: tuple | None = None, itemsize: int = 4):
        self.ptr, self.shape, self.itemsize = ptr, shape, itemsize
        self._stride = stride or tuple(_contiguous(shape))

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple:
        return self._stride

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self) -> int:
        return self.itemsize


def _contiguous(shape):
    acc, out = 1, []
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return reversed(out)


def _plan(n_outputs: int = 1) -> plan_cache.CachedPlan:
    plan = object.__new__(plan_cache.CachedPlan)  # a plan with no launches: only the out= check runs
    plan.spec = type("Spec", (), {"name": "vector_add"})()
    plan.device_index, plan.out_layouts, plan.multi_output = 0, None, n_outputs > 1
    plan.temps, plan.launches, plan._extents = [], [], None
    plan._empty, plan.device = None, None
    return plan


BASE = 0x7F00_0000_0000


def test_out_replay_computes_spans_once_per_plan(monkeypatch):
    plan = _plan()
    calls = []
    real = plan_cache._span
    monkeypatch.setattr(plan_cache, "_span", lambda t: calls.append(t) or real(t))
    for k in range(5):
        a, b = FakeTensor(BASE + k * 65536, (1024,)), FakeTensor(BASE + k * 65536 + 8192, (1024,))
        out = FakeTensor(BASE + k * 65536 + 16384, (1024,))
        assert plan.run((a, b), out) is out
    assert len(calls) == 3  # the first replay: one span per tensor; later replays: none


@pytest.mark.parametrize("out_offset, aliased", [(0, True), (4092, True), (4096, False), (-4092, True), (-4096, False)])
def test_out_replay_still_refuses_aliasing(out_offset, aliased):
    plan = _plan()
    plan.run((FakeTensor(BASE, (1024,)), 2.0), FakeTensor(BASE + (1 << 20), (1024,)))  # extents recorded
    a, out = FakeTensor(BASE, (1024,)), FakeTensor(BASE + out_offset, (1024,))
    if aliased:
        with pytest.raises(AliasingError, match="shares memory"):
            plan.run((a, 2.0), out)
    else:
        assert plan.run((a, 2.0), out) is out


def test_two_outputs_that_overlap_are_refused_and_empty_ones_never_alias():
    plan = _plan(n_outputs=2)
    x = FakeTensor(BASE, (4, 8))
    assert plan.run((x,), (FakeTensor(BASE + 4096, (4, 8)), FakeTensor(BASE + 8192, (4, 8)))) is not None
    with pytest.raises(AliasingError):
        plan.run((x,), (FakeTensor(BASE + 4096, (4, 8)), FakeTensor(BASE + 4096 + 64, (4, 8))))
    empty = _plan(n_outputs=2)
    assert empty.run((FakeTensor(BASE, (0, 8)),), (FakeTensor(BASE, (0, 8)), FakeTensor(BASE, (0, 8)))) is not None


def test_out_replay_check_costs_microseconds():
    """Host µs of the out= check on a replay (printed; bounded loosely, this machine is shared)."""
    plan = _plan()
    a, b, out = FakeTensor(BASE, (64, 1024)), FakeTensor(BASE + (1 << 20), (64, 1024)), FakeTensor(BASE + (2 << 20), (64, 1024))
    inputs = (a, b)
    plan.run(inputs, out)
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        plan.run(inputs, out)
    us = (time.perf_counter() - t0) / n * 1e6
    print(f"out= replay check: {us:.2f} us per call")
    assert us < 50
