"""Stage F, residual performance (optional, `--residual`): after an E INVESTIGATE that C could not
resolve, look for what is left between the port and the reference.

Inputs: E's per-case ratios and B's IR-diff findings. Writes `F/perf_investigation.md` (line 1
`VERDICT: X`) and `F/investigation.json`.
- FIXABLE: performance-relevant IR differences remain (hints, assumptions, memory family, loop
  structure, entry hints: WARN or CRITICAL), listed with their actions;
- ALIGNED: the device IR is aligned on every performance-relevant category, so the gap is outside
  the device program (launch path, JIT options, the cuTile Python side), listed per slow case;
- BLOCKED: no graded benchmark to investigate.
"""

from __future__ import annotations

from tileport.gpu.bench import PARITY_BAR

from tileport.atomic import write_text_atomic

from .artifacts import first_line_verdict, fresh_dir, read_json, stage_verdict, write_json
from .context import KernelContext
from .stage_c import PERF_CATEGORIES
from .verdicts import Verdict


def run(ctx: KernelContext) -> Verdict:
    d = fresh_dir(ctx.dir)
    e = ctx.latest("E")
    bdir = ctx.latest_dir("B")
    arts = {"perf_investigation": ctx.rel(d / "perf_investigation.md"), "investigation": ctx.rel(d / "investigation.json")}
    cases = (e.details.get("cases") if e else None) or []
    findings = read_json(bdir / "findings.json") if bdir and (bdir / "findings.json").is_file() else []
    perf = [f for f in findings if f["category"] in PERF_CATEGORIES and f["severity"] in ("CRITICAL", "WARN")]
    slow = sorted((c for c in cases if c["ratio"] > PARITY_BAR), key=lambda c: -c["ratio"])
    if not cases:
        verdict, reason = "BLOCKED", "no graded benchmark to investigate"
    elif perf:
        verdict = "FIXABLE"
        reason = (f"{len(perf)} performance-relevant IR difference(s): "
                  + ", ".join(sorted({f"{f['category']}/{f['rule']}" for f in perf})))
    else:
        verdict = "ALIGNED"
        reason = (f"the device IR is aligned on every performance-relevant category; {len(slow)} case(s) above "
                  f"{PARITY_BAR} are outside the device program (launch path, JIT options, reference side)")
    write_json(d / "investigation.json", {"verdict": verdict, "reason": reason, "slow_cases": slow, "findings": perf})
    lines = [f"VERDICT: {verdict}", "", f"reason: {reason}", "", f"## Slow cases (ratio > {PARITY_BAR})", ""]
    lines += [f"- {c['dtype']} {c['shape']}: {c['ratio']:.3f}" for c in slow] or ["- none"]
    lines += ["", "## Performance-relevant IR differences", ""]
    lines += [f"- {f['severity']} {f['category']}/{f['rule']}: {f['message']} -> {f['action']}" for f in perf] or ["- none"]
    write_text_atomic(d / "perf_investigation.md", "\n".join(lines) + "\n")
    return ctx.verdict(verdict, reason, artifacts=arts, details={"slow_cases": len(slow), "perf_findings": len(perf)})


def validate(ctx: KernelContext, verdict: Verdict | None = None) -> list[str]:
    verdict, errors = stage_verdict(ctx.dir, verdict)
    if verdict is None:
        return errors
    errors += first_line_verdict(ctx.dir / "perf_investigation.md", ("FIXABLE", "ALIGNED", "BLOCKED"), verdict.verdict)
    if not (ctx.dir / "investigation.json").is_file():
        errors.append("investigation.json: missing")
    return errors
