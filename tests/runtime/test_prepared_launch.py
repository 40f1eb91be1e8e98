"""Prepared launches: a cached cutile-rs plan replays one recorded resolved launch with new array
addresses (support.rs `tileport_launch_prepared`) instead of calling the entry's launcher, which
would check the same descriptors, build the same key and find the same function every time.

CPU only. The Python side runs on the stub library of tileport.gpu.callcost (it records any launch
made while recording and keeps what a replay passes); the library side runs the generated crate on
a fake CUDA driver (fake_cuda.c) with a fake `tileiras` (an ELF-headed placeholder cubin), so that
the first launch of a specialization goes through cutile's own launcher without a toolkit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileport.ops import plan_cache

REPO = Path(__file__).resolve().parents[2]
HOT_PATH_CALLS = {"cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent"}


def _cc() -> str:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stub library / fake driver")
    return cc


# ---------------------------------------------------------------------------------------------
# The Python side, on the stub library


@pytest.fixture
def stub_plan(monkeypatch, tmp_path):
    """(plan, stub library, inputs, stream cell) of vector_add recorded from CPU tensors on the stub."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    _cc()
    import ctypes

    from tileport.gpu import callcost
    from tileport.ops import backends
    from tileport.ops.specs import get_spec
    from tileport.runtime import library as lib_mod
    from tileport.runtime import tensors
    stub = lib_mod.KernelLibrary(callcost._build_stub(tmp_path), lib_mod.REPO_CRATE / "kernels.json")
    stub.dll.stub_last_replay.restype = ctypes.POINTER(ctypes.c_uint64)
    stream = {"now": 0x100}
    monkeypatch.setattr(backends, "library", lambda: stub)
    monkeypatch.setattr(tensors, "describe", callcost._cpu_describe)
    monkeypatch.setattr(plan_cache, "_raw_stream", lambda: (lambda index: stream["now"]))
    spec = get_spec("vector_add")
    a, b = spec.make_inputs((256,), "float32", "cpu", 0)
    out = spec.allocate(a, b)
    plan = plan_cache.record(spec, "cutile-rs", (a, b), (out,), spec.plan(a, b, out), allocated=True,
                             multi_output=False)
    return plan, stub, (a, b), stream, torch


def _last_replay(stub) -> list[int]:
    seen = stub.dll.stub_last_replay()
    return [seen[i] for i in range(5)]


def test_a_replay_after_a_recorded_launch_passes_the_new_addresses_and_stream(stub_plan):
    plan, stub, (a, b), stream, torch = stub_plan
    (launch,) = plan.launches
    assert stub.replay is not None and launch._replay is None
    plan.run((a, b), None)  # through the entry, recorded
    assert launch._replay is not None and launch._attempts == plan_cache.PREPARE_ATTEMPTS - 1
    for now in (0x200, 0x300):
        stream["now"] = now
        a2, b2 = torch.randn(256), torch.randn(256)
        y = plan.run((a2, b2), None)
        assert _last_replay(stub) == [0x5EED, a2.data_ptr(), b2.data_ptr(), y.data_ptr(), now]


def test_a_prepared_replay_still_refuses_a_misaligned_view(stub_plan):
    """The key holds layouts, not addresses: the prepared path checks alignment as the entry path does."""
    from tileport.runtime.abi import MisalignedError
    plan, stub, (a, b), _, torch = stub_plan
    plan.run((a, b), None)
    assert plan.launches[0]._replay is not None
    shifted = torch.empty(257)[1:]  # the recorded layout, 4 bytes off a 16-byte boundary
    before = _last_replay(stub)
    with pytest.raises(MisalignedError):
        plan.run((shifted, b), None)
    assert _last_replay(stub) == before  # nothing launched


def test_a_prepared_replay_still_refuses_an_out_that_aliases_an_input(stub_plan):
    from tileport.ops.specs import get_spec
    from tileport.runtime.abi import AliasingError
    _, stub, (a, b), _, torch = stub_plan
    spec = get_spec("vector_add")
    out = torch.empty(256)
    plan = plan_cache.record(spec, "cutile-rs", (a, b), (out,), spec.plan(a, b, out), allocated=False,
                             multi_output=False)
    plan.run((a, b), out)
    assert plan.launches[0]._replay is not None
    with pytest.raises(AliasingError):
        plan.run((a, b), a)


def test_another_thread_replays_with_addresses_of_its_own(stub_plan):
    import threading
    plan, stub, (a, b), _, torch = stub_plan
    (launch,) = plan.launches
    plan.run((a, b), None)  # through the entry, recorded
    plan.run((a, b), None)  # prepared, with this thread's arguments
    seen = []
    worker = threading.Thread(target=lambda: seen.append(plan.run((b, a), None)))
    worker.start()
    worker.join()
    assert len(launch._fast) == 2
    (mine, theirs) = launch._fast.values()
    assert mine[0] is not theirs[0] and mine[3] is theirs[3]  # own address arrays, one prepared launch
    assert _last_replay(stub)[1:4] == [b.data_ptr(), a.data_ptr(), seen[0].data_ptr()]


def test_a_library_without_prepared_launches_keeps_the_entry_path(stub_plan, monkeypatch):
    plan, stub, (a, b), _, _ = stub_plan
    from tileport.ops.specs import get_spec
    monkeypatch.setattr(stub, "replay", None)
    spec = get_spec("vector_add")
    plan = plan_cache.record(spec, "cutile-rs", (a, b), plan_cache.as_tuple(spec.allocate(a, b)),
                             spec.plan(a, b, spec.allocate(a, b)), allocated=True, multi_output=False)
    for _ in range(3):
        plan.run((a, b), None)
    assert plan.launches[0]._replay is None and plan.launches[0]._attempts == 0


def test_recording_stops_after_its_attempts(stub_plan, monkeypatch):
    """A launch that never records (the stub's take refuses) costs no more than PREPARE_ATTEMPTS tries."""
    plan, stub, (a, b), _, _ = stub_plan
    (launch,) = plan.launches
    takes = []
    api = stub.replay
    monkeypatch.setattr(launch, "_api", type(api)(api.record_next, lambda *args: takes.append(args) or 0,
                                                  api.launch, api.free))
    for _ in range(plan_cache.PREPARE_ATTEMPTS + 3):
        plan.run((a, b), None)
    assert len(takes) == plan_cache.PREPARE_ATTEMPTS and launch._replay is None


# ---------------------------------------------------------------------------------------------
# The library side, on a fake CUDA driver

PROBE = textwrap.dedent("""
    import ctypes, json, sys
    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_cuda_calls.restype = ctypes.c_char_p
    fake.fake_cuda_last_launch.restype = ctypes.POINTER(ctypes.c_uint64)
    fake.fake_cuda_expect_params(11)
    from fake_arrays import FakeArray
    from tileport.runtime.library import load
    from tileport.runtime.tensors import describe
    lib = load()
    api, entry = lib.replay, lib["vector_add_kernel"]
    arrays = {n: FakeArray((1000,), "<f4") for n in "abc"}
    launch = entry.prepare((4,), 0, {n: describe(x, n).desc for n, x in arrays.items()}, {"TILE": 256})
    ptrs = [arrays[n].ptr for n in "abc"]
    descs = (ctypes.c_uint64 * 3)(*map(ctypes.addressof, launch.descs))

    def calls():
        text = fake.fake_cuda_calls().decode()
        fake.fake_cuda_reset()
        return dict(kv.split("=") for kv in text.split(";") if kv)

    def seen():
        last = fake.fake_cuda_last_launch()
        return [last[i] for i in range(19)]
    out = {}
    api.record_next()
    launch(ptrs, 0x1000)  # the first launch: the entry compiled, then launched as a resolved launch, recorded
    first = api.take(0, descs, 3)
    out["after_first"] = first
    api.free(first)
    calls()
    api.record_next()
    launch(ptrs, 0x1000)  # resolved, recorded
    out["resolved"] = seen()
    handle = ctypes.c_uint64(api.take(0, descs, 3))
    out["handle"] = handle.value
    out["again"] = api.take(0, descs, 3)  # taken once only
    calls()
    addresses, stream = (ctypes.c_uint64 * 3)(*ptrs), ctypes.c_uint64(0x1000)
    out["replay_rc"] = api.launch(handle, addresses, stream)
    out["replay"], out["replay_calls"] = seen(), calls()
    addresses[0], addresses[2], stream.value = ptrs[0] + 0x100, ptrs[2] + 0x2000, 0x2000
    out["moved_rc"] = api.launch(handle, addresses, stream)
    out["moved"] = seen()
    calls()
    addresses[1] = ptrs[1] + 8
    out["misaligned_rc"], out["misaligned_error"] = api.launch(handle, addresses, stream), lib.last_error()
    addresses[1] = 0
    out["null_rc"] = api.launch(handle, addresses, stream)
    out["refused_calls"] = calls()
    api.free(handle)
    from tileport.gpu import callcost  # its GPU case of the same: a new grid, so a new specialization
    other = entry.prepare((8,), 0, {n: describe(x, n).desc for n, x in arrays.items()}, {"TILE": 128})
    case = callcost.replay_case(other, ptrs, 0x3000)
    calls()
    case()
    out["case"], out["case_calls"] = seen(), calls()
    print(json.dumps(out))
""")


@pytest.mark.cargo
def test_the_library_replays_the_recorded_launch_with_new_addresses(library, tmp_path):
    """On the fake driver (the idiomatic crate: the first launch compiles the entry and takes the resolved
    path, so it is recorded too; vector_add's output is a block's `&mut Tensor`, passed with its
    partition's extent and stride): a resolved launch is recorded, once; its replay makes the very
    launch the resolved path made (function, grid, block, stream, all eleven parameter values) with
    only the hot path's driver calls; new addresses and a new stream reach the launch, the other
    parameters stay; an address of another alignment class and a null address are refused before any
    driver call."""
    from fake_driver import build_fake_driver, fake_tileiras

    from tileport import toolchain
    fake, tileiras = build_fake_driver(tmp_path), fake_tileiras(tmp_path)
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(library.path), TILEPORT_JIT_CACHE="0", CUTILE_TILEIRAS_PATH=str(tileiras),
               TMPDIR=str(tmp_path), PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(Path(__file__).parent)]))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(fake)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["after_first"] != 0 and out["handle"] != 0 and out["again"] == 0
    assert out["replay_rc"] == 0 and out["replay"] == out["resolved"]
    assert set(out["replay_calls"]) <= HOT_PATH_CALLS and out["replay_calls"]["cuLaunchKernel"] == "1"
    resolved, moved = out["resolved"], out["moved"]
    assert out["moved_rc"] == 0 and moved[:7] == resolved[:7] and moved[7] == 0x2000
    params = resolved[8:]  # a: ptr, extent, stride; b: ...; c: ..., partition extent and stride
    assert moved[8:] == [params[0] + 0x100, *params[1:6], params[6] + 0x2000, *params[7:]]
    assert out["misaligned_rc"] == -9 and "aligned otherwise" in out["misaligned_error"]
    assert out["null_rc"] == -1 and "cuLaunchKernel" not in out["refused_calls"]
    # callcost's c_abi_replay case: recorded after cutile's own first launch, then replayed
    assert out["case"][1:4] == [8, 1, 1] and out["case"][7] == 0x3000 and out["case"][8] == params[0]
    assert set(out["case_calls"]) <= HOT_PATH_CALLS and out["case_calls"]["cuLaunchKernel"] == "1"


def test_a_launch_that_raises_still_ends_the_recording(stub_plan, monkeypatch):
    """Recording stays on until taken (the library copies every resolved launch meanwhile): an
    exception out of the entry's launch must not leave it on."""
    plan, stub, (a, b), _, _ = stub_plan
    (launch,) = plan.launches
    taken = []
    api = stub.replay
    monkeypatch.setattr(launch, "_api", type(api)(api.record_next, lambda *args: taken.append(args) or api.take(*args),
                                                  api.launch, api.free))

    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(launch, "_raw", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plan.run((a, b), None)
    assert len(taken) == 1 and launch._replay is None


def test_a_failed_recorded_launch_raises_its_own_error(stub_plan, monkeypatch):
    """Regression (H200: six launches failed as "tileport_take_prepared: no resolved launch was recorded"):
    the entry's error was read after `take`, whose own message had replaced it."""
    plan, stub, (a, b), _, _ = stub_plan
    (launch,) = plan.launches
    errors = ["launching `vector_add_kernel` failed: the JIT refused it"]
    api = stub.replay

    def take(*args):
        errors.append("tileport_take_prepared: no resolved launch was recorded")
        return 0
    monkeypatch.setattr(launch, "_api", type(api)(api.record_next, take, api.launch, api.free))
    monkeypatch.setattr(launch, "_raw", lambda *args: -5)
    monkeypatch.setattr(launch, "_lib", type("Lib", (), {"last_error": staticmethod(lambda: errors[-1])}))
    with pytest.raises(Exception, match="the JIT refused it"):
        plan.run((a, b), None)
    assert len(errors) == 2  # take was called: the recording ended
