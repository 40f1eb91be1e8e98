"""The `out=` replay of a one-launch, one-output plan (CachedPlan._one_launch_into): it refuses an
output that shares memory with an input, as the general path does, launches into the given output
and returns it; `out=` as a tuple / list takes the general path, with the same result."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

from tileport.ops import plan_cache  # noqa: E402
from tileport.runtime.abi import AliasingError  # noqa: E402


class Launch:
    def __init__(self):
        self.outs = []

    def run(self, groups, index):
        self.outs.append(groups[1][0])


def _plan(launch):
    spec = type("Spec", (), {"name": "relu"})()
    return plan_cache.CachedPlan(spec, torch.device("cpu"), None, False, [], [launch])


def test_an_out_replay_launches_into_the_given_output():
    launch = Launch()
    plan = _plan(launch)
    assert plan.run.__name__ == "run" and plan.run.__qualname__.endswith("_one_launch_into.<locals>.run")
    x, y = torch.empty(4, 64), torch.empty(4, 64)
    assert plan.run((x, 2.0), y) is y and launch.outs == [y]
    assert plan.run((x, 2.0), [y]) is y and plan.run((x, 2.0), (y,)) is y and launch.outs == [y] * 3


@pytest.mark.parametrize("where", ["same", "shifted", "overlapping_end"])
def test_an_out_replay_refuses_an_output_that_shares_an_inputs_memory(where):
    launch = Launch()
    plan = _plan(launch)
    base = torch.empty(8, 64)
    x = base[:4]
    plan.run((x,), torch.empty(4, 64))  # the plan's extents, from a separate output
    out = {"same": x, "shifted": base[1:5], "overlapping_end": base[3:7]}[where]
    for given in (out, (out,)):  # the closure and the general path
        with pytest.raises(AliasingError, match="relu: an output shares memory"):
            plan.run((x,), given)
    assert len(launch.outs) == 1


def test_an_output_next_to_an_input_or_empty_is_not_aliasing():
    launch = Launch()
    plan = _plan(launch)
    base = torch.empty(8, 64)
    plan.run((base[:4],), base[4:])  # adjacent, not overlapping
    empty_plan = _plan(launch)
    z = torch.empty(0, 64)
    empty_plan.run((z,), z)  # nothing to share
    assert len(launch.outs) == 2
