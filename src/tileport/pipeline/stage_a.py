"""Stage A, analyze: kernels, constants, structural variants, configurations, tolerances, reference IR.

Reads the cuTile Python file with the translator's frontend (`ast` only: the user module is never
imported or executed) and writes `A/analysis.json` plus the reference Tile IR of every configuration
(`A/reference/<config>.tileirbc` and its `tileirdisasm` text), exported by cuTile Python on the CPU
from a module rebuilt from the file's AST (`tileport.capture.source`): nothing of the file runs.

- Structural variants are the entries the translator specializes (e.g. `matmul_kernel_use_tf321`
  and `..._use_tf320` for the two values of a `ct.Constant[bool]` that changes the program).
- Configurations come from the operator specs' captures for library kernels (or `--op`), from
  `--config FILE.json`, or else one per float dtype (f32/f16/bf16) when the kernel has no
  `ct.Constant` parameter; each configuration maps to the variant that serves it.
- Tolerances come from the op spec (none for kernels outside the library).

Verdicts: PASS; FAIL_FIXABLE (syntax error, no such kernel, no usable configuration, cuTile Python
cannot compile a configuration); BLOCKED class env (the cuda-tile toolchain is missing).

A Triton source (`@triton.jit` kernels) has no reference Tile IR: A reads it with the Triton
frontend's scan, takes its variants and parameters from the translator and its configurations from
its launches (or --config), and records `reference: none` (no `A/reference/`); the port's proof is
stage D's test against the Triton kernel itself.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from tileport.capture import CaptureError
from tileport.diagnostics import Diagnostic
from tileport.frontends.cutile import KernelConfig, classify_params, scan_module
from tileport.dtypes import TORCH_DTYPES

from . import probe
from .probe import SYNTHESIZED

from tileport.atomic import write_bytes_atomic, write_text_atomic

from . import builds
from .artifacts import artifact_errors, fresh_dir, ir_errors, read_json, slug, stage_verdict, write_json
from .context import KernelContext
from .targets import default_captures
from .verdicts import Verdict

A_TOOLS = ("cuTile Python", "tileirdisasm")

ANALYSIS_SCHEMA = {
    "type": "object",
    "required": ["kernel_name", "source_file", "source_sha256", "kernels_in_file", "module_constants", "params",
                 "variants", "configurations", "config_source", "tolerances", "tolerance_source", "ops",
                 "primary_op", "library", "correctness_reference", "translation"],
    "properties": {
        "kernel_name": {"type": "string", "minLength": 1},
        "source_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "params": {"type": "array", "items": {"type": "object", "required": ["name", "kind"],
                                              "properties": {"kind": {"enum": ["array", "scalar", "const"]}}}},
        "variants": {"type": "array", "minItems": 1,
                     "items": {"type": "object", "required": ["entry", "pinned", "configs"]}},
        "configurations": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["label", "slug", "variant", "arrays", "scalars", "constants",
                                           "reference_ir", "reference_bytecode", "sha256"]}},
        "tolerances": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["rtol", "atol"],
            "properties": {"rtol": {"type": "number"}, "atol": {"type": "number"}}}},
        "ops": {"type": "array", "items": {"type": "string"}},
        "library": {"type": "boolean"},
    },
}


def _param_records(params) -> list[dict]:
    out = []
    for p in params:
        if p.is_const:
            out.append({"name": p.name, "kind": "const", "const_type": p.const_type})
        elif p.is_array:
            out.append({"name": p.name, "kind": "array", "rank": p.ty.rank})
        else:
            out.append({"name": p.name, "kind": "scalar", "dtype": p.ty.dtype})
    return out


def _variant_of(capture, variants: list[dict]) -> str:
    consts = dict(capture.constants)
    dtypes = {n: TORCH_DTYPES.get(dt, dt) for n, (dt, _rank) in capture.arrays.items()}
    for v in variants:
        if all(consts.get(k) == val for k, val in v["pinned"].items()) \
                and all(dtypes.get(n) in allowed for n, allowed in v.get("dtypes", {}).items()):
            return v["entry"]
    return variants[0]["entry"]


def _fail(ctx: KernelContext, verdict: str, reason: str, diag: Diagnostic | None = None, **kw) -> Verdict:
    return ctx.verdict(verdict, reason, diagnostics=[diag.to_dict()] if diag else [], **kw)


TRITON_REFERENCE = ("none: a Triton source has no reference Tile IR; stage D tests the port against the Triton "
                    "kernel on its launches")


def run(ctx: KernelContext) -> Verdict:
    t = ctx.target
    d = fresh_dir(ctx.dir)
    from .targets import is_triton_file
    if is_triton_file(t.path):
        return _run_triton(ctx, d)
    missing = ctx.session.missing_tools(A_TOOLS)
    if missing:
        return _fail(ctx, "BLOCKED", "the cuda-tile toolchain is incomplete: " + "; ".join(missing),
                     fail_class="env")
    source = t.path.read_text()
    try:
        sm = scan_module(str(t.path), source)
    except Diagnostic as diag:
        return _fail(ctx, "FAIL_FIXABLE", f"the file does not parse: {diag.message}", diag)
    if t.kernel not in sm.kernels:
        return _fail(ctx, "FAIL_FIXABLE", f"{t.path} has no @ct.kernel `{t.kernel}` "
                     f"(kernels: {', '.join(sm.kernels) or 'none'})")
    cfg = t.configs.get(t.kernel, KernelConfig())
    fn = sm.kernels[t.kernel]
    try:
        params = _param_records(classify_params(sm, fn, cfg))
    except Diagnostic as diag:
        diag.kernel = diag.kernel or t.kernel
        return _fail(ctx, "FAIL_FIXABLE", f"the kernel signature cannot be analyzed: {diag.message}", diag)

    # structural variants: the entries the translator specializes (its diagnostics are B's business)
    translation, variants, _ = _lowered(ctx)

    captures = list(t.captures)
    synthesized = t.config_source == SYNTHESIZED
    probe_notes = probe.plan(sm, fn, classify_params(sm, fn, KernelConfig())).notes if synthesized else []
    if synthesized and not captures:  # no probe compiles: the located diagnostic
        diag = probe.select(t.path, sm, fn, classify_params(sm, fn, KernelConfig())).diagnostic
        if diag is not None:
            return _fail(ctx, "FAIL_FIXABLE", f"no configuration to capture the reference IR with: {diag.message} "
                         f"({diag.hint})", diag, details={"config_source": SYNTHESIZED, "probe_notes": probe_notes})
    if not captures:
        captures, problem = default_captures(params, t.kernel, t.config_entries)
        if problem:
            return _fail(ctx, "FAIL_FIXABLE", f"no configuration to capture the reference IR with: {problem}")

    ref_dir = d / "reference"
    ref_dir.mkdir()
    configurations = []
    for c in captures:
        s = slug(c.label)
        try:
            data = builds.reference_bytecode(ctx.session.builds, t.path, source, c)
            text = builds.disassemble(ctx.session.builds, data)
        except CaptureError as e:
            return _fail(ctx, "FAIL_FIXABLE", f"cuTile Python cannot compile configuration {c.label}: {e}")
        write_bytes_atomic(ref_dir / f"{s}.tileirbc", data)
        write_text_atomic(ref_dir / f"{s}.tileir", text)
        variant = _variant_of(c, variants)
        next(v for v in variants if v["entry"] == variant)["configs"].append(c.label)
        configurations.append({
            "label": c.label, "slug": s, "variant": variant,
            "arrays": {k: list(v) for k, v in c.arrays.items()}, "scalars": dict(c.scalars),
            "constants": dict(c.constants), "synthesized": synthesized,
            "reference_ir": f"A/reference/{s}.tileir",
            "reference_bytecode": f"A/reference/{s}.tileirbc", "sha256": hashlib.sha256(data).hexdigest()})

    tolerances, tol_source, reference_fn = {}, "none: no operator spec (D needs one)", None
    if t.primary_op:
        from tileport.ops.specs import get_spec

        from .evidence import spec_modules
        spec = get_spec(t.primary_op)
        tolerances = {dt: {"rtol": tol.rtol, "atol": tol.atol} for dt, tol in spec.tolerances.items()}
        tol_source = f"spec:{t.primary_op}"
        reference_fn = f"tileport.ops.specs.{spec_modules()[t.primary_op]}.reference"

    analysis = {
        "kernel_name": t.kernel, "source_file": str(t.path),
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "kernels_in_file": sorted(sm.kernels),
        "module_constants": {k: v for k, v in sm.constants.items() if isinstance(v, (int, float, bool))},
        "const_aliases": dict(sm.const_aliases),
        "params": params,
        "decorator_hints": _decorator_hints(fn),
        "variants": variants,
        "pattern": "multi_variant" if len(variants) > 1 else "single",
        "configurations": configurations, "config_source": t.config_source, "probe_notes": probe_notes,
        "tolerances": tolerances, "tolerance_source": tol_source,
        "ops": list(t.ops), "primary_op": t.primary_op, "library": t.library,
        "correctness_reference": {"function": reference_fn},
        "translation": translation,
    }
    write_json(d / "analysis.json", analysis)
    arts = {"analysis": "A/analysis.json"}
    for c in configurations:
        arts[f"reference_ir:{c['label']}"] = c["reference_ir"]
    note = "" if translation["ok"] else " (the translator reports a diagnostic: stage B decides)"
    if synthesized:
        note += (" for SYNTHESIZED probe values (no recorded launch, no launch in the file, no --config): the IR "
                 "diff proves the port for these values only; D and E need real launches")
    return ctx.verdict("PASS", f"{len(variants)} variant(s), {len(configurations)} configuration(s), "
                       f"reference IR captured{note}", artifacts=arts,
                       details={"variants": [v["entry"] for v in variants], "configurations": len(configurations),
                                "ops": list(t.ops), "config_source": t.config_source, "probe_notes": probe_notes,
                                "tolerance_source": tol_source})


def _lowered(ctx: KernelContext) -> tuple[dict, list[dict], list]:
    """(translation status, structural variants, lowered kernels) of the target (the translator's
    diagnostics are B's business)."""
    from tileport.translate import lower
    t = ctx.target
    translation = {"ok": True, "diagnostic": None}
    kernels: list = []
    try:
        kernels, results = lower(str(t.path), t.configs, only=[t.kernel])
        bad = next((r for r in results if r.kernel == t.kernel and not r.ok), None)
        if bad is not None:
            translation = {"ok": False, "diagnostic": bad.diagnostic.to_dict()}
    except Exception as e:  # noqa: BLE001 - the translator's failure is recorded and left to B
        translation = {"ok": False, "diagnostic": {"message": f"{type(e).__name__}: {e}"}}
    variants = [{"entry": k.name, "pinned": dict(sorted(k.pinned.items())), "hints": dict(k.hints), "configs": []}
                | ({"dtypes": _array_dtypes(k)} if len(kernels) > 1 else {})
                for k in kernels if (k.base_name or k.name) == t.kernel]
    return translation, variants or [{"entry": t.kernel, "pinned": {}, "hints": {}, "configs": []}], kernels


def _array_dtypes(k) -> dict[str, list[str]]:
    """The dtypes each array of an entry accepts (entries of one kernel may be split by dtype)."""
    return {p.name: list(k.dtype_vars.get(p.ty.dtype, (p.ty.dtype,))) for p in k.array_params}


def _triton_params(fn: ast.FunctionDef, kernels: list, launches: list) -> list[dict]:
    """The kernel's parameters in source order: as the translator typed them, a constant it pinned
    per entry as a const, else as the launches pass them."""
    typed = {p.name: r for k in kernels for p, r in zip(k.params, _param_records(k.params))}
    launched = {a.name: a for a in (launches[0].args if launches else [])}
    out = []
    for a in fn.args.args:
        if a.arg in typed:
            out.append(typed[a.arg])
        elif kernels or "constexpr" in ast.unparse(a.annotation or ast.Constant("")):
            out.append({"name": a.arg, "kind": "const"})
        elif a.arg in launched and launched[a.arg].kind in ("array", "scalar", "const"):
            la = launched[a.arg]
            out.append({"name": a.arg, "kind": la.kind, **({"rank": len(la.shape or [])} if la.kind == "array"
                                                           else {"dtype": la.dtype} if la.kind == "scalar" else {})})
        else:
            out.append({"name": a.arg, "kind": "scalar", "dtype": ""})
    return out


def _run_triton(ctx: KernelContext, d: Path) -> Verdict:
    """A for a Triton source: no reference IR (see the module docstring)."""
    from tileport.frontends.triton.scan import scan
    t = ctx.target
    source = t.path.read_text()
    try:
        tm = scan(str(t.path), source)
    except Diagnostic as diag:
        return _fail(ctx, "FAIL_FIXABLE", f"the file does not parse: {diag.message}", diag)
    if t.kernel not in tm.kernels:
        return _fail(ctx, "FAIL_FIXABLE", f"{t.path} has no @triton.jit kernel `{t.kernel}` "
                     f"(kernels: {', '.join(tm.kernels) or 'none'})")
    translation, variants, kernels = _lowered(ctx)
    params = _triton_params(tm.kernels[t.kernel], kernels, t.launches)
    captures = list(t.captures)
    if not captures:
        captures, problem = default_captures(params, t.kernel, t.config_entries)
        if problem or not t.config_entries:
            return _fail(ctx, "FAIL_FIXABLE", "a Triton kernel is specialized for its launches (tl.constexpr values, "
                         "dtypes): record them (`tileport record --out launches.json -- python3 your_program.py`, "
                         "then --launches launches.json) or give them with --config")
    configurations = []
    for c in captures:
        variant = _variant_of(c, variants)
        next(v for v in variants if v["entry"] == variant)["configs"].append(c.label)
        configurations.append({
            "label": c.label, "slug": slug(c.label), "variant": variant,
            "arrays": {k: list(v) for k, v in c.arrays.items()}, "scalars": dict(c.scalars),
            "constants": dict(c.constants), "reference_ir": None, "reference_bytecode": None, "sha256": None})
    analysis = {
        "kernel_name": t.kernel, "source_file": str(t.path), "source_language": "triton",
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(), "kernels_in_file": sorted(tm.kernels),
        "module_constants": {k: v for k, v in tm.constants.items() if isinstance(v, (int, float, bool))},
        "const_aliases": {}, "params": params, "decorator_hints": {}, "variants": variants,
        "pattern": "multi_variant" if len(variants) > 1 else "single", "configurations": configurations,
        "config_source": t.config_source, "tolerances": {}, "tolerance_source": "triton_check (tileport.gpu)",
        "ops": [], "primary_op": None, "library": False,
        "correctness_reference": {"function": None, "kernel": f"the source Triton kernel `{t.kernel}`"},
        "reference": TRITON_REFERENCE, "translation": translation,
    }
    write_json(d / "analysis.json", analysis)
    note = "" if translation["ok"] else " (the translator reports a diagnostic: stage B decides)"
    return ctx.verdict("PASS", f"Triton source: {len(variants)} variant(s), {len(configurations)} configuration(s); "
                       f"no reference IR (stage D tests the port against the Triton kernel){note}",
                       artifacts={"analysis": "A/analysis.json"},
                       details={"variants": [v["entry"] for v in variants], "configurations": len(configurations),
                                "ops": [], "config_source": t.config_source, "reference": TRITON_REFERENCE})


def _decorator_hints(fn: ast.FunctionDef) -> dict:
    out = {}
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call):
            for kw in dec.keywords:
                try:
                    out[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    out[kw.arg] = ast.unparse(kw.value)
    return out


def validate(ctx: KernelContext, verdict: Verdict | None = None) -> list[str]:
    """validate_analysis + validate_ir of TileGym, as code."""
    import jsonschema
    verdict, errors = stage_verdict(ctx.dir, verdict)
    if verdict is None or verdict.verdict != "PASS":
        return errors
    errors += artifact_errors(ctx.kernel_dir, verdict)
    path = ctx.dir / "analysis.json"
    if not path.is_file():
        return errors + ["analysis.json: missing"]
    try:
        analysis = read_json(path)
        jsonschema.validate(analysis, ANALYSIS_SCHEMA)
    except (ValueError, jsonschema.ValidationError) as e:
        return errors + [f"analysis.json: {getattr(e, 'message', e)}"]
    if analysis["kernel_name"] != ctx.kernel:
        errors.append(f"analysis.json names kernel {analysis['kernel_name']}, not {ctx.kernel}")
    if analysis["source_sha256"] != hashlib.sha256(Path(analysis["source_file"]).read_bytes()).hexdigest():
        errors.append("analysis.json: the source file changed after the analysis")
    entries = {v["entry"] for v in analysis["variants"]}
    for v in analysis["variants"]:
        if not v["configs"] and analysis.get("source_language") != "triton":
            errors.append(f"variant {v['entry']} has no configuration (no reference IR)")
    for c in analysis["configurations"]:
        if c["variant"] not in entries:
            errors.append(f"configuration {c['label']} maps to unknown variant {c['variant']}")
        if analysis.get("source_language") == "triton":
            if c["reference_ir"] is not None:
                errors.append(f"configuration {c['label']}: a Triton source has no reference IR")
            continue
        errors += ir_errors(ctx.kernel_dir / c["reference_ir"], ctx.kernel)
        bc = ctx.kernel_dir / c["reference_bytecode"]
        if not bc.is_file() or hashlib.sha256(bc.read_bytes()).hexdigest() != c["sha256"]:
            errors.append(f"{c['reference_bytecode']}: missing or not the bytecode the analysis recorded")
    if analysis["ops"] and not analysis["tolerances"]:
        errors.append("a library kernel needs tolerances (from its op spec)")
    for dt in analysis["tolerances"]:
        if dt not in TORCH_DTYPES:
            errors.append(f"tolerance for unknown dtype {dt}")
    return errors
