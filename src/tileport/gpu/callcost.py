"""Host cost of one operator call, per backend, and a CUDA-graph replay check (needs a GPU).

    python3 -m tileport.gpu.callcost --out out/callcost.json

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
| ct_launch              | `ct.launch` alone with ready arguments (vector_add only)                   |
| tileport_cutile_rs     | `tileport.ops.<op>(...)` on `cutile-rs`, allocating its output            |
| tileport_cutile_rs_out | the same with `out=`                                                       |
| custom_op_cutile_rs    | `torch.ops.tileport.<op>` (the torch.compile path) on `cutile-rs`          |
| c_abi_prepared         | the C symbol with prepared ctypes arguments (library.PreparedLaunch)       |
| c_abi_entry            | the generic `KernelLibrary[kernel](...)` call (descriptors built per call) |

Graph check: a sequence of tileport ops on `cutile-rs` (rms_norm -> silu_and_mul -> softmax ->
matmul) captured with `torch.cuda.graph`, replayed on new input data, compared with eager runs of
the same ops (outputs are poisoned with NaN before each replay, so a replay that does nothing fails).
"""

from __future__ import annotations

import argparse
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
    if op == "vector_add":
        cases.update(_raw_cases(spec, inputs, outs))
    return cases


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
            "c_abi_entry": lambda: entry(grid=launch.grid, stream=handle, **launch.args)}


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


def summary(cost: dict) -> dict:
    """The numbers the issue's targets speak of, from measure_call_cost's result."""
    va = cost.get("vector_add", {}).get("cases", {})

    def host(case: str) -> float | None:
        return va.get(case, {}).get("host_us")
    rs, eager, raw = host("tileport_cutile_rs"), host("torch_eager"), host("c_abi_prepared")
    return {"cutile_rs_op_host_us": rs, "torch_eager_host_us": eager, "c_abi_prepared_host_us": raw,
            "ct_launch_host_us": host("ct_launch"),
            "op_target_met": rs is not None and eager is not None and rs <= eager and rs <= TARGET_OP_US,
            "c_abi_target_met": raw is not None and raw <= TARGET_C_ABI_US,
            "targets_us": {"op": f"<= torch eager and <= {TARGET_OP_US}", "c_abi": f"<= {TARGET_C_ABI_US}"}}


def write_json(path: Path, data: dict) -> None:
    """Atomic write (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def run(out: Path) -> dict:
    from tileport.gpu.bench import environment
    result: dict[str, Any] = {"environment": environment()}
    result["call_cost"] = measure_call_cost()
    result["summary"] = summary(result["call_cost"])
    write_json(out, result)
    result["graph"] = graph_in_subprocess("global")
    if not result["graph"].get("ok"):
        # Which capture mode admits the sequence tells what breaks it: a prohibited call made
        # outside the stream (allowed in "relaxed") or an operation on the capturing stream itself.
        result["graph_other_modes"] = {m: graph_in_subprocess(m) for m in ("thread_local", "relaxed")}
    write_json(out, result)
    return result


def graph_in_subprocess(mode: str) -> dict:
    """graph_check in a fresh process: a failed capture leaves the CUDA state unusable."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "graph.json"
        proc = subprocess.run([sys.executable, "-m", "tileport.gpu.callcost", "--graph-only", mode, "--out", str(path)],
                              capture_output=True, text=True, timeout=300)
        if path.is_file():
            return json.loads(path.read_text())
        return {"ok": False, "capture_error_mode": mode,
                "error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1000:]}"}


def graph_only(mode: str, out: Path) -> int:
    try:
        rec = graph_check(mode=mode)
    except Exception as e:  # noqa: BLE001 - recorded: a capture that fails is a result
        rec = {"ok": False, "capture_error_mode": mode, "error": f"{type(e).__name__}: {e}"[:1000]}
    write_json(out, rec)
    return 0 if rec.get("ok") else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tileport.gpu.callcost", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out/callcost.json"))
    ap.add_argument("--graph-only", metavar="MODE", choices=("global", "thread_local", "relaxed"),
                    help="only the CUDA-graph check, with this capture_error_mode")
    args = ap.parse_args(argv)
    from tileport.ops.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"{ap.prog}: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    if args.graph_only:
        return graph_only(args.graph_only, args.out)
    result = run(args.out)
    s = result["summary"]
    print(f"host µs per call (vector_add 1024 f32): cutile-rs op {s['cutile_rs_op_host_us']}, "
          f"torch eager {s['torch_eager_host_us']}, C ABI prepared {s['c_abi_prepared_host_us']}, "
          f"ct.launch {s['ct_launch_host_us']}")
    print(f"graph replay ok: {result['graph'].get('ok')}  results: {args.out}")
    return 0 if result["graph"].get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
