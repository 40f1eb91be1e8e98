"""The operator wrapper's cached path (tileport.ops.<op>): a call whose key has a cached plan runs
that plan straight from the wrapper, on the backend the call names or the current one, with its
out= in the key; a call without one goes to api.call_with exactly as given."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

from tileport.ops import api, operators, plan_cache  # noqa: E402


class RecordingPlan:
    """A cached plan that records its runs and returns a marker."""

    def __init__(self):
        self.runs = []

    def run(self, inputs, out):
        self.runs.append((inputs, out))
        return "ran"


@pytest.fixture
def op(monkeypatch):
    """vector_add's wrapper with an empty plan cache, "torch" as the default backend and
    api.call_with recording the calls that reach it."""
    plan_cache.clear()
    saved = api._default[0]
    api._default[0] = "torch"
    reached = []
    monkeypatch.setattr(api, "call_with", lambda spec, inputs, out, backend: reached.append((inputs, out, backend))
                        or "call_with")
    fn = operators.get_op("vector_add")
    fn.reached = reached
    yield fn
    api._default[0] = saved
    plan_cache.clear()


def _store(backend, inputs, out=None):
    plan = RecordingPlan()
    plan_cache.store(plan_cache.call_key(api.library_spec("vector_add"), backend, inputs, out), plan)
    return plan


def test_a_cached_call_runs_its_plan_without_call_with(op):
    a, b, o = torch.zeros(8), torch.ones(8), torch.empty(8)
    default, named, into = _store("torch", (a, b)), _store("cutile", (a, b)), _store("cutile", (a, b), o)
    assert op(a, b) == "ran" and default.runs == [((a, b), None)]  # the current backend's plan
    assert op(a, b, backend="cutile") == "ran" and named.runs == [((a, b), None)]
    assert op(a, b, out=o, backend="cutile") == "ran" and into.runs == [((a, b), o)]
    with api.use_backend("cutile"):
        assert op(a, b) == "ran" and len(named.runs) == 2
    assert op.reached == []


def test_a_call_without_a_cached_plan_goes_to_call_with_as_given(op):
    a, b, o = torch.zeros(8), torch.ones(8), torch.empty(8)
    other = _store("torch", (a, b))
    c = torch.zeros(4)  # another shape: another key
    assert op(c, c) == "call_with"
    assert op(a, b, backend="cutile") == "call_with"  # another backend: another key
    assert op(a, b, out=o) == "call_with"  # out= is in the key
    assert op.reached == [((c, c), None, None), ((a, b), None, "cutile"), ((a, b), o, None)]
    assert other.runs == []
