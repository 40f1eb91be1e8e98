"""The final gate of a kernel (TileGym's validate_kernel.sh, as code): every piece of evidence a
finished port must have, each listed as present or missing, written to `<out>/<kernel>/final.json`.

A kernel *passes* the gate when nothing is missing. Checks marked `gpu` need a GPU (correctness,
parity); when only those are missing and their stages ended BLOCKED with class env, the kernel has
reached the best state attainable on this machine (`best_attainable`). A run stopped by `--until`
(PAUSED) counts as such while every verdict so far lets it proceed.
"""

from __future__ import annotations

from .artifacts import read_json
from .context import KernelContext
from .verdicts import check_file

PROCEEDING = {"PASS", "COMPILED", "ALL_PASS", "DONE", "PASS_WITH_NOTES", "ALIGNED"}


def gate(ctx: KernelContext, terminal: str) -> dict:
    checks: list[dict] = []

    def add(name: str, ok: bool, detail: str = "", gpu: bool = False, env_blocked: bool = False) -> None:
        checks.append({"check": name, "ok": bool(ok), "detail": detail, "gpu": gpu, "env_blocked": env_blocked})

    kd = ctx.kernel_dir
    bad_files = [f"{p.relative_to(kd)}: {e}" for p in sorted(kd.glob("*/verdict.json")) for e in check_file(p)]
    add("every verdict.json is schema-valid", not bad_files, "; ".join(bad_files[:3]))

    a = ctx.latest("A")
    add("A: analysis PASS", bool(a and a.verdict == "PASS"), a.reason if a else "A did not run")
    analysis = read_json(kd / "A" / "analysis.json") if (kd / "A" / "analysis.json").is_file() else None
    triton = bool(analysis and analysis.get("source_language") == "triton")
    if triton:  # stated as what it is: no diff ran (D's test against the Triton kernel is the proof)
        add("A/B: no reference IR, no IR diff (Triton source)", True, analysis["reference"])
    elif analysis:
        missing = [v["entry"] for v in analysis["variants"]
                   if not any((kd / c["reference_ir"]).is_file() for c in analysis["configurations"]
                              if c["variant"] == v["entry"])]
        add("A: reference IR for every variant", not missing, ", ".join(missing))

    b, bdir = ctx.latest("B"), ctx.latest_dir("B")
    add("B: device kernel COMPILED", bool(b and b.verdict == "COMPILED"),
        (b.one_line() + ": " + b.reason[:300]) if b else "B did not run")
    if bdir is not None:
        add("B: kernel.rs", (bdir / "kernel.rs").is_file())
        add("B: build log", (bdir / "build.log").is_file())
    if b and b.verdict == "COMPILED" and analysis:
        gen_missing = [c["label"] for c in analysis["configurations"]
                       if not (bdir / "generated" / f"{c['slug']}.tileir").is_file()]
        add("B: generated IR for every configuration", not gen_missing, ", ".join(gen_missing))
        cub = [f"{v['entry']} {arch}" for v in b.details["variants"] for arch, ok in v["cubins"].items()
               if not ok or not (bdir / "cubins" / f"{v['entry']}.{arch}.cubin").is_file()]
        add("B: cubins for every variant and architecture", not cub, ", ".join(cub))
    if b and b.verdict == "COMPILED" and analysis and not triton:
        n = b.details["counts"]["CRITICAL"]
        c = ctx.latest("C")
        add("IR diff clean (0 CRITICAL findings)", n == 0,
            f"{n} CRITICAL finding(s)" + (f"; C: {c.one_line()}: {c.reason[:200]}" if c else "; C did not run"))
    c, cdir = ctx.latest("C"), ctx.latest_dir("C")
    if c is not None:
        add("C: diff report", bool(cdir and (cdir / "diff_report.md").is_file() and (cdir / "diagnosis.json").is_file()))

    d, ddir = ctx.latest("D"), ctx.latest_dir("D")
    if d is None:
        add("D: host/FFI checks", False, "D did not run")
        add("D: GPU correctness ALL_PASS on fresh evidence", False, "D did not run", gpu=True)
    else:
        add("D: host/FFI checks (ffi.rs, exported symbol, manifest)",
            bool(d.details.get("host_checks_ok")) and (ddir / "ffi.rs").is_file(), d.reason[:300] if d.fail_class == "host" else "")
        add("D: GPU correctness ALL_PASS on fresh evidence", d.verdict == "ALL_PASS", f"{d.one_line()}: {d.reason[:400]}",
            gpu=True, env_blocked=d.is_env_block)
    e = ctx.latest("E")
    if e is None:
        add("E: parity DONE on fresh evidence", False, "E did not run", gpu=True,
            env_blocked=bool(d and d.is_env_block))
    else:
        add("E: parity DONE on fresh evidence", e.verdict == "DONE", f"{e.one_line()}: {e.reason[:400]}", gpu=True,
            env_blocked=e.is_env_block)
    f, fdir = ctx.latest("F"), ctx.latest_dir("F")
    if f is not None:
        add("F: investigation report", bool(fdir and (fdir / "perf_investigation.md").is_file()))
    for (stage, attempt), v in sorted(ctx.verdicts.items()):
        if v.agent:
            add(f"{stage}({attempt}): agent prompt and log", (kd / v.agent["prompt"]).is_file()
                and (kd / v.agent.get("log", "")).is_file())
    failing = [x for x in checks if not x["ok"]]
    best = (terminal == "DONE" and not failing) or (
        terminal == "BLOCKED_ENV" and bool(failing) and all(x["gpu"] and x["env_blocked"] for x in failing))
    if terminal == "PAUSED":  # --until: fine so far when every verdict so far lets the run go on
        best = bool(ctx.verdicts) and all(v.verdict in PROCEEDING for v in ctx.verdicts.values())
    return {"kernel": ctx.kernel, "terminal": terminal, "passed": not failing,
            "missing": [f"{x['check']}" + (f": {x['detail']}" if x["detail"] else "") for x in failing],
            "best_attainable": best, "checks": checks}
