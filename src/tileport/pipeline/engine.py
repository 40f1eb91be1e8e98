"""The state machine of one kernel: run a stage, validate its artifacts (one same-stage repair when the
validator rejects them), route on its verdict, until a terminal state; then the final gate.

Resumability: each stage's inputs (the pipeline's and translator's code, the source file and its
configurations, the verdicts it builds on, the GPU evidence, the agent command...) are hashed into
`inputs_hash` of its verdict. With `resume`, a stage whose verdict on disk has the same hash and
whose validator accepts its artifacts is not run again; since a re-run stage changes its verdict,
everything downstream of a change re-runs, and nothing else does.

Env close-out: when D ends BLOCKED with class env (no GPU, stale evidence), E is evaluated once for
the record (it cannot change the terminal state), so the report shows what D and E each lack.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from tileport.cache import sha256
from tileport.launches import records_hash

from . import stage_a, stage_b, stage_c, stage_d, stage_e, stage_f
from .artifacts import inside, remove_tree, stage_verdict, write_json, write_text_atomic
from .context import KernelContext, Session, Target, pipeline_fingerprint, translator_fingerprint
from .final import gate
from .routing import RunState, Step, Terminal, next_step
from .verdicts import REJECTED, Stage, Verdict

STAGES = {Stage.A: stage_a, Stage.B: stage_b, Stage.C: stage_c, Stage.D: stage_d, Stage.E: stage_e, Stage.F: stage_f}

Progress = Callable[[str, str], None]  # (kernel key, message)


@dataclass
class Outcome:
    key: str
    kernel: str
    terminal: str
    route: list[dict] = field(default_factory=list)
    final: dict = field(default_factory=dict)
    seconds: float = 0.0
    why: str = ""
    facts: dict = field(default_factory=dict, repr=False)  # report.facts_of: read back once, for the reports

    @property
    def ok(self) -> bool:
        return bool(self.final.get("best_attainable"))

    def to_dict(self) -> dict:
        return {"key": self.key, "kernel": self.kernel, "terminal": self.terminal, "why": self.why,
                "route": self.route, "final": self.final, "seconds": round(self.seconds, 2), "ok": self.ok}


def route_entry(stage: Stage, attempt: int, v: Verdict, reused: bool, close_out: bool = False) -> dict:
    """One step of a kernel's route (run.json, summary.json, the reports)."""
    entry = {"stage": str(stage), "attempt": attempt, "verdict": v.verdict, "fail_class": v.fail_class,
             "owner": v.owner, "reason": v.reason, "reused": reused, "seconds": v.seconds, "validator": v.validator}
    if close_out:
        entry["close_out"] = True
    return entry


def route_label(r: dict, close_out: str = "*") -> str:
    """A route step as the console and the reports show it: `D(2) FAIL/host`, `E BLOCKED/env*`."""
    extra = f"/{r['fail_class']}" if r.get("fail_class") else f"/{r['owner']}" if r.get("owner") else ""
    return (r["stage"] + ("" if r["attempt"] == 1 else f"({r['attempt']})") + f" {r['verdict']}{extra}"
            + (close_out if r.get("close_out") else ""))


def _sig(v: Verdict | None) -> str:
    if v is None:
        return "-"
    return sha256(v.verdict, v.fail_class, v.owner, v.inputs_hash, v.details)


def inputs_hash(ctx: KernelContext) -> str:
    t, s, o = ctx.target, ctx.stage, ctx.options
    parts: list = [pipeline_fingerprint(), str(s), ctx.attempt, t.kernel, str(t.path), t.source_text, t.config_source,
                   repr(sorted((k, repr(v)) for k, v in t.configs.items())), repr(t.captures), t.config_entries,
                   t.ops, t.primary_op, t.launch_source, records_hash(t.launches)]
    if s == Stage.A:
        from .builds import _cuda_tile_version
        parts += [_cuda_tile_version()]
    elif s == Stage.B:
        parts += [_sig(ctx.latest("A")), translator_fingerprint(), o.archs, o.profile, o.faithful,
                  _code_hash(("tileir", "capture", "runtime"))]
        if ctx.attempt == 1:
            parts.append(o.planted[t.kernel].name if t.kernel in o.planted else None)
        else:
            prev = ctx.stage_dir(Stage.B, 1) / "kernel.rs"
            parts += [o.agent_cmd, _sig(ctx.latest("C")), prev.read_text() if prev.is_file() else None]
    elif s == Stage.C:
        parts += [_sig(ctx.latest("B")), _sig(ctx.previous("D", "E"))]
    elif s in (Stage.D, Stage.E):
        parts += [_sig(ctx.latest("B")), ctx.session.evidence.content_hash, ctx.session.gpu()]
        if s == Stage.E:
            parts.append(_sig(ctx.latest("D")))
        if ctx.attempt > 1:
            parts += [o.agent_cmd, _sig(ctx.previous("C", "D"))]
    elif s == Stage.F:
        parts += [_sig(ctx.latest("E")), _sig(ctx.latest("C")), _sig(ctx.latest("B"))]
    return sha256(*parts)


@lru_cache(maxsize=None)
def _code_hash(parts: tuple[str, ...]) -> str:
    from .context import REPO, _tree_hash
    return _tree_hash([REPO / "src" / "tileport" / p for p in parts])


def _run_safely(module, ctx: KernelContext) -> Verdict:
    try:
        return module.run(ctx)
    except Exception as e:  # noqa: BLE001 - a stage crash is that stage's verdict, with the traceback
        write_text_atomic(ctx.dir / "crash.log", traceback.format_exc())
        return ctx.verdict("BLOCKED", f"internal error in stage {ctx.stage}: {type(e).__name__}: {e} "
                           f"(traceback in {ctx.rel(ctx.dir / 'crash.log')})",
                           fail_class="host" if ctx.stage == Stage.D else None)


def _validate_safely(module, ctx: KernelContext, loaded: Verdict | None = None) -> list[str]:
    """The stage validator's errors; an artifact it cannot read (a file cut short by a killed run,
    not JSON) is one more error, so the stage runs again instead of ending the kernel in ERROR."""
    try:
        return module.validate(ctx, loaded)
    except (OSError, ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        return [f"unreadable artifact: {type(e).__name__}: {e}"]


def execute(ctx: KernelContext, stage: Stage, attempt: int, progress: Progress | None = None) -> tuple[Verdict, bool]:
    """Run one stage (or reuse it); returns (verdict, reused)."""
    module = STAGES[stage]
    ctx.stage, ctx.attempt, ctx.repair_errors = stage, attempt, []
    ctx.history.append((str(stage), attempt))
    h = inputs_hash(ctx)
    ctx.inputs_hash = h
    label = f"{stage}{'' if attempt == 1 else f'({attempt})'}"
    if ctx.options.resume:
        old, _ = stage_verdict(ctx.dir)
        if old is not None and old.inputs_hash == h and not _validate_safely(module, ctx, old):
            if progress:
                progress(ctx.target.key, f"{label} unchanged: {old.verdict}")
            return old, True
    if progress:
        progress(ctx.target.key, f"{label} running")
    t0 = time.perf_counter()
    v = _finish(_run_safely(module, ctx), h, t0, ctx)
    errors = _validate_safely(module, ctx)
    if errors:  # one same-stage repair, then the validator decides
        if progress:
            progress(ctx.target.key, f"{label} validator rejected its artifacts; repairing once")
        ctx.repair_errors = errors
        v = _finish(_run_safely(module, ctx), h, t0, ctx)
        errors2 = _validate_safely(module, ctx)
        if errors2:
            verdict, cls = REJECTED[stage]
            v = ctx.verdict(verdict, f"the validator rejected the stage's artifacts twice: {errors2[0]}",
                            fail_class=cls, artifacts=v.artifacts, agent=v.agent,
                            details={"rejected_verdict": v.verdict, "rejected_reason": v.reason})
            v.validator = {"ok": False, "errors": errors2, "repaired": True}
        else:
            v.validator = {"ok": True, "errors": errors, "repaired": True}
        _finish(v, h, t0, ctx)
    return v, False


def _finish(v: Verdict, h: str, t0: float, ctx: KernelContext) -> Verdict:
    v.inputs_hash = h
    v.seconds = round(time.perf_counter() - t0, 3)
    v.write(ctx.dir / "verdict.json")
    return v


class KernelRun:
    """One kernel's route as a sequence of stage runs: `next_stage()` says which (stage, attempt) runs next
    (None once the route ended), `record()` takes its verdict, `finish()` writes the final gate and run.json.
    The stages themselves run wherever the caller runs them (inline, a thread pool, a cluster: schedule.py)."""

    def __init__(self, session: Session, target: Target):
        self.t0 = time.perf_counter()
        self.session, self.target = session, target
        self.ctx = KernelContext(session, target)
        out = session.options.out
        inside(out, self.ctx.kernel_dir)  # the key names a folder of --out, never anything else
        if not session.options.resume:
            remove_tree(out, self.ctx.kernel_dir)  # a fresh run: nothing from an earlier run counts
        self.ctx.kernel_dir.mkdir(parents=True, exist_ok=True)
        self.state = RunState(residual=session.options.residual)
        self.step = Step(stage=Stage.A, attempt=1)
        self.route: list[dict] = []
        self.last: tuple[Stage, Verdict] | None = None
        self.terminal: str | None = None
        self.paused = False  # stopped by --until

    def next_stage(self) -> tuple[Stage, int] | None:
        """The stage run that comes next; None when the route is over (then `finish`)."""
        if not self.step.is_terminal and not self.paused:
            return self.step.stage, self.step.attempt
        if self.terminal is None:
            self.terminal = str(self.step.terminal) if self.step.terminal else "PAUSED"
            after_d = self.last is not None and self.last[0] == Stage.D
            if self.step.terminal == Terminal.BLOCKED_ENV and after_d and self.ctx.latest("E") is None:
                return Stage.E, 1  # env close-out: for the record
        return None

    def record(self, stage: Stage, attempt: int, v: Verdict, reused: bool) -> None:
        """The verdict of the stage run `next_stage` named."""
        self.ctx.verdicts[(str(stage), attempt)] = v
        if self.terminal is not None:  # the env close-out
            self.route.append(route_entry(stage, attempt, v, reused, close_out=True))
            return
        self.state.record(stage, v.verdict)
        self.route.append(route_entry(stage, attempt, v, reused))
        self.last = (stage, v)
        self.step = next_step(self.state, stage, attempt, v.verdict, v.fail_class, v.owner)
        if self.session.options.until is not None and stage == self.session.options.until and not self.step.is_terminal:
            self.step = Step(terminal=None, why=f"stopped after {stage} (--until)")
            self.paused = True

    def finish(self, progress: Progress | None = None) -> Outcome:
        ctx, out, target = self.ctx, self.session.options.out, self.target
        terminal = self.terminal or "PAUSED"
        ran = {str(s) + ("" if a == 1 else str(a)) for s, a in ctx.verdicts}
        for sdir in ctx.kernel_dir.iterdir():  # stage directories of an earlier, different route
            if sdir.is_dir() and sdir.name not in ran and sdir.name.rstrip("2") in {str(x) for x in Stage}:
                remove_tree(out, sdir)
        final = gate(ctx, terminal)
        write_json(ctx.kernel_dir / "final.json", final)
        outcome = Outcome(target.key, target.kernel, terminal, self.route, final, time.perf_counter() - self.t0,
                          self.step.why)
        write_json(ctx.kernel_dir / "run.json", {**outcome.to_dict(), "source": str(target.path), "ops": target.ops,
                                                 "primary_op": target.primary_op,
                                                 "config_source": target.config_source})
        if progress:
            progress(target.key, f"{terminal}")
        return outcome


def run_kernel(session: Session, target: Target, progress: Progress | None = None) -> Outcome:
    """One kernel's whole route, its stages run inline."""
    run = KernelRun(session, target)
    while (nxt := run.next_stage()) is not None:
        v, reused = execute(run.ctx, *nxt, progress)
        run.record(*nxt, v, reused)
    return run.finish(progress)
