"""Sum up the pytest shards of `scripts/h200.sh pytest`: DIR/<shard>.xml (junit) and DIR/rc.txt.

    python3 scripts/pytest-summary.py DIR OUT.json

Writes OUT.json (per shard: exit code, passed / failed / errors / skipped; every failure and error with its
message; skip reasons with their counts) and prints a table. Exit code 0 only when every shard wrote its
junit file, exited 0 and nothing failed, and at least one test passed: a shard cut by its time limit (rc 124) or
without results fails.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def shard_results(xml: Path) -> dict:
    cases = ET.parse(xml).getroot().iter("testcase")
    out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "problems": [], "skips": Counter()}
    for case in cases:
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag: child for child in case}
        if "failure" in kinds or "error" in kinds:
            tag = "failure" if "failure" in kinds else "error"
            out["failed" if tag == "failure" else "errors"] += 1
            out["problems"].append({"test": name, "kind": tag,
                                    "message": (kinds[tag].get("message") or kinds[tag].text or "")[:600]})
        elif "skipped" in kinds:
            out["skipped"] += 1
            out["skips"][(kinds["skipped"].get("message") or "")[:300]] += 1
        else:
            out["passed"] += 1
    return out


def main(directory: Path, target: Path) -> int:
    rcs = {}
    rc_file = directory / "rc.txt"
    for line in rc_file.read_text().splitlines() if rc_file.is_file() else []:
        name, _, rc = line.partition(" rc=")
        rcs[name] = int(rc) if rc.strip().lstrip("-").isdigit() else None
    shards, ok = {}, bool(rcs)
    for name in sorted(rcs):
        xml = directory / f"{name}.xml"
        res = shard_results(xml) if xml.is_file() else None
        if res is None:
            shards[name] = {"rc": rcs[name], "junit": False}
            ok = False
            continue
        res["skips"] = dict(res["skips"])
        shards[name] = {"rc": rcs[name], "junit": True, **res}
        # pytest exits 5 when it selects no test: fine for the catch-all shard only (no other GPU tests yet)
        allowed = (0, 5) if name == "rest" else (0,)
        ok = ok and rcs[name] in allowed and not res["failed"] and not res["errors"]
    total = {k: sum(s.get(k, 0) for s in shards.values()) for k in ("passed", "failed", "errors", "skipped")}
    ok = ok and total["passed"] > 0  # nothing run is no result
    skips = Counter()
    for s in shards.values():
        skips.update(s.get("skips", {}))
    doc = {"kind": "tileport-pytest-shards", "ok": ok, "total": total, "skip_reasons": dict(skips), "shards": shards}
    target.write_text(json.dumps(doc, indent=1))
    print(f"{'shard':<24} {'rc':>4} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}")
    for name, s in shards.items():
        print(f"{name:<24} {str(s['rc']):>4} {s.get('passed', '-'):>7} {s.get('failed', '-'):>7} "
              f"{s.get('errors', '-'):>7} {s.get('skipped', '-'):>8}" + ("" if s["junit"] else "  (no junit file)"))
    print(f"total: {total}")
    for s in shards.values():
        for p in s.get("problems", [])[:10]:
            print(f"{p['kind'].upper()} {p['test']}: {p['message'][:300]}")
    for reason, n in skips.most_common(10):
        print(f"skipped x{n}: {reason}")
    print(f"pytest shards: {'OK' if ok else 'NOT OK'} ({total['passed']} passed, {total['failed']} failed, "
          f"{total['errors']} errors, {total['skipped']} skipped)")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
