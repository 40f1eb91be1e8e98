"""Stage D, host/FFI + correctness.

Host side (on any machine): the launcher of the port (`D/ffi.rs`, the C-ABI part of B's kernel.rs)
declares `extern "C" fn tileport_<kernel>` with `*const TensorDesc` arrays (`Desc`, an
`Option<&TensorDesc>`, in an idiomatic port: the same pointer, null or not) and `#[unsafe(no_mangle)]`;
the built library exports that symbol with the runtime's ABI version, and its manifest entry lists
the kernel's parameters in order. A failure there is FAIL class host.

Correctness (needs a GPU with PyTorch): every cutile-rs case of every operator that launches the
kernel (shapes incl. ragged ones, every dtype) against PyTorch, with the op spec's tolerances
(`tileport.gpu.check`). A kernel outside the operator library is tested against its SOURCE cuTile
kernel on its launches (the launch spec's, else the ones its host code fixes): random inputs shaped
and strided as launched, every array compared (`tileport.gpu.launch_check`; for a Triton source file,
against the source Triton kernel on its recorded launches, `tileport.gpu.triton_check`: Triton has no
reference IR, so this test is the port's proof); without launches the
stage is FAIL_FIXABLE (nothing to test on; the hint says how to record them), not an environment
block. On a machine without a GPU the stage grades evidence recorded on a GPU
machine (`--gpu-results`, see evidence.py) when it is fresh for this build; otherwise it ends
BLOCKED with class env and says why (no GPU; which evidence exists and why it is stale).
FAIL classes: host (FFI/launcher/binding/plan errors) or kernel (numeric mismatch, device faults).

Repair D(2) with `--agent-cmd`: the agent may edit `D2/ffi.rs`; the kernel is rebuilt from B's
device code plus that launcher.
"""

from __future__ import annotations

import re
from pathlib import Path

from tileport.gpu.launch_check import evidence_key, launch_components, launch_fingerprint, plan_launches
from tileport.runtime.library import load

from tileport.atomic import write_text_atomic

from . import agent
from .artifacts import first_line_verdict, fresh_dir, read_json, stage_verdict, write_json
from .builds import CrateBuild, read_crate
from .context import KernelContext
from .evidence import EvidenceStore, evidence_lines, fingerprints, grade_correctness, worktree_reader
from .stage_b import split_module
from .verdicts import Verdict


def host_checks(ctx: KernelContext, ffi: str, build: dict, analysis: dict, translation: dict) -> list[dict]:
    checks = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
    entry = (translation.get("manifest_entry") or [{}])[0]
    own_symbol = entry.get("symbol", f"tileport_{ctx.kernel}")  # B's kernel, translated alone
    crate_manifest = Path(build.get("crate", "")) / "kernels.json"
    if crate_manifest.is_file():  # the entry of the library actually built: in a crate of several files, a kernel
        # name two modules define gets the module as prefix (tileport_<module>_<kernel>)
        entry = next((e for e in read_json(crate_manifest)["entries"]
                      if e["kernel"] == ctx.kernel and e["module"] == ctx.target.module), entry)
    symbol = entry.get("symbol", own_symbol)
    check("ffi.rs declares the C symbol", re.search(rf'extern\s+"C"\s+fn\s+{re.escape(own_symbol)}\s*\(', ffi)
          is not None, own_symbol)
    check("arrays cross as *const TensorDesc", "*const TensorDesc" in ffi or re.search(r": Desc\b", ffi) or not any(
        p["kind"] == "array" for p in analysis["params"]))
    check("#[unsafe(no_mangle)]", "#[unsafe(no_mangle)]" in ffi)
    check("no raw-memory escapes (from_raw_parts / mem::forget / transmute)",
          not re.search(r"from_raw_parts|mem::forget|transmute", ffi))
    names = [p["name"] for p in entry.get("params", [])]
    want = [p["name"] for p in analysis["params"]]
    check("manifest parameters = kernel parameters (in order)", names == want, f"manifest {names} vs kernel {want}")
    so = build.get("library")
    if not so:
        check("library built", False, "stage B recorded no library")
        return checks
    try:
        import ctypes

        from tileport.runtime.abi import ABI_VERSION
        lib = load(Path(build["crate"]), Path(so))
        fn = lib.dll.tileport_abi_version
        fn.restype = ctypes.c_int32
        check("library loads with the runtime's ABI version", fn() == ABI_VERSION == lib.manifest.get("abi_version"),
              f"{so}: ABI {fn()}, manifest {lib.manifest.get('abi_version')}, runtime {ABI_VERSION}")
        check("library exports the symbol", hasattr(lib.dll, symbol), symbol)
    except Exception as e:  # noqa: BLE001 - a library that does not load is a host failure with its message
        check("library loads with the runtime's ABI version", False, f"{type(e).__name__}: {e}")
    return checks


def run(ctx: KernelContext) -> Verdict:
    t = ctx.target
    d = fresh_dir(ctx.dir)
    b = ctx.latest("B")
    bdir = ctx.latest_dir("B")
    analysis = read_json(ctx.stage_dir("A") / "analysis.json")
    translation = read_json(bdir / "translation.json")
    kernel_text = (bdir / "kernel.rs").read_text()
    device, ffi = split_module(kernel_text)
    ffi_path = d / "ffi.rs"
    write_text_atomic(ffi_path, ffi)
    build = dict(b.details["library"])
    fps, comps = b.details.get("fingerprints") or {}, b.details.get("components") or {}
    agent_record = None
    if ctx.attempt > 1 and ctx.options.agent_cmd:
        agent_record = agent.invoke(ctx, _prompt(ctx, ffi_path, bdir), [ffi_path])
        new_ffi = ffi_path.read_text() if ffi_path.is_file() else ""
        if new_ffi != ffi:
            ffi = new_ffi
            rebuilt = _rebuild(ctx, bdir, device + ffi)
            write_text_atomic(d / "build.log", rebuilt.log)
            if not rebuilt.ok:
                return ctx.verdict("FAIL", f"the repaired launcher does not build: {rebuilt.error[:1000]}",
                                   fail_class="host", agent=agent_record,
                                   artifacts={"ffi.rs": ctx.rel(ffi_path), "build_log": ctx.rel(d / "build.log")})
            build = rebuilt.describe()
            fps, comps = fingerprints(t.ops, worktree_reader(rebuilt.crate_dir))
    checks = host_checks(ctx, ffi, build, analysis, translation)
    write_json(d / "host_checks.json", checks)
    arts = {"ffi.rs": ctx.rel(ffi_path), "host_checks": ctx.rel(d / "host_checks.json"),
            "correctness": ctx.rel(d / "correctness.json"), "correctness_report": ctx.rel(d / "correctness.md")}
    details: dict = {"host_checks_ok": all(c["ok"] for c in checks), "library": build,
                     "fingerprints": fps, "ops": list(t.ops)}

    def finish(verdict: str, reason: str, fail_class: str | None, grade: dict | None, evidence: dict,
               diagnostics: list[dict] | None = None) -> Verdict:
        write_json(d / "correctness.json", {"verdict": verdict, "fail_class": fail_class, "reason": reason,
                                            "grade": grade, "evidence": evidence, "host_checks": checks})
        _report(d / "correctness.md", verdict, fail_class, reason, checks, grade, evidence)
        return ctx.verdict(verdict, reason, fail_class=fail_class, agent=agent_record, artifacts=arts,
                           diagnostics=diagnostics or [], details={**details, "grade": grade, "evidence": evidence})

    bad = [c for c in checks if not c["ok"]]
    if bad:
        return finish("FAIL", "host/FFI check failed: " + "; ".join(f"{c['check']} ({c['detail']})" for c in bad),
                      "host", None, {})
    if not t.ops:
        return _check_launches(ctx, d, build, finish)
    assessments = ctx.session.assess(ctx, "check", {op: (fps.get(op), comps.get(op, {})) for op in t.ops}, build)
    evidence = {op: a.describe() for op, a in assessments.items()}
    if all(a.status == "fresh" for a in assessments.values()):
        records = [r for a in assessments.values() for r in a.records]
        grade = grade_correctness(records)
        return finish(grade["verdict"], grade["reason"], grade["fail_class"], grade, evidence)
    gpu_ok, gpu_why = ctx.session.gpu()
    parts = []
    stale_grade = {}  # op -> what its stale evidence says
    for op, a in assessments.items():
        if a.status == "stale":
            stale_grade[op] = grade_correctness(a.records)["reason"]
            parts.append(f"`{op}`: stale evidence ({a.reason}; it says: {stale_grade[op]})")
        elif a.status == "none":
            parts.append(f"`{op}`: no recorded GPU results")
    if stale_grade:
        evidence["stale_grade"] = stale_grade
    why = gpu_why if not gpu_ok else "the GPU harness cannot run this build"
    return finish("BLOCKED", f"{why}; fresh GPU evidence is needed ({'; '.join(parts)}); record it on a GPU machine "
                  "(docs/pipeline.md, 'GPU evidence') and pass --gpu-results", "env", None, evidence)


NO_LAUNCHES_HINT = ("record them from your own program on a GPU machine (`tileport record --out launches.json -- "
                    "python3 your_program.py`) and pass `--launches launches.json`, or write the launches by hand in "
                    "a spec (docs/pipeline.md, 'Launch specs')")


def is_triton(ctx: KernelContext) -> bool:
    """The kernel's source file is Triton (its port is tested against the Triton kernel)."""
    from .targets import is_triton_file
    return is_triton_file(ctx.target.path)


def launch_identity(ctx: KernelContext, build: dict) -> tuple[str, str, dict]:
    """(evidence key, fingerprint, components) of this kernel's launches on the port B built."""
    from tileport.gpu.triton_check import triton_launch_components
    t = ctx.target
    key = evidence_key(t.path, t.kernel)
    describe = triton_launch_components if is_triton(ctx) else launch_components
    comps = describe(t.source_text, Path(build.get("crate", "")), t.path.stem, t.kernel, t.launches)
    return key, launch_fingerprint(comps), comps


def _entry_params(ctx: KernelContext, build: dict) -> list[dict]:
    manifest = Path(build.get("crate", "")) / "kernels.json"
    entries = read_json(manifest)["entries"] if manifest.is_file() else []
    entry = next((e for e in entries if e["kernel"] == ctx.kernel and e["module"] == ctx.target.path.stem), None)
    return entry["params"] if entry else []


def _check_launches(ctx: KernelContext, d: Path, build: dict, finish) -> Verdict:
    """Correctness of a kernel outside the operator library: the port against its source cuTile kernel
    on the kernel's launches (tileport.gpu.launch_check), natively on a GPU or from recorded evidence."""
    t = ctx.target
    triton = is_triton(ctx)
    if not t.launches:
        missing = [str(m) for m in t.launch_missing]
        where = (f"; launch inference: {'; '.join(missing[:6])}" if missing
                 else "; Triton launches are not inferred from host code" if triton
                 else "; its file has no ct.launch call site that launches it")
        diagnostics = [{"message": m.what, "construct": "ct.launch", "hint": m.hint, "kernel": t.kernel,
                        "file": m.file, "line": m.line, "col": m.col} for m in t.launch_missing]
        return finish("FAIL_FIXABLE", f"no launches of `{t.kernel}` to test the port on: {NO_LAUNCHES_HINT}{where}",
                      None, None, {"launch_source": "none"}, diagnostics)
    key, fp, comps = launch_identity(ctx, build)
    if triton:
        from tileport.gpu.triton_check import calls_dot, plan_triton_launches
        plans, problems = plan_triton_launches(key, t.launches, _entry_params(ctx, build),
                                               calls_dot(t.source_text, t.kernel))
    else:
        plans, problems = plan_launches(key, t.launches, _entry_params(ctx, build))
    evidence: dict = {"launch_source": t.launch_source, "launches": len(t.launches), "fingerprint": fp}
    if problems:
        return finish("FAIL_FIXABLE", "the launches do not fit the kernel: " + "; ".join(problems[:5]), None, None,
                      evidence)
    found = ctx.session.evidence.assess(key, "check", (fp, comps))
    if found.status != "fresh":
        gpu_ok, gpu_why = ctx.session.gpu()
        if gpu_ok and build.get("library"):
            native = native_triton_evidence if triton else native_launch_evidence
            path = native(ctx, d, build, key, fp, comps, plans)
            evidence["native"] = ctx.rel(path)
            found = EvidenceStore.load([path]).assess(key, "check", (fp, comps))
        else:
            evidence[key] = found.describe()
            stale = f" (it says: {grade_correctness(found.records)['reason']})" if found.status == "stale" else ""
            return finish("BLOCKED", f"{gpu_why or 'the library was not built'}; fresh GPU evidence of the "
                          f"{len(plans)} launch(es) is needed: {found.reason}{stale}; record it on a GPU machine "
                          f"(`python -m tileport.gpu.{'triton_check' if triton else 'launch_check'} record`, "
                          "docs/pipeline.md 'Launch specs') and pass "
                          "--gpu-results", "env", None, evidence)
    evidence[key] = found.describe()
    grade = grade_correctness(found.records)
    return finish(grade["verdict"], f"launches ({t.launch_source}): {grade['reason']}", grade["fail_class"], grade,
                  evidence)


def native_launch_evidence(ctx: KernelContext, d: Path, build: dict, key: str, fp: str, comps: dict,
                           plans: list) -> Path:
    """Run the differential test and the parity timing here (a GPU is present) and write them as
    evidence next to D's artifacts, for D and E."""
    from tileport.capture import kernel_namespace
    from tileport.gpu.launch_check import TorchDevice, check_launch, evidence_document, time_launch, write_evidence
    device = TorchDevice({ctx.kernel: kernel_namespace(ctx.target.path)[ctx.kernel]},
                         load(Path(build["crate"]), Path(build["library"])))
    check = [check_launch(p, device, seed=i) for i, p in enumerate(plans)]
    bench = [time_launch(p, device, seed=i) for i, p in enumerate(plans)]
    doc = evidence_document({key: fp}, {key: comps}, check, bench, gpu=device.name(),
                            library=build["library"], note="recorded by tileport port (stage D) on this machine")
    return write_evidence(d / "gpu-evidence-launches.json", doc)


def native_triton_evidence(ctx: KernelContext, d: Path, build: dict, key: str, fp: str, comps: dict,
                           plans: list) -> Path:
    """native_launch_evidence for a Triton source: the port against the source Triton kernel."""
    from tileport.gpu.launch_check import evidence_document, write_evidence
    from tileport.gpu.triton_check import TritonDevice, check_triton_launch, time_triton_launch
    from tileport.gpu.triton_source import source_kernel
    device = TritonDevice({ctx.kernel: source_kernel(ctx.target.path, ctx.kernel)},
                          load(Path(build["crate"]), Path(build["library"])))
    check = [check_triton_launch(p, device, seed=i) for i, p in enumerate(plans)]
    bench = [time_triton_launch(p, device, seed=i) for i, p in enumerate(plans)]
    doc = evidence_document({key: fp}, {key: comps}, check, bench, gpu=device.name(), library=build["library"],
                            note="recorded by tileport port (stage D) on this machine: port vs source Triton kernel")
    return write_evidence(d / "gpu-evidence-launches.json", doc)


def _rebuild(ctx: KernelContext, bdir: Path, text: str) -> CrateBuild:
    """The kernel with a repaired launcher, as a private crate: B's rendering of this kernel alone
    (`translation/`) with `text` as its module."""
    files = read_crate(bdir / "translation")
    files[f"src/{ctx.target.module}.rs"] = text
    return ctx.session.builds.private(files)


def _prompt(ctx: KernelContext, ffi_path, bdir) -> str:
    failing = [p / "verdict.json" for p in (ctx.latest_dir("C"), ctx.stage_dir("D", 1)) if p and (p / "verdict.json").is_file()]
    return agent.render_prompt(
        ctx, task="repair the host side of the port: the C-ABI launcher in ffi.rs (descriptor checks, dtype dispatch, "
                  "generics, grid, device/stream handling); keep the symbol name and the parameter order",
        editable=[ffi_path], failing=failing,
        artifacts={"kernel.rs (B)": bdir / "kernel.rs", "translation (B)": bdir / "translation.json",
                   "previous correctness (D(1))": ctx.stage_dir("D", 1) / "correctness.md"},
        findings=[], checks=["the kernel (B's device code + your ffi.rs) builds", "ffi.rs declares the C symbol with "
                             "*const TensorDesc arrays and #[unsafe(no_mangle)]", "the library exports the symbol",
                             "GPU correctness (fresh evidence) passes on every case"])


def _report(path, verdict, fail_class, reason, checks, grade, evidence) -> None:
    lines = [f"VERDICT: {verdict}", "", f"fail_class: {fail_class or '-'}", f"reason: {reason}", "",
             "## Host / FFI checks", "", "| Test | result | detail |", "|---|---|---|"]
    lines += [f"| {c['check']} | {'PASS' if c['ok'] else 'FAIL'} | {c['detail']} |" for c in checks]
    if evidence.get("launch_source"):
        lines += ["", "## Launches", "", f"source: {evidence['launch_source']}, launches: {evidence.get('launches', 0)}"
                  + (f", fingerprint: {evidence['fingerprint']}" if evidence.get("fingerprint") else "")]
    lines += ["", "## GPU correctness evidence", ""] + evidence_lines(evidence)
    if grade:
        lines += ["", f"cases: {grade.get('cases')}, passed: {grade.get('passed')}, failed: {grade.get('failed')}"]
        for f in grade.get("failures", [])[:20]:
            lines.append(f"- FAILED {f['op']} {f['dtype']} {f['shape']} ({f['class']}): {f['error'][:200]}")
    write_text_atomic(path, "\n".join(lines) + "\n")


def validate(ctx: KernelContext, verdict: Verdict | None = None) -> list[str]:
    """validate_agent_d of TileGym, as code."""
    verdict, errors = stage_verdict(ctx.dir, verdict)
    if verdict is None:
        return errors
    d = ctx.dir
    errors += first_line_verdict(d / "correctness.md", ("ALL_PASS", "FAIL", "FAIL_FIXABLE", "BLOCKED"),
                                 verdict.verdict)
    ffi = d / "ffi.rs"
    if not ffi.is_file():
        errors.append("ffi.rs: missing")
    if not (d / "host_checks.json").is_file():
        errors.append("host_checks.json: missing")
    elif verdict.verdict == "ALL_PASS" and not all(c["ok"] for c in read_json(d / "host_checks.json")):
        errors.append("ALL_PASS with a failed host check")
    if not (d / "correctness.json").is_file():
        errors.append("correctness.json: missing")
    elif verdict.verdict == "ALL_PASS":
        data = read_json(d / "correctness.json")
        ev = data.get("evidence") or {}
        if not ev or any(isinstance(e, dict) and e.get("status") not in ("fresh", None) for k, e in ev.items()
                         if k != "stale_grade"):
            errors.append("ALL_PASS without fresh GPU evidence for every op")
        g = data.get("grade") or {}
        if not g.get("cases") or g.get("failed"):
            errors.append("ALL_PASS without passing cases")
    return errors


__all__ = ["run", "validate"]
