"""A resolved kernel runs under the function configuration cuTile Python gives the source kernel.

cuTile Python's launcher, when it loads a kernel that comes with a host program (each cubin tileiras makes
carries one, `.nv.host`), raises the kernel's dynamic shared memory limit on each device to the device's opt-in
maximum less the kernel's static shared memory (`cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, optin -
static)` in its `prepare_launch_with_extracted_args`). The port's launcher left the driver's default (48 KB less
the static size; 0 above 48 KB). The cutile_gpt GEMM ports, whose machine code at launch equals cuTile Python's
(tests/gpu/test_matmul_launch_config.py), timed 1.06x the source on an H200, so what differs is the launch;
this is one of its two differences (the other: cuTile Python runs the host program itself, the port leaves it
to the driver). `resolve` (support.rs) now configures the function it keeps as cuTile Python does, once per
specialization; the resolved launches stay one `cuLaunchKernel` (tests/runtime/test_launch_target.py).
Whether this closes the GEMM gap is for the GPU test above to show.
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

from test_launch_target import CASES, _fake_driver

REPO = Path(__file__).resolve().parents[2]
SUPPORT_RS = REPO / "src" / "tileport" / "emit" / "templates" / "support.rs"
FAKE_OPTIN, FAKE_STATIC = 1024, 256  # what fake_cuda.c answers for the opt-in limit and the static size
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CUfunction_attribute

PROBE = textwrap.dedent("""
    import ctypes, json, sys
    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_cuda_calls.restype = ctypes.c_char_p
    fake.fake_cuda_last_func_attribute.restype = ctypes.POINTER(ctypes.c_int)
    from fake_arrays import FakeArray
    from tileport.runtime.library import load
    from tileport.runtime.tensors import describe
    kernel, shapes, values, grid, n_params = json.loads(sys.argv[2])
    entry = load()[kernel]
    arrays = {name: FakeArray(shape, typestr) for name, (shape, typestr) in shapes.items()}
    launch = entry.prepare(grid, 0, {n: describe(a, n).desc for n, a in arrays.items()}, values)
    ptrs = [arrays[p.name].ptr for p in entry.params if p.kind == "array"]
    fake.fake_cuda_expect_params(n_params)
    out = []
    for _ in range(2):  # cutile's launcher and the resolve, then a resolved launch
        fake.fake_cuda_reset()
        launch(ptrs, 0x1000)
        text = fake.fake_cuda_calls().decode()
        seen = fake.fake_cuda_last_func_attribute()
        out.append({"calls": {k: int(v) for k, v in (kv.split("=") for kv in text.split(";") if kv)},
                    "func_attribute": [seen[0], seen[1]]})
    print(json.dumps(out))
""")


def test_resolve_configures_the_function_it_keeps():
    """The function the resolved launches use is configured in `resolve`, by `configure_as_cutile_python`,
    with the opt-in limit less the static size (text of the template: runs without a GPU or cargo)."""
    text = SUPPORT_RS.read_text()
    resolve = text[text.index("pub fn resolve("):text.index("\n}\n", text.index("pub fn resolve("))]
    assert re.search(r"configure_as_cutile_python\(target, loaded\)", resolve), resolve
    body = text[text.index("fn configure_as_cutile_python("):]
    body = body[:body.index("\n}\n")]
    assert "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN" in body, body
    assert "static_shared_memory_bytes()" in body, body
    assert "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES" in body and "optin - static_bytes" in body, body


@pytest.mark.cargo
def test_the_first_launch_raises_the_dynamic_shared_memory_limit_as_cutile_python(library, tmp_path):
    """On the fake driver: the first launch of a specialization sets MAX_DYNAMIC_SHARED_SIZE_BYTES to the
    opt-in limit less the static size; the resolved launch after it sets nothing."""
    from tileport import toolchain
    if toolchain.tileiras() is None:
        pytest.skip("tileiras is not installed: the first launch cannot compile the kernel")
    fake = _fake_driver(tmp_path)
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(library.path), TILEPORT_JIT_CACHE="0",
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(Path(__file__).parent)]))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(fake), json.dumps(CASES["vector_add"])], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = json.loads(proc.stdout.splitlines()[-1])
    assert first["calls"].get("cuLaunchKernel") == 1 and first["calls"].get("cuFuncSetAttribute"), first
    assert first["func_attribute"] == [MAX_DYNAMIC_SHARED_SIZE_BYTES, FAKE_OPTIN - FAKE_STATIC], first
    assert second["calls"].get("cuLaunchKernel") == 1 and "cuFuncSetAttribute" not in second["calls"], second
