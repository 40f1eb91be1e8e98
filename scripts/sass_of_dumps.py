"""Machine code of the runtime Tile IR dumps committed under bench/results/ (CPU: tileiras + nvdisasm).

    python3 scripts/sass_of_dumps.py bench/results/2026-11-29-h200-runtime-ir-dumps.tar.gz --out OUT.json

Every dumped bytecode (both JITs, per benchmark case) is compiled for sm_90 and disassembled with
`tileport.sass`; the JSON lists registers and instruction counts per file and, per case, the comparison
of each cuTile dump with the port's. A file that does not compile or disassemble is recorded as an error.
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from pathlib import Path

from tileport import sass
from tileport.capture import compile_cubin
from tileport.verify import run_metadata


def measure(bytecode: bytes, arch: str) -> tuple[dict, sass.Sass | None]:
    r = compile_cubin(bytecode, arch)
    if not r.ok or r.sass is None:
        return {"error": r.error or r.sass_error}, None
    return {"registers": r.sass.registers, "instructions": len(r.sass.instructions)}, r.sass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.dumps) as tar:
            tar.extractall(tmp, filter="data")
        root = Path(tmp) / "ir-dumps"
        for entry in json.loads((root / "index.json").read_text()):
            case = {"case": entry["case"], "files": {}, "comparisons": []}
            listings = {}
            for side in ("cutile", "cutile-rs"):
                for name in entry[side]["files"]:
                    stats, listing = measure((root / entry["case"] / side / name).read_bytes(), args.arch)
                    case["files"][f"{side}/{name}"] = stats
                    listings[(side, name)] = listing
            port = [v for (side, _), v in listings.items() if side == "cutile-rs"]
            for (side, name), ref in listings.items():
                if side == "cutile" and ref is not None and port and port[0] is not None:
                    case["comparisons"].append({"cutile": name, **sass.compare(ref, port[0])})
            cases.append(case)
            print(json.dumps(case)[:300], flush=True)
    meta = run_metadata(f"python3 scripts/sass_of_dumps.py {args.dumps} --out {args.out.name}")
    args.out.write_text(json.dumps({**meta, "arch": args.arch, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
