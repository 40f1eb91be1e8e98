"""CPU evidence of the unit-axis specialization: flash_decode's kernels at a one-split launch, port vs cuTile Python.

    python3 scripts/unit_axis_sass.py --lib LIB.so --out OUT.json   (LIB: the rust/ crate built, e.g. `dev`)

A split-KV launch with one partition gives the partial results an axis of length 1. cuTile Python's launcher
compiles a length-1 axis as the constant 1 (`shape_constant`); the port's launcher passes 1 for that axis'
unit-axis generic (support.rs `unit_axis`, mirrored by `unit_axis` below). For each kernel the script compiles
both sides for sm_90 (tileiras, then nvdisasm) at two signatures: the launch's length-1 axes static
(`unit`), and every length dynamic (`dynamic`, the capture signature: the baseline). Nothing else of the
launch is known to either side (no shape or stride divisibility), so the comparison isolates the length-1
axes. At the GPU launch both also know the lengths' divisibility, which cutile 0.5.0 shifts past a static
axis (support.rs `unit_axis`); a third comparison compiles cuTile Python's kernel with the launch's
divisibility and with the shifted one (a model of both launches: power-of-two divisors up to 16, contiguous
strides). The script exits 1 when a side fails to compile or disassemble, or when a comparison's register
or instruction counts differ.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from pathlib import Path

from tileport import sass
from tileport.capture import compile_cubin, generic_arguments
from tileport.corpus import REPO
from tileport.ops.capture_ref import BYTECODE_VERSION, reference_kernel
from tileport.ops.spec import Capture
from tileport.runtime.library import KernelLibrary
from tileport.verify import run_metadata

KERNELS = REPO / "src" / "tileport" / "ops" / "kernels" / "attention.py"

# flash_decode_sinks' bench case (B 64, Hq 64, Hkv 8, S 4096, D 64, window 128): the planner takes one split
# on an H200 (132 SMs). Shapes as `decode_plan` passes them: arrays (dtype, shape), scalars, constants.
B, HQ, HKV, S, D, SPLITS = 64, 64, 8, 4096, 64, 1
GROUP = HQ // HKV
CASES = {
    "flash_decode_partial_kernel": (
        {"q": ("float16", (B, HKV, GROUP, D)), "k": ("float16", (B, HKV, S, D)), "v": ("float16", (B, HKV, S, D)),
         "block_table": ("int32", (1, 1)), "kv_lens": ("int32", (B,)), "sinks": ("float32", (HQ,)),
         "o_part": ("float32", (B, HKV, GROUP, SPLITS, D)), "lse_part": ("float32", (B, HKV, GROUP, SPLITS))},
        {"qk_scale": "float32", "softcap": "float32", "window": "int32", "tiles_per_split": "int32"},
        {"GROUP_TILE": 16, "BLOCK_N": 64, "HEAD_DIM": D, "PAGED": False, "SLIDING": True, "HAS_SINKS": True,
         "SOFTCAP": False}),
    "flash_decode_combine_kernel": (
        {"o_part": ("float32", (B, HQ, SPLITS, D)), "lse_part": ("float32", (B, HQ, SPLITS)),
         "o": ("float16", (B, HQ, D)), "lse": ("float32", (B, HQ))},
        {"n_splits": "int32"}, {"HEAD_DIM": D}),
}


def unit_axis(shape: tuple[int, ...], axis: int) -> int:
    """support.rs `unit_axis`: 1 for a length-1 axis unless cutile's shifted shape divisibility would claim
    more of a dynamic length than holds (then the whole array stays dynamic), else -1."""
    def div(v: int) -> int:
        return 16 if v == 0 else min(v & -v, 16)
    dynamic = [i for i, n in enumerate(shape) if n != 1]
    sound = all(shape[i] % div(shape[k]) == 0 for k, i in enumerate(dynamic))
    return 1 if sound and shape[axis] == 1 else -1


def port_bytecode(lib: KernelLibrary, kernel: str, capture: Capture, shapes: dict, unit: bool) -> bytes:
    entry = next(e for e in lib.manifest["entries"] if e["kernel"] == kernel)
    name, generics = generic_arguments(entry, capture)
    variant = next(v for v in entry["variants"] if v["entry"] == name)
    if not variant.get("unit_axes"):
        raise SystemExit(f"{kernel}: the manifest lists no unit-axis generics (translated before they existed?)")
    if unit:
        values = dict(zip(variant["generics"], generics))
        for g, (array, axis) in variant["unit_axes"].items():
            values[g] = str(unit_axis(shapes[array], axis))
        generics = [values[g] for g in variant["generics"]]
    return lib.ir(name, generics, "sm_90")[1]


def div_hint(v: int) -> int:
    """cutile's `DivHint::from_value`: the largest power of two dividing v, at most 16 (0: 16)."""
    return 16 if v == 0 else min(v & -v, 16)


def shape_divisibility(shape: tuple[int, ...], hints: str | None) -> tuple[int, ...]:
    """Per axis, what a signature knows divides the length: nothing (None); the launch's lengths ("launch");
    or what cutile 0.5.0 claims at a launch with the length-1 axes static ("shifted": the k-th dynamic axis
    gets axis k's divisibility, see `unit_axis` in support.rs)."""
    if hints is None:
        return (1,) * len(shape)
    if hints == "launch":
        return tuple(1 if n == 1 else div_hint(n) for n in shape)
    out = [1] * len(shape)
    for k, axis in enumerate(i for i, n in enumerate(shape) if n != 1):
        out[axis] = div_hint(shape[k])
    return tuple(out)


def reference_bytecode(kernel: str, capture: Capture, shapes: dict, unit: bool, hints: str | None = None) -> bytes:
    """cuTile Python's export for the launch's signature: the capture's, plus `shape_constant` 1 on every
    length-1 axis when `unit` (what its launcher passes for such a launch), plus the lengths' and the
    contiguous strides' divisibility when `hints` (see `shape_divisibility`)."""
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature, ScalarConstraint,
                                       export_kernel)
    from tileport.ops.capture_ref import kernel_parameters
    fn = reference_kernel(KERNELS, kernel)
    params = []
    for name in kernel_parameters(fn):
        if name in capture.arrays:
            dtype, shape = capture.arrays[name][0], shapes[name]
            strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]  # contiguous
            params.append(ArrayConstraint(
                getattr(ct, dtype), len(shape), index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                may_alias_internally=False, stride_constant=(None,) * (len(shape) - 1) + (1,),
                base_addr_divisible_by=16, shape_constant=tuple(1 if unit and n == 1 else None for n in shape),
                shape_divisible_by=shape_divisibility(shape, hints),
                stride_divisible_by=tuple(div_hint(st) if hints and i + 1 < len(shape) else 1
                                          for i, st in enumerate(strides))))
        elif name in capture.scalars:
            params.append(ScalarConstraint(getattr(ct, capture.scalars[name])))
        else:
            params.append(capture.constants[name])
    buf = io.BytesIO()
    export_kernel(fn, [KernelSignature(params, CallingConvention.cutile_python_v2())], buf,
                  output_format="tileir_bytecode", bytecode_version=BYTECODE_VERSION)
    return buf.getvalue()


def machine_code(bytecode: bytes, what: str) -> sass.Sass:
    r = compile_cubin(bytecode, "sm_90")
    if not r.ok or r.sass is None or not r.sass.instructions:
        raise SystemExit(f"{what}: no machine code ({r.error or r.sass_error or 'empty listing'})")
    return r.sass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", type=Path, required=True, help="the built rust/ crate (libtileport_kernels.so)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    lib = KernelLibrary(args.lib, REPO / "rust" / "kernels.json")
    results, failed = [], []
    for kernel, (arrays, scalars, constants) in CASES.items():
        capture = Capture(kernel, {n: (dt, len(shape)) for n, (dt, shape) in arrays.items()}, scalars, constants)
        shapes = {n: shape for n, (_dt, shape) in arrays.items()}
        for unit in (False, True):
            label = f"{kernel} {'unit' if unit else 'dynamic'}"
            ref = machine_code(reference_bytecode(kernel, capture, shapes, unit), f"{label} cuTile Python")
            port = machine_code(port_bytecode(lib, kernel, capture, shapes, unit), f"{label} port")
            cmp = sass.compare(ref, port)
            results.append({"kernel": kernel, "signature": "unit" if unit else "dynamic", **cmp})
            print(f"{label}: registers cuTile {cmp['registers'][0]} / port {cmp['registers'][1]}, instructions "
                  f"cuTile {cmp['instructions'][0]} / port {cmp['instructions'][1]}, same code: "
                  f"{cmp['same_except_parameter_offsets']}", flush=True)
            if cmp["registers"][0] != cmp["registers"][1] or cmp["instructions"][0] != cmp["instructions"][1]:
                failed.append(label)
        # At the GPU launch both sides also know the lengths' divisibility, but cutile 0.5.0 shifts it past
        # a static axis: cuTile Python compiled with the launch's divisibility vs with the shifted one.
        launch = {h: machine_code(reference_bytecode(kernel, capture, shapes, True, h), f"{kernel} {h} divisibility")
                  for h in ("launch", "shifted")}
        cmp = sass.compare(launch["launch"], launch["shifted"])
        results.append({"kernel": kernel, "signature": "unit, divisibility launch vs shifted (cuTile Python)", **cmp})
        print(f"{kernel} unit, with the launch's divisibility: registers {cmp['registers'][0]}, instructions "
              f"{cmp['instructions'][0]}; with cutile-rs's shifted divisibility: {cmp['registers'][1]}, "
              f"{cmp['instructions'][1]}", flush=True)
        if cmp["registers"][0] != cmp["registers"][1] or cmp["instructions"][0] != cmp["instructions"][1]:
            failed.append(f"{kernel} shifted divisibility")
    meta = run_metadata(f"python3 scripts/unit_axis_sass.py --lib {args.lib.name} --out {args.out.name}")
    args.out.write_text(json.dumps({**meta, "arch": "sm_90", "launch": {"B": B, "Hq": HQ, "Hkv": HKV, "S": S,
                                                                        "D": D, "splits": SPLITS},
                                    "results": results, "failed": failed}, indent=1) + "\n")
    if failed:
        sys.exit(f"port and cuTile Python differ: {', '.join(failed)}")


if __name__ == "__main__":
    main()
