"""CPU evidence for the Triton ports: the machine code (SASS) each port compiles to for the largest
recorded launch of its kernel, as the GPU launch would specialize it.

    python3 eval/measure/triton_sass_evidence.py --launches SPEC --label after --out bench/results/X.json FILE...

1. `tileport port FILE... --launches SPEC --until B --no-gpu` ports the kernels (dtypes and constants of
   the recorded launches) and builds their crate;
2. a copy of that crate is built whose CPU Tile IR export (`tileport_ir`) specializes the arrays as a
   cutile-rs launch does on the GPU from the tensors it gets: the unit-stride dimension where the view
   contract (kernels.json `view`) has it, shapes and the other strides divisible by 16 (`--div`; the
   stage B capture assumes nothing of them, so its IR is not what the GPU runs);
3. each kernel's largest launch is compiled to an sm_90 cubin with tileiras and disassembled (nvdisasm,
   cuobjdump): instructions, registers, threads per block, global load/store widths, MUFU, calls.

Results go under `runs.<label>` of the JSON (merged with what the file holds: run once per revision,
e.g. `--label before` with PYTHONPATH at an older checkout). A tool that fails stops the script.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tileport import toolchain
from tileport.capture import compile_cubin, generic_arguments
from tileport.runtime.library import KernelLibrary

REPO = Path(__file__).resolve().parents[2]
# The export's capture signature in the generated support.rs, and what replaces it (the launch's spec).
SIGNATURE = {
    ".map(|i| if i + 1 == *rank { 1 } else { -1 })": ".map(|i| if i == ir_unit(name, *rank) { 1 } else { -1 })",
    "shape_div: vec![DivHint::default(); *rank],": "shape_div: vec![ir_div(); *rank],",
    "stride_div: vec![DivHint::default(); *rank],":
        "stride_div: (0..*rank).map(|i| if i == ir_unit(name, *rank) { DivHint::default() } else { ir_div() })"
        ".collect(),",
    "stride_one: (0..*rank).map(|i| i + 1 == *rank).collect(),":
        "stride_one: (0..*rank).map(|i| i == ir_unit(name, *rank)).collect(),",
}
HELPERS = """
/// Evidence build: the divisibility of shapes and strides a GPU launch infers (TILEPORT_IR_DIV).
fn ir_div() -> cutile::cutile_compiler::specialization::DivHint {
    let d: i32 = std::env::var("TILEPORT_IR_DIV").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    if d > 1 { cutile::cutile_compiler::specialization::DivHint { divisor: d, max: 16 } } else { Default::default() }
}

/// Evidence build: the unit-stride dimension of an array (TILEPORT_IR_UNIT="k_ptr=2,v_ptr=3"; else the last).
fn ir_unit(name: &str, rank: usize) -> usize {
    std::env::var("TILEPORT_IR_UNIT").ok().and_then(|v| v.split(',').find_map(|kv| {
        let (k, d) = kv.split_once('=')?;
        if k == name { d.parse().ok() } else { None }
    })).unwrap_or(rank - 1)
}
"""
OPCODE = re.compile(r"^(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{(proc.stderr or proc.stdout)[-3000:]}")
    return proc


def port_crate(files: list[str], spec: Path, work: Path) -> Path:
    """The batch crate `tileport port --until B` built for the recorded launches."""
    out = work / "port"
    shutil.rmtree(out, ignore_errors=True)  # verdicts of an earlier run name other crates
    subprocess.run([sys.executable, "-m", "tileport.cli", "port", *files, "--launches", str(spec), "--until", "B",
                    "--no-gpu", "-o", str(out)], capture_output=True, text=True)
    crates = {json.loads(v.read_text()).get("details", {}).get("library", {}).get("crate")
              for v in out.glob("*/B/verdict.json")}
    crates.discard(None)
    if len(crates) != 1:
        sys.exit(f"expected one batch crate under {out}/*/B, found {sorted(crates)}")
    return Path(crates.pop())


def evidence_library(crate: Path, work: Path, label: str, occupancy: int | None) -> KernelLibrary:
    """A copy of `crate` whose IR export takes the launch's specialization (and, when given, whose entries
    have an occupancy hint), built with cargo."""
    dst = work / f"crate-{label}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(crate, dst, ignore=shutil.ignore_patterns("target"))
    name = f"tileport_sass_evidence_{re.sub(r'[^a-z0-9_]', '_', label.lower())}"
    manifest = dst / "Cargo.toml"
    manifest.write_text(re.sub(r'(?m)^name = ".*"$', f'name = "{name}"', manifest.read_text(), count=1))
    support = dst / "src" / "support.rs"
    text = support.read_text()
    for old, new in SIGNATURE.items():
        if old not in text:
            sys.exit(f"{support}: the IR export's capture signature changed (no `{old}`): update SIGNATURE")
        text = text.replace(old, new)
    support.write_text(text + HELPERS)
    if occupancy:  # what-if: the entries with cuTile's occupancy hint
        for src in (dst / "src").glob("*.rs"):
            text = re.sub(r"occupancy = \d+", f"occupancy = {occupancy}", src.read_text())
            src.write_text(text.replace(
                "#[cutile::entry()]", f"#[cutile::entry(optimization_hints = (default = (occupancy = {occupancy},),))]"))
    env = toolchain.env()
    env.setdefault("CARGO_TARGET_DIR", str(REPO / "target"))
    run(["cargo", "build", "--manifest-path", str(manifest)], env=env)
    so = Path(env["CARGO_TARGET_DIR"]) / "debug" / f"lib{name}.so"
    return KernelLibrary(so, dst / "kernels.json")


def largest_launches(spec: Path, kernels: set[str]) -> dict[str, dict]:
    """Per kernel, its launch that moves the most array elements (what dominates its time)."""
    best: dict[str, tuple[int, dict]] = {}
    for launch in json.loads(spec.read_text())["launches"]:
        if launch["kernel"] not in kernels:
            continue
        size = sum(_elements(a["shape"]) for a in launch["args"] if a["kind"] == "array")
        if launch["kernel"] not in best or size > best[launch["kernel"]][0]:
            best[launch["kernel"]] = (size, launch)
    return {k: v for k, (_, v) in best.items()}


def _elements(shape) -> int:
    n = 1
    for d in shape or ():
        n *= d
    return n


def unit_dims(entry: dict) -> str:
    """TILEPORT_IR_UNIT for an entry: the unit-stride dimension of each array's view contract."""
    dims = []
    for p in entry["params"]:
        view = p.get("view")
        if p.get("kind") == "array" and view and "1" in view["strides"]:
            dims.append(f"{p['name']}={view['strides'].index('1')}")
    return ",".join(dims)


def sass_summary(cubin: Path) -> dict:
    listing = run([str(toolchain.nvdisasm()), "-c", str(cubin)]).stdout
    ops = collections.Counter()
    for line in listing.splitlines():
        m = re.match(r"^\s*/\*[0-9a-f]+\*/\s+(.*?);?\s*$", line)
        if m and m.group(1) and not m.group(1).startswith("."):
            op = OPCODE.match(m.group(1))
            if op:
                ops[op.group(1)] += 1
    if not ops:
        sys.exit(f"nvdisasm listed no instruction for {cubin}")
    usage = run([str(toolchain.cuobjdump()), "-res-usage", str(cubin)]).stdout
    regs = max(int(n) for n in re.findall(r"REG:(\d+)", usage))
    elf = run([str(toolchain.cuobjdump()), "-elf", str(cubin)]).stdout
    threads = re.search(r"EIATTR_REQNTID\s*\n\s*Format:.*\n\s*Value:\s*(0x[0-9a-f]+)", elf)

    def count(prefix):
        return {k: v for k, v in sorted(ops.items()) if k.startswith(prefix)}
    return {
        "instructions": sum(ops.values()), "registers": regs,
        "threads_per_block": int(threads.group(1), 16) if threads else None,
        "global_loads": count("LDG"), "global_stores": count("STG"), "tma": count("UTMA"),
        "async_copies": count("LDGSTS"), "mufu": count("MUFU"), "calls": sum(count("CALL").values()),
        "branches": sum(count("BRA").values()), "local_memory": {**count("LDL"), **count("STL")},
        "mma": {**count("HMMA"), **count("HGMMA")},
    }


def resident_blocks(registers: int, threads: int | None) -> int | None:
    """Tile blocks an H100/H200 SM holds as far as registers and threads allow (registers are allocated
    per warp in multiples of 8 per thread; 65536 per SM, 2048 threads, 32 blocks)."""
    if not threads:
        return None
    per_block = -(-registers // 8) * 8 * threads
    return min(65536 // per_block, 2048 // threads, 32)


def summarize(before: dict, after: dict) -> dict:
    """Per kernel, the before/after figures that explain its time."""
    keys = ("instructions", "registers", "threads_per_block", "global_loads", "calls", "mufu", "local_memory")
    out = {}
    for kernel in sorted(set(before) & set(after)):
        row = {}
        for label, run in (("before", before[kernel]), ("after", after[kernel])):
            row[label] = {k: run[k] for k in keys}
            row[label]["resident_blocks_per_sm"] = resident_blocks(run["registers"], run["threads_per_block"])
        out[kernel] = row
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--launches", type=Path, required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=REPO / "out" / "sass-evidence")
    ap.add_argument("--div", type=int, default=16)
    ap.add_argument("--occupancy", type=int, help="what-if: give every entry this occupancy hint")
    ap.add_argument("--note", default="", help="what this run is (e.g. the revision PYTHONPATH points at)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    lib = evidence_library(port_crate(args.files, args.launches, args.work), args.work, args.label, args.occupancy)
    entries = {e["kernel"]: e for e in lib.manifest["entries"]}
    results = {}
    for kernel, launch in sorted(largest_launches(args.launches, set(entries)).items()):
        arrays = {a["name"]: (a["dtype"], len(a["shape"])) for a in launch["args"] if a["kind"] == "array"}
        consts = [(a["name"], a["value"]) for a in launch["args"] if a["kind"] == "const"]
        capture = SimpleNamespace(kernel=kernel, label=kernel, arrays=arrays, constants=consts)
        name, generics = generic_arguments(entries[kernel], capture)
        os.environ.update(TILEPORT_IR_DIV=str(args.div), TILEPORT_IR_UNIT=unit_dims(entries[kernel]))
        _, bytecode = lib.ir(name, generics)
        cubin = args.work / f"{args.label}-{name}.sm_90.cubin"
        res = compile_cubin(bytecode, "sm_90", cubin, sass=False)
        if not res.ok:
            sys.exit(f"tileiras failed on {name}: {res.error}")
        results[kernel] = {"entry": name, "generics": generics, "unit_dims": os.environ["TILEPORT_IR_UNIT"],
                           "launch": {"grid": launch["grid"], "arrays": {k: [d, a] for k, (d, a) in arrays.items()},
                                      "shapes": {a["name"]: a["shape"] for a in launch["args"] if a["kind"] == "array"}},
                           **sass_summary(cubin)}
        print(kernel, {k: results[kernel][k] for k in ("instructions", "registers", "threads_per_block",
                                                         "global_loads", "mufu", "calls")})
    doc = json.loads(args.out.read_text()) if args.out.exists() else {}
    doc.setdefault("runs", {})[args.label] = {
        "command": "python3 eval/measure/triton_sass_evidence.py " + " ".join(sys.argv[1:]),
        "note": args.note, "div": args.div, "occupancy_hint": args.occupancy, "kernels": results}
    if {"before", "after"} <= set(doc["runs"]):
        doc["summary"] = summarize(doc["runs"]["before"]["kernels"], doc["runs"]["after"]["kernels"])
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
