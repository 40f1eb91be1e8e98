"""Host cost of one operator call, per backend, and a CUDA-graph replay check (needs a GPU).

    python3 -m tileport.gpu.callcost --out out/callcost.json
    python3 -m tileport.gpu.callcost --only binding --out out/binding.json   # no GPU needed

Call cost: tiny inputs (the GPU work is a few µs), `CALLS` calls per round, `ROUNDS` rounds; each
round synchronizes, times the calls on the host (`host_us`: what the caller's thread spends per
call), synchronizes again (`call_us`: host time including the drain, per call). Rounds are short
enough that the CUDA launch queue never fills, so `host_us` is the launch path itself, not the
GPU. Medians over the rounds, and the best round.

| case                   | what one call is                                                          |
|------------------------|---------------------------------------------------------------------------|
| torch_eager            | the PyTorch baseline of the op (ops/baselines.py), allocating its output   |
| tileport_torch         | `tileport.ops.<op>(...)` on the `torch` backend                            |
| tileport_cutile        | `tileport.ops.<op>(...)` on `cutile` (cuTile Python)                       |
| ct_launch              | `ct.launch` alone with ready arguments                                     |
| tileport_cutile_rs     | `tileport.ops.<op>(...)` on `cutile-rs`, allocating its output            |
| tileport_cutile_rs_out | the same with `out=`                                                       |
| tileport_cutile_rs_python | `tileport_cutile_rs` with the compiled replay (runtime.fastcall) taken away: the Python path |
| op_default             | `tileport.ops.<op>(...)` with no `backend=` (the default, set to cutile-rs) |
| custom_op_cutile_rs    | `torch.ops.tileport.<op>` (the torch.compile path) on `cutile-rs`          |
| c_abi_prepared         | the C symbol with prepared ctypes arguments (library.PreparedLaunch)       |
| c_abi_replay           | the library's prepared launch of it (tileport_launch_prepared): the op path |
| c_abi_entry            | the generic `KernelLibrary[kernel](...)` call (descriptors built per call) |
| binding_floor          | ctypes call, prepared arguments, into a no-op C function of that signature |
| binding_floor_replay   | the same into a no-op of tileport_launch_prepared's (handle, addresses, stream) |
| driver_call            | a driver call that does nothing (cuCtxGetCurrent, ctypes, libcuda)         |
| driver_noop            | cuLaunchKernel (ctypes, libcuda) of an empty PTX kernel, no parameters     |
| driver_args            | the same with FLOOR_PARAMS u64 parameters (a vector_add launch's count)   |
| c_abi_empty            | the empty kernel through the launchers' shared path (tileport_launch_empty) |
| py_call_key            | the cached op call's key alone (vector_add only)                          |
| py_alloc_output        | the output allocation alone (torch.empty_strided, vector_add only)         |
| py_alloc_like          | the same through torch.empty_like of a tensor of that layout (the op's way) |
| py_plan_launches       | the cached plan's C-ABI launches alone, into a given output (vector_add)   |
| py_stream              | the current stream's handle as the launch reads it (plan_cache._raw_stream) |
| py_stream_public       | the same through torch.cuda.current_stream(device).cuda_stream            |

`summary.floors_us` puts the vector_add cases side by side, cheapest first: what a driver call, a
launch, the Python -> C call, our C ABI, the op call, torch eager and ct.launch each cost here;
`summary.shares_us` the differences between the layers (SHARES).
`--only python` (no GPU) times the Python layers of the op call on CPU tensors with a stub library.

Graph check (`graph`, per capture_error_mode global / thread_local / relaxed, each in a fresh
process since a failed capture leaves CUDA unusable): a sequence of tileport ops on `cutile-rs`
(rms_norm -> silu_and_mul -> softmax -> matmul) captured with `torch.cuda.graph`, replayed on new
input data, compared with eager runs of the same ops (outputs are poisoned with NaN before each
replay, so a replay that does nothing fails).

torch.compile check (`compile`, modes default and reduce-overhead, each in a fresh process):
`softmax(rms_norm(x, w)) * 2` written with `tileport.ops`, compiled with fullgraph=True (the ops
become `torch.ops.tileport.*` custom ops; reduce-overhead records them in a CUDA graph), run on
fresh inputs and compared bitwise with the same ops run eagerly; host µs per compiled call.

C-ABI graph check (`graph_c_abi`, global mode): one prepared C-ABI launch (vector_add) alone,
captured and replayed on new data (a failure here is the launcher's, not the Python op path's).

Binding (`binding`, needs no GPU: `--only binding`): µs per call from Python into a stub C function
with a launcher's signature, built with the system C compiler: ctypes with argtypes, prepared ctypes
objects without argtypes (what the op path uses), and cffi ABI mode when cffi is installed.

Every section runs unattended: a section that fails is recorded as {"error": ...} and the rest
still runs; the JSON is rewritten (atomically) after each section.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

CALLS = 200
ROUNDS = 40
TINY = {"vector_add": (1024,), "softmax": (4, 1024), "rms_norm": (4, 1024)}
TARGET_OP_US = 15.0  # issue target: cutile-rs op call <= torch eager and <= 15 µs
TARGET_C_ABI_US = 5.0


def per_call(fn: Callable[[], Any], calls: int = CALLS, rounds: int = ROUNDS) -> dict:
    """Host µs per call (median / min over rounds) and µs per call including the final drain."""
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    host, total = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        total.append((t2 - t0) / calls * 1e6)
    return {"host_us": statistics.median(host), "host_us_min": min(host), "call_us": statistics.median(total),
            "calls": calls, "rounds": rounds}


def _cases(op: str, dtype: str) -> dict[str, Callable[[], Any]]:
    """The call variants measured for `op` on tiny inputs (see the module table); the custom op runs
    on the default backend, which measure_call_cost sets to cutile-rs."""
    import tileport.ops
    from tileport.ops import torch_ops
    from tileport.ops.baselines import BASELINES
    from tileport.ops.specs import get_spec
    spec = get_spec(op)
    inputs = spec.make_inputs(TINY[op], dtype, "cuda", 0)
    fn = getattr(tileport.ops, op)
    base = BASELINES[op]
    custom = getattr(torch_ops, op)
    outs = spec.allocate(*inputs)
    cases: dict[str, Callable[[], Any]] = {
        "torch_eager": lambda: base(*inputs),
        "tileport_torch": lambda: fn(*inputs, backend="torch"),
        "tileport_cutile": lambda: fn(*inputs, backend="cutile"),
        "tileport_cutile_rs": lambda: fn(*inputs, backend="cutile-rs"),
        "tileport_cutile_rs_out": lambda: fn(*inputs, out=outs, backend="cutile-rs"),
    }
    cases["custom_op_cutile_rs"] = lambda: custom(*inputs)
    cases["op_default"] = lambda: fn(*inputs)  # measure_call_cost makes cutile-rs the default
    try:  # the launch alone, per op: where a call's cost beyond vector_add's comes from
        cases.update(_raw_cases(spec, inputs, outs))
    except Exception as e:  # noqa: BLE001 - recorded as the case's error, the other cases still run
        cases["c_abi_replay"] = functools.partial(_reraise, e)
    if op == "vector_add":
        cases.update(_floor_cases())
        try:
            cases.update(_breakdown_cases(spec, fn, inputs, outs))
        except Exception as e:  # noqa: BLE001 - recorded as the case's error, the other cases still run
            cases["py_breakdown"] = functools.partial(_reraise, e)
    cases["tileport_cutile_rs_python"] = _python_path(op, cases["tileport_cutile_rs"])  # last: it drops the replay
    return cases


def _python_path(op: str, call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` on the Python path: the first call forgets the op's compiled replays (runtime.fastcall),
    and its plans, already promoted, are not promoted again."""
    from tileport.ops import plan_cache
    table = plan_cache.fast_table(op)
    forgotten: list = []

    def python_call():
        if not forgotten:
            forgotten.append(table.pop("cutile-rs", None))
        return call()
    return python_call


def _reraise(error: Exception) -> None:
    raise error


def _breakdown_cases(spec, fn, inputs: tuple, out) -> dict[str, Callable[[], Any]]:
    """The pieces of a cached `cutile-rs` op call, alone: the call key, the output allocation, and
    the plan's launches (on the given output, no allocation)."""
    import torch

    from tileport.ops import plan_cache
    fn(*inputs, backend="cutile-rs")  # records the plan
    plan = plan_cache.lookup(plan_cache.call_key(spec, "cutile-rs", inputs, None))
    if plan is None:
        raise RuntimeError(f"{spec.name}: no cached plan after a call (the call path did not cache it)")
    ((shape, stride, dtype),) = plan.out_layouts
    groups = (inputs, (out,), [])
    device = out.device

    def launches():
        for launch in plan.launches:
            launch.run(groups, plan.device_index)
    raw_stream, index = plan_cache._raw_stream(), plan.device_index
    return {"py_call_key": lambda: plan_cache.call_key(spec, "cutile-rs", inputs, None),
            "py_alloc_output": lambda: torch.empty_strided(shape, stride, dtype=dtype, device=device),
            "py_alloc_like": lambda: torch.empty_like(out),
            "py_plan_launches": launches,
            "py_stream": lambda: raw_stream(index),
            "py_stream_public": lambda: torch.cuda.current_stream(index).cuda_stream}


def _raw_cases(spec, inputs: tuple, out) -> dict[str, Callable[[], Any]]:
    """ct.launch and the C ABI with ready arguments: the floor under each tile backend."""
    import cuda.tile as ct
    import torch

    from tileport.ops.backends import library
    from tileport.ops.backends_cutile import _grid, _kernel, positional_args
    from tileport.runtime.tensors import describe
    (launch,) = spec.plan(*inputs, out)
    kernel, params = _kernel(spec.kernel_path, launch.kernel)
    args, grid = positional_args(params, launch), _grid(launch)
    stream = torch.cuda.current_stream()
    entry = library()[launch.kernel]
    arrays = {p: describe(v, p).desc for p, v in launch.args.items() if isinstance(v, torch.Tensor)}
    ptrs = [launch.args[p.name].data_ptr() for p in entry.params if p.kind == "array"]
    prepared = entry.prepare(launch.grid, out.device.index, arrays,
                             {p: v for p, v in launch.args.items() if p not in arrays})
    handle = stream.cuda_stream
    return {"ct_launch": lambda: ct.launch(stream, grid, kernel, args),
            "c_abi_prepared": lambda: prepared(ptrs, handle),
            "c_abi_replay": replay_case(prepared, ptrs, handle),
            "c_abi_entry": lambda: entry(grid=launch.grid, stream=handle, **launch.args)}


def replay_case(prepared: Any, ptrs: list[int], stream: int) -> Callable[[], Any]:
    """The library's prepared launch (what a cached op call launches) of `prepared`
    (library.PreparedLaunch) at `ptrs` on `stream`: launched twice through the entry (the first
    launch of a specialization goes through cutile's own launcher), recorded on the second; the
    case's error when the library predates prepared launches or records none."""
    import ctypes

    from tileport.runtime.abi import raise_for
    lib = prepared.entry.lib
    api = lib.replay
    if api is None:
        return _case_error(f"{lib.path.name} predates prepared launches (no tileport_launch_prepared)")
    descs = (ctypes.c_uint64 * len(prepared.descs))(*map(ctypes.addressof, prepared.descs))
    try:
        prepared(ptrs, stream)
        api.record_next()
        prepared(ptrs, stream)
    except Exception as e:  # noqa: BLE001 - recorded as the case's error
        api.take(prepared.device, descs, len(prepared.descs))  # ends the recording
        return _case_error(f"{type(e).__name__}: {e}")
    handle = api.take(prepared.device, descs, len(prepared.descs))
    if not handle:
        return _case_error(f"no prepared launch was recorded: {lib.last_error()}")
    args = (ctypes.c_uint64(handle), (ctypes.c_uint64 * len(ptrs))(*ptrs), ctypes.c_uint64(stream))

    def call():
        rc = api.launch(*args)
        if rc:
            raise_for(rc, lib.last_error())
    return call  # the handle is never freed: the case may run until the process ends


# The floors under the C-ABI call: Python -> C through ctypes, and the driver's cuLaunchKernel

FLOOR_PARAMS = 9  # vector_add's launch: 3 arrays x (address, extent, stride)
NOOP_PTX = """.version 7.8
.target sm_90
.address_size 64
.visible .entry noop_0 { ret; }
.visible .entry noop_args(%s) { ret; }
""" % ", ".join(f".param .u64 p{i}" for i in range(FLOOR_PARAMS))


def _case_error(message: str) -> Callable[[], Any]:
    return functools.partial(_reraise, RuntimeError(message))


DRIVER_CASES = ("driver_call", "driver_noop", "driver_args", "c_abi_empty")


def _floor_cases() -> dict[str, Callable[[], Any]]:
    """binding_floor: a ctypes call with the prepared launch's arguments into a no-op C function of a
    launcher's signature; driver_call: a driver call that does nothing; driver_noop / driver_args:
    cuLaunchKernel through ctypes on libcuda of an empty kernel (no parameters / FLOOR_PARAMS u64
    parameters) on torch's current stream. Each floor that cannot be set up is recorded as that
    case's error."""
    import tempfile
    cases: dict[str, Callable[[], Any]] = {}
    try:
        with tempfile.TemporaryDirectory() as d:
            stub = _binding_cases(_build_stub(Path(d)))  # loaded before the directory goes
        cases["binding_floor"] = stub["ctypes_prepared"]
        cases["binding_floor_replay"] = stub["ctypes_replay"]
    except Exception as e:  # noqa: BLE001 - recorded as the case's error
        cases["binding_floor"] = cases["binding_floor_replay"] = _case_error(f"{type(e).__name__}: {e}")
    try:
        cases.update(driver_floor_cases())
    except Exception as e:  # noqa: BLE001 - recorded as the case's error
        for name in DRIVER_CASES:
            cases[name] = _case_error(f"{type(e).__name__}: {e}")
    return cases


def _cu(lib: Any, name: str, *args: Any) -> None:
    rc = getattr(lib, name)(*args)
    if rc:
        raise RuntimeError(f"{name} failed with CUresult {rc}")


def driver_floor_cases(stream_handle: int | None = None, device: int | None = None) -> dict[str, Callable[[], Any]]:
    """cuCtxGetCurrent, and cuLaunchKernel of NOOP_PTX's kernels, with prepared ctypes arguments (the
    driver's own cost: a call that does nothing, and a launch), on `stream_handle` of `device`
    (default: torch's current stream and device, its context made current)."""
    import ctypes
    if stream_handle is None or device is None:
        import torch
        torch.zeros(1, device="cuda")  # torch's primary context is current on this thread
        stream_handle, device = torch.cuda.current_stream().cuda_stream, torch.cuda.current_device()
    cu = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    _cu(cu, "cuCtxGetCurrent", ctypes.byref(ctx))
    if not ctx.value:
        raise RuntimeError("no current CUDA context after torch initialized the device")
    module = ctypes.c_void_p()
    _cu(cu, "cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(NOOP_PTX.encode()))
    launch = cu.cuLaunchKernel
    launch.restype = ctypes.c_int
    stream = ctypes.c_void_p(stream_handle)
    one, zero = ctypes.c_uint(1), ctypes.c_uint(0)
    values = [ctypes.c_uint64(0) for _ in range(FLOOR_PARAMS)]
    pointers = (ctypes.c_void_p * FLOOR_PARAMS)(*[ctypes.addressof(v) for v in values])
    get_current, ctx_ref = cu.cuCtxGetCurrent, ctypes.byref(ctx)
    get_current.restype = ctypes.c_int

    def driver_call():
        rc = get_current(ctx_ref)
        if rc:
            raise RuntimeError(f"cuCtxGetCurrent failed with CUresult {rc}")
    cases = {"driver_call": driver_call}
    for name, params in (("noop_0", None), ("noop_args", pointers)):
        function = ctypes.c_void_p()
        _cu(cu, "cuModuleGetFunction", ctypes.byref(function), module, ctypes.c_char_p(name.encode()))
        args = (function, one, one, one, one, one, one, zero, stream, params, None)

        def call(args=args):
            rc = launch(*args)
            if rc:
                raise RuntimeError(f"cuLaunchKernel failed with CUresult {rc}")
        call()
        cases["driver_noop" if params is None else "driver_args"] = call
        if params is None:
            # the handle, not stream.value: c_void_p(0).value is None (torch's default stream is 0)
            cases["c_abi_empty"] = _c_abi_empty_case(function.value, stream_handle, device)
    return cases  # the module stays loaded (never unloaded) while the functions are in use


def _c_abi_empty_case(function: int, stream: int, device: int) -> Callable[[], Any]:
    """The generated library's `tileport_launch_empty`: the launchers' shared path (target, context
    check, cuLaunchKernel) with the empty kernel, prepared ctypes arguments as the op path passes
    them; the case's error when the library cannot be loaded or predates the symbol."""
    import ctypes

    from tileport.ops.backends import library
    from tileport.runtime.abi import raise_for
    try:
        lib = library()
        fn = lib.dll.tileport_launch_empty
    except Exception as e:  # noqa: BLE001 - recorded as the case's error
        return _case_error(f"{type(e).__name__}: {e}")
    fn.restype = ctypes.c_int32
    args = (ctypes.c_uint64(function), ctypes.c_int32(device), ctypes.c_uint64(stream))

    def call():
        rc = fn(*args)
        if rc:
            raise_for(rc, lib.last_error())
    return call


def measure_call_cost(dtype: str = "float32") -> dict:
    """{op: {case: per_call(...) or {"error": ...}}} for every op of TINY."""
    from tileport.ops import api
    saved = api._default[0]
    api.set_backend("cutile-rs")  # for the custom op, which runs on the current backend
    try:
        return _measure_all(dtype)
    finally:
        api._default[0] = saved


def _measure_all(dtype: str) -> dict:
    res: dict[str, dict] = {}
    for op in TINY:
        res[op] = {"shape": list(TINY[op]), "dtype": dtype, "cases": {}}
        try:
            cases = _cases(op, dtype)
        except Exception as e:  # noqa: BLE001 - recorded with the reason
            res[op]["error"] = f"{type(e).__name__}: {e}"[:500]
            continue
        for name, fn in cases.items():
            try:
                res[op]["cases"][name] = per_call(fn)
            except Exception as e:  # noqa: BLE001 - recorded with the reason
                res[op]["cases"][name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    return res


# ---------------------------------------------------------------------------------------------
# CUDA graph capture of a sequence of tileport ops


def _sequence(x, w, wm):
    import tileport.ops as ops
    h = ops.rms_norm(x, w)
    g = ops.silu_and_mul(h)
    s = ops.softmax(g)
    return ops.matmul(s, wm), s


def graph_check(backend: str = "cutile-rs", dtype: str = "bfloat16", trials: int = 3,
                mode: str = "global") -> dict:
    """Capture `_sequence` on `backend` in a CUDA graph (`mode`: torch's capture_error_mode), replay
    it on new inputs, compare with eager."""
    import torch

    import tileport.ops as ops
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(64, 2048, device="cuda", dtype=dt, generator=gen)
    w = torch.rand(2048, device="cuda", dtype=dt, generator=gen) + 0.5
    wm = torch.randn(1024, 256, device="cuda", dtype=dt, generator=gen)
    rec: dict[str, Any] = {"backend": backend, "dtype": dtype, "capture_error_mode": mode, "ops": ["rms_norm", "silu_and_mul", "softmax", "matmul"],
                           "trials": []}
    with ops.use_backend(backend):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as torch.cuda.graph asks
            for _ in range(3):
                _sequence(x, w, wm)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        from tileport.ops import plan_cache  # which ops the capture replays through runtime.fastcall
        rec["compiled_replays"] = {op: len(t[backend].args[0]) if backend in t else 0
                                   for op in rec["ops"] for t in [plan_cache.fast_table(op)]}
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode=mode):
            static_y, static_s = _sequence(x, w, wm)
        for trial in range(trials):
            x.copy_(torch.randn(x.shape, device="cuda", dtype=dt, generator=gen))
            static_y.fill_(float("nan"))
            static_s.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            eager_y, eager_s = _sequence(x.clone(), w, wm)
            torch.cuda.synchronize()
            rec["trials"].append({
                "bitwise_equal": bool(torch.equal(static_y, eager_y) and torch.equal(static_s, eager_s)),
                "max_abs_diff": float(max((static_y.float() - eager_y.float()).abs().max(),
                                          (static_s.float() - eager_s.float()).abs().max())),
                "finite": bool(torch.isfinite(static_y).all() and torch.isfinite(static_s).all())})
        rec["replay_us"] = per_call(graph.replay, calls=50, rounds=10)
        rec["eager_sequence_us"] = per_call(lambda: _sequence(x, w, wm), calls=50, rounds=10)
    rec["ok"] = all(t["finite"] and t["max_abs_diff"] == 0.0 for t in rec["trials"])
    return rec


def raw_graph_check(mode: str = "global", trials: int = 3) -> dict:
    """One prepared C-ABI launch (vector_add, no Python planning, no allocation) captured with
    `torch.cuda.graph` and replayed on new data: tells a launcher that breaks capture from the
    Python op path breaking it."""
    import torch

    from tileport.ops.backends import library
    from tileport.ops.specs import get_spec
    from tileport.runtime.tensors import describe
    spec = get_spec("vector_add")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn(1 << 14, device="cuda", generator=gen) for _ in range(2))
    out = spec.allocate(a, b)
    (launch,) = spec.plan(a, b, out)
    entry = library()[launch.kernel]
    arrays = {p: describe(v, p).desc for p, v in launch.args.items() if isinstance(v, torch.Tensor)}
    prepared = entry.prepare(launch.grid, out.device.index or 0, arrays,
                             {p: v for p, v in launch.args.items() if p not in arrays})
    ptrs = [launch.args[p.name].data_ptr() for p in entry.params if p.kind == "array"]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    prepared(ptrs, side.cuda_stream)  # warm-up (compiles) off the capture stream
    torch.cuda.synchronize()
    rec: dict[str, Any] = {"kernel": launch.kernel, "capture_error_mode": mode, "trials": []}
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=mode):
        prepared(ptrs, torch.cuda.current_stream().cuda_stream)
    for _ in range(trials):
        a.copy_(torch.randn(a.shape, device="cuda", generator=gen))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        rec["trials"].append({"bitwise_equal": bool(torch.equal(out, a + b))})
    rec["replay_us"] = per_call(graph.replay, calls=50, rounds=10)
    rec["ok"] = all(t["bitwise_equal"] for t in rec["trials"])
    return rec


# ---------------------------------------------------------------------------------------------
# torch.compile of a function written with tileport ops


def compile_check(mode: str = "default", backend: str = "cutile-rs", dtype: str = "bfloat16",
                  runs: int = 4) -> dict:
    """torch.compile(fullgraph=True) of `softmax(rms_norm(x, w)) * 2` written with tileport ops
    (`mode`: "default" or "reduce-overhead"), run on fresh inputs and compared bitwise with the same
    ops run eagerly."""
    import torch

    import tileport.ops as ops

    def fn(x, w):
        return ops.softmax(ops.rms_norm(x, w)) * 2
    torch._dynamo.reset()
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    w = torch.rand(1024, device="cuda", dtype=dt, generator=gen) + 0.5
    f = torch.compile(fn, mode=None if mode == "default" else mode, fullgraph=True)
    rec: dict[str, Any] = {"mode": mode, "backend": backend, "dtype": dtype, "shape": [8, 1024], "runs": []}
    with ops.use_backend(backend):
        for _ in range(runs):  # warm-up, (reduce-overhead:) record, then replays
            x = torch.randn(8, 1024, device="cuda", dtype=dt, generator=gen)
            got = f(x, w).clone()
            want = fn(x, w)
            torch.cuda.synchronize()
            rec["runs"].append({"bitwise_equal": bool(torch.equal(got, want)),
                                "max_abs_diff": float((got.float() - want.float()).abs().max()),
                                "finite": bool(torch.isfinite(got).all())})
        x = torch.randn(8, 1024, device="cuda", dtype=dt, generator=gen)
        rec["compiled_call_us"] = per_call(lambda: f(x, w), calls=50, rounds=10)
        rec["eager_call_us"] = per_call(lambda: fn(x, w), calls=50, rounds=10)
    rec["ok"] = all(r["bitwise_equal"] and r["finite"] for r in rec["runs"])
    return rec


# ---------------------------------------------------------------------------------------------
# The Python binding alone (no GPU): a stub with a launcher's C signature

STUB_C = r"""
#include <stddef.h>
#include <stdint.h>
typedef struct { uint64_t ptr; int32_t ndim; int64_t shape[6]; int64_t strides[6]; int32_t dtype; } TensorDesc;
static volatile uint64_t sink;
int32_t stub_launch(const TensorDesc *a, const TensorDesc *b, const TensorDesc *c, int32_t n,
                    uint32_t gx, uint32_t gy, uint32_t gz, int32_t device, uint64_t stream) {
    sink = a->ptr + b->ptr + c->ptr + (uint64_t)n + gx + gy + gz + (uint64_t)device + stream;
    return 0;
}
/* What tileport.runtime.library.KernelLibrary needs to load this stub as the generated library whose
 * only launcher is vector_add's (a no-op): the CPU breakdown of the op call path. */
static int recording, recorded;
int32_t tileport_vector_add_kernel(const TensorDesc *a, const TensorDesc *b, const TensorDesc *c, int32_t n,
                                   uint32_t gx, uint32_t gy, uint32_t gz, int32_t device, uint64_t stream) {
    recorded = recording;
    return stub_launch(a, b, c, n, gx, gy, gz, device, stream);
}
/* Prepared launches (support.rs): a launch made while recording is taken as handle STUB_HANDLE; a
 * replay keeps what it was given (stub_last_replay: handle, the three addresses, stream). */
#define STUB_HANDLE 0x5eedu
static uint64_t last_replay[5];
void tileport_record_next(void) { recording = 1; recorded = 0; }
uint64_t tileport_take_prepared(int32_t device, const uint64_t *descs, size_t n) {
    int ok = recorded && descs && n == 3;
    (void)device; recording = recorded = 0;
    return ok ? STUB_HANDLE : 0;
}
int32_t tileport_launch_prepared(uint64_t handle, const uint64_t *addresses, uint64_t stream) {
    if (handle != STUB_HANDLE || !addresses) return -1;
    last_replay[0] = handle; last_replay[1] = addresses[0]; last_replay[2] = addresses[1];
    last_replay[3] = addresses[2]; last_replay[4] = stream;
    sink = addresses[0] + addresses[1] + addresses[2] + stream;
    return 0;
}
void tileport_free_prepared(uint64_t handle) { (void)handle; }
const uint64_t *stub_last_replay(void) { return last_replay; }
const char *tileport_last_error(void) { return "stub"; }
int32_t tileport_abi_version(void) { return ABI_VERSION; }
int32_t tileport_enable_jit_cache(void) { return 0; }
"""
STUB_DECL = ("typedef struct { uint64_t ptr; int32_t ndim; int64_t shape[6]; int64_t strides[6]; int32_t dtype; }"
             " TensorDesc; int32_t stub_launch(const TensorDesc*, const TensorDesc*, const TensorDesc*, int32_t,"
             " uint32_t, uint32_t, uint32_t, int32_t, uint64_t);")


BINDING_CALLS, BINDING_ROUNDS = 20000, 9


def _host_us(fn: Callable[[], Any], calls: int | None = None, rounds: int | None = None) -> dict:
    """Host µs per call of a CPU-only function (median and best of `rounds`)."""
    calls, rounds = calls or BINDING_CALLS, rounds or BINDING_ROUNDS
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return {"host_us": statistics.median(times), "host_us_min": min(times), "calls": calls, "rounds": rounds}


def _build_stub(directory: Path) -> Path:
    import shutil

    from tileport.proc import run as run_tool
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc, clang) to build the stub")
    src, lib = directory / "stub.c", directory / "libstub.so"
    src.write_text(STUB_C)
    from tileport.runtime.abi import ABI_VERSION
    proc = run_tool([cc, "-O2", "-shared", "-fPIC", f"-DABI_VERSION={ABI_VERSION}", "-o", str(lib), str(src)], 300)
    if proc.returncode != 0:
        raise RuntimeError(f"{cc} failed: {proc.stderr[-500:]}")
    return lib


def _binding_cases(lib: Path) -> dict[str, Callable[[], Any]]:
    """One call per binding, each writing the three data pointers and the stream as the op path does."""
    import ctypes

    from tileport.runtime.abi import TensorDesc
    descs = [TensorDesc() for _ in range(3)]
    refs = [ctypes.byref(d) for d in descs]
    typed = ctypes.CDLL(str(lib)).stub_launch
    typed.argtypes = [ctypes.POINTER(TensorDesc)] * 3 + [ctypes.c_int32] + [ctypes.c_uint32] * 3 + \
        [ctypes.c_int32, ctypes.c_uint64]
    typed.restype = ctypes.c_int32
    raw = ctypes.CDLL(str(lib)).stub_launch
    raw.restype = ctypes.c_int32
    stream = ctypes.c_uint64(0)
    prepared = (*refs, ctypes.c_int32(1024), ctypes.c_uint32(4), ctypes.c_uint32(1), ctypes.c_uint32(1),
                ctypes.c_int32(0), stream)

    def ctypes_argtypes():
        descs[0].ptr, descs[1].ptr, descs[2].ptr = 0x1000, 0x2000, 0x3000
        return typed(*refs, 1024, 4, 1, 1, 0, 0x77)

    def ctypes_prepared():
        descs[0].ptr, descs[1].ptr, descs[2].ptr = 0x1000, 0x2000, 0x3000
        stream.value = 0x77
        return raw(*prepared)
    replay = ctypes.CDLL(str(lib)).tileport_launch_prepared  # the stub replays handle 0x5eed
    replay.restype = ctypes.c_int32
    addresses = (ctypes.c_uint64 * 3)()
    replay_args = (ctypes.c_uint64(0x5EED), addresses, stream)

    def ctypes_replay():
        addresses[0], addresses[1], addresses[2] = 0x1000, 0x2000, 0x3000
        stream.value = 0x77
        return replay(*replay_args)
    cases: dict[str, Callable[[], Any]] = {"ctypes_argtypes": ctypes_argtypes, "ctypes_prepared": ctypes_prepared,
                                           "ctypes_replay": ctypes_replay}
    try:
        import cffi
    except ImportError:
        return cases
    ffi = cffi.FFI()
    ffi.cdef(STUB_DECL)
    fn = ffi.dlopen(str(lib)).stub_launch
    cd = [ffi.new("TensorDesc *") for _ in range(3)]

    def cffi_abi():
        cd[0].ptr, cd[1].ptr, cd[2].ptr = 0x1000, 0x2000, 0x3000
        return fn(cd[0], cd[1], cd[2], 1024, 4, 1, 1, 0, 0x77)
    cases["cffi_abi"] = cffi_abi
    return cases


def binding_cost() -> dict:
    """{binding: _host_us(...) or {"error": ...}}, and which one is cheapest."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        try:
            cases = _binding_cases(_build_stub(Path(d)))
        except Exception as e:  # noqa: BLE001 - recorded with the reason
            return {"error": f"{type(e).__name__}: {e}"[:500]}
        res: dict[str, Any] = {}
        for name, fn in cases.items():
            try:
                if fn() != 0:
                    raise RuntimeError("the stub returned non-zero")
                res[name] = _host_us(fn)
            except Exception as e:  # noqa: BLE001 - recorded with the reason
                res[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    timed = {k: v["host_us"] for k, v in res.items() if "host_us" in v}
    res["cheapest"] = min(timed, key=timed.get) if timed else None
    return res


# ---------------------------------------------------------------------------------------------
# The Python side of a cached cutile-rs op call, layer by layer, on CPU (no GPU needed)

PY_SIZE = 1024
# Short rounds, many of them, the best one reported: on a shared machine most rounds are preempted,
# and a round of 200 calls (~1 ms) often is not.
PY_CALLS, PY_ROUNDS = 200, 400


class _Patched:
    """Set attributes for the duration of a block, then restore them."""

    def __init__(self, *changes: tuple[Any, str, Any]):
        self.changes, self.saved = changes, []

    def __enter__(self) -> "_Patched":
        for obj, name, value in self.changes:
            self.saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, value)
        return self

    def __exit__(self, *exc: Any) -> None:
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)


def _cpu_describe(t: Any, name: str) -> Any:
    """runtime.tensors.describe for a CPU tensor (the launcher is a stub: nothing reads the memory)."""
    from types import SimpleNamespace

    from tileport.runtime import tensors
    return SimpleNamespace(desc=tensors._fill(t.data_ptr(), t.shape, t.stride(), tensors.TORCH_DTYPES[str(t.dtype)],
                                              name))


def python_breakdown() -> dict:
    """Host µs per layer of a cached `cutile-rs` op call (vector_add, PY_SIZE f32), on CPU tensors:
    the library is a stub whose vector_add launcher does nothing (same C signature), the stream
    accessor returns a constant. What each case is: PY_CASES."""
    import tempfile

    from tileport.ops import api, backends, plan_cache
    from tileport.ops import plan_cache as pc
    from tileport.ops.specs import get_spec
    from tileport.runtime import library as lib_mod
    from tileport.runtime import tensors
    with tempfile.TemporaryDirectory() as d:
        stub = lib_mod.KernelLibrary(_build_stub(Path(d)), lib_mod.REPO_CRATE / "kernels.json")
    spec = get_spec("vector_add")
    a, b = spec.make_inputs((PY_SIZE,), "float32", "cpu", 0)
    out = spec.allocate(a, b)
    patches = _Patched((backends, "library", lambda: stub), (tensors, "describe", _cpu_describe),
                       (pc, "_raw_stream", lambda: (lambda index: 0x77)), (api, "_default", ["cutile-rs"]))
    with patches:
        plan_cache.clear()
        for o in (None, out):  # the plans of op(a, b) and op(a, b, out=out), recorded as a GPU call would
            plan = plan_cache.record(spec, "cutile-rs", (a, b), (out,), spec.plan(a, b, out),
                                     allocated=o is None, multi_output=False)
            plan_cache.store(plan_cache.call_key(spec, "cutile-rs", (a, b), o), plan)
        try:
            return {name: _host_us(fn, calls=PY_CALLS, rounds=PY_ROUNDS) for name, fn in
                    _python_cases(spec, a, b, out, stub).items()}
        finally:
            plan_cache.clear()


def _cpu_environment() -> dict:
    import platform

    import torch

    from tileport.gpu.bench import _cmd
    return {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
            "python": platform.python_version(),
            "commit": os.environ.get("TILEPORT_COMMIT") or _cmd(["git", "rev-parse", "HEAD"]),
            "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


PY_CASES = {
    "op_default": "tileport.ops.vector_add(a, b): the default backend (cutile-rs), output allocated",
    "op_backend": "tileport.ops.vector_add(a, b, backend='cutile-rs')",
    "op_out": "tileport.ops.vector_add(a, b, out=c, backend='cutile-rs')",
    "api_call": "tileport.ops.api.call(spec, a, b, backend='cutile-rs'): without the operator wrapper",
    "op_wrapper_checks": "the operator wrapper's torch.compile and autograd checks alone",
    "get_backend": "the current backend (no backend= given)",
    "call_key": "the call key alone",
    "lookup": "the plan lookup by a ready key",
    "alloc_output": "torch.empty_strided of the output (CPU allocator here; CUDA's caching allocator on a GPU)",
    "alloc_like": "torch.empty_like of an input of the output's layout (what the op call allocates with)",
    "plan_run_out": "the cached plan's run with out= (aliasing check, launches)",
    "launch": "the plan's one launch: data pointers, stream, the prepared launch (ctypes) of the no-op stub",
    "data_ptrs": "the three data_ptr() reads alone",
    "binding_floor": "the ctypes call into the no-op stub launcher alone, prepared arguments",
    "binding_floor_replay": "the ctypes call into the no-op stub's tileport_launch_prepared alone",
}


def _python_cases(spec, a, b, out, stub) -> dict[str, Callable[[], Any]]:
    import torch

    import tileport.ops as ops
    from tileport.ops import api, operators, plan_cache
    fn = ops.vector_add
    key = plan_cache.call_key(spec, "cutile-rs", (a, b), None)
    plan = plan_cache.lookup(key)
    plan_out = plan_cache.lookup(plan_cache.call_key(spec, "cutile-rs", (a, b), out))
    if plan is None or plan_out is None:
        raise RuntimeError("the recorded plans are not found by their call keys")
    (launch,) = plan.launches
    for _ in range(2):  # the first launch goes through the entry (recorded), later ones are prepared
        plan.run((a, b), None)
        plan_out.run((a, b), out)
    if launch._replay is None or plan_out.launches[0]._replay is None:
        raise RuntimeError("the stub's launch was not recorded as a prepared launch")
    groups = ((a, b), [out], [])
    ((shape, stride, dtype),) = plan.out_layouts
    prepared = launch._prepared
    inputs = (a, b)
    replay_args = next(iter(launch._fast.values()))[2]
    cases: dict[str, Callable[[], Any]] = {
        "op_default": lambda: fn(a, b),
        "op_backend": lambda: fn(a, b, backend="cutile-rs"),
        "op_out": lambda: fn(a, b, out=out, backend="cutile-rs"),
        "api_call": lambda: api.call(spec, a, b, backend="cutile-rs"),
        "op_wrapper_checks": lambda: operators._compiling() or ("vector_add" in api.AUTOGRAD_OPS
                                                                and operators._needs_grad(inputs)),
        "get_backend": api.get_backend,
        "call_key": lambda: plan_cache.call_key(spec, "cutile-rs", inputs, None),
        "lookup": lambda: plan_cache.lookup(key),
        "alloc_output": lambda: torch.empty_strided(shape, stride, dtype=dtype, device=out.device),
        "alloc_like": lambda: torch.empty_like(a),
        "plan_run_out": lambda: plan_out.run(inputs, out),
        "launch": lambda: launch.run(groups, 0),
        "data_ptrs": lambda: (a.data_ptr(), b.data_ptr(), out.data_ptr()),
        "binding_floor": lambda: stub["vector_add_kernel"].raw(*prepared.args),
        "binding_floor_replay": lambda: stub.replay.launch(*replay_args),
    }
    assert cases.keys() == PY_CASES.keys()
    return cases


# ---------------------------------------------------------------------------------------------
# The result file


def summary(cost: dict, graph: dict | None = None, compiled: dict | None = None,
            graph_c_abi: dict | None = None) -> dict:
    """The numbers the issue's targets speak of, from measure_call_cost's result (and the graph /
    torch.compile checks per mode, when given)."""
    va = cost.get("vector_add", {}).get("cases", {})

    def host(case: str) -> float | None:
        return va.get(case, {}).get("host_us")
    rs, eager = host("tileport_cutile_rs"), host("torch_eager")
    from tileport.runtime import fastcall
    # the raw C-ABI launch the op path makes: the prepared launch, or the entry's with an older library
    c_abi_case = "c_abi_replay" if host("c_abi_replay") is not None else "c_abi_prepared"
    raw = host(c_abi_case)
    out = {"cutile_rs_op_host_us": rs, "torch_eager_host_us": eager, "fastcall": fastcall.status(),
           "cutile_rs_op_python_host_us": host("tileport_cutile_rs_python"),
           "c_abi_host_us": raw, "c_abi_case": c_abi_case,
           "c_abi_prepared_host_us": host("c_abi_prepared"), "c_abi_replay_host_us": host("c_abi_replay"),
           "ct_launch_host_us": host("ct_launch"),
           "op_target_met": rs is not None and eager is not None and rs <= eager and rs <= TARGET_OP_US,
           "c_abi_target_met": raw is not None and raw <= TARGET_C_ABI_US,
           "targets_us": {"op": f"<= torch eager and <= {TARGET_OP_US}", "c_abi": f"<= {TARGET_C_ABI_US}"}}
    floors = {case: host(case) for case in ("binding_floor", "binding_floor_replay", "driver_noop", "driver_args")}
    out["c_abi_floors_us"] = floors
    out["floors_us"] = floor_table(va)
    out["shares_us"] = shares(out["floors_us"])
    binding = floors["binding_floor_replay" if c_abi_case == "c_abi_replay" else "binding_floor"]
    if raw is not None and binding is not None and floors["driver_args"] is not None:
        # what the launcher itself adds over the Python->C call and the driver's launch
        out["c_abi_ours_us"] = raw - binding - floors["driver_args"]
    if graph_c_abi is not None:
        out["graph_c_abi_ok"] = {mode: bool(rec.get("ok")) for mode, rec in graph_c_abi.items()}
    if graph is not None:
        out["graph_ok"] = {mode: bool(rec.get("ok")) for mode, rec in graph.items()}
    if compiled is not None:
        out["compile_ok"] = {mode: bool(rec.get("ok")) for mode, rec in compiled.items()}
    return out


FLOOR_CASES = ("driver_call", "binding_floor_replay", "binding_floor", "driver_noop", "driver_args", "c_abi_empty",
               "py_stream", "c_abi_replay", "c_abi_prepared", "py_plan_launches", "ct_launch", "torch_eager",
               "tileport_cutile_rs", "op_default", "tileport_cutile_rs_out", "tileport_cutile_rs_python")


def floor_table(cases: dict) -> dict:
    """{case: host µs} of the FLOOR_CASES measured, cheapest first (a failed case is left out; its
    error stays in call_cost)."""
    timed = {c: cases[c]["host_us"] for c in FLOOR_CASES if "host_us" in cases.get(c, {})}
    return dict(sorted(timed.items(), key=lambda kv: kv[1]))


SHARES = {  # share of a call: (case, the case under it)
    # key, lookup, allocation, plan run over the op's launch (a library without prepared launches: the entry's)
    "op_python": ("tileport_cutile_rs_python", ("c_abi_replay", "c_abi_prepared")),
    # the same through the compiled replay (runtime.fastcall; the Python path when it is not built)
    "op_compiled": ("tileport_cutile_rs", ("c_abi_replay", "c_abi_prepared")),
    "kernel_launcher": ("c_abi_prepared", "c_abi_empty"),  # a kernel's checks, key, params; 6 more arguments
    "replay_saves": ("c_abi_prepared", "c_abi_replay"),  # the launcher's checks, key and lookup, 6 arguments
    "replay_over_empty": ("c_abi_replay", "c_abi_empty"),  # copying the recorded parameters, the addresses
    "shared_launch_path": ("c_abi_empty", "driver_noop"),  # target, context check, guard (ctypes as both)
    "launch_over_call": ("driver_noop", "driver_call"),  # what cuLaunchKernel costs over a driver call
}


def shares(floors: dict) -> dict:
    """{share: µs} of SHARES whose two cases were both measured (the first measured of several under-cases)."""
    out = {}
    for name, (top, under) in SHARES.items():
        measured = [u for u in ((under,) if isinstance(under, str) else under) if u in floors]
        if top in floors and measured:
            out[name] = floors[top] - floors[measured[0]]
    return out


def write_json(path: Path, data: dict) -> None:
    """Atomic write (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


GRAPH_MODES = ("global", "thread_local", "relaxed")
COMPILE_MODES = ("default", "reduce-overhead")
CHECKS: dict[str, tuple[Callable[[str], dict], tuple[str, ...]]] = {
    "graph_c_abi": (lambda mode: raw_graph_check(mode=mode), ("global",)),
    "graph": (lambda mode: graph_check(mode=mode), GRAPH_MODES),
    "compile": (lambda mode: compile_check(mode=mode), COMPILE_MODES),
}
CHECK_TIMEOUT_S = 420


def run(out: Path) -> dict:
    """Every section, the file rewritten after each: call cost, binding, graph and compile checks."""
    from tileport.gpu.bench import environment
    result: dict[str, Any] = {"environment": environment()}
    result["call_cost"] = _section(measure_call_cost)
    result["summary"] = summary(result["call_cost"])
    write_json(out, result)
    result["binding"] = _section(binding_cost)
    write_json(out, result)
    for kind, (_, modes) in CHECKS.items():
        result[kind] = {}
        for mode in modes:
            result[kind][mode] = check_in_subprocess(kind, mode)
            result["summary"] = summary(result["call_cost"], result.get("graph"), result.get("compile"),
                                        result.get("graph_c_abi"))
            write_json(out, result)
    return result


def _section(fn: Callable[[], dict]) -> dict:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a section that fails is a result
        return {"error": f"{type(e).__name__}: {e}"[:1000]}


def check_in_subprocess(kind: str, mode: str) -> dict:
    """A graph / compile check in a fresh process: a failed capture leaves the CUDA state unusable."""
    import tempfile

    from tileport.proc import ToolTimeout
    from tileport.proc import run as run_tool
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "check.json"
        cmd = [sys.executable, "-m", "tileport.gpu.callcost", "--only", f"{kind}:{mode}", "--out", str(path)]
        try:
            proc = run_tool(cmd, CHECK_TIMEOUT_S)
        except ToolTimeout:
            return {"ok": False, "mode": mode, "error": f"timed out after {CHECK_TIMEOUT_S} s"}
        if path.is_file():
            return json.loads(path.read_text())
        return {"ok": False, "mode": mode, "error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"}


def graph_in_subprocess(mode: str) -> dict:
    return check_in_subprocess("graph", mode)


def run_one(kind: str, mode: str, out: Path) -> int:
    """One check in this process, its record written to `out` (a failure is recorded, not raised)."""
    check, _ = CHECKS[kind]
    try:
        rec = check(mode)
    except Exception as e:  # noqa: BLE001 - recorded: a capture or compile that fails is a result
        rec = {"ok": False, "mode": mode, "error": f"{type(e).__name__}: {e}"[:1500]}
    write_json(out, rec)
    return 0 if rec.get("ok") else 1


ONLY = ["binding", "python"] + [f"{kind}:{mode}" for kind, (_, modes) in CHECKS.items() for mode in modes]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tileport.gpu.callcost", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out/callcost.json"))
    ap.add_argument("--only", choices=ONLY, help="one section: the binding (no GPU needed) or one check:mode")
    args = ap.parse_args(argv)
    if args.only == "binding":
        rec = binding_cost()
        write_json(args.out, rec)
        print(json.dumps(rec, indent=1))
        return 1 if "error" in rec or rec.get("cheapest") is None else 0
    if args.only == "python":
        rec = {"environment": _cpu_environment(), "cases": PY_CASES, "host_us": python_breakdown()}
        write_json(args.out, rec)
        print("\n".join(f"{v['host_us_min']:7.2f} µs best round ({v['host_us']:.2f} median)  {k}"
                        for k, v in rec["host_us"].items()))
        return 0
    from tileport.ops.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"{ap.prog}: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    if args.only:
        kind, mode = args.only.split(":")
        return run_one(kind, mode, args.out)
    result = run(args.out)
    s = result["summary"]
    print(f"host µs per call (vector_add 1024 f32): cutile-rs op {s['cutile_rs_op_host_us']}, "
          f"torch eager {s['torch_eager_host_us']}, C ABI ({s['c_abi_case']}) {s['c_abi_host_us']}, "
          f"ct.launch {s['ct_launch_host_us']}")
    print("floors, host µs per call: " + ", ".join(f"{k} {v:.2f}" for k, v in s.get("floors_us", {}).items()))
    print("shares, µs: " + ", ".join(f"{k} {v:.2f}" for k, v in s.get("shares_us", {}).items()))
    print(f"targets met: op {s['op_target_met']}, C ABI {s['c_abi_target_met']}; graph replay ok "
          f"{s.get('graph_ok')}; torch.compile ok {s.get('compile_ok')}  results: {args.out}")
    checks = [ok for key in ("graph_c_abi_ok", "graph_ok", "compile_ok") for ok in s.get(key, {}).values()]
    ok = s["op_target_met"] and s["c_abi_target_met"] and all(checks)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
