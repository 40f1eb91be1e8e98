"""Stage E, benchmark: geomean t(cutile-rs) / t(faster reference) over the op's benchmark cases, or,
for a kernel outside the operator library, t(port) / t(source cuTile kernel) over its launches.

The kernel is graded with the benchmark of its primary op (the op with the fewest kernels that
launches it, or `--op`): every dtype and benchmark shape, cutile-rs vs cuTile Python vs PyTorch side
by side (`tileport.gpu.bench`: median GPU time, L2 flushed); for a Triton source file the reference
is the source Triton kernel itself, t(port) / t(Triton) (`tileport.gpu.triton_check`). The faster reference is the reference
backend with the lower geomean time over the cases; DONE when the geomean ratio is <= 1.05, else
INVESTIGATE (E never FAILs). The ratio against cuTile Python alone is reported next to it.

Without a GPU the stage grades fresh recorded evidence (`--gpu-results`) or ends BLOCKED class env,
reporting what stale evidence says. Writes `E/performance.json` and `E/performance.md` (line 1
`VERDICT: X`, exactly one `geomean_ratio=X.XXXX` line when graded).
"""

from __future__ import annotations

import re

from tileport.atomic import write_text_atomic
from tileport.gpu.launch_check import evidence_key

from .artifacts import first_line_verdict, fresh_dir, read_json, stage_verdict, write_json
from .context import KernelContext
from .evidence import THRESHOLD, EvidenceStore, evidence_lines, grade_performance
from .stage_d import launch_identity
from .verdicts import Verdict


def _fps(ctx: KernelContext, op: str) -> tuple:
    d = ctx.latest("D")
    b = ctx.latest("B")
    fps = (d.details.get("fingerprints") if d else None) or (b.details.get("fingerprints") if b else {}) or {}
    comps = (b.details.get("components") if b else {}) or {}
    return fps.get(op), comps.get(op, {})


def run(ctx: KernelContext) -> Verdict:
    t = ctx.target
    d = fresh_dir(ctx.dir)
    arts = {"performance": ctx.rel(d / "performance.json"), "performance_report": ctx.rel(d / "performance.md")}
    graded_by = t.primary_op or (evidence_key(t.path, t.kernel) if t.launches else None)  # op, or the launches

    def finish(verdict: str, reason: str, fail_class: str | None, grade: dict | None, evidence: dict) -> Verdict:
        write_json(d / "performance.json", {"verdict": verdict, "reason": reason, "op": graded_by,
                                            "grade": grade, "evidence": evidence})
        _report(d / "performance.md", verdict, reason, graded_by, grade, evidence)
        details = {"op": graded_by, "evidence": evidence, "threshold": THRESHOLD}
        if grade and "geomean_ratio" in grade:
            details.update({k: grade[k] for k in ("geomean_ratio", "reference_backend", "geomean_ratio_vs_cutile",
                                                  "worst_case_ratio", "reference_geomean_us")})
            details["cases"] = [{k: c[k] for k in ("dtype", "shape", "ratio", "ratio_vs_cutile", "times_us")}
                                for c in grade["cases"]]
        return ctx.verdict(verdict, reason, fail_class=fail_class if verdict == "BLOCKED" else None,
                           artifacts=arts, details=details)

    op = t.primary_op
    if op is None:
        return _time_launches(ctx, finish)
    dv = ctx.latest("D")
    a = ctx.session.assess(ctx, "bench", {op: _fps(ctx, op)}, (dv.details.get("library") if dv else None) or {})[op]
    evidence = {op: a.describe()}
    if a.status == "fresh":
        g = grade_performance(a.records)
        return finish(g["verdict"], g["reason"], g.get("fail_class"), g, evidence)
    gpu_ok, gpu_why = ctx.session.gpu()
    why = gpu_why if not gpu_ok else "the GPU harness cannot run this build"
    if a.status == "stale":
        g = grade_performance(a.records)
        evidence["stale_grade"] = {k: g.get(k) for k in ("verdict", "geomean_ratio", "reference_backend",
                                                         "geomean_ratio_vs_cutile", "reason")}
        return finish("BLOCKED", f"{why}; the recorded benchmark is stale ({a.reason}; it says: {g['reason']})",
                      "env", None, evidence)
    return finish("BLOCKED", f"{why}; no recorded benchmark of `{op}` (record one on a GPU machine and pass "
                  "--gpu-results; docs/pipeline.md)", "env", None, evidence)


def _time_launches(ctx: KernelContext, finish) -> Verdict:
    """Parity of a kernel outside the operator library on its launches: t(port) / t(source cuTile
    kernel), from the evidence D graded (recorded with --gpu-results, or measured by D here)."""
    t = ctx.target
    dv = ctx.latest("D")
    if not t.launches or dv is None:
        return finish("BLOCKED", "no launches of this kernel to time (D: record them with `tileport record`)", None,
                      None, {})
    key, fp, comps = launch_identity(ctx, dv.details.get("library") or {})
    found = ctx.session.evidence.assess(key, "bench", (fp, comps))
    native = (dv.details.get("evidence") or {}).get("native")
    if found.status != "fresh" and native:
        found = EvidenceStore.load([ctx.kernel_dir / native]).assess(key, "bench", (fp, comps))
    evidence = {key: found.describe()}
    if found.status == "fresh":
        g = grade_performance(found.records)
        return finish(g["verdict"], f"launches ({t.launch_source}): {g['reason']}", g.get("fail_class"), g, evidence)
    gpu_ok, gpu_why = ctx.session.gpu()
    return finish("BLOCKED", f"{gpu_why or 'the GPU harness did not time this build'}; no fresh timing of the "
                  f"{len(t.launches)} launch(es): {found.reason} (record it on a GPU machine: docs/pipeline.md, "
                  "'Launch specs')", "env", None, evidence)


def _report(path, verdict, reason, op, grade, evidence) -> None:
    lines = [f"VERDICT: {verdict}", ""]
    if grade and "geomean_ratio" in grade:
        lines += [f"geomean_ratio={grade['geomean_ratio']:.4f}", "",
                  f"- op: `{op}`, reference: {grade['reference_backend']} (the faster one), threshold {THRESHOLD}",
                  f"- geomean vs cuTile Python: {grade['geomean_ratio_vs_cutile']}", "",
                  "| dtype | shape | cutile-rs µs | cuTile µs | torch µs | rs/ref |", "|---|---|---|---|---|---|"]
        triton = grade["reference_backend"] == "triton"  # a Triton source: the Triton kernel is the reference
        if triton:
            lines[-2:] = ["| dtype | shape | cutile-rs µs | Triton µs | rs/ref |", "|---|---|---|---|---|"]
        for c in grade["cases"]:
            tm = c["times_us"]
            refs = [tm.get("triton", 0)] if triton else [tm.get("cutile", 0), tm.get("torch", 0)]
            lines.append(f"| {c['dtype']} | {'x'.join(map(str, c['shape']))} | {tm.get('cutile-rs', 0):.1f} | "
                         + "".join(f"{t:.1f} | " for t in refs) + f"{c['ratio']:.3f} |")
    lines += ["", f"reason: {reason}", "", "## Evidence", ""] + evidence_lines(evidence)
    write_text_atomic(path, "\n".join(lines) + "\n")


def validate(ctx: KernelContext, verdict: Verdict | None = None) -> list[str]:
    """validate_agent_e of TileGym, as code."""
    verdict, errors = stage_verdict(ctx.dir, verdict)
    if verdict is None:
        return errors
    report = ctx.dir / "performance.md"
    errors += first_line_verdict(report, ("DONE", "INVESTIGATE", "BLOCKED"), verdict.verdict)
    if errors:
        return errors
    text = report.read_text()
    ratios = re.findall(r"^geomean_ratio=([0-9]+(?:\.[0-9]+)?)\s*$", text, re.M)
    if verdict.verdict in ("DONE", "INVESTIGATE"):
        if len(ratios) != 1:
            return errors + [f"performance.md: expected exactly one geomean_ratio= line, found {len(ratios)}"]
        r = float(ratios[0])
        if abs(r - verdict.details["geomean_ratio"]) > 1e-3:
            errors.append("performance.md and verdict.json disagree on geomean_ratio")
        if verdict.verdict == "DONE" and r > THRESHOLD:
            errors.append(f"DONE with geomean_ratio {r} > {THRESHOLD}")
        data = read_json(ctx.dir / "performance.json")
        if not (data.get("grade") or {}).get("cases"):
            errors.append("performance.json: no graded cases")
        if any(e.get("status") != "fresh" for k, e in (data.get("evidence") or {}).items() if k != "stale_grade"):
            errors.append("a graded benchmark must come from fresh evidence")
    elif ratios:
        errors.append("BLOCKED but performance.md has a geomean_ratio= line")
    return errors
