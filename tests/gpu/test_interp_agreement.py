"""The Tile IR interpreter agrees with the GPU: every corpus capture, both tile backends.

For each capture, the interpreter's small problem (eval.interp.problem: same inputs,
same grid, outputs poisoned with NaN) runs
- on the GPU through cuTile Python (`ct.launch`) and through the cutile-rs library, and
- in the interpreter, on the Tile IR of the same side (cuTile Python's export for `cutile`, the
  library's IR export for `cutile-rs`);
each GPU output must match the interpreter's within the op spec's dtype tolerance (NaN exactly where
the interpreter has NaN: elements never written). One JSON record per capture goes to
$TILEPORT_RESULTS_DIR/interp_agreement-<backend>.json (default: the current directory), rewritten
atomically after every case so a partial run keeps its results; the backends can run as two
invocations (`-k "not cutile-rs"`, `-k cutile-rs`) without overwriting each other.

    TILEPORT_LIB=<path to libtileport_kernels.so> TILEPORT_RESULTS_DIR=out \
        python3 -m pytest -q -m gpu tests/gpu/test_interp_agreement.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from eval.interp import problem, variants
from tileport.ops.backends import unavailable_reason
from tileport.ops.capture_ref import reference_bytecode, reference_kernel
from tileport.ops.specs import all_specs
from tileport.tileir import read_module
from tileport.tileir.interp import compare, run_kernel

pytestmark = pytest.mark.gpu

BACKENDS = ("cutile", "cutile-rs")
RESULTS: list[dict] = []


def _captures():
    seen, out = set(), []
    for spec in all_specs().values():
        for cap in spec.captures:
            if (spec.kernel_file, cap.label) not in seen:
                seen.add((spec.kernel_file, cap.label))
                out.append((spec, cap))
    return out


CASES = [(spec, cap, backend, v) for spec, cap in _captures() for backend in BACKENDS
         for v in range(variants(cap))]


def _results_path(backend: str) -> Path:
    return Path(os.environ.get("TILEPORT_RESULTS_DIR", ".")) / f"interp_agreement-{backend}.json"


def _record(entry: dict) -> None:
    RESULTS.append(entry)
    mine = [r for r in RESULTS if r["backend"] == entry["backend"]]
    path = _results_path(entry["backend"])
    path.parent.mkdir(parents=True, exist_ok=True)
    agree = sum(r["agree"] for r in mine)
    body = json.dumps({"backend": entry["backend"], "commit": os.environ.get("TILEPORT_COMMIT", ""),
                       "cases": len(mine), "agree": agree, "results": mine}, indent=1)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        f.write(body + "\n")
    os.replace(f.name, path)


def _require(backend: str) -> None:
    reason = unavailable_reason(backend)
    if reason is None:
        return
    required = {b.strip() for b in os.environ.get("TILEPORT_GPU_REQUIRE", "").split(",") if b.strip()}
    if backend in required or "all" in required:
        pytest.fail(f"backend {backend!r} is required ($TILEPORT_GPU_REQUIRE) but unavailable: {reason}")
    pytest.skip(f"backend {backend!r} is unavailable here: {reason}")


def _to_torch(array):
    import torch
    data = torch.from_numpy(np.ascontiguousarray(array.data))
    if array.elem == "bf16":
        data = data.to(torch.bfloat16)  # exact: the values are bf16 values held in float32
    return data.cuda()


def _launch_args(prob, cap) -> tuple[dict, dict]:
    """Kernel arguments by parameter name (torch tensors, Python scalars, constants) and the tensors."""
    tensors, args = {}, {}
    for name, arg in prob.args:
        if hasattr(arg, "data"):
            tensors[name] = args[name] = _to_torch(arg)
        else:
            args[name] = float(arg.value) if arg.elem.startswith("f") else int(arg.value)
    args.update(cap.constants)
    return args, tensors


def _run_gpu(backend: str, spec, cap, prob) -> dict:
    import torch
    args, tensors = _launch_args(prob, cap)
    if backend == "cutile":
        import cuda.tile as ct
        from tileport.capture.export import kernel_parameters
        kernel = reference_kernel(spec, cap.kernel)
        positional = tuple(args[p] for p in kernel_parameters(kernel))
        ct.launch(torch.cuda.current_stream(), prob.grid, kernel, positional)
    else:
        from tileport.runtime.library import load
        load()[cap.kernel](grid=prob.grid, **args)
    torch.cuda.synchronize()
    return {name: tensors[name].float().cpu().numpy() for name in prob.outputs}


def _interpreted(backend: str, spec, cap, prob) -> dict:
    if backend == "cutile":
        return run_kernel(read_module(reference_bytecode(spec, cap)), prob.args, prob.grid)
    from tileport.capture import generated_arg_roles, generated_bytecode
    from tileport.runtime.library import load
    lib = load()
    port = read_module(generated_bytecode(lib, cap)[1])
    return run_kernel(port, prob.args, prob.grid, generated_arg_roles(lib, cap, port))


@pytest.mark.parametrize("spec,cap,backend,variant", CASES,
                         ids=[f"{s.kernel_file[:-3]}:{c.label}#{v}-{b}" for s, c, b, v in CASES])
def test_interpreter_agrees_with_gpu(spec, cap, backend, variant):
    _require(backend)
    tol = spec.tolerances[next(iter(cap.arrays.values()))[0]]
    prob = problem(cap, spec.kernel_file, tolerance=(tol.rtol, tol.atol), variant=variant)
    entry = {"kernel": cap.kernel, "capture": cap.label, "variant": variant, "backend": backend,
             "grid": list(prob.grid),
             "rtol": tol.rtol, "atol": tol.atol, "agree": False, "outputs": [], "error": ""}
    t0 = time.perf_counter()
    try:
        gpu = _run_gpu(backend, spec, cap, prob)
        interp = _interpreted(backend, spec, cap, prob)
        comparisons = [compare(name, interp[name], gpu[name], exact=False, rtol=tol.rtol, atol=tol.atol)
                       for name in prob.outputs]
        entry["outputs"] = [c.__dict__ for c in comparisons]
        entry["agree"] = all(c.agree for c in comparisons)
    except Exception as e:  # noqa: BLE001 - recorded in the JSON, then the test fails with it
        entry["error"] = f"{type(e).__name__}: {e}"
    entry["seconds"] = round(time.perf_counter() - t0, 3)
    _record(entry)
    assert not entry["error"], entry["error"]
    assert entry["agree"], [c for c in entry["outputs"] if not c["agree"]]
