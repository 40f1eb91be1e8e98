"""The operator call path on the GPU: host µs per call per backend, a CUDA-graph-captured sequence
of tileport ops replayed against eager runs in every capture mode, torch.compile of tileport ops
(default and reduce-overhead), and launches on several streams (tileport.gpu.callcost).

Results go to $TILEPORT_RESULTS_DIR (default out/callpath-gpu): callcost.json, graph.json and
compile.json. Marked `gpu`: skipped with the reason on a machine without CUDA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(os.environ.get("TILEPORT_RESULTS_DIR") or REPO / "out" / "callpath-gpu")


def _require_rs():
    from tileport.ops.backends import unavailable_reason
    reason = unavailable_reason("cutile-rs")
    if reason:
        pytest.fail(f"cutile-rs is unavailable on this GPU machine: {reason}")


def test_graph_captured_c_abi_launch_replays():
    """One prepared C-ABI launch alone, captured and replayed on new data (no Python planning)."""
    from tileport.gpu.bench import environment
    from tileport.gpu.callcost import check_in_subprocess, write_json
    _require_rs()
    rec = check_in_subprocess("graph_c_abi", "global")
    write_json(RESULTS / "graph-c-abi.json", {"environment": environment(), "graph_c_abi": rec})
    assert "error" not in rec, rec["error"]
    assert len(rec["trials"]) == 3 and rec["ok"], rec["trials"]


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_graph_captured_sequence_replays_like_eager(mode):
    """In a fresh process per capture mode (a failed capture leaves CUDA unusable for the tests
    after it)."""
    from tileport.gpu.bench import environment
    from tileport.gpu.callcost import check_in_subprocess, write_json
    _require_rs()
    rec = check_in_subprocess("graph", mode)
    write_json(RESULTS / f"graph-{mode}.json", {"environment": environment(), "graph": rec})
    assert "error" not in rec, rec["error"]
    assert len(rec["trials"]) == 3
    assert rec["ok"], f"graph replay differs from eager: {rec['trials']}"


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_torch_compile_of_tileport_ops_matches_eager(mode):
    """torch.compile(fullgraph=True) of a function of tileport ops (custom ops on cutile-rs; with
    reduce-overhead recorded in a CUDA graph and replayed) equals the eager ops bitwise."""
    from tileport.gpu.bench import environment
    from tileport.gpu.callcost import check_in_subprocess, write_json
    _require_rs()
    rec = check_in_subprocess("compile", mode)
    write_json(RESULTS / f"compile-{mode}.json", {"environment": environment(), "compile": rec})
    assert "error" not in rec, rec["error"]
    assert len(rec["runs"]) == 4
    assert rec["ok"], f"compiled runs differ from eager: {rec['runs']}"


def test_launches_on_several_streams_match():
    """Each (device, stream) pair gets its own cached launch target: the same op on three streams
    (and the default one) gives the same result as the reference."""
    import torch

    import tileport.ops as ops
    _require_rs()
    x = torch.randn(1 << 14, device="cuda")
    y = torch.randn(1 << 14, device="cuda")
    want = x + y
    streams = [torch.cuda.Stream() for _ in range(3)]
    outs = []
    for _ in range(2):
        for s in streams + [torch.cuda.default_stream()]:
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                outs.append(ops.vector_add(x, y, backend="cutile-rs"))
    torch.cuda.synchronize()
    for got in outs:
        assert torch.equal(got, want)


def test_call_cost_per_backend():
    from tileport.gpu.bench import environment
    from tileport.gpu.callcost import TARGET_C_ABI_US, TARGET_OP_US, measure_call_cost, summary, write_json
    _require_rs()
    cost = measure_call_cost()
    s = summary(cost)
    write_json(RESULTS / "callcost.json", {"environment": environment(), "call_cost": cost, "summary": s})
    errors = {f"{op}/{case}": r["error"] for op, rec in cost.items() for case, r in rec.get("cases", {}).items()
              if "error" in r}
    errors.update({op: rec["error"] for op, rec in cost.items() if "error" in rec})
    assert not errors, f"call-cost cases failed: {errors}"
    assert s["c_abi_target_met"], (f"C-ABI launch ({s['c_abi_case']}) {s['c_abi_host_us']:.2f} µs > "
                                   f"{TARGET_C_ABI_US} µs; "
                                   f"floors {s['c_abi_floors_us']}, launcher's own {s.get('c_abi_ours_us')} µs")
    assert s["op_target_met"], (f"cutile-rs op call {s['cutile_rs_op_host_us']:.2f} µs vs torch eager "
                                f"{s['torch_eager_host_us']:.2f} µs (target: <= eager and <= {TARGET_OP_US} µs)")


def test_cached_call_path_does_not_synchronize():
    """torch's sync debug mode raises on any synchronizing torch call made by a repeated op call."""
    import torch

    import tileport.ops as ops
    _require_rs()
    x = torch.randn(4, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(1024, device="cuda", dtype=torch.bfloat16)
    ops.rms_norm(x, w, backend="cutile-rs")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            ops.rms_norm(x, w, backend="cutile-rs")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def _compiled_replays(op: str):
    """The op's compiled replays on cutile-rs (runtime.fastcall), or a skip saying why there are none."""
    from tileport.ops import plan_cache
    from tileport.runtime import fastcall
    if fastcall.module() is None:
        pytest.skip(f"runtime.fastcall: {fastcall.status()}")
    return plan_cache.fast_table(op)


def test_compiled_replay_launches_what_the_python_path_launches():
    """Once built (python3 -m tileport.runtime.fastcall build), a repeated cutile-rs op call is
    promoted to the compiled replay, whose outputs equal the Python path's (out=) bitwise, on the
    current stream; another layout is declined, then promoted beside it."""
    import torch

    import tileport.ops as ops
    from tileport.ops import plan_cache
    _require_rs()
    plan_cache.clear()
    table = _compiled_replays("softmax")
    x = torch.randn(64, 1000, device="cuda", dtype=torch.float16)
    for _ in range(4):
        ops.softmax(x, backend="cutile-rs")
    assert "cutile-rs" in table, "four calls of one signature left no compiled replay"
    compiled = table["cutile-rs"]
    side = torch.cuda.Stream()
    for stream in (torch.cuda.current_stream(), side):
        with torch.cuda.stream(stream):
            x2 = torch.randn_like(x)
            got = compiled((x2,))
            assert got is not None, "the compiled replay declined a call of its own signature"
            want = torch.empty_like(x2)
            ops.softmax(x2, out=want, backend="cutile-rs")  # out=: the Python path
        stream.synchronize()
        assert torch.equal(got, want)
    other = torch.randn(32, 1000, device="cuda", dtype=torch.float16)
    assert compiled((other,)) is None  # another shape: not its signature
    for _ in range(4):
        ops.softmax(other, backend="cutile-rs")
    assert len(table["cutile-rs"].args[0]) == 2
    want = torch.empty_like(other)
    ops.softmax(other, out=want, backend="cutile-rs")
    assert torch.equal(table["cutile-rs"]((other,)), want)


def test_compiled_replay_leaves_a_misaligned_view_to_the_python_path():
    """Same layout, base 2 bytes off: the key matches, the compiled replay declines, and the Python
    path raises its typed error (never a launch at a misaligned address)."""
    import torch

    import tileport.ops as ops
    from tileport.ops import plan_cache
    from tileport.runtime.abi import MisalignedError
    _require_rs()
    plan_cache.clear()
    table = _compiled_replays("vector_add")
    a = torch.randn(4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, device="cuda", dtype=torch.float16)
    for _ in range(4):
        got = ops.vector_add(a, b, backend="cutile-rs")
    assert "cutile-rs" in table and torch.equal(got, a + b)
    shifted = torch.randn(4097, device="cuda", dtype=torch.float16)[1:]
    assert table["cutile-rs"]((shifted, b)) is None
    with pytest.raises(MisalignedError):
        ops.vector_add(shifted, b, backend="cutile-rs")
