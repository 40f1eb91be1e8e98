"""A launch never drops a borrowed CUDA stream (regression: CUDA-graph capture of cutile-rs launches
failed in every capture mode, and a launch cost 16.8 µs on the host).

cuda-core's `Drop for Stream` calls `cuStreamQuery` on the stream, which is illegal while the stream
is being captured (the capture is invalidated whatever the capture mode), and on a busy stream it
records an event and hands the stream to a completion worker thread. The launchers used to wrap the
caller's stream in a fresh `Stream` per launch and dropped it when the launch returned. They now
take the (device, stream) target from a process-lifetime cache (support.rs `LaunchTarget::get`), so
no `Stream` is ever dropped on the launch path. CPU: the generated code is checked here; the GPU
side (capture in every mode, replay against eager runs) is tests/gpu/test_callpath.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUPPORT_RS = REPO / "src" / "tileport" / "emit" / "rust" / "templates" / "support.rs"
LAUNCH_RS = SUPPORT_RS.with_name("launch.rs")  # the idiomatic launchers' shared path
CRATE_SRC = REPO / "rust" / "src"
LAUNCHER = re.compile(r'pub (?:unsafe )?extern "C" fn (tileport_\w+)\(.*?\n\}\n', re.S)


def _launchers() -> dict[str, str]:
    """C symbol -> body of every generated kernel launcher."""
    out = {}
    for path in sorted(CRATE_SRC.glob("*.rs")):
        if path.name in ("support.rs", "lib.rs"):
            continue
        for m in LAUNCHER.finditer(path.read_text()):
            out[m.group(1)] = m.group(0)
    return out


def _function(text: str, name: str) -> str:
    """The text of `fn name` up to the next top-level item (4-space indented methods included)."""
    start = text.index(f"fn {name}(")
    end = text.find("\n    }\n", start)
    return text[start:end]


def test_every_launcher_takes_the_cached_target():
    """A faithful launcher takes the target itself; an idiomatic one launches through `Call::go`, which does."""
    launchers = _launchers()
    assert len(launchers) >= 21, sorted(launchers)  # one per corpus kernel at least
    go = _function(LAUNCH_RS.read_text(), "go")
    assert "LaunchTarget::get(self.launch.device_id, self.launch.stream)?" in go
    for symbol, body in launchers.items():
        assert "LaunchTarget::get(device_id, stream)?" in body or ".go()" in body, symbol
        assert "LaunchTarget::new" not in body and "Stream::borrow_raw" not in body, symbol


def test_a_stream_is_borrowed_only_into_the_process_lifetime_cache():
    text = SUPPORT_RS.read_text()
    assert text.count("Stream::borrow_raw(") == 1
    get, shared = _function(text, "get"), _function(text, "shared")
    assert "Stream::borrow_raw(" in shared
    assert "Box::leak(" in shared and "map.insert((device_id, stream), target)" in shared
    assert "static TARGETS: OnceLock<TargetMap>" in get  # a static is never dropped
    # the per-thread shortcut holds only targets of that map (never freed), keyed by (device, stream)
    assert "Self::shared(&TARGETS, device_id, stream)?" in get
    assert "Some((d, s, target)) if d == device_id && s == stream => target" in get
    assert "LAST_TARGET.with(|last| last.set(Some((device_id, stream, target))))" in get
    # the only way to make a target, and nothing that would drop one
    assert len(re.findall(r"LaunchTarget \{ context", text)) == 1
    assert "impl Drop for LaunchTarget" not in text
    assert "fn new(device_id" not in text


def test_output_overlap_check_allocates_nothing():
    body = _function(SUPPORT_RS.read_text(), "require_disjoint")
    assert "Vec" not in body and ".collect" not in body


# ---------------------------------------------------------------- on a fake CUDA driver

# The only driver calls a launch may make once its kernel is loaded: the launch, and the checks
# that the device's context is current.
HOT_PATH_CALLS = {"cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent"}
# (kernel, arrays {name: (shape, typestr)}, other arguments, grid, kernel parameter count); vector_add's
# output `c` is a block's `&mut Tensor` in the idiomatic crate, passed with its partition's shape and stride
CASES = {
    "vector_add": ("vector_add_kernel", {"a": ((1000,), "<f4"), "b": ((1000,), "<f4"), "c": ((1000,), "<f4")},
                   {"TILE": 256}, (4,), 11),
    "softmax_gather": ("softmax_gather_kernel", {"x": ((8, 1000), "<f2"), "y": ((8, 1000), "<f2")},
                       {"TILE": 1024}, (8,), 12),
    "rms_norm": ("rms_norm_kernel", {"x": ((8, 1024), "<f4"), "w": ((1024,), "<f4"), "y": ((8, 1024), "<f4")},
                 {"eps": 1e-6, "BLOCK_M": 1, "TILE": 1024}, (8,), 14),
    "flash_decode_combine": ("flash_decode_combine_kernel",  # an integer scalar: a divisibility hint
                             {"o_part": ((2, 4, 4, 128), "<f4"), "lse_part": ((2, 4, 4), "<f4"),
                              "o": ((2, 4, 128), "<f2"), "lse": ((2, 4), "<f4")},
                             {"n_splits": 4, "HEAD_DIM": 128}, (2, 4), 29),
}
PROBE = textwrap.dedent("""
    import ctypes, json, sys, time
    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_cuda_calls.restype = ctypes.c_char_p
    fake.fake_cuda_last_launch.restype = ctypes.POINTER(ctypes.c_uint64)
    from fake_arrays import FakeArray
    from tileport.runtime.library import load
    from tileport.runtime.tensors import describe
    kernel, shapes, values, grid, n_params = json.loads(sys.argv[2])
    entry = load()[kernel]
    arrays = {name: FakeArray(shape, typestr) for name, (shape, typestr) in shapes.items()}
    launch = entry.prepare(grid, 0, {n: describe(a, n).desc for n, a in arrays.items()}, values)
    ptrs = [arrays[p.name].ptr for p in entry.params if p.kind == "array"]
    fake.fake_cuda_expect_params(n_params)

    def run(n, stream, ptrs=ptrs):
        fake.fake_cuda_reset()
        t0 = time.perf_counter()
        for _ in range(n):
            launch(ptrs, stream)
        us = (time.perf_counter() - t0) / n * 1e6
        text = fake.fake_cuda_calls().decode()
        calls = {k: int(v) for k, v in (kv.split("=") for kv in text.split(";") if kv)}
        seen = fake.fake_cuda_last_launch()
        return {"calls": calls, "us": us, "launch": [seen[i] for i in range(8 + n_params)]}
    first = run(1, 0x1000)  # cutile's launcher: compiles, loads, checks, launches
    second = run(1, 0x1000)  # the resolved launch
    hot = run(200, 0x1000)
    new_stream = run(1, 0x2000)
    realigned = run(1, 0x1000, [p + 0x100 for p in ptrs])  # 256-byte aligned: the same class as 16
    print(json.dumps({"first": first, "second": second, "hot": hot, "new_stream": new_stream,
                      "realigned": realigned}))
""")


def _fake_driver(tmp_path: Path) -> Path:
    from fake_driver import build_fake_driver
    return build_fake_driver(tmp_path)


@pytest.mark.cargo
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_launch_makes_no_driver_call_but_the_launch(library, tmp_path, case):
    """On a fake driver that counts calls and records what each launch passes: the first launch of
    a specialization compiles and loads it (cutile's launcher in the faithful crate, cutile's compile and
    the launch path of later launches in the idiomatic one: JIT compile, module load); a
    later one calls cuLaunchKernel (and the current-context checks) and nothing else: no stream
    query (illegal during graph capture), no event, no synchronization, no allocation, no second
    module load (the resolved function is the one cutile loaded), with the very same function,
    grid, block, stream and parameter bytes as cutile's own launch; also on a stream not seen
    before."""
    from fake_driver import fake_tileiras

    from tileport import toolchain
    fake = _fake_driver(tmp_path)
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(library.path), TILEPORT_JIT_CACHE="0", TMPDIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(Path(__file__).parent)]))
    if toolchain.tileiras() is None:  # the first launch "compiles" to a placeholder the fake driver loads
        env["CUTILE_TILEIRAS_PATH"] = str(fake_tileiras(tmp_path))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(fake), json.dumps(CASES[case])], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads(proc.stdout.splitlines()[-1])
    first, second, hot, new_stream = rec["first"], rec["second"], rec["hot"], rec["new_stream"]
    realigned = rec["realigned"]
    assert first["calls"].get("cuModuleLoadData") == 1 and first["calls"].get("cuLaunchKernel") == 1, first
    assert second["launch"] == first["launch"], (first["launch"], second["launch"])
    assert hot["calls"].get("cuLaunchKernel") == 200, hot["calls"]
    for rec_ in (second, hot, new_stream, realigned):
        assert set(rec_["calls"]) <= HOT_PATH_CALLS, rec_["calls"]
    assert new_stream["calls"].get("cuLaunchKernel") == 1
    assert new_stream["launch"][:7] == first["launch"][:7] and new_stream["launch"][8:] == first["launch"][8:]
    # an address aligned to 256 instead of 2^44 bytes is the same specialization (cutile clamps the
    # alignment at 16 bytes): the resolved launch, not cutile's launcher, with the new addresses
    assert realigned["calls"].get("cuLaunchKernel") == 1 and realigned["launch"][:8] == first["launch"][:8]
    print(f"{case}: hot launch {hot['us']:.2f} us on the fake driver, realigned {realigned['us']:.2f} us")


EMPTY_PROBE = textwrap.dedent("""
    import ctypes, json, sys
    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_cuda_calls.restype = ctypes.c_char_p
    fake.fake_cuda_last_launch.restype = ctypes.POINTER(ctypes.c_uint64)
    from tileport.runtime.library import load
    lib = load()
    empty = lib.dll.tileport_launch_empty
    empty.restype = ctypes.c_int32
    out = []
    for function, stream in [(0x5000, 0x1000), (0x5000, 0x2000), (0x5000, 0x1000), (0x5000, 0x1000), (0, 0x1000)]:
        fake.fake_cuda_reset()
        rc = empty(ctypes.c_uint64(function), ctypes.c_int32(0), ctypes.c_uint64(stream))
        seen = fake.fake_cuda_last_launch()
        out.append({"rc": rc, "calls": fake.fake_cuda_calls().decode(), "launch": [seen[i] for i in range(8)],
                    "error": lib.last_error() if rc else ""})
    print(json.dumps(out))
""")


@pytest.mark.cargo
def test_the_empty_launch_takes_the_shared_path_on_the_stream_given(library, tmp_path):
    """tileport_launch_empty (callcost's floor of the launchers' shared path) on the fake driver:
    one cuLaunchKernel of the given function on one thread, on the stream of each call, also when
    the stream changes between calls (the per-thread target shortcut must not keep the last one);
    the context checks are the only other driver calls; a null function is refused, not launched."""
    from tileport import toolchain
    fake = _fake_driver(tmp_path)
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(library.path), TILEPORT_JIT_CACHE="0", PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([sys.executable, "-c", EMPTY_PROBE, str(fake)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    *launches, null = json.loads(proc.stdout.splitlines()[-1])
    for k, (rec, stream) in enumerate(zip(launches, (0x1000, 0x2000, 0x1000, 0x1000))):
        assert rec["rc"] == 0, rec
        calls = dict(kv.split("=") for kv in rec["calls"].split(";") if kv)
        assert calls.get("cuLaunchKernel") == "1", calls
        assert k == 0 or set(calls) <= HOT_PATH_CALLS, calls  # the first opens the device's context
        assert rec["launch"][:7] == [0x5000, 1, 1, 1, 1, 1, 1] and rec["launch"][7] == stream, rec["launch"]
    assert null["rc"] == -1 and "null function" in null["error"] and "cuLaunchKernel" not in null["calls"]
