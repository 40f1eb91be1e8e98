"""Run the pipeline over many kernels: their stage runs as units on an executor (`-j N` threads of this
process by default, or a Ray cluster: schedule.py), rich progress bars, a summary table, `summary.json`
and the HTML/markdown report. Threads suffice locally: the heavy work (cargo, tileiras, tileirdisasm) runs
in subprocesses and the library's IR export releases the GIL.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tileport import executor

from .artifacts import inside, write_json
from .context import Options, Session, Target
from .engine import Outcome, route_label
from .outdir import check_out, out_lock, run_entries
from .schedule import Scheduler

TERMINAL_STYLE = {"DONE": "bold green", "BLOCKED_ENV": "yellow", "COMPLETE": "cyan", "STOPPED": "red",
                  "PAUSED": "dim", "ERROR": "bold red"}


def run_batch(targets: list[Target], options: Options, console: Console | None = None,
              progress: bool = True) -> tuple[list[Outcome], Session]:
    """Port `targets` under the lock of `options.out` (OutLockedError if another run holds it;
    UnsafePathError if a target's folder would lie outside it; OutDirError if the run would replace
    what no port run wrote there, see outdir.py; ExecutorError if `options.executor` cannot run)."""
    for t in targets:
        inside(options.out, options.out / t.key)
    entries = run_entries([t.key for t in targets], gpu=options.native_gpu is not False)
    check_out(options.out, entries, options.force)
    pool = executor.make(options.executor, options.jobs)
    try:
        with out_lock(options.out, entries):
            return _run_batch(targets, options, pool, console or Console(), progress)
    finally:
        pool.close()


def _run_batch(targets: list[Target], options: Options, pool: executor.Executor, console: Console,
               progress: bool) -> tuple[list[Outcome], Session]:
    session = Session(options, targets)
    t0 = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    where = (f"{options.jobs} at a time" if pool.name == "local"
             else f"on {pool.name} ({pool.describe().get('nodes', '?')} node(s))")
    with Progress(*columns, console=console, disable=not progress, transient=False) as bars:
        overall = bars.add_task(f"porting {len(targets)} kernel(s), {where}", total=len(targets))
        run_line = bars.add_task("", total=None, visible=progress)
        tasks = {t.key: bars.add_task(escape(f"  {t.key}"), total=6, visible=False) for t in targets}
        stages_seen: dict[str, int] = {}

        def report(key: str, message: str) -> None:
            if key not in tasks:
                return
            if message.endswith("running"):
                stages_seen[key] = stages_seen.get(key, 0) + 1
            bars.update(tasks[key], description=escape(f"  {key}: {message}"), completed=min(6, stages_seen.get(key, 0)),
                        visible=True)

        def finished(out: Outcome) -> None:
            bars.update(tasks[out.key], visible=False)
            bars.advance(overall)
            if progress:
                style = TERMINAL_STYLE.get(out.terminal, "")
                steps = " → ".join(route_label(r, " (close-out)") for r in out.route)
                bars.console.print(f"  [{style}]{out.terminal:<11}[/] " + escape(f"{out.key}  {steps}"))
                for line in reason_lines(out):
                    bars.console.print(escape(line), highlight=False)

        scheduler = Scheduler(session, pool, report,
                              lambda line: bars.update(run_line, description=escape(f"  {line}")), finished)
        try:
            ordered = scheduler.run()
        finally:
            session.close()
    seconds = time.perf_counter() - t0
    write_summary(ordered, session, seconds, {**pool.describe(), **scheduler.stats.to_dict()})
    from .report import write_report
    write_report(options.out, ordered, session, seconds)
    return ordered, session


def reason_lines(outcome: Outcome) -> list[str]:
    """Why each stage decided what it did (its verdict's reason), then why the run ended: what a user
    reads on the terminal without opening the verdict files."""
    lines = [f"      {route_label(r, ' (close-out)')}: {r['reason']}" for r in outcome.route if r.get("reason")]
    if outcome.why:
        lines.append(f"      -> {outcome.why}")
    return lines


def write_summary(outcomes: list[Outcome], session: Session, seconds: float, executor: dict | None = None) -> Path:
    o = session.options
    gpu_ok, gpu_why = session.gpu()
    doc = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 1),
        "options": {k: (str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, list) else v)
                    for k, v in asdict(o).items()},
        "gpu": {"available": gpu_ok, "reason": gpu_why},
        "executor": executor or {"name": "local"},
        "evidence": {"files": session.evidence.files, "errors": session.evidence.errors},
        "counts": _counts(outcomes),
        "kernels": [x.to_dict() for x in outcomes],
    }
    return write_json(o.out / "summary.json", doc)


def _counts(outcomes: list[Outcome]) -> dict:
    out: dict[str, int] = {}
    for x in outcomes:
        out[x.terminal] = out.get(x.terminal, 0) + 1
    out["best_attainable"] = sum(1 for x in outcomes if x.ok)
    out["total"] = len(outcomes)
    return out


def summary_table(outcomes: list[Outcome], out_dir: Path) -> Table:
    from .report import facts_of
    table = Table(title=f"tileport port: {len(outcomes)} kernel(s)", show_lines=False)
    for col in ("kernel", "route", "terminal", "IR diff", "correctness (D)", "parity (E)", "final gate"):
        table.add_column(col, overflow="fold")
    for x in outcomes:
        f = facts_of(x, out_dir)
        gate = "[green]passed[/]" if x.final.get("passed") else (
            "[yellow]GPU evidence missing[/]" if x.ok else f"[red]{len(x.final.get('missing', []))} missing[/]")
        table.add_row(escape(x.key), escape(" → ".join(route_label(r) for r in x.route)),
                      f"[{TERMINAL_STYLE.get(x.terminal, '')}]{x.terminal}[/]", escape(f["ir_text"]),
                      escape(f["d_text"]), escape(f["e_text"]), gate)
    return table
