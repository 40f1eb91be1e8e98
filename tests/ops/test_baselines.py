"""The PyTorch baselines (ops/baselines.py) compute what the specs compute: on CPU, every op, every
dtype, every CPU-sized test shape, within the op's own tolerance of its f32 reference."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the baseline checks need it (CI has none)")

from tileport.gpu.check import compare  # noqa: E402
from tileport.ops import op_names  # noqa: E402
from tileport.ops.baselines import (ATTENTION_HOST_LENGTHS, BASELINES, GRAPH_BREAKS, OWN_RANDOM_STREAM,  # noqa: E402
                                   TOPK_TIES, baseline)
from tileport.ops.specs import all_specs  # noqa: E402

SPECS = all_specs()
MAX_CPU_ELEMENTS = 1 << 18
# the attention ops (shapes with flags, a different cost) are checked in test_baselines_attention.py
CASES = [(name, dt, tuple(shape)) for name, spec in SPECS.items()
         if name not in ATTENTION_HOST_LENGTHS and name not in OWN_RANDOM_STREAM
         for dt in spec.dtypes for shape in spec.shapes if math.prod(shape) <= MAX_CPU_ELEMENTS]


def test_every_library_op_has_a_baseline():
    assert sorted(BASELINES) == op_names()
    for name, spec in SPECS.items():
        assert baseline(spec) is BASELINES[name]


def test_a_spec_that_is_not_the_librarys_runs_its_reference():
    import dataclasses
    changed = dataclasses.replace(SPECS["relu"], plan=SPECS["relu"].plan)
    assert baseline(changed) is changed.reference


@pytest.mark.parametrize("name,dtype,shape", CASES, ids=[f"{n}-{d}-{'x'.join(map(str, s))}" for n, d, s in CASES])
def test_baseline_matches_the_reference(name, dtype, shape):
    spec = SPECS[name]
    inputs = spec.make_inputs(shape, dtype, "cpu", 0)
    tol = spec.tolerances[dtype]
    got, want = BASELINES[name](*inputs), spec.reference(*inputs)
    if name in TOPK_TIES:  # the chosen experts' logits, not their ids, where logits tie
        logits = inputs[0].float()
        got, want = (got[0], logits.gather(1, got[1].long())), (want[0], logits.gather(1, want[1].long()))
    ok, max_abs, ratio, msg = compare(got, want, tol.rtol, tol.atol)
    assert ok, f"{name} {dtype} {shape}: {msg} (max |err| {max_abs:.3g}, err/tol {ratio:.2f})"


@pytest.mark.parametrize("name", sorted(OWN_RANDOM_STREAM))
def test_dropout_baselines_drop_about_p_and_scale_the_rest(name):
    """torch's dropout draws another mask than the op's: the baseline is checked for what dropout is (about
    p of the elements zero, the others x / (1 - p)), and the backward for reusing the forward's mask."""
    spec = SPECS[name]
    x, seed, offset, p = spec.make_inputs((512, 1024), "float32", "cpu", 0)
    y = BASELINES[name](x, seed, offset, p)
    kept = y != 0
    assert abs(1 - kept.float().mean().item() - p) < 0.01
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    if name == "dropout_bwd":
        assert torch.equal(BASELINES[name](x, seed, offset, p), y)


def test_graph_breaking_baselines_compile_to_their_eager_results():
    """The baselines bench compiles without fullgraph (GRAPH_BREAKS, attention aside) give what they give eagerly."""
    for name in sorted(GRAPH_BREAKS - ATTENTION_HOST_LENGTHS):
        spec = SPECS[name]
        inputs = spec.make_inputs(spec.shapes[1], "float32", "cpu", 0)
        torch._dynamo.reset()
        got = torch.compile(BASELINES[name], backend="eager", dynamic=False)(*inputs)
        want = BASELINES[name](*inputs)
        pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
        assert all(torch.equal(g, w) for g, w in pairs), name


def test_backward_baselines_make_the_forward_state_once_per_input(monkeypatch):
    """The state autograd's forward saved is made once per input, not in every timed call."""
    from tileport.ops import baselines as B
    made = []
    real = torch.log_softmax
    monkeypatch.setattr(torch, "log_softmax", lambda *a, **k: made.append(1) or real(*a, **k))
    spec = SPECS["cross_entropy_bwd"]
    inputs = spec.make_inputs((37, 1000), "float32", "cpu", 0)
    B._SAVED.clear()
    first = BASELINES["cross_entropy_bwd"](*inputs)
    assert torch.equal(BASELINES["cross_entropy_bwd"](*inputs), first) and len(made) == 1


def test_baselines_compute_in_the_input_dtype():
    """Not the f32 reference in disguise: the element-wise baselines keep f16 intermediates, so their
    f16 result differs from the reference's single rounding somewhere."""
    spec = SPECS["swiglu"]
    a, b = spec.make_inputs((256, 1024), "float16", "cpu", 0)
    assert not torch.equal(BASELINES["swiglu"](a, b), spec.reference(a, b))
    assert BASELINES["matmul"](a, b.t()).dtype == torch.float16


def test_every_baseline_traces_as_one_graph():
    """bench's `torch.compile` column compiles the baselines with fullgraph=True: dynamo must trace
    each without a graph break (checked with the eager backend; inductor runs on the GPU machine). The
    attention baselines break once, at their lengths (test_baselines_attention.py)."""
    failures = {}
    for name, spec in SPECS.items():
        if name in GRAPH_BREAKS or name in OWN_RANDOM_STREAM:
            continue
        inputs = spec.make_inputs(spec.shapes[1], spec.dtypes[0], "cpu", 0)
        torch._dynamo.reset()
        try:
            got = torch.compile(BASELINES[name], fullgraph=True, backend="eager", dynamic=False)(*inputs)
        except Exception as e:  # noqa: BLE001 - collected, reported below
            failures[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        want = BASELINES[name](*inputs)
        pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
        if not all(torch.equal(g, w) for g, w in pairs):
            failures[name] = "compiled result differs from eager"
    assert not failures, failures
