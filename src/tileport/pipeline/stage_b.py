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

Phases: 1. translate the kernel alone; 2. the kernel text this attempt builds (the translator's, an
agent's repair, or, in tests only, the translator's with a planted defect: `Options.planted`);
3. build; 4. generated IR, diff and cubins (`stage_b_ir`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Protocol

from tileport.atomic import write_text_atomic
from tileport.diagnostics import Diagnostic

from . import agent, builds
from .artifacts import artifact_errors, fresh_dir, ir_errors, read_json, stage_verdict, write_json
from .context import KernelContext, translator_fingerprint
from .stage_b_ir import capture_and_diff
from .verdicts import Verdict

B_TOOLS = ("tileiras", "ptxas", "libnvvm", "CUDA headers", "libclang", "cargo", "rustc", "cutile crate")
FIXABLE_CONSTRUCTS = {"config", "specialization", "signature", "syntax", "kernel"}
DEVICE_END = "\nuse crate::support::*;"


# ------------------------------------------------------------------------------------ planted defects

class PlantedDefect(Protocol):
    """A translator defect planted into B(1)'s kernel text by a test (`Options.planted`: kernel -> defect),
    which the repair attempt removes. Pipeline tests define them; a real run has none."""

    name: str

    def apply(self, text: str) -> tuple[str, str]:
        """(the text with the defect, what changed)."""


def split_module(text: str) -> tuple[str, str]:
    """(device part, host part: the C-ABI launcher) of a generated module."""
    cut = text.find(DEVICE_END)
    return (text[:cut], text[cut:]) if cut >= 0 else (text, "")


# ------------------------------------------------------------------------------------ the stage

def _diag_verdict(ctx: KernelContext, d: Diagnostic, what: str) -> Verdict:
    construct = d.construct or ""
    verdict = "FAIL_FIXABLE" if construct in FIXABLE_CONSTRUCTS else "BLOCKED"
    kind = "input the translator needs" if verdict == "FAIL_FIXABLE" else "a construct the translator does not support"
    where = f"{d.loc}: " if d.loc else ""
    return ctx.verdict(verdict, f"{what}: {where}{d.message} ({kind})", diagnostics=[d.to_dict()],
                       details={"construct": construct, "hint": d.hint})


# ------------------------------------------------------------------------------------ the stage

def run(ctx: KernelContext) -> Verdict:
    d = fresh_dir(ctx.dir)
    missing = ctx.session.missing_tools(B_TOOLS)
    if missing:
        return ctx.verdict("BLOCKED", "the cutile-rs toolchain is incomplete: " + "; ".join(missing), fail_class="env")
    translated = translate_alone(ctx, d)
    if isinstance(translated, Verdict):
        return translated
    files, pristine, entries = translated
    kernel_rs = d / "kernel.rs"
    text, details, agent_record = kernel_text(ctx, kernel_rs, pristine, entries)

    def verdict(v: str, reason: str, **kw) -> Verdict:
        return ctx.verdict(v, reason, details={**details, **kw.pop("details", {})}, agent=agent_record,
                           artifacts={"kernel.rs": ctx.rel(kernel_rs), "translation": ctx.rel(d / "translation.json"),
                                      **kw.pop("artifacts", {})}, **kw)

    build = build_kernel(ctx, d, files, text, pristine)
    details["library"] = build.describe()
    arts = {"build_log": ctx.rel(d / "build.log")}
    if not build.ok:
        return verdict("FAIL_COMPILE", f"the port does not build: {build.error[:1500]}", artifacts=arts)
    return capture_and_diff(ctx, d, build, arts, verdict)


def translate_alone(ctx: KernelContext, d: Path) -> tuple[dict, str, list[str]] | Verdict:
    """Phase 1: the crate the translator renders for this kernel alone, written (formatted) under
    `translation/`; (its files, the kernel's module text, the entries), or the diagnostic's verdict."""
    from tileport.emit.rust.crate import ModuleSource, render_crate, write_crate
    from tileport.translate import lower

    t = ctx.target
    kernels, results = lower(str(t.path), t.configs, only=[t.kernel])
    bad = next((r for r in results if not r.ok), None)
    if bad is not None:
        return _diag_verdict(ctx, bad.diagnostic, "the translator cannot translate this kernel")
    source = t.record_path(str(t.path)) if t.record_path else str(t.path)
    failures: list = []
    for k in kernels:
        k.module_name = t.module
    files = render_crate([ModuleSource(t.module, source, kernels)], "tileport_port", failures,
                         faithful=ctx.options.faithful)
    if failures:
        return _diag_verdict(ctx, failures[0][1], "the emitter cannot generate this kernel")
    pristine_dir = d / "translation"  # kept: D(2) rebuilds a repaired launcher from it
    write_crate(files, pristine_dir)  # formatted by rustfmt, as `tileport translate` writes it
    files = builds.read_crate(pristine_dir)
    entries = [k.name for k in kernels]
    manifest = json.loads(files["kernels.json"])
    write_json(d / "translation.json", {"kernel": t.kernel, "entries": entries, "module": t.module,
                                        "translator_fingerprint": translator_fingerprint(),
                                        "manifest_entry": manifest["entries"]})
    return files, files[f"src/{t.module}.rs"], entries


def kernel_text(ctx: KernelContext, kernel_rs: Path, pristine: str, entries: list[str]):
    """Phase 2: the kernel text this attempt builds, written to `kernel_rs`: (text, details, agent record)."""
    t = ctx.target
    details: dict = {"entries": entries, "plant": None, "agent_edited": False}
    agent_record = None
    text = pristine
    if ctx.attempt == 1:
        defect = ctx.options.planted.get(t.kernel)
        if defect is not None:
            text, what = defect.apply(pristine)
            details["plant"] = {"defect": defect.name, "change": what}
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
    return text, details, agent_record


def build_kernel(ctx: KernelContext, d: Path, files: dict, text: str, pristine: str):
    """Phase 3: the build that serves the kernel: the run's batch crate when `text` is the translator's
    output, else a private crate (the translation with `text` as its module); the log goes to build.log."""
    t = ctx.target
    build = None
    if text == pristine:
        batch = ctx.session.builds.batch_for(t)
        if batch.ok and t.kernel in batch.kernels:
            build = batch
    if build is None:
        files = {**files, f"src/{t.module}.rs": text}
        build = ctx.session.builds.private(files)
    write_text_atomic(d / "build.log", build.log or f"(batch crate {build.crate_dir} built earlier in this run)\n")
    return build


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
