"""The C ABI under load and with bad descriptors, on a real GPU.

1. Threads: 8 Python threads, each on its own CUDA stream, run 1,000 op calls each (corpus ops through
   the cutile-rs backend: `tileport.ops` -> the generated cdylib; ctypes releases the GIL, so the
   launchers really run concurrently). Every output is poisoned with NaN before its call and compared
   bit for bit with a reference computed once, single-threaded, with the same kernels (itself checked
   against PyTorch under the op's tolerances and for determinism).
2. Bad descriptors on real CUDA tensors: null, wrong rank, dtype, device, an output aliasing an input or
   another output, overlapping output elements, a misaligned base, a non-contiguous row where the
   kernel computes addresses, a view outside its storage, bad grid and constants -> each the typed
   exception of tileport.runtime.abi, never an abort; the CUDA context still works afterwards.

Results (threads, launches, mismatches, exceptions, the bad-descriptor outcomes, GPU, driver,
commit) are written to $TILEPORT_RESULTS_DIR/ffi-threads.json (default: a folder under the temp dir).

    TILEPORT_LIB=<prebuilt libtileport_kernels.so> TILEPORT_RESULTS_DIR=<dir> \\
        python3 -m pytest -q -m gpu tests/gpu/test_ffi_threads.py
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
THREADS = int(os.environ.get("TILEPORT_FFI_THREADS", "8"))
CALLS_PER_THREAD = int(os.environ.get("TILEPORT_FFI_LAUNCHES", "1000"))
JOIN_TIMEOUT_S = 900
# (op, dtype): one shape per op (its third test shape), dtypes rotated so all three are exercised.
OPS = [("vector_add", "float32"), ("relu", "float16"), ("gelu", "bfloat16"), ("silu_and_mul", "float16"),
       ("swiglu", "float32"), ("softmax", "float32"), ("softmax_gather", "float16"),
       ("softmax_online", "bfloat16"), ("rms_norm", "bfloat16"), ("layer_norm", "float32"),
       ("rope", "float16"), ("matmul", "float16"), ("bmm", "bfloat16"), ("matmul_splitk", "float32")]

RESULTS: dict[str, Any] = {}


# ---------------------------------------------------------------- results file


def _results_path() -> Path:
    root = os.environ.get("TILEPORT_RESULTS_DIR") or os.path.join(tempfile.gettempdir(), "tileport-results")
    return Path(root) / "ffi-threads.json"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _commit() -> str:
    if os.environ.get("TILEPORT_COMMIT"):
        return os.environ["TILEPORT_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _driver() -> dict[str, Any]:
    out: dict[str, Any] = {"driver_version": None, "cuda_driver_api": None}
    if shutil.which("nvidia-smi"):
        try:
            out["driver_version"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                text=True, timeout=60).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
            out["cuda_driver_api"] = version.value
    except (OSError, AttributeError):
        pass
    return out


@pytest.fixture(scope="module", autouse=True)
def results_file():
    """Write what the tests of this module found, also when one fails (partial results say so)."""
    started = time.time()
    yield
    import torch
    RESULTS.update({
        "test": "tests/gpu/test_ffi_threads.py",
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "library": os.environ.get("TILEPORT_LIB"),
        "seconds": round(time.time() - started, 1),
        **_driver(),
    })
    path = _results_path()
    _write_atomic(path, json.dumps(RESULTS, indent=2, default=str) + "\n")
    print(f"\nFFI results: {path}")


def _require_cutile_rs() -> None:
    from tileport.ops.backends import unavailable_reason
    reason = unavailable_reason("cutile-rs")
    if reason is None:
        return
    required = {b.strip() for b in os.environ.get("TILEPORT_GPU_REQUIRE", "").split(",") if b.strip()}
    if "cutile-rs" in required or "all" in required:
        pytest.fail(f"backend 'cutile-rs' is required ($TILEPORT_GPU_REQUIRE) but unavailable: {reason}")
    pytest.skip(f"backend 'cutile-rs' is unavailable here: {reason}")


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    op: str
    dtype: str
    shape: tuple
    spec: Any
    inputs: tuple
    refs: tuple          # reference outputs (cutile-rs, computed once)
    launches: int        # kernel launches per op call
    label: str = field(init=False)

    def __post_init__(self):
        self.label = f"{self.op}/{self.dtype}/{'x'.join(map(str, self.shape))}"


def _tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _bits(t):
    """The tensor's bits as integers (exact comparison: -0.0 differs from 0.0, NaN never matches)."""
    import torch
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _run(spec, inputs, outs):
    """One op call through the public API on the cutile-rs backend, on the current stream."""
    from tileport.ops.api import call
    return call(spec, *inputs, out=outs, backend="cutile-rs")


def _fresh_outputs(spec, inputs):
    """The op's outputs, poisoned (NaN) so that an element the kernel does not write shows."""
    outs = _tuple(spec.allocate(*inputs))
    for o in outs:
        o.fill_(float("nan") if o.dtype.is_floating_point else -1)
    return outs if len(outs) > 1 else outs[0]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    import torch

    from tileport.gpu.check import compare
    from tileport.ops.specs import all_specs
    _require_cutile_rs()
    specs = all_specs()
    out = []
    for op, dtype in OPS:
        spec = specs[op]
        shape = tuple(spec.shapes[min(2, len(spec.shapes) - 1)])
        inputs = spec.make_inputs(shape, dtype, "cuda", 0)
        first = _run(spec, inputs, _fresh_outputs(spec, inputs))
        second = _run(spec, inputs, _fresh_outputs(spec, inputs))
        torch.cuda.synchronize()
        tol = spec.tolerances[dtype]
        ok, _, _, msg = compare(first, spec.reference(*inputs), tol.rtol, tol.atol)
        assert ok, f"{op} {dtype} {shape}: the cutile-rs result is wrong before any threading: {msg}"
        assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(_tuple(first), _tuple(second))), \
            f"{op} {dtype} {shape}: two single-threaded runs differ (the kernel is not deterministic)"
        outs = _fresh_outputs(spec, inputs)
        launches = len(spec.plan(*inputs, outs))
        out.append(Case(op, dtype, shape, spec, tuple(inputs), _tuple(first), launches))
    torch.cuda.synchronize()
    RESULTS["cases"] = [{"case": c.label, "kernel_launches_per_call": c.launches} for c in out]
    return out


# ---------------------------------------------------------------- 1. threads on distinct streams


def _worker(tid: int, cases: list[Case], stream, barrier: threading.Barrier, result: dict) -> None:
    import torch
    try:
        with torch.cuda.stream(stream):
            if torch.cuda.current_stream().cuda_stream != stream.cuda_stream:
                raise RuntimeError("the thread's current stream is not its own stream")
            outs = [_tuple(c.spec.allocate(*c.inputs)) for c in cases]  # this thread's buffers
            differing = torch.zeros(len(cases), dtype=torch.int64, device="cuda")
            calls = [0] * len(cases)
            barrier.wait(timeout=300)
            start = time.perf_counter()
            for i in range(CALLS_PER_THREAD):
                k = (tid + i) % len(cases)
                case, o = cases[k], outs[k]
                for t in o:
                    t.fill_(float("nan"))
                _run(case.spec, case.inputs, o if len(o) > 1 else o[0])
                for got, ref in zip(o, case.refs):
                    differing[k] += torch.ne(_bits(got), _bits(ref)).any()
                calls[k] += 1
            stream.synchronize()
            result.update(seconds=time.perf_counter() - start, calls=calls, mismatches=differing.tolist())
    except BaseException as e:  # noqa: BLE001 - every failure of a thread is reported
        barrier.abort()
        result["exception"] = f"{type(e).__name__}: {e}"


def test_threads_on_distinct_streams_give_exact_results(cases):
    import torch
    streams = [torch.cuda.Stream() for _ in range(THREADS)]
    handles = {s.cuda_stream for s in streams}
    assert len(handles) == THREADS and 0 not in handles, "the streams are not distinct"
    torch.cuda.synchronize()  # inputs and references are ready before any thread reads them
    barrier = threading.Barrier(THREADS)
    results = [dict() for _ in range(THREADS)]
    threads = [threading.Thread(target=_worker, args=(i, cases, streams[i], barrier, results[i]), daemon=True)
               for i in range(THREADS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    deadline = start + JOIN_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    torch.cuda.synchronize()
    exceptions = [f"thread {i}: {r['exception']}" for i, r in enumerate(results) if "exception" in r]
    mismatches: dict[str, int] = {}
    op_calls = kernel_launches = 0
    for r in results:
        for k, (n, bad) in enumerate(zip(r.get("calls", []), r.get("mismatches", []))):
            op_calls += n
            kernel_launches += n * cases[k].launches
            if bad:
                mismatches[cases[k].label] = mismatches.get(cases[k].label, 0) + bad
    RESULTS["threads"] = {
        "threads": THREADS, "calls_per_thread": CALLS_PER_THREAD, "streams": len(handles),
        "op_calls": op_calls, "kernel_launches": kernel_launches,
        "mismatches": sum(mismatches.values()), "mismatches_by_case": mismatches,
        "exceptions": exceptions, "hung_threads": hung,
        "seconds": round(time.perf_counter() - start, 2),
        "per_thread_seconds": [round(r.get("seconds", -1), 2) for r in results],
    }
    assert not hung, f"threads {hung} did not finish within {JOIN_TIMEOUT_S} s"
    assert not exceptions, exceptions
    assert op_calls == THREADS * CALLS_PER_THREAD
    assert not mismatches, f"outputs differ from the reference: {mismatches}"


# ---------------------------------------------------------------- 2. bad descriptors on CUDA tensors


def _bad_cases(lib) -> list[tuple[str, type, Callable[[], Any]]]:
    import torch

    from tileport.runtime import abi
    n, dev = 4096, "cuda"
    vadd, relu = lib["vector_add_kernel"], lib["relu_kernel"]
    ln, gather = lib["layer_norm_fwd_kernel"], lib["softmax_gather_kernel"]
    f32 = lambda *s: torch.randn(*s, device=dev)  # noqa: E731
    a, b, c = f32(n), f32(n), torch.empty(n, device=dev)
    x2, w, bias = f32(64, 256), f32(256), f32(256)
    y2, mean, rstd = torch.empty(64, 256, device=dev), torch.empty(64, device=dev), torch.empty(64, device=dev)
    grid = ((n + 255) // 256,)
    cases = [
        ("null descriptor", abi.NullTensorError, lambda: vadd(None, b, c, 256, grid=grid)),
        ("wrong rank", abi.RankError, lambda: vadd(f32(64, 64), b, c, 256, grid=grid)),
        ("rank above the descriptor limit", abi.RankError,
         lambda: vadd(f32(*(2,) * 7), b, c, 256, grid=grid)),
        ("unsupported dtype f64", abi.DTypeError,
         lambda: vadd(a.double(), b.double(), c.double(), 256, grid=grid)),
        ("mixed dtypes", abi.DTypeError, lambda: vadd(a, b.half(), c, 256, grid=grid)),
        ("integer dtype", abi.DTypeError,
         lambda: relu(torch.zeros(n, dtype=torch.int32, device=dev), torch.zeros(n, dtype=torch.int32,
                                                                                  device=dev), 256, grid=grid)),
        ("fixed-dtype array of the wrong dtype", abi.DTypeError,
         lambda: ln(x2, w, bias, y2, mean.half(), rstd, 1e-5, 1, 256, grid=(64,))),
        ("CPU tensor", abi.WrongDeviceError, lambda: vadd(a.cpu(), b, c, 256, grid=grid)),
        ("output aliasing an input (in place)", abi.AliasingError, lambda: vadd(a, b, a, 256, grid=grid)),
        ("output overlapping part of an input", abi.AliasingError,
         lambda: relu(a, a[n // 2:], 256, grid=((n // 2 + 255) // 256,))),
        ("two outputs sharing memory", abi.AliasingError,
         lambda: ln(x2, w, bias, y2, mean, mean, 1e-5, 1, 256, grid=(64,))),
        ("output with overlapping elements (stride 0)", abi.LayoutError,
         lambda: vadd(a, b, torch.empty(1, device=dev).expand(n), 256, grid=grid)),
        ("misaligned base (4 bytes)", abi.MisalignedError,
         lambda: vadd(torch.empty(n + 4, device=dev)[1:n + 1], b, c, 256, grid=grid)),
        ("misaligned output (8 bytes)", abi.MisalignedError,
         lambda: vadd(a, b, torch.empty(n + 4, device=dev)[2:n + 2], 256, grid=grid)),
        ("non-contiguous row where the kernel computes addresses", abi.LayoutError,
         lambda: gather(f32(64, 512)[:, ::2], y2, 256, grid=(64,))),
        ("empty grid", abi.InvalidArgumentError, lambda: vadd(a, b, c, 256, grid=(0,))),
        ("tile not a power of two", abi.InvalidArgumentError, lambda: vadd(a, b, c, 100, grid=grid)),
    ]
    if torch.empty(0, device=dev).data_ptr() == 0:  # an empty CUDA tensor has no memory: a null pointer
        cases.append(("null data pointer (empty tensor)", abi.NullTensorError,
                      lambda: vadd(torch.empty(0, device=dev), b, c, 256, grid=grid)))
    if torch.cuda.device_count() > 1:
        cases.append(("arrays on two devices", abi.WrongDeviceError,
                      lambda: vadd(a, b, torch.empty(n, device="cuda:1"), 256, grid=grid)))
    return cases


def _outside_storage_view():
    """A view whose storage was shrunk under it (None when this torch refuses to shrink it)."""
    import torch
    base = torch.empty(4096, device="cuda")
    view = base[1024:]
    try:
        base.untyped_storage().resize_(1024 * 4)
    except Exception:  # noqa: BLE001 - a torch that refuses: the case is reported as skipped
        return None
    return view


def test_bad_descriptors_raise_typed_exceptions(cases):
    import torch

    from tileport.runtime import abi
    from tileport.runtime.library import load
    lib = load()
    outcomes = []
    for label, expected, call in _bad_cases(lib):
        rec = {"case": label, "expected": expected.__name__}
        try:
            call()
            rec.update(got=None, ok=False)
        except Exception as e:  # noqa: BLE001 - the type is what is checked
            rec.update(got=type(e).__name__, message=str(e)[:300], ok=type(e) is expected)
        outcomes.append(rec)
    view = _outside_storage_view()
    if view is None:
        outcomes.append({"case": "view outside its storage", "expected": "LayoutError", "skipped":
                         "torch refused to shrink the storage"})
    else:
        rec = {"case": "view outside its storage", "expected": "LayoutError"}
        try:
            lib["relu_kernel"](view, torch.empty(3072, device="cuda"), 256, grid=(12,))
            rec.update(got=None, ok=False)
        except Exception as e:  # noqa: BLE001
            rec.update(got=type(e).__name__, message=str(e)[:300], ok=type(e) is abi.LayoutError)
        outcomes.append(rec)
    # The context survived: a good launch still gives the reference result.
    case = cases[0]
    got = _run(case.spec, case.inputs, _fresh_outputs(case.spec, case.inputs))
    torch.cuda.synchronize()
    healthy = all(torch.equal(_bits(g), _bits(r)) for g, r in zip(_tuple(got), case.refs))
    RESULTS["bad_descriptors"] = {"cases": outcomes, "passed": sum(bool(o.get("ok")) for o in outcomes),
                                  "skipped": sum("skipped" in o for o in outcomes),
                                  "context_healthy_after": healthy}
    wrong = [o for o in outcomes if "skipped" not in o and not o["ok"]]
    assert not wrong, wrong
    assert healthy, "a good launch after the bad ones no longer gives the reference result"
