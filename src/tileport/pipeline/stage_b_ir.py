"""Stage B, phase 4: the port's Tile IR for every configuration of stage A, its structural diff against
A's reference IR, cubins per variant and architecture, and the grade (the layout gate).

Writes under B's directory: `generated/<config>.tileir|.tileirbc`, `irdiff/<config>.json|.md`,
`cubins/<variant>.<arch>.cubin`, `findings.json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tileport.atomic import write_bytes_atomic, write_text_atomic
from tileport.ops.spec import Capture

from . import builds
from .artifacts import read_json, write_json
from .context import KernelContext
from .verdicts import Verdict

STRUCTURAL = {"memory_family", "memory_count", "memory_semantics", "partition_view", "tile_shape", "dtype",
              "reduction", "mma", "loop", "function", "signature"}


def finding_records(report, label: str) -> list[dict]:
    out = []
    for f in report.sorted_findings():
        if str(f.status) == "MATCH":
            continue
        out.append({"config": label, "severity": str(f.severity), "status": str(f.status), "category": f.category,
                    "rule": f.rule, "owner": str(f.owner), "message": f.message, "action": f.action,
                    "count": f.count, "ref_source": f.ref.source if f.ref else None,
                    "gen_source": f.gen.source if f.gen else None,
                    "ref_op": f.ref.op if f.ref else None, "gen_op": f.gen.op if f.gen else None})
    return out


def capture_of(config: dict, kernel: str) -> Capture:
    return Capture(kernel, {k: tuple(v) for k, v in config["arrays"].items()}, dict(config["scalars"]),
                   dict(config["constants"]))


def capture_and_diff(ctx: KernelContext, d: Path, build, arts: dict,
                     verdict: Callable[..., Verdict]) -> Verdict:
    """Generated IR and diff per configuration, cubins per variant, then the grade (`verdict` makes B's
    verdict with the phases' details; `arts`: the artifacts so far, extended here)."""
    from tileport.capture import CaptureError, diff_port
    from tileport.runtime.abi import TileportError

    t = ctx.target
    analysis = read_json(ctx.stage_dir("A") / "analysis.json")
    if analysis.get("source_language") == "triton":
        return own_ir_checks(ctx, analysis, build, d, verdict, arts)
    gen_dir, diff_dir, cubin_dir = d / "generated", d / "irdiff", d / "cubins"
    for p in (gen_dir, diff_dir, cubin_dir):
        p.mkdir()
    ir_diff, all_findings = {}, []
    lib = build.library()
    for c in analysis["configurations"]:
        cap = capture_of(c, t.kernel)
        try:
            gen_text, gen_bc = builds.generated_bytecode(ctx.session.builds, build, cap, module=t.module)
        except (CaptureError, TileportError) as e:
            return verdict("FAIL_COMPILE", f"the cutile compiler cannot compile {c['label']}: {e}", artifacts=arts)
        write_text_atomic(gen_dir / f"{c['slug']}.tileir", gen_text)
        write_bytes_atomic(gen_dir / f"{c['slug']}.tileirbc", gen_bc)
        report = diff_port(lib, cap, (ctx.kernel_dir / c["reference_bytecode"]).read_bytes(), gen_bc, t.module)
        write_text_atomic(diff_dir / f"{c['slug']}.json", report.to_json() + "\n")
        write_text_atomic(diff_dir / f"{c['slug']}.md", report.to_markdown())
        all_findings += finding_records(report, c["label"])
        ir_diff[c["label"]] = {"verdict": report.verdict, "counts": report.counts(), "slug": c["slug"],
                               "variant": c["variant"], "report": ctx.rel(diff_dir / f"{c['slug']}.json")}
        arts[f"generated_ir:{c['label']}"] = ctx.rel(gen_dir / f"{c['slug']}.tileir")
    variants, cubin_fail = compile_variants(ctx, analysis, gen_dir, cubin_dir)
    return grade(ctx, d, build, arts, verdict, variants, cubin_fail, ir_diff, all_findings)


def compile_variants(ctx: KernelContext, analysis: dict, gen_dir: Path, cubin_dir: Path,
                     has_reference: bool = True) -> tuple[list, list]:
    """tileiras on one configuration of every variant, per architecture: (records, failures where the
    reference compiles; every failure when there is no reference)."""
    variants, cubin_fail = [], []
    _compile_apart(ctx, analysis, gen_dir)
    for v in analysis["variants"]:
        conf = next((c for c in analysis["configurations"] if c["variant"] == v["entry"]), None)
        rec = {"entry": v["entry"], "configs": v["configs"], "cubins": {}}
        if conf is not None:
            gen_bc = (gen_dir / f"{conf['slug']}.tileirbc").read_bytes()
            for arch in ctx.options.archs:
                res = builds.cubin(ctx.session.builds, gen_bc, arch, cubin_dir / f"{v['entry']}.{arch}.cubin")
                rec["cubins"][arch] = res["ok"]
                if not res["ok"] and not has_reference:
                    cubin_fail.append(f"{v['entry']} {arch}: {res['error'][:500]}")
                elif not res["ok"]:
                    ref_bc = (ctx.kernel_dir / conf["reference_bytecode"]).read_bytes()
                    ref = builds.cubin(ctx.session.builds, ref_bc, arch, None)
                    if ref["ok"]:
                        cubin_fail.append(f"{v['entry']} {arch}: {res['error'][:500]}")
                    else:
                        rec.setdefault("notes", []).append(f"{arch}: the reference does not compile either")
        variants.append(rec)
    return variants, cubin_fail


def _compile_apart(ctx: KernelContext, analysis: dict, gen_dir: Path) -> None:
    """Every cubin of the loop below, compiled at once by the session's fan-out into the capture cache, which the
    loop then reads (tileiras takes seconds per variant and architecture: the longest part of B)."""
    root = str(ctx.session.builds.cache.root)
    todo = [(root, (gen_dir / f"{c['slug']}.tileirbc").read_bytes(), arch)
            for v in analysis["variants"]
            for c in [next((c for c in analysis["configurations"] if c["variant"] == v["entry"]), None)] if c
            for arch in ctx.options.archs]
    if len(todo) > 1:
        ctx.session.fan_out(builds.warm_cubin, todo)


def grade(ctx: KernelContext, d: Path, build, arts: dict, verdict: Callable[..., Verdict], variants: list,
          cubin_fail: list, ir_diff: dict, all_findings: list) -> Verdict:
    """The layout gate: COMPILED unless a cubin fails where the reference's compiles or a structural
    CRITICAL finding remains; other CRITICAL findings are left to stage C (`critical_pending`)."""
    from .evidence import fingerprints, worktree_reader
    critical = [f for f in all_findings if f["severity"] == "CRITICAL"]
    structural = [f for f in critical if f["category"] in STRUCTURAL]
    pending = [f for f in critical if f["category"] not in STRUCTURAL]
    fps, comps = fingerprints(ctx.target.ops, worktree_reader(build.crate_dir))
    write_json(d / "findings.json", all_findings)
    arts["findings"] = ctx.rel(d / "findings.json")
    grade = {"variants": variants, "ir_diff": ir_diff, "diff_clean": not critical,
             "counts": {s: sum(x["counts"][s] for x in ir_diff.values()) for s in ("CRITICAL", "WARN", "INFO")},
             "critical_structural": structural, "critical_pending": pending,
             "fingerprints": fps, "components": comps}
    if cubin_fail:
        return verdict("FAIL_COMPILE", "tileiras rejects the port's IR where it compiles the reference: "
                       + "; ".join(cubin_fail), artifacts=arts, details=grade)
    if structural:
        f = structural[0]
        return verdict("FAIL_FIXABLE", f"layout gate: {len(structural)} structural CRITICAL finding(s); first: "
                       f"{f['category']}/{f['rule']}: {f['message']} ({f['config']})", artifacts=arts, details=grade)
    n_conf = len(ir_diff)
    note = (f"; {len(pending)} CRITICAL finding(s) outside the layout gate left to C: "
            + ", ".join(sorted({f"{f['category']}/{f['rule']}" for f in pending}))) if pending else ""
    return verdict("COMPILED", f"builds; IR of {n_conf} configuration(s) captured and diffed "
                   f"({grade['counts']['CRITICAL']} CRITICAL, {grade['counts']['WARN']} WARN); cubins for "
                   f"{', '.join(ctx.options.archs)}{note}", artifacts=arts, details=grade)


def own_ir_checks(ctx: KernelContext, analysis: dict, build, d: Path, verdict, arts: dict) -> Verdict:
    """B's step 4 for a Triton source, which has no reference Tile IR: the port's own IR of every
    configuration (the cutile compiler must export it, `tileirdisasm` must read it) and its cubins;
    nothing is diffed, and the verdict says so."""
    from tileport.capture import CaptureError
    from tileport.runtime.abi import TileportError
    t = ctx.target
    gen_dir, cubin_dir = d / "generated", d / "cubins"
    for p in (gen_dir, cubin_dir):
        p.mkdir()
    for c in analysis["configurations"]:
        try:
            gen_text, gen_bc = builds.generated_bytecode(ctx.session.builds, build, capture_of(c, t.kernel), module=t.module)
        except (CaptureError, TileportError) as e:
            return verdict("FAIL_COMPILE", f"the cutile compiler cannot compile {c['label']}: {e}", artifacts=arts)
        write_text_atomic(gen_dir / f"{c['slug']}.tileir", gen_text)
        write_bytes_atomic(gen_dir / f"{c['slug']}.tileirbc", gen_bc)
        arts[f"generated_ir:{c['label']}"] = ctx.rel(gen_dir / f"{c['slug']}.tileir")
    variants, cubin_fail = compile_variants(ctx, analysis, gen_dir, cubin_dir, has_reference=False)
    grade = {"variants": variants, "ir_diff": {}, "diff_clean": None, "reference": analysis["reference"],
             "counts": {"CRITICAL": 0, "WARN": 0, "INFO": 0}, "critical_structural": [], "critical_pending": [],
             "fingerprints": {}, "components": {}}
    if cubin_fail:
        return verdict("FAIL_COMPILE", "tileiras rejects the port's IR: " + "; ".join(cubin_fail), artifacts=arts,
                       details=grade)
    return verdict("COMPILED", f"builds; the port's own IR of {len(analysis['configurations'])} configuration(s) "
                   f"captured and cubins for {', '.join(ctx.options.archs)}; no IR diff (Triton source: no reference "
                   "IR; stage D tests the port against the Triton kernel)", artifacts=arts, details=grade)

