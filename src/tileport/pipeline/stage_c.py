"""Stage C, diagnose (after a D failure or an E INVESTIGATE): IR-diff findings -> owner and actions.

Reads the latest B's IR diffs (`B*/findings.json`, `B*/irdiff/`) and the verdict that sent the run
here, and writes `C/diff_report.md` (TileGym's layout: line 1 `VERDICT: X`, structural comparison,
checklist, root cause, impact, verdict with `owner:`, action items) and `C/diagnosis.json`.

- FAIL_FIXABLE owner kernel: a CRITICAL finding owned by the device kernel (B repairs it).
- FAIL_FIXABLE owner host: CRITICAL findings owned by the host side only; or a D correctness failure
  while the device IR matches the reference (then only the launcher / descriptors / plan can differ).
- FAIL_COMPILER_BUG: the device IR matches the reference, yet the cutile-rs JIT/compiler fails on it.
- PASS_WITH_NOTES: no CRITICAL finding, WARN findings remain (listed; for an E INVESTIGATE, the
  performance-relevant ones first); or the cuTile Python reference fails the same cases too.
- PASS: the IR matches; nothing in the device program explains the failure.
- BLOCKED: there is no IR diff to diagnose.
"""

from __future__ import annotations

import re

from tileport.atomic import write_text_atomic

from .artifacts import fresh_dir, first_line_verdict, read_json, stage_verdict, write_json
from .context import KernelContext
from .verdicts import Verdict

PERF_CATEGORIES = {"memory_hints", "entry_hints", "assume", "memory_family", "loop", "partition_view", "constant_arg"}
COMPILER_ERRORS = re.compile(r"panic|InternalError|JIT|compil", re.I)


def _root_cause(f: dict) -> str:
    if f["status"] == "SEMANTIC_EQUIV":
        return "semantic_equiv"
    return "user_code" if f["owner"] == "kernel" else "host_code"


def run(ctx: KernelContext) -> Verdict:
    d = fresh_dir(ctx.dir)
    b = ctx.latest("B")
    bdir = ctx.latest_dir("B")
    if b is None or bdir is None or not (bdir / "findings.json").is_file():
        return ctx.verdict("BLOCKED", "no IR diff of the port to diagnose (stage B produced none)")
    findings = read_json(bdir / "findings.json")
    trigger = ctx.previous("D", "E")
    critical = [f for f in findings if f["severity"] == "CRITICAL"]
    warn = [f for f in findings if f["severity"] == "WARN"]
    trigger_text = trigger.one_line() if trigger else "no trigger"
    details: dict = {"trigger": trigger_text, "b_attempt": b.attempt, "critical": len(critical), "warn": len(warn)}
    failures = (trigger.details.get("grade") or {}).get("failures", []) if trigger and trigger.stage == "D" else []
    owner = None
    if critical:
        owner = "kernel" if any(f["owner"] == "kernel" for f in critical) else "host"
        kinds = sorted({f"{f['category']}/{f['rule']}" for f in critical})
        verdict = "FAIL_FIXABLE"
        reason = (f"{len(critical)} CRITICAL IR-diff finding(s) ({', '.join(kinds)}), owner {owner}; first: "
                  f"{critical[0]['message']}" + (f" at {critical[0]['gen_source'] or critical[0]['ref_source']}"
                                                 if critical[0]['gen_source'] or critical[0]['ref_source'] else ""))
    elif trigger is not None and trigger.stage == "D" and trigger.verdict in ("FAIL", "BLOCKED"):
        if failures and all(f.get("reference_ok") is False for f in failures):
            verdict, reason = "PASS_WITH_NOTES", ("the device IR matches the reference and the cuTile Python "
                                                  "reference fails the same cases: not a porting defect")
        elif any(COMPILER_ERRORS.search(f.get("error", "")) for f in failures):
            verdict, reason = "FAIL_COMPILER_BUG", ("the device IR matches the reference (0 CRITICAL) but the "
                                                    "cutile-rs JIT/compiler fails on it: "
                                                    + next(f["error"] for f in failures
                                                           if COMPILER_ERRORS.search(f.get("error", "")))[:300])
        else:
            verdict, owner = "FAIL_FIXABLE", "host"
            reason = ("the device IR matches the reference (0 CRITICAL findings), so the correctness failure "
                      "comes from the host side: launcher, tensor descriptors, grid or launch plan")
    elif warn:
        perf = [f for f in warn if f["category"] in PERF_CATEGORIES]
        verdict = "PASS_WITH_NOTES"
        reason = (f"no CRITICAL finding; {len(warn)} WARN finding(s)"
                  + (f", {len(perf)} performance-relevant ({', '.join(sorted({f['category'] + '/' + f['rule'] for f in perf}))})"
                     if perf else ""))
    else:
        verdict, reason = "PASS", "the generated IR matches the reference (no CRITICAL or WARN finding)"
    details.update(owner=owner, root_causes=sorted({_root_cause(f) for f in critical + warn}))
    actions = [{"finding": f"{f['category']}/{f['rule']}", "owner": f["owner"], "action": f["action"],
                "where": f["gen_source"] or f["ref_source"], "config": f["config"]} for f in critical]
    if verdict == "FAIL_FIXABLE" and owner == "host" and not critical:
        actions = [{"finding": "correctness", "owner": "host", "action": "check the launcher (ffi.rs), descriptors, "
                    "grid and launch plan against the reference backend", "where": None, "config": None}]
    details["actions"] = actions
    write_json(d / "diagnosis.json", {"verdict": verdict, "owner": owner, "reason": reason, "trigger": trigger_text,
                                      "critical": critical, "warn": warn, "actions": actions})
    write_text_atomic(d / "diff_report.md", _report(ctx, verdict, owner, reason, bdir, b, findings, actions, trigger_text))
    return ctx.verdict(verdict, reason, owner=owner if verdict == "FAIL_FIXABLE" else None, details=details,
                       artifacts={"diff_report": ctx.rel(d / "diff_report.md"),
                                  "diagnosis": ctx.rel(d / "diagnosis.json")})


def _report(ctx, verdict, owner, reason, bdir, b, findings, actions, trigger) -> str:
    lines = [f"VERDICT: {verdict}", "", f"# IR diff report: `{ctx.kernel}`", "",
             f"- trigger: {trigger}", f"- generated by B({b.attempt}): `{ctx.rel(bdir)}`", "",
             "## Step 1: structural comparison", "",
             "| configuration | diff verdict | CRITICAL | WARN | INFO |", "|---|---|---|---|---|"]
    for label, x in b.details.get("ir_diff", {}).items():
        c = x["counts"]
        lines.append(f"| {label} | {x['verdict']} | {c['CRITICAL']} | {c['WARN']} | {c['INFO']} |")
    lines += ["", "## Step 2: checklist (item by item)", "",
              "| status | severity | category / rule | owner | finding | where |", "|---|---|---|---|---|---|"]
    shown = [f for f in findings if f["severity"] in ("CRITICAL", "WARN")]
    for f in shown:
        where = f["gen_source"] or f["ref_source"] or ""
        lines.append(f"| {f['status']} | {f['severity']} | {f['category']} / {f['rule']} | {f['owner']} | "
                     f"{f['message'].replace('|', '/')} ({f['config']}) | {where} |")
    if not shown:
        lines.append("| MATCH | INFO | all categories | - | no CRITICAL or WARN finding | - |")
    lines += ["", "Checked explicitly: flush_to_zero / rounding<approx> (math), assume div_by (assume), "
              "strides=[...] and dim_map (partition_view), allow_tma and latency (memory_hints), entry hints.", "",
              "## Step 3: root cause", ""]
    causes = sorted({_root_cause(f) for f in shown}) or ["none (the IR matches)"]
    lines += [f"- {c}" for c in causes]
    lines += ["", "## Step 4: impact", ""]
    crit = [f for f in shown if f["severity"] == "CRITICAL"]
    if crit:
        lines.append(f"- correctness/performance: {len(crit)} CRITICAL finding(s) make the port a different "
                     "program (numerics, memory access or schedule); blocking until fixed.")
    else:
        lines.append("- correctness: the device program matches the reference; performance: see the WARN "
                     "findings (hints) if any.")
    lines += ["", "## Step 5: verdict", "", f"{verdict}: {reason}"]
    if owner:
        lines.append(f"owner: {owner}")
    if verdict == "FAIL_FIXABLE":
        lines += ["", "### Action Items", ""]
        stage = "B" if owner == "kernel" else "D"
        lines += [f"- [{a['owner']} -> fix for stage {stage}] {a['finding']}: {a['action']}"
                  + (f" (at {a['where']})" if a["where"] else "") + (f" [{a['config']}]" if a["config"] else "")
                  for a in actions]
    if verdict == "PASS_WITH_NOTES":
        lines += ["", "Known gaps accepted as notes: the WARN findings above (no CRITICAL finding)."]
    return "\n".join(lines) + "\n"


SECTIONS = (r"structural comparison", r"checklist", r"root cause", r"impact", r"verdict")


def validate(ctx: KernelContext, verdict: Verdict | None = None) -> list[str]:
    """validate_diff_report of TileGym, as code."""
    verdict, errors = stage_verdict(ctx.dir, verdict)
    if verdict is None or verdict.verdict == "BLOCKED":
        return errors
    report = ctx.dir / "diff_report.md"
    errors += first_line_verdict(report, ("PASS", "PASS_WITH_NOTES", "FAIL_FIXABLE", "FAIL_COMPILER_BUG"),
                                 verdict.verdict)
    if errors:
        return errors
    text = report.read_text()
    for s in SECTIONS:
        if not re.search(rf"^#+ .*{s}", text, re.I | re.M):
            errors.append(f"diff_report.md: no `{s}` section")
    if not re.search(r"\|.*\|.*\|.*\|", text):
        errors.append("diff_report.md: no comparison table")
    if not re.search(r"MATCH|DIFFERS|MISSING|EXTRA|SEMANTIC_EQUIV", text):
        errors.append("diff_report.md: the checklist has no status token")
    if verdict.verdict == "FAIL_FIXABLE":
        if not re.search(rf"^owner: {verdict.owner}$", text, re.M):
            errors.append("diff_report.md: FAIL_FIXABLE without the verdict's `owner:` line")
        if not re.search(r"^### Action Items", text, re.M):
            errors.append("diff_report.md: FAIL_FIXABLE without action items")
    if not (ctx.dir / "diagnosis.json").is_file():
        errors.append("diagnosis.json: missing")
    else:
        diag = read_json(ctx.dir / "diagnosis.json")
        bdir = ctx.latest_dir("B")
        if bdir and (bdir / "findings.json").is_file():
            n = sum(1 for f in read_json(bdir / "findings.json") if f["severity"] == "CRITICAL")
            if len(diag["critical"]) != n:
                errors.append(f"diagnosis.json cites {len(diag['critical'])} CRITICAL findings, B has {n}")
    return errors
