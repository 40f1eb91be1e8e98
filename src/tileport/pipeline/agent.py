"""The external agent protocol of the repair stages (B(2) after C, D(2) after C or a host failure).

With `--agent-cmd "<command>"`, a repair stage prepares its work directory (the files to repair, e.g.
`B2/kernel.rs`), writes a prompt file and runs

    <command> <prompt.md>        (through the shell, cwd = the work directory)

with the environment variables TILEPORT_PROMPT (the prompt file), TILEPORT_WORKDIR (the work
directory), TILEPORT_STAGE (B or D), TILEPORT_ATTEMPT, TILEPORT_KERNEL and TILEPORT_OUT (the kernel's
output directory). The prompt lists the stage, the failing verdict (inline and by path), the artifact
paths, the IR-diff findings, the files the agent may edit and what the stage's validator will check.
When the command exits (any exit code; a timeout kills it), the stage carries on with whatever the
agent left in the work directory: it builds, captures and diffs as usual, and its validator decides.
The agent never writes verdicts. See docs/pipeline.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

from tileport.atomic import write_text_atomic
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

from .context import KernelContext

def _hashes(files: list[Path]) -> dict[str, str | None]:
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else None for f in files}


def render_prompt(ctx: KernelContext, *, task: str, editable: list[Path], failing: list[Path],
                  artifacts: dict[str, Path], findings: list[dict], checks: list[str]) -> str:
    """The prompt: everything by path, plus the failing verdicts and findings inline."""
    lines = [f"# tileport repair request: stage {ctx.stage}({ctx.attempt}) of kernel `{ctx.kernel}`", "",
             f"Task: {task}", "",
             "## Protocol",
             f"- Work directory: `{ctx.dir}` (also $TILEPORT_WORKDIR). Edit only the files listed under "
             "\"Files you may edit\"; everything else is read-only evidence.",
             "- Exit when done. The pipeline then rebuilds and re-checks; the stage's validator decides, "
             "not your exit code. Do not write verdict files.", "",
             "## Files you may edit"]
    lines += [f"- `{p}`" for p in editable]
    lines += ["", "## Failing verdict(s)"]
    for p in failing:
        lines.append(f"### `{p}`")
        try:
            doc = json.loads(p.read_text())
            brief = {k: doc.get(k) for k in ("stage", "attempt", "verdict", "fail_class", "owner", "reason")}
            lines += ["```json", json.dumps(brief, indent=1), "```"]
        except (OSError, json.JSONDecodeError):
            lines.append("(unreadable)")
    lines += ["", "## Artifacts"]
    lines += [f"- {name}: `{p}`" for name, p in artifacts.items()]
    lines += ["", "## IR-diff findings (reference cuTile Python vs generated cutile-rs)"]
    if findings:
        lines += ["| severity | category/rule | owner | finding | where | action |", "|---|---|---|---|---|---|"]
        for f in findings:
            where = "; ".join(x for x in (f.get("ref_source") and f"ref {f['ref_source']}",
                                          f.get("gen_source") and f"gen {f['gen_source']}",
                                          f.get("gen_op") and f"gen op `{f['gen_op'][:120]}`") if x)
            lines.append(f"| {f['severity']} | {f['category']}/{f['rule']} | {f['owner']} | "
                         f"{f['message'].replace('|', '/')} | {where} | {f['action'].replace('|', '/')} |")
    else:
        lines.append("(none)")
    if ctx.repair_errors:
        lines += ["", "## The validator rejected the previous attempt's artifacts"]
        lines += [f"- {e}" for e in ctx.repair_errors]
    lines += ["", "## What the validator will check"]
    lines += [f"- {c}" for c in checks]
    return "\n".join(lines) + "\n"


def invoke(ctx: KernelContext, prompt_text: str, editable: list[Path]) -> dict[str, Any]:
    """Run the agent command once; returns the verdict's `agent` record."""
    cmd = ctx.options.agent_cmd or ""
    agent_dir = ctx.dir / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    prompt = agent_dir / "prompt.md"
    write_text_atomic(prompt, prompt_text)
    log = agent_dir / "agent.log"
    env = dict(os.environ, TILEPORT_PROMPT=str(prompt), TILEPORT_WORKDIR=str(ctx.dir), TILEPORT_STAGE=str(ctx.stage),
               TILEPORT_ATTEMPT=str(ctx.attempt), TILEPORT_KERNEL=ctx.kernel, TILEPORT_OUT=str(ctx.kernel_dir))
    before = _hashes(editable)
    t0 = time.perf_counter()
    exit_code: int | None
    try:
        proc = run_tool(f"{cmd} {shlex.quote(str(prompt))}", ctx.options.agent_timeout, what="the agent", shell=True,
                        cwd=ctx.dir, env=env)
        exit_code, out = proc.returncode, proc.stdout + proc.stderr
    except ToolTimeout as e:
        exit_code = None
        out = f"{e.stdout or ''}{e.stderr or ''}\n(killed after {ctx.options.agent_timeout:.0f} s)"
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
    seconds = time.perf_counter() - t0
    write_text_atomic(log, f"$ {cmd} {prompt}\n(cwd {ctx.dir})\n{out}\nexit={exit_code}\n")
    after = _hashes(editable)
    changed = [ctx.rel(Path(p)) for p in editable if before[str(p)] != after[str(p)]]
    return {"command": cmd, "prompt": ctx.rel(prompt), "exit_code": exit_code, "seconds": round(seconds, 2),
            "changed": changed, "log": ctx.rel(log)}
