"""The operator wrapper's routing (tileport.ops.<op>): only an op with a backward (api.AUTOGRAD_OPS)
looks at requires_grad, and runs as the torch custom op when an input requires grad in grad mode;
every other call goes to api.call_with, the cached call path."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

from tileport.ops import api, operators, torch_ops  # noqa: E402


@pytest.fixture
def routes(monkeypatch):
    """Where each op call went: ("api", op name) or ("torch_ops", op name)."""
    seen = []
    monkeypatch.setattr(api, "call_with", lambda spec, inputs, out, backend: seen.append(("api", spec.name)))
    for name in api.AUTOGRAD_OPS:
        monkeypatch.setattr(torch_ops, name, lambda *inputs, name=name: seen.append(("torch_ops", name)),
                            raising=False)
    return seen


def test_the_autograd_table_is_the_custom_ops_own():
    assert torch_ops.AUTOGRAD_OPS is api.AUTOGRAD_OPS and "fmha_fwd" in api.AUTOGRAD_OPS


def test_an_op_with_a_backward_runs_as_the_custom_op_when_an_input_requires_grad(routes):
    op = operators.get_op("fmha_fwd")
    q = torch.zeros(1, 1, 4, 64, requires_grad=True)
    op(q, q.detach(), q.detach(), None, False)
    op(q.detach(), q.detach(), q.detach(), None, False)
    with torch.no_grad():
        op(q, q.detach(), q.detach(), None, False)
    op(q, q.detach(), q.detach(), None, False, backend="cutile-rs")  # an explicit backend: the call path
    assert routes == [("torch_ops", "fmha_fwd"), ("api", "fmha_fwd"), ("api", "fmha_fwd"), ("api", "fmha_fwd")]


def test_an_op_without_a_backward_never_routes_on_requires_grad(routes, monkeypatch):
    monkeypatch.setattr(operators, "_needs_grad", lambda inputs: pytest.fail("looked at requires_grad"))
    op = operators.get_op("vector_add")
    a = torch.zeros(64, requires_grad=True)
    op(a, a.detach())
    assert routes == [("api", "vector_add")]
