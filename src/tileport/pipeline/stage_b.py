"""Stage B, device kernel: translate, build, generated IR per configuration, cubins, IR diff.

Writes under `B/` (`B2/` for the repair attempt):
- `kernel.rs`: the cutile-rs module the translator generates for this kernel alone (device entries
  and C-ABI launcher); `translation.json`: entries and the manifest entry; `translation/`: the crate
  the translator renders for this kernel alone (formatted);
- `build.log`: the cargo build of the crate that serves the kernel (the run's batch crate when
  `kernel.rs` is the translator's output, else a private crate: `translation/` with `kernel.rs` as
  its module);
- `generated/<config>.tileir|.tileirbc`: the generated Tile IR of every configuration of stage A;
- `irdiff/<config>.json|.md`: the structural diff against A's reference IR (tileport.tileir.diff);
- `cubins/<variant>.<arch>.cubin`: tileiras output for one configuration of every variant.

Verdicts:
- COMPILED: it builds, every configuration's IR is captured, every cubin compiles, and the layout
  gate passes: no CRITICAL finding in the structural categories (memory family/count/semantics,
  partition views, tile shapes, dtypes, reductions, MMA, loops, entries, signature). CRITICAL
  findings in the other categories (math flags such as flush_to_zero / rounding, hints, assumptions,
  constants, casts) do not block B: they are listed as `critical_pending` and are stage C's to
  diagnose (this is TileGym's split between B's semantic-layout gate and C's diff analysis). The
  final gate requires them to be diagnosed or gone.
- FAIL_COMPILE: cargo, the cutile compiler (IR export) or tileiras rejects the port.
- FAIL_FIXABLE: a translator diagnostic that input can fix (configuration, specialization,
  signature), or a structural CRITICAL finding. BLOCKED: a construct the translator does not support.

Test-only switch (documented in docs/pipeline.md): TILEPORT_PIPELINE_PLANT="<kernel>:<defect>[,...]"
post-processes the translator's output of that kernel in B's first attempt only, modelling a
translator defect that the repair attempt removes. Defects: `ftz` (ftz::Enabled -> ftz::Disabled),
`tma` (tma::Enabled -> tma::Disabled), `ffi` (the launcher's C symbol renamed: a host defect),
`compile` (code rustc rejects).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from tileport.diagnostics import Diagnostic
from tileport.ops.spec import Capture

from tileport.atomic import write_bytes_atomic, write_text_atomic

from . import agent, builds
from .artifacts import artifact_errors, fresh_dir, ir_errors, read_json, stage_verdict, write_json
from .context import KernelContext, translator_fingerprint
from .verdicts import Verdict

B_TOOLS = ("tileiras", "ptxas", "libnvvm", "CUDA headers", "libclang", "cargo", "rustc", "cutile crate")
PLANT_ENV = "TILEPORT_PIPELINE_PLANT"
FIXABLE_CONSTRUCTS = {"config", "specialization", "signature", "syntax", "kernel"}
STRUCTURAL = {"memory_family", "memory_count", "memory_semantics", "partition_view", "tile_shape", "dtype",
              "reduction", "mma", "loop", "function", "signature"}
DEVICE_END = "\nuse crate::support::*;"


# ------------------------------------------------------------------------------------ planted defects

def planted(kernel: str) -> str | None:
    for item in os.environ.get(PLANT_ENV, "").split(","):
        k, _, defect = item.strip().partition(":")
        if k == kernel and defect:
            return defect
    return None


def split_module(text: str) -> tuple[str, str]:
    """(device part, host part: the C-ABI launcher) of a generated module."""
    cut = text.find(DEVICE_END)
    return (text[:cut], text[cut:]) if cut >= 0 else (text, "")


def plant(text: str, defect: str) -> tuple[str, str]:
    """(new text, what changed). Only the device part of the module is touched."""
    device, host = split_module(text)
    if defect in ("ftz", "tma"):
        old, new = {"ftz": ("ftz::Enabled", "ftz::Disabled"), "tma": ("tma::Enabled", "tma::Disabled")}[defect]
        n = device.count(old)
        return device.replace(old, new) + host, f"{n} x `{old}` -> `{new}`" if n else f"no `{old}` to change"
    if defect == "ffi":  # a launcher defect: the C symbol is exported under another name
        new_host, n = re.subn(r'(extern "C" fn tileport_\w+)\(', r"\1_planted(", host, count=1)
        return device + new_host, f"{n} C symbol(s) renamed with suffix `_planted`"
    if defect == "compile":
        return text + '\n#[allow(dead_code)]\nfn planted_defect() -> i32 {\n    "not an i32"\n}\n', "type error appended"
    raise ValueError(f"unknown planted defect {defect!r} (ftz, tma, ffi, compile)")


# ------------------------------------------------------------------------------------ findings

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


def _diag_verdict(ctx: KernelContext, d: Diagnostic, what: str) -> Verdict:
    construct = d.construct or ""
    verdict = "FAIL_FIXABLE" if construct in FIXABLE_CONSTRUCTS else "BLOCKED"
    kind = "input the translator needs" if verdict == "FAIL_FIXABLE" else "a construct the translator does not support"
    where = f"{d.loc}: " if d.loc else ""
    return ctx.verdict(verdict, f"{what}: {where}{d.message} ({kind})", diagnostics=[d.to_dict()],
                       details={"construct": construct, "hint": d.hint})


# ------------------------------------------------------------------------------------ the stage

def run(ctx: KernelContext) -> Verdict:
    from tileport.emit.crate import ModuleSource, render_crate, write_crate
    from tileport.translate import lower

    t = ctx.target
    d = fresh_dir(ctx.dir)
    missing = ctx.session.missing_tools(B_TOOLS)
    if missing:
        return ctx.verdict("BLOCKED", "the cutile-rs toolchain is incomplete: " + "; ".join(missing), fail_class="env")
    analysis = read_json(ctx.stage_dir("A") / "analysis.json")

    # 1. translate this kernel alone
    kernels, results = lower(str(t.path), t.configs, only=[t.kernel])
    bad = next((r for r in results if not r.ok), None)
    if bad is not None:
        return _diag_verdict(ctx, bad.diagnostic, "the translator cannot translate this kernel")
    source = t.record_path(str(t.path)) if t.record_path else str(t.path)
    failures: list = []
    for k in kernels:
        k.module_name = t.module
    files = render_crate([ModuleSource(t.module, source, kernels)], "tileport_port", failures)
    if failures:
        return _diag_verdict(ctx, failures[0][1], "the emitter cannot generate this kernel")
    rel = f"src/{t.module}.rs"
    pristine_dir = d / "translation"  # kept: D(2) rebuilds a repaired launcher from it
    write_crate(files, pristine_dir)  # formatted by rustfmt, as `tileport translate` writes it
    files = builds.read_crate(pristine_dir)
    pristine = files[rel]
    entries = [k.name for k in kernels]
    manifest = json.loads(files["kernels.json"])
    write_json(d / "translation.json", {"kernel": t.kernel, "entries": entries, "module": t.module,
                                        "translator_fingerprint": translator_fingerprint(),
                                        "manifest_entry": manifest["entries"]})

    # 2. the kernel text this attempt builds
    kernel_rs = d / "kernel.rs"
    details: dict = {"entries": entries, "plant": None, "agent_edited": False}
    agent_record = None
    text = pristine
    if ctx.attempt == 1:
        defect = planted(t.kernel)
        if defect:
            text, what = plant(pristine, defect)
            details["plant"] = {"defect": defect, "change": what, "env": PLANT_ENV}
        write_text_atomic(kernel_rs, text)
    else:
        prev = ctx.stage_dir("B", 1) / "kernel.rs"
        if ctx.options.agent_cmd:
            write_text_atomic(kernel_rs, prev.read_text() if prev.is_file() else pristine)
            agent_record = agent.invoke(ctx, _prompt(ctx, kernel_rs), [kernel_rs])
            text = kernel_rs.read_text() if kernel_rs.is_file() else ""
            details["agent_edited"] = bool(agent_record["changed"])
        else:
            write_text_atomic(kernel_rs, text)  # the repair without an agent: a fresh translation
    details["kernel_rs_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    details["from_translator"] = text == pristine

    def verdict(v: str, reason: str, **kw) -> Verdict:
        return ctx.verdict(v, reason, details={**details, **kw.pop("details", {})}, agent=agent_record,
                           artifacts={"kernel.rs": ctx.rel(kernel_rs), "translation": ctx.rel(d / "translation.json"),
                                      **kw.pop("artifacts", {})}, **kw)

    # 3. build
    build = None
    if text == pristine:
        batch = ctx.session.builds.batch_for(t)
        if batch.ok and t.kernel in batch.kernels:
            build = batch
    if build is None:
        files[rel] = text
        build = ctx.session.builds.private(files)
    write_text_atomic(d / "build.log", build.log or f"(batch crate {build.crate_dir} built earlier in this run)\n")
    details["library"] = build.describe()
    arts = {"build_log": ctx.rel(d / "build.log")}
    if not build.ok:
        return verdict("FAIL_COMPILE", f"the port does not build: {build.error[:1500]}", artifacts=arts)

    # 4. generated IR, diff, cubins (a Triton source has no reference: the port's own IR and cubins)
    if analysis.get("source_language") == "triton":
        return _own_ir_checks(ctx, analysis, build, d, verdict, arts)
    from tileport.capture import CaptureError, generated_arg_roles, reference_arg_roles
    from tileport.runtime.abi import TileportError
    from tileport.tileir import diff, read_module
    gen_dir, diff_dir, cubin_dir = d / "generated", d / "irdiff", d / "cubins"
    for p in (gen_dir, diff_dir, cubin_dir):
        p.mkdir()
    ir_diff, all_findings = {}, []
    lib = build.library()
    for c in analysis["configurations"]:
        cap = capture_of(c, t.kernel)
        try:
            gen_text, gen_bc = builds.generated_bytecode(ctx.session, build, cap)
        except (CaptureError, TileportError) as e:
            return verdict("FAIL_COMPILE", f"the cutile compiler cannot compile {c['label']}: {e}", artifacts=arts)
        write_text_atomic(gen_dir / f"{c['slug']}.tileir", gen_text)
        write_bytes_atomic(gen_dir / f"{c['slug']}.tileirbc", gen_bc)
        ref_bc = (ctx.kernel_dir / c["reference_bytecode"]).read_bytes()
        ref_module, gen_module = read_module(ref_bc), read_module(gen_bc)
        report = diff(ref_module, gen_module, generated_arg_roles=generated_arg_roles(lib, cap, gen_module),
                      reference_arg_roles=reference_arg_roles(lib, cap, ref_module))
        write_text_atomic(diff_dir / f"{c['slug']}.json", report.to_json() + "\n")
        write_text_atomic(diff_dir / f"{c['slug']}.md", report.to_markdown())
        recs = finding_records(report, c["label"])
        all_findings += recs
        ir_diff[c["label"]] = {"verdict": report.verdict, "counts": report.counts(), "slug": c["slug"],
                               "variant": c["variant"], "report": ctx.rel(diff_dir / f"{c['slug']}.json")}
        arts[f"generated_ir:{c['label']}"] = ctx.rel(gen_dir / f"{c['slug']}.tileir")
    variants = []
    cubin_fail = []
    for v in analysis["variants"]:
        conf = next((c for c in analysis["configurations"] if c["variant"] == v["entry"]), None)
        rec = {"entry": v["entry"], "configs": v["configs"], "cubins": {}}
        if conf is not None:
            gen_bc = (gen_dir / f"{conf['slug']}.tileirbc").read_bytes()
            for arch in ctx.options.archs:
                res = builds.cubin(ctx.session, gen_bc, arch, cubin_dir / f"{v['entry']}.{arch}.cubin")
                rec["cubins"][arch] = res["ok"]
                if not res["ok"]:
                    ref = builds.cubin(ctx.session, (ctx.kernel_dir / conf["reference_bytecode"]).read_bytes(), arch, None)
                    if ref["ok"]:
                        cubin_fail.append(f"{v['entry']} {arch}: {res['error'][:500]}")
                    else:
                        rec.setdefault("notes", []).append(f"{arch}: the reference does not compile either")
        variants.append(rec)
    critical = [f for f in all_findings if f["severity"] == "CRITICAL"]
    structural = [f for f in critical if f["category"] in STRUCTURAL]
    pending = [f for f in critical if f["category"] not in STRUCTURAL]
    from .evidence import fingerprints, worktree_reader
    fps, comps = fingerprints(t.ops, worktree_reader(build.crate_dir))
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


def _own_ir_checks(ctx: KernelContext, analysis: dict, build, d: Path, verdict, arts: dict) -> Verdict:
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
            gen_text, gen_bc = builds.generated_bytecode(ctx.session, build, capture_of(c, t.kernel))
        except (CaptureError, TileportError) as e:
            return verdict("FAIL_COMPILE", f"the cutile compiler cannot compile {c['label']}: {e}", artifacts=arts)
        write_text_atomic(gen_dir / f"{c['slug']}.tileir", gen_text)
        write_bytes_atomic(gen_dir / f"{c['slug']}.tileirbc", gen_bc)
        arts[f"generated_ir:{c['label']}"] = ctx.rel(gen_dir / f"{c['slug']}.tileir")
    variants, cubin_fail = [], []
    for v in analysis["variants"]:
        conf = next((c for c in analysis["configurations"] if c["variant"] == v["entry"]), None)
        rec = {"entry": v["entry"], "configs": v["configs"], "cubins": {}}
        if conf is not None:
            gen_bc = (gen_dir / f"{conf['slug']}.tileirbc").read_bytes()
            for arch in ctx.options.archs:
                res = builds.cubin(ctx.session, gen_bc, arch, cubin_dir / f"{v['entry']}.{arch}.cubin")
                rec["cubins"][arch] = res["ok"]
                if not res["ok"]:
                    cubin_fail.append(f"{v['entry']} {arch}: {res['error'][:500]}")
        variants.append(rec)
    grade = {"variants": variants, "ir_diff": {}, "diff_clean": None, "reference": analysis["reference"],
             "counts": {"CRITICAL": 0, "WARN": 0, "INFO": 0}, "critical_structural": [], "critical_pending": [],
             "fingerprints": {}, "components": {}}
    if cubin_fail:
        return verdict("FAIL_COMPILE", "tileiras rejects the port's IR: " + "; ".join(cubin_fail), artifacts=arts,
                       details=grade)
    return verdict("COMPILED", f"builds; the port's own IR of {len(analysis['configurations'])} configuration(s) "
                   f"captured and cubins for {', '.join(ctx.options.archs)}; no IR diff (Triton source: no reference "
                   "IR; stage D tests the port against the Triton kernel)", artifacts=arts, details=grade)


def _prompt(ctx: KernelContext, kernel_rs: Path) -> str:
    c_dir = ctx.latest_dir("C")
    failing = [p / "verdict.json" for p in (c_dir, ctx.latest_dir("D"), ctx.latest_dir("E")) if p]
    findings = read_json(ctx.stage_dir("B", 1) / "findings.json") if (ctx.stage_dir("B", 1) / "findings.json").is_file() else []
    arts = {"reference Tile IR (stage A)": ctx.stage_dir("A") / "reference",
            "previous kernel.rs (B(1))": ctx.stage_dir("B", 1) / "kernel.rs",
            "previous IR diffs (B(1))": ctx.stage_dir("B", 1) / "irdiff",
            "previous generated IR (B(1))": ctx.stage_dir("B", 1) / "generated"}
    if c_dir:
        arts["diagnosis (C)"] = c_dir / "diff_report.md"
    return agent.render_prompt(
        ctx, task="repair the cutile-rs device kernel so that its Tile IR matches the reference "
                  "(fix every CRITICAL finding owned by the kernel); keep the entry names and the launcher",
        editable=[kernel_rs], failing=failing, artifacts=arts,
        findings=[f for f in findings if f["severity"] in ("CRITICAL", "WARN")],
        checks=["kernel.rs builds with cargo (in a crate holding only this kernel)",
                "every entry of translation.json is still defined in kernel.rs",
                "the generated IR of every configuration is captured, its cubins compile (sm_80/90/100)",
                "the IR diff has no structural CRITICAL finding (layout gate); stage C re-diagnoses the rest"])


def validate(ctx: KernelContext, verdict: Verdict | None = None) -> list[str]:
    """validate_agent_b of TileGym, as code (plus the IR and diff checks)."""
    from tileport.tileir.report import SCHEMA_PATH
    import jsonschema
    verdict, errors = stage_verdict(ctx.dir, verdict)
    if verdict is None:
        return errors
    errors += artifact_errors(ctx.kernel_dir, verdict)
    d = ctx.dir
    if (d / "ffi.rs").exists():
        errors.append("lane guard: stage B must not write ffi.rs (stage D's artifact)")
    if verdict.verdict not in ("COMPILED", "FAIL_COMPILE"):
        return errors
    kernel_rs = d / "kernel.rs"
    text = kernel_rs.read_text() if kernel_rs.is_file() else ""
    if not text.strip():
        return errors + ["kernel.rs: missing or empty"]
    if not (d / "translation.json").is_file():
        return errors + ["translation.json: missing"]
    if not (d / "translation" / "kernels.json").is_file():
        errors.append("translation/: missing (the crate a repaired launcher is rebuilt from)")
    for entry in read_json(d / "translation.json")["entries"]:
        if not re.search(rf"\bfn\s+{re.escape(entry)}\b", text):
            errors.append(f"kernel.rs: entry `{entry}` is not defined")
    if not (d / "build.log").is_file():
        errors.append("build.log: missing")
    if verdict.verdict != "COMPILED":
        return errors
    schema = read_json(SCHEMA_PATH)
    analysis = read_json(ctx.stage_dir("A") / "analysis.json")
    details = verdict.details
    if analysis.get("source_language") == "triton":
        for c in analysis["configurations"]:
            errors += ir_errors(d / "generated" / f"{c['slug']}.tileir", ctx.kernel)
        if details.get("ir_diff") or details.get("diff_clean") is not None:
            errors.append("a Triton source has no reference IR: nothing may be reported as diffed")
        return errors + _cubin_errors(d, details)
    for c in analysis["configurations"]:
        errors += ir_errors(d / "generated" / f"{c['slug']}.tileir", ctx.kernel)
        rep = d / "irdiff" / f"{c['slug']}.json"
        if not rep.is_file():
            errors.append(f"irdiff/{rep.name}: missing")
            continue
        try:
            doc = read_json(rep)
            jsonschema.validate(doc, schema)
        except (ValueError, jsonschema.ValidationError) as e:
            errors.append(f"irdiff/{rep.name}: {getattr(e, 'message', e)}")
            continue
        recorded = details["ir_diff"].get(c["label"])
        if recorded is None or recorded["counts"] != doc["counts"]:
            errors.append(f"irdiff/{rep.name}: counts differ from the verdict's")
    if details.get("critical_structural"):
        errors.append("COMPILED with structural CRITICAL findings")
    if details.get("diff_clean") != (details["counts"]["CRITICAL"] == 0):
        errors.append("diff_clean disagrees with the CRITICAL count")
    return errors + _cubin_errors(d, details)


def _cubin_errors(d: Path, details: dict) -> list[str]:
    errors = []
    for v in details["variants"]:
        for arch, ok in v["cubins"].items():
            if ok and not (d / "cubins" / f"{v['entry']}.{arch}.cubin").is_file():
                errors.append(f"cubins/{v['entry']}.{arch}.cubin: missing")
            if not ok and not v.get("notes"):
                errors.append(f"COMPILED although {v['entry']} does not compile for {arch}")
    return errors
