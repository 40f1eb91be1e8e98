"""GPU correctness of the reference corpus: every spec's plan, run with the `cutile` backend
(`ct.launch` on the current torch stream), for every dtype and correctness shape, against the
spec's PyTorch reference with the spec's tolerances.

Runs on a CUDA machine with torch and cuda-tile (+ a tileiras that supports the GPU, e.g. 13.4 for
sm_90). Skips, with the reason, everywhere else.
"""

from __future__ import annotations

import pytest

from tileport.ops.specs import all_specs

pytestmark = pytest.mark.gpu

SPECS = all_specs()
CASES = [(name, dt, shape) for name, spec in SPECS.items() for dt in spec.dtypes
         for shape in spec.shapes]


def _case_id(case):
    name, dt, shape = case
    return f"{name}-{dt}-{'x'.join(str(s) for s in shape)}"


@pytest.fixture(scope="module")
def cuda_torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed: the GPU corpus tests need torch with CUDA")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the GPU corpus tests need an NVIDIA GPU")
    try:
        import cuda.tile  # noqa: F401
    except ImportError:
        pytest.skip("cuda-tile is not installed")
    return torch


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_plan_cutile_matches_torch(cuda_torch, case):
    from tileport.ops.backends_cutile import run_plan_cutile

    torch = cuda_torch
    name, dt, shape = case
    spec = SPECS[name]
    inputs = spec.make_inputs(shape, dt, "cuda", 0)
    snapshot = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    outs = spec.allocate(*inputs)
    for o in _as_tuple(outs):  # poison the outputs: every element must be written
        o.fill_(float("nan"))
    launches = spec.plan(*inputs, outs)
    run_plan_cutile(spec, launches, torch.cuda.current_stream())
    torch.cuda.synchronize()

    refs = _as_tuple(spec.reference(*inputs))
    got = _as_tuple(outs)
    assert len(got) == len(refs), f"{name}: {len(got)} outputs, reference has {len(refs)}"
    tol = spec.tolerances[dt]
    for i, (g, r) in enumerate(zip(got, refs)):
        assert g.shape == r.shape and g.dtype == r.dtype, (
            f"output {i}: {tuple(g.shape)} {g.dtype} vs reference {tuple(r.shape)} {r.dtype}")
        torch.testing.assert_close(g.float(), r.float(), rtol=tol.rtol, atol=tol.atol,
                                   msg=lambda m: f"{name} {dt} {shape} output {i}: {m}")
    for before, after in zip(snapshot, inputs):
        if isinstance(before, torch.Tensor):
            assert torch.equal(before, after), f"{name}: an input was modified"
