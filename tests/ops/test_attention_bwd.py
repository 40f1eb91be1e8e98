"""The attention backward (kernels/attention_bwd.py, specs/fmha_bwd.py) and fmha_fwd's autograd.

CPU: the kernels translate (one entry per CAUSAL), the plan fits the captures, the autograd
reference agrees with the NumPy gradients of the interpreter corpus (torch needed), and
`loss.backward()` through `tileport.ops.fmha_fwd` reaches the fmha_bwd op (torch backend). GPU
(marker `gpu`): the same backward on the cutile and cutile-rs backends against the reference.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tileport.corpus import kernel_configs
from tileport.ops.spec import KERNELS_DIR
from tileport.ops.specs import fmha_bwd, get_spec
from tileport.translate import translate

SPEC = get_spec("fmha_bwd")


def test_backward_kernels_translate_one_entry_per_mask():
    path = str(KERNELS_DIR / "attention_bwd.py")
    report = translate([path], None, {path: kernel_configs({"fmha_bwd": SPEC})[path]})
    assert [str(r.diagnostic) for r in report.results if not r.ok] == []
    assert {r.kernel: len(r.entries) for r in report.results} == {
        "fmha_bwd_preprocess_kernel": 1, "fmha_bwd_dkdv_kernel": 2, "fmha_bwd_dq_kernel": 2}


def test_every_shape_has_a_captured_head_dim_and_a_ragged_edge():
    dims = {c.constants["HEAD_DIM"] for c in SPEC.captures if c.kernel == "fmha_bwd_dq_kernel"}
    for shape in list(SPEC.shapes) + list(SPEC.bench_shapes):
        assert shape[4] in dims and shape[1] % shape[2] == 0
    assert {s[5] for s in SPEC.shapes} == {0, 1}
    assert any(s[2] < s[1] for s in SPEC.shapes)  # GQA
    assert any(s[3] % 64 for s in SPEC.shapes if s[0] > 1)  # a length not a multiple of a tile


def test_backward_flops_are_two_and_a_half_forwards():
    from tileport.ops.specs import _attention as A

    assert SPEC.flops((1, 1, 1, 4, 64, 1)) == A.prefill_flops((1, 1, 1, 4, 64), causal=True) * 5 // 2


# ---- torch (absent in CI; present on the GPU machine) -----------------------------------------


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip("torch", reason="torch is not installed: reference checks need it")


@pytest.mark.parametrize("causal", [0, 1])
def test_autograd_reference_matches_numpy_gradients(torch_mod, causal):
    from eval.interp.corpus import _attention_grads

    inputs = SPEC.make_inputs((2, 4, 2, 77, 64, causal), "float16", "cpu", 0)
    got = SPEC.reference(*inputs)
    q, k, v, lens, _, _, _, do, dlse = inputs
    want = _attention_grads(*(x.double().numpy() for x in (q, k, v, do, dlse)), lens.tolist(),
                            bool(causal))[:3]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.double().numpy(), w, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("causal", [0, 1])
def test_reference_is_the_autograd_of_the_math_attention(torch_mod, causal):
    t = torch_mod
    q, k, v, lens, _, o, lse, do, dlse = SPEC.make_inputs((2, 4, 2, 50, 64, causal), "float32",
                                                          "cpu", 0)
    got = SPEC.reference(q, k, v, lens, bool(causal), o, lse, do, dlse)
    for b, n in enumerate(lens.tolist()):
        leaves = [x[b, :, :n].clone().requires_grad_() for x in (q, k, v)]
        kf, vf = (x.repeat_interleave(2, 0) for x in leaves[1:])
        s = leaves[0] @ kf.transpose(-1, -2) / 8.0
        if causal:
            s = s.masked_fill(t.ones((n, n), dtype=t.bool).triu(1), float("-inf"))
        t.autograd.backward([t.softmax(s, -1) @ vf, t.logsumexp(s, -1)],
                            [do[b, :, :n], dlse[b, :, :n]])
        for g, leaf in zip(got, leaves):
            t.testing.assert_close(g[b, :, :n], leaf.grad, rtol=1e-4, atol=1e-4)
            assert not g[b, :, n:].any()


def _grads_through_fmha_fwd(torch, shape, dtype, device, backend):
    """q, k, v grads of sum(o * do) + sum(lse * dlse) through tileport.ops.fmha_fwd."""
    import tileport.ops as ops

    q, k, v, lens, causal, _o, _lse, do, dlse = SPEC.make_inputs(shape, dtype, device, 0)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    with ops.use_backend(backend):
        o, lse = ops.fmha_fwd(*leaves, lens, causal)
        mask = torch.isfinite(lse)
        loss = (o.float() * do.float()).sum() + (torch.where(mask, lse, 0) * dlse).sum()
        loss.backward()
    return [x.grad for x in leaves], SPEC.reference(q, k, v, lens, causal, _o, _lse, do, dlse)


def test_fmha_fwd_backward_runs_the_fmha_bwd_op(torch_mod, monkeypatch):
    """loss.backward() through tileport.ops.fmha_fwd calls fmha_bwd (torch backend on CPU)."""
    from tileport.ops import api

    seen = []
    real_call = api.call
    monkeypatch.setattr(api, "call", lambda spec, *a, **kw: (seen.append(spec.name),
                                                             real_call(spec, *a, **kw))[1])
    got, want = _grads_through_fmha_fwd(torch_mod, (2, 4, 2, 33, 64, 1), "float16", "cpu",
                                        "torch")
    assert seen == ["fmha_fwd", "fmha_bwd"]
    for g, w in zip(got, want):
        assert g is not None and g.shape == w.shape
        np.testing.assert_allclose(g.double().numpy(), w.double().numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cutile", "cutile-rs"])
@pytest.mark.parametrize("shape", [(2, 8, 2, 200, 128, 1), (3, 4, 4, 77, 64, 0)])
def test_fmha_fwd_backward_on_tile_backends(torch_mod, backend, shape):
    from tileport.gpu.check import compare
    from tileport.ops.backends import unavailable_reason

    reason = unavailable_reason(backend)
    if reason is not None:
        required = os.environ.get("TILEPORT_GPU_REQUIRE", "")
        if backend in required.split(",") or required == "all":
            pytest.fail(f"backend {backend!r} is required but unavailable: {reason}")
        pytest.skip(f"backend {backend!r} is unavailable here: {reason}")
    for dt in SPEC.dtypes:
        got, want = _grads_through_fmha_fwd(torch_mod, shape, dt, "cuda", backend)
        tol = SPEC.tolerances[dt]
        for name, g, w in zip(("dq", "dk", "dv"), got, want):
            ok, max_abs, ratio, msg = compare(g, w, tol.rtol, tol.atol)
            assert ok, f"{backend} {dt} {shape} {name}: {msg} (max |err| {max_abs:.3g})"


def test_bwd_tiles_cover_the_head_dims():
    assert set(fmha_bwd.DKDV_TILES) == set(fmha_bwd.DQ_TILES) == {64, 128}
