"""Capture the Tile IR each JIT really compiled for a benchmark case, on the GPU machine.

cuTile Python and cutile-rs specialize kernels at launch on the actual arguments (divisibility of
shapes, strides and integer scalars, alignment), so the IR that runs can differ from the CPU
capture. For a case with a parity gap this records both runtime bytecodes:
- cuTile Python: CUDA_TILE_DUMP_BYTECODE=<dir> (its disk cache off, so the JIT runs);
- cutile-rs: CUTILE_TILEIRAS_PATH points at a wrapper that keeps a copy of each bytecode before
  running the real tileiras (its disk cache off).
Each case runs in a fresh process. `tileport irdiff` then compares the pair on any machine.
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
from pathlib import Path

from tileport.gpu.bench import PARITY_BAR
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

WRAPPER = """#!/usr/bin/env bash
for a in "$@"; do last="$a"; done
cp "$last" "$TILEPORT_DUMP_DIR/cutile-rs-$(date +%s%N).tileirbc" 2>/dev/null
exec "$TILEPORT_REAL_TILEIRAS" "$@"
"""


def run_case(op: str, dtype: str, shape: list[int], backend: str) -> None:
    """Child process: run one case once on one backend (the JIT compiles, the dump hooks record)."""
    import torch

    from tileport.ops.api import call
    from tileport.ops.specs import get_spec
    spec = get_spec(op)
    inputs = spec.make_inputs(tuple(shape), dtype, "cuda", 0)
    call(spec, *inputs, backend=backend)
    torch.cuda.synchronize()


def dump_case(op: str, dtype: str, shape: list[int], out_dir: Path) -> dict:
    from tileport import toolchain
    out_dir.mkdir(parents=True, exist_ok=True)
    wrapper = out_dir.parent / "tileiras-dump.sh"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    result = {}
    for backend in ("cutile", "cutile-rs"):
        d = out_dir / backend
        d.mkdir(exist_ok=True)
        env = dict(os.environ, TILEPORT_DUMP_DIR=str(d), CUDA_TILE_DUMP_BYTECODE=str(d), CUDA_TILE_CACHE_DIR="off",
                   TILEPORT_JIT_CACHE="0", TILEPORT_REAL_TILEIRAS=str(toolchain.tileiras()),
                   CUTILE_TILEIRAS_PATH=str(wrapper))
        cmd = [sys.executable, "-m", "tileport.gpu.dump", "--run", op, dtype, ",".join(map(str, shape)), backend]
        try:
            proc = run_tool(cmd, 300, env=env)
        except ToolTimeout as e:
            result[backend] = {"rc": None, "files": sorted(p.name for p in d.iterdir()), "stderr": str(e)}
            continue
        result[backend] = {"rc": proc.returncode, "files": sorted(p.name for p in d.iterdir()),
                           "stderr": proc.stderr[-1500:] if proc.returncode else ""}
    return result


def dump_gaps(bench_json: Path, out_dir: Path, threshold: float = PARITY_BAR) -> Path:
    """Dump every benchmark case whose t(cutile-rs)/t(cuTile Python) exceeds `threshold`; one tarball."""
    bench = json.loads(bench_json.read_text())
    index = []
    for r in bench["records"]:
        ratio = r.get("ratio_rs_over_cutile")
        if ratio is None or ratio <= threshold:
            continue
        name = f"{r['op']}-{r['dtype']}-{'x'.join(map(str, r['shape']))}"
        index.append({"case": name, "ratio": ratio, **dump_case(r["op"], r["dtype"], r["shape"], out_dir / name)})
    (out_dir / "index.json").write_text(json.dumps(index, indent=1))
    tar = out_dir.parent / "ir-dumps.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        tf.add(out_dir, arcname="ir-dumps")
    return tar


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--run":
        op, dtype, shape, backend = argv[1:5]
        run_case(op, dtype, [int(s) for s in shape.split(",")], backend)
        return 0
    bench_json, out_dir = Path(argv[0]), Path(argv[1])
    print(dump_gaps(bench_json, out_dir, float(argv[2]) if len(argv) > 2 else PARITY_BAR))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
