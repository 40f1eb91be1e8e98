"""CPU evidence for the softmax_tma f32 8192x1000 parity case: one kernel, two launch signatures, sm_90 code.

    python3 scripts/divisibility_sass.py --out OUT.json [--lib LIB.so]   (LIB: the rust/ crate built)

cuTile Python's launch of softmax_tma_kernel on f32 [8192, 1000] (demangled from the kernel symbol Nsight
Compute reported on the H200, BLOCK_M 4, TILE 1024) records the row length as divisible by 1 and the row
stride by 4 elements: its launcher keeps 16 or nothing for lengths, 16 bytes for strides. cutile's
runtime divisibility hint (`DivHint::from_value`: the largest power of two dividing a value, at most 16)
gives the port's launch 8 for both. The script compiles cuTile Python's own kernel under each signature
(and with no divisibility, as a baseline) for sm_90 and counts the memory instructions. With `--lib` it
also compiles the port's entry at the launch's arrays (`tileport_ir_launch`, support.rs) under cutile's own
claims (`compute_spec`) and under the claims its launcher makes now (`python_claims`: cuTile Python's), and
compares each with cuTile Python's kernel under the matching signature. It exits 1 when a compile or
disassembly fails, or when a port signature's code differs from cuTile Python's under the same claims.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections import Counter
from pathlib import Path

import ctypes

from tileport import sass
from tileport.capture import compile_cubin
from tileport.corpus import REPO
from tileport.ops.capture_ref import BYTECODE_VERSION, reference_kernel
from tileport.runtime.abi import DTYPE_CODES, TensorDesc, raise_for
from tileport.runtime.library import KernelLibrary
from tileport.verify import run_metadata

KERNELS = REPO / "src" / "tileport" / "ops" / "kernels" / "softmax.py"
SIGNATURES = {  # name -> (shape divisibility, stride divisibility) of x and y
    "cuTile Python's launch": ((16, 1), (4, 1)),
    "cutile's runtime hints (the port's launch)": ((16, 8), (8, 1)),
    "no divisibility": ((1, 1), (1, 1)),
}
MEMORY_OPS = ("LDG", "STG", "LDS", "STS", "UTMA")
ROWS, COLS = 8192, 1000
# the port's entry at this launch: generics E, BLOCK_M, TILE, Y_LEN0, Y_LEN1 (no axis of length 1: dynamic)
PORT_ENTRY, PORT_GENERICS = "softmax_tma_kernel", ["f32", "4", "1024", "-1", "-1"]
PORT_CLAIMS = {  # port signature -> (its claims selector, the cuTile Python signature with the same claims)
    "port, cutile's own claims": (0, "cutile's runtime hints (the port's launch)"),
    "port, cuTile Python's claims (its launcher now)": (1, "cuTile Python's launch"),
}


def machine_code(shape_div: tuple, stride_div: tuple) -> sass.Sass:
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel
    arr = ArrayConstraint(ct.float32, 2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                          may_alias_internally=False, stride_constant=(None, 1), base_addr_divisible_by=16,
                          shape_constant=(None, None), shape_divisible_by=shape_div, stride_divisible_by=stride_div)
    buf = io.BytesIO()
    export_kernel(reference_kernel(KERNELS, "softmax_tma_kernel"),
                  [KernelSignature([arr, arr, 4, 1024], CallingConvention.cutile_python_v2())], buf,
                  output_format="tileir_bytecode", bytecode_version=BYTECODE_VERSION)
    r = compile_cubin(buf.getvalue(), "sm_90")
    if not r.ok or r.sass is None or not r.sass.instructions:
        raise SystemExit(f"no machine code: {r.error or r.sass_error or 'empty listing'}")
    return r.sass


def port_machine_code(lib: KernelLibrary, python_claims: int) -> sass.Sass:
    """The port's entry compiled on the CPU at the launch's arrays (x and y: f32 [8192, 1000], contiguous,
    16-byte aligned) under cutile's claims (0) or cuTile Python's (1), then for sm_90."""
    descs = (TensorDesc * 2)()
    for d in descs:
        d.ptr, d.ndim, d.dtype = 1 << 20, 2, DTYPE_CODES["f32"]
        d.shape[0], d.shape[1], d.strides[0], d.strides[1] = ROWS, COLS, COLS, 1
    masks = (ctypes.c_uint32 * 2)(0, 0)  # no axis static
    text_p, text_n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
    bc_p, bc_n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
    fn = lib.dll.tileport_ir_launch
    fn.restype = ctypes.c_int32
    rc = fn(PORT_ENTRY.encode(), ",".join(PORT_GENERICS).encode(), b"sm_90", descs, masks, ctypes.c_size_t(2),
            ctypes.c_int32(python_claims), ctypes.byref(text_p), ctypes.byref(text_n), ctypes.byref(bc_p),
            ctypes.byref(bc_n))
    if rc:
        raise_for(rc, lib.last_error())
    try:
        bytecode = ctypes.string_at(bc_p, bc_n.value)
    finally:
        lib.dll.tileport_free(text_p, text_n)
        lib.dll.tileport_free(bc_p, bc_n)
    r = compile_cubin(bytecode, "sm_90")
    if not r.ok or r.sass is None or not r.sass.instructions:
        raise SystemExit(f"port: no machine code: {r.error or r.sass_error or 'empty listing'}")
    return r.sass


def summary(code: sass.Sass) -> dict:
    return {"registers": code.registers, "instructions": len(code.instructions), "memory_ops": memory_ops(code)}


def memory_ops(code: sass.Sass) -> dict[str, int]:
    ops = Counter(next((w for w in i.text.split() if not w.startswith("@")), "") for i in code.instructions)
    return {op: n for op, n in sorted(ops.items()) if op.startswith(MEMORY_OPS)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--lib", type=Path, help="the built rust/ crate (libtileport_kernels.so): adds the port's entry")
    ap.add_argument("--crate", type=Path, default=REPO / "rust", help="the crate LIB was built from (its manifest)")
    args = ap.parse_args()
    codes = {name: machine_code(*divs) for name, divs in SIGNATURES.items()}
    base = codes["cuTile Python's launch"]
    results = []
    for name, code in codes.items():
        cmp = sass.compare(base, code)
        results.append({"signature": name, "shape_divisible_by": SIGNATURES[name][0],
                        "stride_divisible_by": SIGNATURES[name][1], **summary(code),
                        "same_code_as_cutile_launch": cmp["same_except_parameter_offsets"]})
        print(f"{name}: {summary(code)}")
    port, failed = [], []
    if args.lib:
        lib = KernelLibrary(args.lib, args.crate / "kernels.json")
        for name, (selector, reference) in PORT_CLAIMS.items():
            code = port_machine_code(lib, selector)
            same = sass.compare(codes[reference], code)["same_except_parameter_offsets"]
            port.append({"signature": name, **summary(code), "same_code_as": reference, "same": same})
            print(f"{name}: {summary(code)}; same code as cuTile Python's kernel under {reference!r}: {same}")
            if not same:
                failed.append(name)
    command = f"python3 scripts/divisibility_sass.py --out {args.out.name}" + (" --lib LIB" if args.lib else "")
    meta = run_metadata(command)
    args.out.write_text(json.dumps({**meta, "arch": "sm_90", "kernel": "softmax_tma_kernel",
                                    "launch": "f32 [8192, 1000], BLOCK_M 4, TILE 1024", "results": results,
                                    "port": port}, indent=1) + "\n")
    if failed:
        raise SystemExit(f"the port's code differs from cuTile Python's under the same claims: {', '.join(failed)}")


if __name__ == "__main__":
    sys.exit(main())
