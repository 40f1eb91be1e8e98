"""CPU evidence for the softmax_tma f32 8192x1000 parity case: one kernel, two launch signatures, sm_90 code.

    python3 scripts/divisibility_sass.py --out OUT.json

cuTile Python's launch of softmax_tma_kernel on f32 [8192, 1000] (demangled from the kernel symbol Nsight
Compute reported on the H200, BLOCK_M 4, TILE 1024) records the row length as divisible by 1 and the row
stride by 4 elements: its launcher keeps 16 or nothing for lengths, 16 bytes for strides. cutile's
runtime divisibility hint (`DivHint::from_value`: the largest power of two dividing a value, at most 16)
gives the port's launch 8 for both. The script compiles cuTile Python's own kernel under each signature
(and with no divisibility, as a baseline) for sm_90 and counts the memory instructions. It exits 1 when a
compile or disassembly fails.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections import Counter
from pathlib import Path

from tileport import sass
from tileport.capture import compile_cubin
from tileport.corpus import REPO
from tileport.ops.capture_ref import BYTECODE_VERSION, reference_kernel
from tileport.verify import run_metadata

KERNELS = REPO / "src" / "tileport" / "ops" / "kernels" / "softmax.py"
SIGNATURES = {  # name -> (shape divisibility, stride divisibility) of x and y
    "cuTile Python's launch": ((16, 1), (4, 1)),
    "cutile's runtime hints (the port's launch)": ((16, 8), (8, 1)),
    "no divisibility": ((1, 1), (1, 1)),
}
MEMORY_OPS = ("LDG", "STG", "LDS", "STS", "UTMA")


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


def memory_ops(code: sass.Sass) -> dict[str, int]:
    ops = Counter(next((w for w in i.text.split() if not w.startswith("@")), "") for i in code.instructions)
    return {op: n for op, n in sorted(ops.items()) if op.startswith(MEMORY_OPS)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    codes = {name: machine_code(*divs) for name, divs in SIGNATURES.items()}
    base = codes["cuTile Python's launch"]
    results = []
    for name, code in codes.items():
        cmp = sass.compare(base, code)
        results.append({"signature": name, "shape_divisible_by": SIGNATURES[name][0],
                        "stride_divisible_by": SIGNATURES[name][1], "registers": code.registers,
                        "instructions": len(code.instructions), "memory_ops": memory_ops(code),
                        "same_code_as_cutile_launch": cmp["same_except_parameter_offsets"]})
        print(f"{name}: {code.registers} registers, {len(code.instructions)} instructions, {memory_ops(code)}")
    meta = run_metadata(f"python3 scripts/divisibility_sass.py --out {args.out.name}")
    args.out.write_text(json.dumps({**meta, "arch": "sm_90", "kernel": "softmax_tma_kernel",
                                    "launch": "f32 [8192, 1000], BLOCK_M 4, TILE 1024", "results": results},
                                   indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
