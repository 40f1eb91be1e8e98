"""A launch of the generated library claims cuTile Python's divisibility, not cutile's (CPU, fake CUDA driver).

Regression: softmax_tma_kernel at f32 [8192, 1000] was compiled with cutile's claims (`compute_spec`: the
row length and the row stride divisible by 8), where cuTile Python's launcher claims 1 and 4 (16 or nothing
for a length, 16 bytes for a stride): other sm_90 code, 1.077x cuTile Python's time on the H200
(bench/results/2026-12-02-cpu-softmax-tma-divisibility-sass.json). The fake driver and a fake `tileiras` that keeps the bytecode it is given
(tests/runtime/fake_driver.py) let the first launch run cutile's own JIT; its Tile IR must carry the
divisibility assumptions of `tileport_ir_launch` under cuTile Python's claims, and not those under cutile's.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_unit_axis_launch import repo_library

REPO = Path(__file__).resolve().parents[2]
ROWS, COLS = 8192, 1000
GENERICS = "f32,4,1024,-1,-1"  # E, BLOCK_M, TILE, Y_LEN0, Y_LEN1 (no axis of length 1)

PROBE = textwrap.dedent("""
    import ctypes, sys
    ctypes.CDLL(sys.argv[1])
    from fake_arrays import FakeArray
    from tileport.runtime.library import load
    from tileport.runtime.tensors import describe
    lib = load()
    arrays = {n: FakeArray((%d, %d), "<f4") for n in ("x", "y")}
    launch = lib["softmax_tma_kernel"].prepare((1,), 0, {n: describe(a, n).desc for n, a in arrays.items()},
                                               {"BLOCK_M": 4, "TILE": 1024})
    launch([a.ptr for a in arrays.values()], 0x1000)
""" % (ROWS, COLS))

# a fake tileiras (fake_driver.py's) that also copies the bytecode it compiles into $KEEP_BYTECODE
KEEPING_TILEIRAS = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake tileiras 0"; exit 0; fi
out=""; last=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; shift; fi; last="$1"; shift; done
[ -n "$out" ] || exit 1
case "$last" in *.bc) cp "$last" "$KEEP_BYTECODE/$(basename "$last")";; esac
printf '\\177ELF-fake-cubin' > "$out"
"""


ASSUME = re.compile(r"(%v\d+) = assume (%v\d+) \{predicate = (\w+<[^>]*>)\}")


def divisibility(bytecode: bytes) -> list[tuple[str, str]]:
    """The divisibility assumptions of a module's Tile IR, in order: (the entry argument it is stated of,
    through a chain of assumptions; the predicate)."""
    from tileport.tileir.printer import to_text
    from tileport.tileir.reader import read_module
    of: dict[str, str] = {}
    out = []
    for result, operand, predicate in ASSUME.findall(to_text(read_module(bytecode))):
        of[result] = of.get(operand, operand)
        if predicate.startswith("div_by"):
            out.append((of[result], predicate))
    return out


def exported(lib_path: Path, python_claims: int, arrays=None, static_axes=(0, 0), generics=GENERICS,
             address=1 << 20) -> bytes:
    """`tileport_ir_launch`'s bytecode of softmax_tma_kernel at a launch's arrays x and y, each (shape, strides)
    (default: the launch above, contiguous), at `address`; `static_axes`: one axis mask per array."""
    from tileport.runtime.abi import DTYPE_CODES, TensorDesc
    dll = ctypes.CDLL(str(lib_path))
    dll.tileport_last_error.restype = ctypes.c_char_p
    descs = (TensorDesc * 2)()
    for d, (shape, strides) in zip(descs, arrays or [((ROWS, COLS), (COLS, 1))] * 2):
        d.ptr, d.ndim, d.dtype = address, 2, DTYPE_CODES["f32"]
        d.shape[0], d.shape[1], d.strides[0], d.strides[1] = *shape, *strides
    text_p, text_n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
    bc_p, bc_n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
    rc = dll.tileport_ir_launch(b"softmax_tma_kernel", generics.encode(), b"sm_90", descs,
                                (ctypes.c_uint32 * 2)(*static_axes), ctypes.c_size_t(2),
                                ctypes.c_int32(python_claims), ctypes.byref(text_p), ctypes.byref(text_n),
                                ctypes.byref(bc_p), ctypes.byref(bc_n))
    assert rc == 0, dll.tileport_last_error()
    bytecode = ctypes.string_at(bc_p, bc_n.value)
    dll.tileport_free(text_p, text_n)
    dll.tileport_free(bc_p, bc_n)
    return bytecode


@pytest.mark.cargo
def test_each_claim_sits_where_cutiles_entry_reads_it(tmp_path):
    """cutile 0.5.0 reads the k-th dynamic length (stride) claim at position k: past a static axis or a stride
    of one, cuTile Python's claim of an axis must still reach that axis' argument. Entry arguments: x is %v0
    (address), %v1 %v2 (lengths), %v3 %v4 (strides); y likewise from %v5."""
    lib = repo_library(tmp_path)
    # x column-major (stride one on axis 0): its one dynamic stride, 8192 (x4 bytes: 16 bytes divide it), is axis 1
    # y [1, 1024] with axis 0 static: its one dynamic length, 1024 (16 divides it), is axis 1
    arrays = [((1024, 8192), (1, 1024)), ((1, 1024), (1024, 1))]
    claims = divisibility(exported(lib, 1, arrays, static_axes=(0, 1), generics="f32,4,1024,1,-1"))
    assert claims == [("%v1", "div_by<16>"), ("%v2", "div_by<16>"), ("%v4", "div_by<4>"), ("%v0", "div_by<16>"),
                      ("%v7", "div_by<16>"), ("%v8", "div_by<4>"), ("%v5", "div_by<16>")], claims
    # an address 4 bytes past a 16-byte boundary: cuTile Python claims nothing of it, nor of a length of 1000
    claims = divisibility(exported(lib, 1, address=(1 << 20) + 4))
    assert claims == [("%v1", "div_by<16>"), ("%v3", "div_by<4>"), ("%v6", "div_by<16>"), ("%v8", "div_by<4>")], claims


@pytest.mark.cargo
def test_first_launch_claims_cutile_python_divisibility(tmp_path):
    from fake_driver import build_fake_driver

    from tileport import toolchain
    lib = repo_library(tmp_path)
    fake = build_fake_driver(tmp_path)
    tileiras, kept = tmp_path / "tileiras", tmp_path / "kept"
    tileiras.write_text(KEEPING_TILEIRAS)
    tileiras.chmod(0o755)
    kept.mkdir()
    env = toolchain.env()
    env.update(LD_LIBRARY_PATH=f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
               TILEPORT_LIB=str(lib), TILEPORT_JIT_CACHE="0", CUTILE_TILEIRAS_PATH=str(tileiras),
               KEEP_BYTECODE=str(kept), TMPDIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(Path(__file__).parent)]))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(fake)], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launched = [divisibility(p.read_bytes()) for p in kept.glob("*.bc")]
    launched = [d for d in launched if d]  # compile probes of the fake assembler hold no kernel
    python, own = divisibility(exported(lib, 1)), divisibility(exported(lib, 0))
    assert python != own, python  # the two claims differ at this launch
    assert launched and all(d == python for d in launched), (launched, python, own)
    # the launcher's later launches (`resolve`) look up the same key: cutile's cache answers, no second compile
    assert len(launched) == 1, launched
