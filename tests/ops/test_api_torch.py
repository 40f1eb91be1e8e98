"""The operator API and its PyTorch integration on the CPU (needs torch, no GPU).

CI has no torch: every test here skips with that reason. With torch installed they check the
signatures derived from the specs, input / out= validation, DLPack inputs, and the torch.library
custom ops (schemas, fake kernels, opcheck, torch.compile fullgraph) using the `torch` backend.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch-side API tests need it (CI has none)")

import tileport.ops as ops  # noqa: E402
import tileport.ops.torch_ops  # noqa: E402,F401  (registers torch.ops.tileport.*)
from tileport.ops import BackendUnavailable, api  # noqa: E402
from tileport.ops.specs import all_specs  # noqa: E402

SPECS = all_specs()


@pytest.fixture(autouse=True)
def _torch_backend():
    saved = api._default[0]
    api._default[0] = "torch"
    yield
    api._default[0] = saved


def _small_shape(spec):
    return min(list(spec.shapes)[1:] or spec.shapes, key=lambda s: torch.Size(s).numel())


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


# ---------------------------------------------------------------------------------------------
# Signatures derived from the specs


def test_signatures_of_the_library():
    ln = ops.signature("layer_norm")
    assert [(i.name, i.kind, i.dtype) for i in ln.inputs] == [("x", "tensor", None), ("w", "tensor", None),
                                                                ("b", "tensor", None)]
    assert (ln.n_outputs, ln.multi_output) == (3, True)
    rope = ops.signature("rope")
    assert [(i.name, i.dtype) for i in rope.inputs] == [("x", None), ("cos", "float32"), ("sin", "float32")]
    assert (rope.n_outputs, rope.multi_output) == (1, False)
    for name in SPECS:
        assert ops.signature(name).inputs


def _synthetic_spec():
    """A spec with scalar inputs (none of the corpus ops has one yet)."""
    base = SPECS["relu"]

    def make_inputs(shape, dtype, device, seed=0):
        (x,) = base.make_inputs(shape, dtype, device, seed)
        return x, 0.5, 3, True

    def reference(x, alpha, k, flag):
        return x * alpha

    def allocate(x, alpha, k, flag):
        return torch.empty_like(x), torch.empty(x.shape[0], device=x.device)

    return dataclasses.replace(base, name="scaled", make_inputs=make_inputs, reference=reference,
                               allocate=allocate)


def test_signature_with_scalar_inputs_and_its_schema():
    from tileport.ops import torch_ops
    spec = _synthetic_spec()
    sig = ops.signature(spec)
    assert [(i.name, i.kind) for i in sig.inputs] == [("x", "tensor"), ("alpha", "float"), ("k", "int"),
                                                      ("flag", "bool")]
    assert torch_ops.schema_of(spec) == "(Tensor x, float alpha, SymInt k, bool flag) -> (Tensor, Tensor)"


def test_schemas_of_the_registered_ops():
    from tileport.ops import torch_ops
    assert torch_ops.schema_of("layer_norm") == "(Tensor x, Tensor w, Tensor b) -> (Tensor, Tensor, Tensor)"
    assert torch_ops.schema_of("rope") == "(Tensor x, Tensor cos, Tensor sin) -> Tensor"
    for name in SPECS:
        schema = str(getattr(torch.ops.tileport, name).default._schema)
        assert schema == f"tileport::{name}{torch_ops.schema_of(name)}"


# ---------------------------------------------------------------------------------------------
# Inputs and out=


def test_input_errors_are_typed():
    x = torch.randn(4, 8)
    with pytest.raises(TypeError, match="softmax supports float32, float16, bfloat16, got float64 for `x`"):
        ops.softmax(x.double())
    with pytest.raises(TypeError, match="got int32"):
        ops.relu(torch.ones(3, dtype=torch.int32))
    with pytest.raises(TypeError, match="inputs must share one dtype; `a` is float16, `b` is float32"):
        ops.vector_add(x.half(), x)
    with pytest.raises(TypeError, match=r"layer_norm\(\) takes 3 input\(s\) \(x, w, b\), got 1"):
        ops.layer_norm(x)
    with pytest.raises(TypeError, match="input `b` must be a tensor or a DLPack array, got float"):
        ops.vector_add(x, 1.0)
    x4 = torch.randn(1, 3, 2, 8)
    cos, sin = SPECS["rope"].make_inputs((1, 3, 2, 8), "float32", "cpu")[1:]
    with pytest.raises(TypeError, match="rope: input `cos` must be float32, got float16"):
        ops.rope(x4, cos.half(), sin)


def test_out_is_written_and_returned():
    x = torch.randn(4, 8)
    out = torch.empty(4, 8)
    assert ops.softmax(x, out=out) is out
    torch.testing.assert_close(out, torch.softmax(x, -1))
    spec = SPECS["layer_norm"]
    inputs = spec.make_inputs((5, 16), "float32", "cpu")
    outs = spec.allocate(*inputs)
    got = ops.layer_norm(*inputs, out=list(outs))
    assert isinstance(got, tuple) and all(g is o for g, o in zip(got, outs))
    for g, r in zip(got, spec.reference(*inputs)):
        torch.testing.assert_close(g, r)


def test_out_errors():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"softmax: out= must be \(4, 8\) torch.float32; got \(8, 4\) torch.float32"):
        ops.softmax(x, out=torch.empty(8, 4))
    with pytest.raises(ValueError, match="out= must be"):
        ops.softmax(x, out=torch.empty(4, 8, dtype=torch.float16))
    spec = SPECS["layer_norm"]
    inputs = spec.make_inputs((5, 16), "float32", "cpu")
    with pytest.raises(ValueError, match=r"out= must be \(5, 16\) torch.float32, \(5,\) torch.float32, \(5,\)"):
        ops.layer_norm(*inputs, out=torch.empty(5, 16))
    with pytest.raises(ValueError, match="out= must be on"):
        ops.softmax(x, out=torch.empty(4, 8, device="meta"))


@pytest.mark.parametrize("backend", ["cutile", "cutile-rs"])
def test_tile_backend_on_cpu_tensors_is_unavailable_with_the_reason(backend):
    with pytest.raises(BackendUnavailable, match=f"backend '{backend}' (is unavailable|runs on CUDA tensors)"):
        ops.softmax(torch.randn(4, 8), backend=backend)
    with ops.use_backend(backend), pytest.raises(BackendUnavailable):
        ops.torch.softmax(torch.randn(4, 8))  # the custom op follows the same rule


# ---------------------------------------------------------------------------------------------
# DLPack: any producer is viewed without a copy; results are torch tensors


class _Producer:
    """A DLPack producer that is not a torch tensor."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, *args, **kwargs):
        return self._t.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_dlpack_inputs_give_torch_results():
    a, b = torch.randn(100), torch.randn(100)
    got = ops.vector_add(_Producer(a), _Producer(b))
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, a + b)
    out = torch.empty(100)
    got = ops.vector_add(_Producer(a), _Producer(b), out=_Producer(out))
    assert isinstance(got, torch.Tensor) and got.data_ptr() == out.data_ptr()  # a view of the producer's memory
    torch.testing.assert_close(out, a + b)


def test_numpy_arrays_are_accepted():
    np = pytest.importorskip("numpy")
    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
    y = ops.relu(x)
    assert isinstance(y, torch.Tensor)
    np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))
    out = np.empty_like(x)
    ops.relu(x, out=out)
    np.testing.assert_array_equal(out, np.maximum(x, 0))


# ---------------------------------------------------------------------------------------------
# torch.library custom ops


def test_namespace_and_registration():
    from tileport.ops import torch_ops
    assert ops.torch is torch_ops
    assert torch_ops.register_all() == torch_ops.OPS  # idempotent
    for name in SPECS:
        assert getattr(ops.torch, name) is getattr(torch.ops.tileport, name)
    with pytest.raises(AttributeError, match="tileport.ops.torch has no operator 'nope'"):
        ops.torch.nope  # noqa: B018


def test_outputs_never_alias_inputs():
    from tileport.ops.torch_ops import _fresh
    x = torch.randn(4)
    y = _fresh(x, (x,))
    assert y is not x and y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    z = torch.randn(4)
    assert _fresh((z, x), (x,))[0] is z


@pytest.mark.parametrize("name", sorted(SPECS))
def test_opcheck(name):
    """Schema, fake kernel, autograd registration and AOT dispatch checks of torch.library."""
    spec = SPECS[name]
    dtype = "float32" if "float32" in spec.dtypes else spec.dtypes[0]  # the attention ops take f16/bf16 only
    inputs = spec.make_inputs(_small_shape(spec), dtype, "cpu", 0)
    utils = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    if any(isinstance(t, torch.Tensor) and t.dtype == torch.float8_e4m3fn for t in inputs):
        utils = utils[1:]  # the schema check compares inputs with an operator the CPU lacks for float8
    torch.library.opcheck(getattr(torch.ops.tileport, name).default, inputs, test_utils=utils)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_meta_tensors(name):
    spec = SPECS[name]
    shape = spec.shapes[-1]
    inputs = spec.make_inputs(shape, "bfloat16", "meta", 0)
    got = _tuple(getattr(torch.ops.tileport, name)(*inputs))
    want = _tuple(spec.allocate(*inputs))
    assert [(g.shape, g.dtype, g.device.type) for g in got] == [(w.shape, w.dtype, "meta") for w in want]


def _graph_ops(fn, *inputs, **compile_kw):
    torch._dynamo.reset()  # each test compiles afresh (the recompile limit counts per code object)
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    result = torch.compile(fn, backend=record, fullgraph=True, **compile_kw)(*inputs)
    targets = {str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"}
    return result, targets


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "rope", "matmul", "swiglu"])
def test_compile_fullgraph_keeps_the_custom_op(name):
    spec = SPECS[name]
    inputs = spec.make_inputs(_small_shape(spec), "float32", "cpu", 0)
    for fn in (getattr(ops.torch, name), getattr(ops, name)):  # both spellings trace to the custom op
        got, targets = _graph_ops(lambda *xs: fn(*xs), *inputs)
        assert f"tileport.{name}.default" in targets or f"tileport.{name}" in targets, targets
        for g, r in zip(_tuple(got), _tuple(spec.reference(*inputs))):
            torch.testing.assert_close(g, r)


def test_compile_with_dynamic_shapes_and_multi_outputs():
    spec = SPECS["layer_norm"]

    def f(x, w, b):
        y, mean, rstd = ops.layer_norm(x, w, b)
        return y * 2, mean + rstd

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=True)
    for shape in ((3, 17), (37, 100)):
        inputs = spec.make_inputs(shape, "float32", "cpu", 1)
        y, m = compiled(*inputs)
        ry, rmean, rrstd = spec.reference(*inputs)
        torch.testing.assert_close(y, ry * 2)
        torch.testing.assert_close(m, rmean + rrstd)


def test_compiled_graph_reads_the_backend_when_it_runs():
    compiled = torch.compile(lambda x: ops.torch.relu(x), fullgraph=True, backend="aot_eager")
    x = torch.randn(16)
    torch.testing.assert_close(compiled(x), torch.relu(x))
    with ops.use_backend("cutile"), pytest.raises(BackendUnavailable):
        compiled(x)  # same graph, now on a tile backend: CPU tensors are refused, never a fallback


def test_inductor_on_cpu():
    spec = SPECS["softmax"]
    (x,) = spec.make_inputs((37, 100), "float32", "cpu", 0)
    try:
        compiled = torch.compile(lambda x: ops.softmax(x) * 3, fullgraph=True)
        got = compiled(x)
    except Exception as e:  # noqa: BLE001 - inductor needs a working C++ compiler on the CPU
        if "C++ compiler" in str(e) or "InvalidCxxCompiler" in type(e).__name__:
            pytest.skip(f"inductor cannot compile for the CPU here: {e}")
        raise
    torch.testing.assert_close(got, spec.reference(x) * 3)


# ---------------------------------------------------------------------------------------------
# The GPU checker's logic, on the CPU with the torch backend


def test_run_case_passes_a_correct_op():
    from tileport.gpu.check import run_case
    for name in ("layer_norm", "rope", "softmax"):
        spec = SPECS[name]
        rec = run_case(spec, "torch", "bfloat16", _small_shape(spec), device="cpu")
        assert rec["ok"], rec
        assert rec["rtol"] == spec.tolerances["bfloat16"].rtol


def test_run_case_catches_unwritten_outputs_modified_inputs_and_wrong_values(monkeypatch):
    from tileport.gpu import check
    spec = SPECS["relu"]

    def half_written(spec, *inputs, out=None, backend=None):
        out[: out.shape[0] // 2] = torch.relu(inputs[0][: out.shape[0] // 2])
        return out
    monkeypatch.setattr("tileport.ops.api.call", half_written)
    rec = check.run_case(spec, "torch", "float32", (7, 33), device="cpu")
    assert not rec["ok"] and "NaN" in rec["error"]

    def clobbers_input(spec, *inputs, out=None, backend=None):
        out.copy_(torch.relu(inputs[0]))
        inputs[0].zero_()
        return out
    monkeypatch.setattr("tileport.ops.api.call", clobbers_input)
    rec = check.run_case(spec, "torch", "float32", (7, 33), device="cpu")
    assert not rec["ok"] and "modified" in rec["error"]

    def off_by_a_bit(spec, *inputs, out=None, backend=None):
        out.copy_(torch.relu(inputs[0]) + 1e-3)
        return out
    monkeypatch.setattr("tileport.ops.api.call", off_by_a_bit)
    rec = check.run_case(spec, "torch", "float32", (7, 33), device="cpu")
    assert not rec["ok"] and "exceeds atol" in rec["error"]

    def fresh_outputs(spec, *inputs, out=None, backend=None):
        return torch.relu(inputs[0])
    monkeypatch.setattr("tileport.ops.api.call", fresh_outputs)
    rec = check.run_case(spec, "torch", "float32", (7, 33), device="cpu")
    assert not rec["ok"]  # out= left NaN, and the result is not the out= tensor
