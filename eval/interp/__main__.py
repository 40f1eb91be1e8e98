"""Differential runs of the corpus on the CPU: every capture's reference and port, interpreted.

    python3 -m eval.interp [--kernel SUBSTRING] [--seed N] [--json report.json] [--profile dev]

Needs cuTile Python (reference export) and the generated library ($TILEPORT_LIB, or built with
cargo in the given profile: `dev` builds in a fraction of `release`'s time and exports the same IR).
Exit status: 0 when every capture AGREEs, 1 when one DIFFERs, 2 when one is an ERROR.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from tileport.runtime.library import PROFILES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m eval.interp",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default="", help="only captures whose label contains this")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--json", type=Path, help="write every report here")
    parser.add_argument("--profile", choices=PROFILES, default="release",
                        help="cargo profile of the generated library when $TILEPORT_LIB is not set")
    args = parser.parse_args(argv)

    from tileport.capture import generated_arg_roles, generated_bytecode
    from tileport.tileir.reader import read_module
    from tileport.ops.capture_ref import reference_bytecode
    from tileport.ops.specs import all_specs
    from tileport.runtime.library import load

    from .corpus import problems
    from tileport.tileir.interp.differential import differential

    lib = load(profile=args.profile)
    reports, seen = [], set()
    for spec in all_specs().values():
        for cap in spec.captures:
            if (spec.kernel_file, cap.label) in seen or args.kernel not in cap.label:
                continue
            seen.add((spec.kernel_file, cap.label))
            tol = spec.tolerances[next(iter(cap.arrays.values()))[0]]
            ref, gen = reference_bytecode(spec, cap), generated_bytecode(lib, cap)[1]
            roles = generated_arg_roles(lib, cap, read_module(gen))
            for variant, prob in enumerate(problems(cap, spec.kernel_file, args.seed,
                                                    (tol.rtol, tol.atol))):
                report = differential(ref, gen, prob, roles)
                print(report.summary(f"{cap.label} #{variant}"), flush=True)
                reports.append({"capture": cap.label, "variant": variant, "grid": list(prob.grid),
                                **asdict(report)})
    if not reports:
        print(f"no capture matches {args.kernel!r}", file=sys.stderr)
        return 2
    if args.json:
        _write_atomic(args.json, json.dumps({"reports": reports}, indent=1) + "\n")
    verdicts = {r["verdict"] for r in reports}
    print(f"{len(reports)} problems: " + ", ".join(f"{sum(r['verdict'] == v for r in reports)} {v}"
                                                   for v in sorted(verdicts)))
    return 2 if "ERROR" in verdicts else 1 if "DIFFER" in verdicts else 0


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        f.write(text)
    os.replace(f.name, path)


if __name__ == "__main__":
    sys.exit(main())
