"""A cached plan whose one output has the layout of a plain tensor input allocates it with
torch.empty_like of that input (fewer arguments to parse than torch.empty_strided), and only where
empty_like gives exactly the recorded layout; an input of another tensor type takes empty_strided."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

from tileport.ops import plan_cache  # noqa: E402


def test_the_template_input_is_one_empty_like_turns_into_the_output_layout():
    out = torch.empty(4, 8)
    assert plan_cache._template_input((2.0, torch.empty(8), torch.empty(4, 8)), out) == 2
    assert plan_cache._template_input((torch.empty(4, 8, dtype=torch.float16),), out) is None  # another dtype
    assert plan_cache._template_input((torch.empty(8, 4).t(),), out) is None  # another layout
    gappy = torch.empty(8)[::2]  # not dense: empty_like makes it contiguous, not stride 2
    assert plan_cache._template_input((torch.empty(8)[::2],), gappy) is None
    transposed = torch.empty(8, 4).t()  # dense: empty_like keeps its strides
    assert plan_cache._template_input((torch.empty(8, 4).t(),), transposed) == 0


class Sub(torch.Tensor):
    pass


def test_a_replay_allocates_the_recorded_layout_through_the_template(monkeypatch):
    """On a plan with one launch (a stand-in): the output has the recorded layout, empty_like of the
    template is what allocates it, and a subclass input falls back to empty_strided (plain tensor)."""
    calls = []
    like = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda x: calls.append("like") or like(x))
    launched = []

    class Launch:
        def run(self, groups, index):
            launched.append(groups[1][0])
    x = torch.empty(8, 4).t()
    plan = plan_cache.CachedPlan(None, x.device, (plan_cache._layout(x),), False, [], [Launch()], like=0)
    y = plan.run((x,), None)
    assert calls == ["like"] and y.stride() == x.stride() and y.shape == x.shape and launched == [y]
    s = torch.empty(8, 4).t().as_subclass(Sub)
    z = plan.run((s,), None)
    assert calls == ["like"] and type(z) is torch.Tensor and z.stride() == x.stride()
    no_template = plan_cache.CachedPlan(None, x.device, (plan_cache._layout(x),), False, [], [Launch()])
    assert no_template.run((x,), None).stride() == x.stride() and calls == ["like"]
