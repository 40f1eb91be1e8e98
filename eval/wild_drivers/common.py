"""Shared by the wild-corpus drivers: run named cases, each isolated, and report what ran.

A driver imports a wild package (installed from its pinned wheel on the GPU machine) and calls the
package's own launcher functions with representative shapes, under `tileport record`, so that every
`ct.launch` they make is recorded. A case that fails (a missing dependency, a launcher error) is
reported with its error and the others still run. The summary goes to stdout and, when
$WILD_DRIVER_OUT is set, to that JSON file.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Callable


def run_cases(package: str, cases: dict[str, Callable[[], None]]) -> int:
    results = {}
    for name, case in cases.items():
        try:
            case()
            results[name] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - one case's failure is reported; the others still run
            results[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:1000],
                             "traceback": traceback.format_exc()[-2000:]}
        print(f"{package}: {name}: {'ok' if results[name]['ok'] else results[name]['error']}", flush=True)
    summary = {"package": package, "cases": results, "ok": sum(r["ok"] for r in results.values()),
               "total": len(results)}
    out = os.environ.get("WILD_DRIVER_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"{package}: driver done: {summary['ok']}/{summary['total']} cases ran", flush=True)
    return 0 if summary["ok"] else 1


def sync() -> None:
    import torch
    torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit("common.py is imported by the drivers")
