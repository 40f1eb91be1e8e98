"""The cached call path (ops/plan_cache.py) on CPU: call keys, replayed plans equal fresh plans for
every op, the cases that must not be cached, validation once per key, the prepared C-ABI launch."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the plan-cache tests need it (CI has none)")

import tileport.ops as ops  # noqa: E402
from tileport.ops import api, plan_cache  # noqa: E402
from tileport.ops.plan_cache import INPUT, OUTPUT, TEMP, ArrayRef, NotCacheable, call_key, resolve, trace  # noqa: E402
from tileport.ops.spec import Launch  # noqa: E402
from tileport.ops.specs import all_specs  # noqa: E402

SPECS = all_specs()
MAX_CPU_ELEMENTS = 1 << 20


@pytest.fixture(autouse=True)
def _torch_backend():
    saved = api._default[0]
    api._default[0] = "torch"
    plan_cache.clear()
    yield
    api._default[0] = saved
    plan_cache.clear()


# ---------------------------------------------------------------------------------------------
# Call keys


def test_call_key_tells_apart_everything_a_plan_depends_on():
    spec = SPECS["softmax"]
    x = torch.randn(4, 8)
    base = call_key(spec, "cutile-rs", (x,), None)
    assert base == call_key(spec, "cutile-rs", (torch.randn(4, 8),), None)  # new memory, same layout
    others = [call_key(spec, "cutile", (x,), None),
              call_key(spec, "cutile-rs", (x.half(),), None),
              call_key(spec, "cutile-rs", (torch.randn(8, 4),), None),
              call_key(spec, "cutile-rs", (torch.randn(8, 4).t(),), None),  # same shape, other strides
              call_key(spec, "cutile-rs", (torch.empty(4, 8, device="meta"),), None),
              call_key(spec, "cutile-rs", (x,), torch.empty(4, 8)),
              call_key(SPECS["softmax_tma"], "cutile-rs", (x,), None)]
    assert len({base, *others}) == 1 + len(others)
    # scalars by type and value (1 == 1.0 == True in Python)
    keys = {call_key(spec, "torch", (x, v), None) for v in (1, 1.0, True, 2)}
    assert len(keys) == 4


def test_call_key_is_none_for_non_tensor_arrays():
    class Producer:
        def __dlpack__(self):
            raise AssertionError("not called")
    assert call_key(SPECS["relu"], "torch", (Producer(),), None) is None


# ---------------------------------------------------------------------------------------------
# Replay == fresh plan, for every op, dtype and CPU-sized shape


def _cases():
    for name, spec in SPECS.items():
        for shape in spec.shapes:
            if math.prod(shape) <= MAX_CPU_ELEMENTS:
                for dt in ("float32", "bfloat16"):
                    if dt in spec.dtypes:  # the attention ops take f16 / bf16 only
                        yield name, dt, tuple(shape)


CASES = list(_cases())


@pytest.mark.parametrize("name,dtype,shape", CASES, ids=[f"{n}-{d}-{'x'.join(map(str, s))}" for n, d, s in CASES])
def test_replayed_plan_equals_the_fresh_plan(name, dtype, shape):
    """The plan traced on one call, resolved on the tensors of another call with the same key, gives
    exactly the launches the spec plans for that call (pointers, layouts, constants, grids)."""
    spec = SPECS[name]
    inputs1 = spec.make_inputs(shape, dtype, "cpu", 0)
    outs1 = plan_cache.as_tuple(spec.allocate(*inputs1))
    recorded, temps = trace(inputs1, outs1, spec.plan(*inputs1, _one(outs1)))
    # other tensors, the same scalars (a scalar is part of the key: dropout's inputs of another seed differ in it)
    inputs2 = tuple(x if not isinstance(x, torch.Tensor) else y
                    for x, y in zip(inputs1, spec.make_inputs(shape, dtype, "cpu", 1)))
    outs2 = plan_cache.as_tuple(spec.allocate(*inputs2))
    assert call_key(spec, "cutile-rs", inputs1, None) == call_key(spec, "cutile-rs", inputs2, None)
    fresh = spec.plan(*inputs2, _one(outs2))
    temps2 = tuple(torch.empty_strided(s, st, dtype=d) for s, st, d in temps)
    assert [r.kernel for r in recorded] == [f.kernel for f in fresh]
    for rec, launch in zip(recorded, fresh):
        assert rec.grid == tuple(launch.grid)
        got = resolve(rec, (inputs2, outs2, temps2))
        assert set(got) == set(launch.args)
        for param, value in launch.args.items():
            if isinstance(value, torch.Tensor):
                ptr, layout = got[param]
                assert layout == (tuple(value.shape), tuple(value.stride()), value.dtype), param
                if rec.args[param].group != TEMP:  # the plan's own buffers are allocated per call
                    assert ptr == value.data_ptr(), param
            else:
                assert got[param] == value and type(got[param]) is type(value), param


def _one(outs: tuple):
    return outs if len(outs) > 1 else outs[0]


def test_split_k_workspace_is_a_temporary_written_then_read():
    spec = SPECS["matmul_splitk"]
    a, b = spec.make_inputs((17, 33, 1000), "float32", "cpu")
    c = spec.allocate(a, b)
    recorded, temps = trace((a, b), (c,), spec.plan(a, b, c))
    assert len(temps) == 1 and temps[0][2] == torch.float32
    ws_refs = [r.args["ws"] for r in recorded]
    assert all(isinstance(w, ArrayRef) and (w.group, w.index) == (TEMP, 0) for w in ws_refs)
    assert recorded[1].args["c"] == ArrayRef(OUTPUT, 0, 0, (tuple(c.shape), tuple(c.stride()), c.dtype), True)


def test_views_are_traced_with_their_offset():
    x = torch.randn(6, 8)
    y = torch.empty(3, 8)
    launch = Launch("relu_kernel", (1, 1, 1), {"x": x[3:].reshape(-1), "y": y.view(-1), "TILE": 32})
    (rec,), _ = trace((x,), (y,), [launch])
    assert rec.args["x"] == ArrayRef(INPUT, 0, 3 * 8 * 4, ((24,), (1,), torch.float32), False)
    assert rec.args["y"].whole is False and rec.args["y"].offset == 0


def test_overlapping_inputs_are_not_cached():
    a = torch.randn(64)
    spec = SPECS["vector_add"]
    c = spec.allocate(a, a)
    with pytest.raises(NotCacheable, match="several inputs/outputs"):
        trace((a, a), (c,), spec.plan(a, a, c))
    with pytest.raises(NotCacheable, match="several inputs/outputs"):  # out= aliasing an input
        trace((a, torch.randn(64)), (a,), spec.plan(a, torch.randn(64), a))


def test_a_plan_buffer_read_before_written_is_not_cached():
    """A buffer the plan made that a kernel reads first holds data (e.g. a copy of an input): the
    replay would pass uninitialized memory, so such a plan is never cached."""
    x = torch.randn(64)
    y = torch.empty(64)
    copy = x.clone()
    with pytest.raises(NotCacheable, match="read before a kernel writes it"):
        trace((x,), (y,), [Launch("relu_kernel", (1, 1, 1), {"x": copy, "y": y, "TILE": 64})])


def test_a_temporary_read_whole_under_another_shape_is_a_view_of_it():
    """Split-KV partials: the partial kernel writes [B, Hkv, G, splits, D], the combine kernel reads the same
    buffer as [B, Hq, splits, D]; the replay passes a view of the one temporary (a decode plan was never
    cached before). A part of a temporary under another shape is still refused."""
    x, y = torch.randn(64), torch.empty(64)
    ws = torch.empty(4, 16)
    launches = [Launch("relu_kernel", (1, 1, 1), {"x": x, "y": ws, "TILE": 64}),
                Launch("relu_kernel", (1, 1, 1), {"x": ws.view(64), "y": y, "TILE": 64})]
    recorded, temps = trace((x,), (y,), launches)
    assert temps == [((4, 16), (16, 1), torch.float32)]
    assert recorded[1].args["x"] == ArrayRef(TEMP, 0, 0, ((64,), (1,), torch.float32), False)
    launches[1] = Launch("relu_kernel", (1, 1, 1), {"x": ws.view(64)[:32], "y": y, "TILE": 64})
    with pytest.raises(NotCacheable, match="two layouts"):
        trace((x,), (y,), launches)


# ---------------------------------------------------------------------------------------------
# Through the API (torch backend on CPU): checked once per key, bad inputs always raise


def test_a_repeated_call_skips_the_full_check(monkeypatch):
    x = torch.randn(4, 8)
    ops.softmax(x)
    n = plan_cache.size()
    assert n >= 1
    calls = []
    monkeypatch.setattr(api, "_check_inputs", lambda *a: calls.append(a))
    ops.softmax(torch.randn(4, 8))  # same key: no check
    assert calls == [] and plan_cache.size() == n
    ops.softmax(torch.randn(5, 8))  # new key: checked
    assert len(calls) == 1 and plan_cache.size() == n + 1


def test_bad_inputs_raise_every_time_and_are_never_cached():
    x = torch.randn(4, 8)
    ops.softmax(x)
    for _ in range(2):
        with pytest.raises(TypeError, match="softmax supports float32, float16, bfloat16, got float64"):
            ops.softmax(x.double())
        with pytest.raises(ValueError, match="out= must be on"):
            ops.softmax(x, out=torch.empty(4, 8, device="meta"))
    assert all(k[1] == "torch" for k in plan_cache._PLANS)


def test_meta_and_cpu_out_do_not_share_a_plan():
    """Regression: keys by device index alone made a meta out= replay a CPU call's plan."""
    x = torch.randn(4, 8)
    ops.softmax(x, out=torch.empty(4, 8))
    with pytest.raises(ValueError, match="out= must be on"):
        ops.softmax(x, out=torch.empty(4, 8, device="meta"))


def test_torch_backend_runs_the_baseline_in_the_input_dtype(monkeypatch):
    from tileport.ops import baselines
    seen = []
    monkeypatch.setitem(baselines.BASELINES, "relu", lambda x: seen.append(x.dtype) or torch.relu(x))
    x = torch.randn(16, dtype=torch.bfloat16)
    torch.testing.assert_close(ops.relu(x), torch.relu(x), rtol=0, atol=0)
    assert seen == [torch.bfloat16]


# ---------------------------------------------------------------------------------------------
# The prepared C-ABI launch (library.PreparedLaunch)


def test_prepared_launch_marshals_once_and_returns_typed_errors(library):
    """A prepared vector_add launch on null data pointers: the launcher refuses them (typed error,
    not a crash), and a thread's copy has descriptors of its own."""
    from tileport.runtime.abi import DTYPE_CODES, FFIError, TensorDesc
    entry = library["vector_add_kernel"]
    x = torch.randn(64)
    desc = TensorDesc(ptr=0, ndim=1, dtype=DTYPE_CODES["f32"])
    desc.shape[0], desc.strides[0] = 64, 1
    prepared = entry.prepare((1, 1, 1), 0, {"a": desc, "b": desc, "c": desc}, {"TILE": 64})
    with pytest.raises(FFIError):
        prepared([0, 0, 0], 0)
    twin = prepared.copy()
    prepared.descs[0].ptr = x.data_ptr()
    assert twin.descs[0].ptr == 0 and twin.descs[0].shape[0] == 64
    with pytest.raises(TypeError, match="missing TILE"):
        entry.prepare((1, 1, 1), 0, {"a": desc, "b": desc, "c": desc}, {})


@pytest.mark.parametrize("name,shape", [("matmul_splitk", (17, 33, 1000)), ("rope", (2, 7, 3, 80)),
                                        ("layer_norm", (37, 1000))])
def test_cutile_rs_replay_passes_the_new_tensors_pointers(monkeypatch, library, name, shape):
    """A cutile-rs plan recorded on one call and replayed on another (CPU tensors, the C symbol
    replaced by a recorder): every launch gets the new call's addresses, fresh outputs and
    workspaces, the current stream, and the recorded layouts and constants."""
    _cpu_rust_stand_ins(monkeypatch, library)
    spec = SPECS[name]
    inputs1 = spec.make_inputs(shape, "float32", "cpu", 0)
    outs1 = plan_cache.as_tuple(spec.allocate(*inputs1))
    plan = plan_cache.record(spec, "cutile-rs", inputs1, outs1, spec.plan(*inputs1, _one(outs1)),
                             allocated=True, multi_output=len(outs1) > 1)
    inputs2 = spec.make_inputs(shape, "float32", "cpu", 1)
    seen = []
    for launch in plan.launches:  # snapshot the descriptors at call time
        prepared = launch._prepared
        monkeypatch.setattr(launch, "_raw",
                            lambda *args, p=prepared: seen.append(([(d.ptr, d.ndim, tuple(d.shape[:d.ndim]),
                                                                     tuple(d.strides[:d.ndim])) for d in p.descs],
                                                                   p.stream.value, args)) or 0)
    outs2 = plan_cache.as_tuple(plan.run(inputs2, None))
    assert all(o.data_ptr() != p.data_ptr() for o, p in zip(outs2, outs1))  # fresh outputs
    fresh = spec.plan(*inputs2, _one(outs2))
    assert len(seen) == len(fresh)
    for (descs, stream, args), launch in zip(seen, fresh):
        assert stream == 777
        arrays = [launch.args[p.name] for p in library[launch.kernel].params if p.kind == "array"]
        for (ptr, ndim, dshape, dstrides), t in zip(descs, arrays):
            assert (ndim, dshape, dstrides) == (t.dim(), tuple(t.shape), tuple(t.stride()))
            if not (name == "matmul_splitk" and t.dtype == torch.float32 and t.dim() == 3):  # workspace: new buffer
                assert ptr == t.data_ptr()
        grid = [a.value for a in args[-5:-2]]
        assert tuple(grid) == tuple(launch.grid)
    if name == "matmul_splitk":  # one workspace: written by the first launch, read by the second
        assert seen[0][0][2][0] == seen[1][0][0][0] and seen[0][0][2][0] not in {t.data_ptr() for t in inputs2}


@pytest.mark.parametrize("name,shape", [("matmul_splitk", (17, 33, 1000)), ("silu_and_mul", (7, 100))])
def test_cutile_replay_rebuilds_the_launch_arguments(monkeypatch, name, shape):
    """The cutile backend's replay: ct.launch gets the kernel, the grid and positional arguments equal
    (same memory, same layout) to the ones the spec plans for the new call (ct.launch recorded)."""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from tileport.ops.backends_cutile import _kernel, positional_args
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: "stream")
    spec = SPECS[name]
    inputs1 = spec.make_inputs(shape, "float32", "cpu", 0)
    outs1 = plan_cache.as_tuple(spec.allocate(*inputs1))
    plan = plan_cache.record(spec, "cutile", inputs1, outs1, spec.plan(*inputs1, _one(outs1)),
                             allocated=False, multi_output=len(outs1) > 1)
    seen = []
    for launch in plan.launches:
        launch.launch = lambda stream, grid, kernel, args: seen.append((stream, grid, kernel, args))
    inputs2 = spec.make_inputs(shape, "float32", "cpu", 1)
    outs2 = plan_cache.as_tuple(spec.allocate(*inputs2))
    plan.run(inputs2, _one(outs2))
    fresh = spec.plan(*inputs2, _one(outs2))
    assert len(seen) == len(fresh)
    for (stream, grid, kernel, args), launch in zip(seen, fresh):
        k, params = _kernel(spec.kernel_path, launch.kernel)
        assert stream == "stream" and kernel is k and grid == tuple(launch.grid)
        for got, want in zip(args, positional_args(params, launch)):
            if isinstance(want, torch.Tensor):
                assert (tuple(got.shape), tuple(got.stride()), got.dtype) == (tuple(want.shape), tuple(want.stride()),
                                                                             want.dtype)
                if not (name == "matmul_splitk" and want.dim() == 3):  # the workspace is allocated per call
                    assert got.data_ptr() == want.data_ptr()
            else:
                assert got == want


def _cpu_rust_stand_ins(monkeypatch, library):
    """Let cutile-rs plans be recorded from CPU tensors: descriptors of CPU memory, the library
    fixture, a fixed stream handle (777)."""
    from types import SimpleNamespace

    from tileport.ops import backends
    from tileport.runtime import tensors
    from tileport.runtime.abi import DTYPE_CODES, TensorDesc

    def describe(t, name):
        d = TensorDesc(ptr=t.data_ptr(), ndim=t.dim(), dtype=DTYPE_CODES[tensors.TORCH_DTYPES[str(t.dtype)]])
        for i, (n, s) in enumerate(zip(t.shape, t.stride())):
            d.shape[i], d.strides[i] = n, s
        return SimpleNamespace(desc=d)
    monkeypatch.setattr(backends, "library", lambda: library)
    monkeypatch.setattr(tensors, "describe", describe)
    monkeypatch.setattr(plan_cache, "_raw_stream", lambda: (lambda index: 777))


def test_each_thread_launches_with_descriptors_of_its_own(monkeypatch, library):
    import threading
    _cpu_rust_stand_ins(monkeypatch, library)
    spec = SPECS["vector_add"]
    a, b = spec.make_inputs((64,), "float32", "cpu", 0)
    plan = plan_cache.record(spec, "cutile-rs", (a, b), (torch.empty(64),), spec.plan(a, b, torch.empty(64)),
                             allocated=True, multi_output=False)
    (launch,) = plan.launches
    monkeypatch.setattr(launch, "_raw", lambda *args: 0)
    plan.run((a, b), None)
    worker = threading.Thread(target=plan.run, args=((a, b), None))
    worker.start()
    worker.join()
    copies = list(launch._by_thread.values())
    assert len(copies) == 2 and copies[0].descs[0] is not copies[1].descs[0]
    assert copies[0].descs[0].ptr == copies[1].descs[0].ptr == a.data_ptr()


def test_replay_refuses_a_misaligned_view_of_the_recorded_layout(monkeypatch, library):
    """The call key holds layouts, not addresses: a view with the recorded shape and strides but a
    base off the 16-byte alignment the port assumes is refused on replay, as the full check would."""
    from tileport.runtime.abi import MisalignedError
    _cpu_rust_stand_ins(monkeypatch, library)
    spec = SPECS["relu"]
    x = spec.make_inputs((4, 64), "float32", "cpu", 0)
    outs = plan_cache.as_tuple(spec.allocate(*x))
    plan = plan_cache.record(spec, "cutile-rs", x, outs, spec.plan(*x, _one(outs)), allocated=True,
                             multi_output=False)
    for launch in plan.launches:
        monkeypatch.setattr(launch, "_raw", lambda *args: 0)
    plan.run(x, None)  # aligned: replays
    shifted = torch.empty(4 * 64 + 1)[1:].view(4, 64)  # same layout, base 4 bytes off
    with pytest.raises(MisalignedError):
        plan.run((shifted,), None)


def test_replay_refuses_an_out_that_aliases_an_input(monkeypatch, library):
    from tileport.runtime.abi import AliasingError
    _cpu_rust_stand_ins(monkeypatch, library)
    spec = SPECS["relu"]
    x = spec.make_inputs((4, 64), "float32", "cpu", 0)
    out = torch.empty(4, 64)
    plan = plan_cache.record(spec, "cutile-rs", x, (out,), spec.plan(*x, out), allocated=False,
                             multi_output=False)
    for launch in plan.launches:
        monkeypatch.setattr(launch, "_raw", lambda *args: 0)
    plan.run(x, out)
    with pytest.raises(AliasingError):
        plan.run(x, x[0])
