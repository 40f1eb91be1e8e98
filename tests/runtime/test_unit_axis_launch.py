"""Launches of the generated library whose arrays have length-1 axes compile (CPU, fake CUDA driver).

Regression: with every length-1 axis static, `softmax_online_kernel` at [1, 1] and `matmul_splitk_kernel`
at [1, 1, 1] did not compile on the H200 (cutile 0.5.0: "cuda_tile.assume: bounded endpoints must be ordered":
`for c in 1..n_chunks` with n_chunks folded to 1). The fake driver and fake `tileiras` (tests/runtime/
fake_driver.py) let the first launch run cutile's own JIT up to the cubin, which is where that check fails.
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

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import ctypes, json, sys
    ctypes.CDLL(sys.argv[1])
    from fake_arrays import FakeArray
    from tileport.runtime.library import load
    from tileport.runtime.tensors import describe
    lib = load()
    out = {}
    for name, shapes, values in json.loads(sys.argv[2]):
        arrays = {n: FakeArray(s, "<f4") for n, s in shapes.items()}
        try:
            launch = lib[name].prepare((1,), 0, {n: describe(x, n).desc for n, x in arrays.items()}, values)
            launch([a.ptr for a in arrays.values()], 0x1000)
            out[name] = "ok"
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))
""")

CASES = [
    ("softmax_online_kernel", {"x": (1, 1), "y": (1, 1)}, {"BLOCK_M": 1, "CHUNK": 1}),
    ("matmul_splitk_kernel", {"a": (1, 1), "b": (1, 1), "ws": (1, 1, 1)},
     {"k_tiles_per_split": 1, "TILE_M": 128, "TILE_N": 128, "TILE_K": 32, "GROUP_M": 8, "USE_TF32": True}),
    ("splitk_reduce_kernel", {"ws": (1, 1, 1), "c": (1, 1)}, {"TILE_M": 64, "TILE_N": 128}),
]


def repo_library(tmp_path: Path) -> Path:
    """A copy of the repository crate's cdylib ($TILEPORT_LIB, else cargo's build of rust/, which also puts it
    back where a test that built another crate of the same name in the shared target directory replaced it)."""
    from tileport.runtime.library import build
    so = Path(os.environ.get("TILEPORT_LIB") or build(REPO / "rust", os.environ.get("TILEPORT_PROFILE", "dev")))
    copy = tmp_path / "lib" / so.name
    copy.parent.mkdir()
    shutil.copy(so, copy)
    return copy


@pytest.mark.cargo
def test_launches_with_length_one_axes_compile(tmp_path):
    from fake_driver import build_fake_driver, fake_tileiras

    from tileport import toolchain
    lib = repo_library(tmp_path)
    fake, tileiras = build_fake_driver(tmp_path), fake_tileiras(tmp_path)
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(lib), TILEPORT_JIT_CACHE="0", CUTILE_TILEIRAS_PATH=str(tileiras),
               TMPDIR=str(tmp_path), PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(Path(__file__).parent)]))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(fake), json.dumps(CASES)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out == {name: "ok" for name, _, _ in CASES}, out
