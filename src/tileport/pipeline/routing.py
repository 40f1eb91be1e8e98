"""The router: the routing table as data, the caps, and a pure `next_step(state, verdict)`.

The table is the verdict protocol's routing (docs/pipeline.md), made exact with the rules of the public
TileGym porting pipeline it mirrors (its protocol §2.2-2.3):

    A      PASS -> B | FAIL_FIXABLE, BLOCKED -> STOP
    B      COMPILED -> D | FAIL_COMPILE, FAIL_FIXABLE, BLOCKED -> STOP
    D(1)   ALL_PASS -> E | FAIL/BLOCKED class host -> D(2) | class kernel (or none) -> C
    D      FAIL_FIXABLE (no launches to test on: the user must record or write them) -> STOP
    D(2)   ALL_PASS -> E | FAIL, BLOCKED -> COMPLETE
    E      DONE -> DONE (terminal) | E(1) INVESTIGATE/BLOCKED -> C once (if C has not run and B was
           not respawned) | E(2) any -> COMPLETE
    C      FAIL_FIXABLE owner kernel (or none) -> B(2) if B not respawned | owner host -> D(2) if D
           not respawned | PASS, PASS_WITH_NOTES, FAIL_COMPILER_BUG, BLOCKED -> COMPLETE
    F      any -> COMPLETE
    BLOCKED with class env, at any stage -> BLOCKED_ENV (stops, and says why)

Caps (semantic runs per stage): A1 B2 C1 D2 E2 F1; a route into a stage whose cap is spent ends
COMPLETE. F (residual performance) runs only when enabled, after an E INVESTIGATE that C could not
resolve. The one same-stage validator repair per stage is the engine's business, not a route.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from .verdicts import VERDICTS, Stage

CAPS: dict[Stage, int] = {Stage.A: 1, Stage.B: 2, Stage.C: 1, Stage.D: 2, Stage.E: 2, Stage.F: 1}


class Terminal(StrEnum):
    DONE = "DONE"              # E DONE: ported, correct, at parity
    COMPLETE = "COMPLETE"      # the pipeline ran its course (caps / diagnosis) without reaching DONE
    STOPPED = "STOPPED"        # A or B could not produce what the next stage needs
    BLOCKED_ENV = "BLOCKED_ENV"  # the environment cannot run a stage (e.g. no GPU); says which and why


@dataclass(frozen=True)
class Step:
    """Where to go next: a stage (with the attempt it will be) or a terminal state."""

    stage: Stage | None = None
    attempt: int = 0
    terminal: Terminal | None = None
    why: str = ""

    @property
    def is_terminal(self) -> bool:
        return self.terminal is not None

    def __str__(self) -> str:
        if self.terminal:
            return f"{self.terminal}"
        return f"{self.stage}" + (f"({self.attempt})" if self.attempt > 1 else "")


@dataclass
class RunState:
    """What the router needs to know about the run so far."""

    runs: Counter = field(default_factory=Counter)  # Stage -> semantic runs so far
    residual: bool = False  # F enabled
    last_e: str | None = None  # verdict of the latest E, if any

    def record(self, stage: Stage, verdict: str) -> None:
        self.runs[stage] += 1
        if stage == Stage.E:
            self.last_e = verdict

    def ran(self, stage: Stage) -> bool:
        return self.runs[stage] > 0

    def respawned(self, stage: Stage) -> bool:
        return self.runs[stage] > 1


# ------------------------------------------------------------------------------------ the table
# A row matches (stage, attempt, verdict, cond) where attempt is 1, 2 or None (any), verdict a
# verdict name or None (any), cond a fail_class / owner value, "none" (absent) or None (any).
# `then` is a stage or a Terminal; `guard` names a condition that must hold for `then`, else the
# run ends in `otherwise`.

@dataclass(frozen=True)
class Route:
    stage: Stage
    attempt: int | None
    verdict: str | None
    cond: str | None
    then: Stage | Terminal
    guard: str | None = None
    otherwise: Stage | Terminal = Terminal.COMPLETE  # a Stage here is F, taken only when F is enabled
    note: str = ""


S, T = Stage, Terminal
ENV = "env"

TABLE: tuple[Route, ...] = (
    # any stage: an environment block stops the run and says so
    *(Route(st, None, "BLOCKED", ENV, T.BLOCKED_ENV, note="blocked by the environment") for st in Stage
      if st != Stage.F),
    Route(S.D, None, "FAIL", ENV, T.BLOCKED_ENV, note="the environment failed the run"),
    Route(S.A, None, "PASS", None, S.B),
    Route(S.A, None, "FAIL_FIXABLE", None, T.STOPPED, note="analysis failed"),
    Route(S.A, None, "BLOCKED", None, T.STOPPED, note="analysis blocked"),
    Route(S.B, None, "COMPILED", None, S.D),
    Route(S.B, None, "FAIL_COMPILE", None, T.STOPPED, note="the port does not compile"),
    Route(S.B, None, "FAIL_FIXABLE", None, T.STOPPED, note="the kernel did not translate / failed the layout gate"),
    Route(S.B, None, "BLOCKED", None, T.STOPPED, note="translation blocked"),
    Route(S.D, None, "ALL_PASS", None, S.E),
    Route(S.D, None, "FAIL_FIXABLE", None, T.STOPPED, note="no launches to test the port on (record them)"),
    Route(S.D, 1, "FAIL", "host", S.D, guard="cap"),
    Route(S.D, 1, "BLOCKED", "host", S.D, guard="cap"),
    Route(S.D, 1, "FAIL", "kernel", S.C, guard="c_not_run"),
    Route(S.D, 1, "BLOCKED", "kernel", S.C, guard="c_not_run"),
    Route(S.D, 1, "FAIL", "none", S.C, guard="c_not_run", note="no class: kernel route"),
    Route(S.D, 1, "BLOCKED", "none", S.C, guard="c_not_run", note="no class: kernel route"),
    Route(S.D, 2, "FAIL", None, T.COMPLETE, note="D(2) failed"),
    Route(S.D, 2, "BLOCKED", None, T.COMPLETE, note="D(2) blocked"),
    Route(S.E, None, "DONE", None, T.DONE),
    Route(S.E, 1, "INVESTIGATE", None, S.C, guard="c_not_run_b_not_respawned", otherwise=S.F),
    Route(S.E, 1, "BLOCKED", None, S.C, guard="c_not_run_b_not_respawned"),
    Route(S.E, 2, "INVESTIGATE", None, S.F, guard="residual", note="E(2) ends the run"),
    Route(S.E, 2, "BLOCKED", None, T.COMPLETE, note="E(2) ends the run"),
    Route(S.C, None, "FAIL_FIXABLE", "host", S.D, guard="d_not_respawned"),
    Route(S.C, None, "FAIL_FIXABLE", "kernel", S.B, guard="b_not_respawned"),
    Route(S.C, None, "FAIL_FIXABLE", "none", S.B, guard="b_not_respawned", note="no owner: kernel"),
    Route(S.C, None, "PASS", None, S.F, guard="residual_after_investigate"),
    Route(S.C, None, "PASS_WITH_NOTES", None, S.F, guard="residual_after_investigate"),
    Route(S.C, None, "FAIL_COMPILER_BUG", None, T.COMPLETE, note="compiler bug reported"),
    Route(S.C, None, "BLOCKED", None, T.COMPLETE, note="diagnosis blocked"),
    Route(S.F, None, None, None, T.COMPLETE),
)


def _guard(name: str | None, state: RunState) -> bool:
    if name is None or name == "cap":
        return True
    return {
        "c_not_run": not state.ran(S.C),
        "c_not_run_b_not_respawned": not state.ran(S.C) and not state.respawned(S.B),
        "b_not_respawned": not state.respawned(S.B),
        "d_not_respawned": not state.respawned(S.D),
        "residual": state.residual,
        "residual_after_investigate": state.residual and state.last_e == "INVESTIGATE",
    }[name]


def _cond_of(stage: Stage, verdict: str, fail_class: str | None, owner: str | None) -> str:
    value = owner if (stage == S.C and verdict == "FAIL_FIXABLE") else fail_class
    return value or "none"


def match(stage: Stage, attempt: int, verdict: str, fail_class: str | None = None,
          owner: str | None = None) -> Route:
    """The table row for a verdict (the first that matches)."""
    if verdict not in {v.value for v in VERDICTS[stage]}:
        raise ValueError(f"{verdict!r} is not a verdict of stage {stage}")
    cond = _cond_of(stage, verdict, fail_class, owner)
    for row in TABLE:
        if (row.stage == stage and row.attempt in (None, attempt) and row.verdict in (None, verdict)
                and row.cond in (None, cond)):
            return row
    raise LookupError(f"no route for {stage}({attempt}) {verdict} [{cond}]")  # the tests prove it cannot


def next_step(state: RunState, stage: Stage, attempt: int, verdict: str, fail_class: str | None = None,
              owner: str | None = None) -> Step:
    """Pure routing: the verdict of `stage`(`attempt`) given the run so far (which already counts it)."""
    row = match(stage, attempt, verdict, fail_class, owner)
    label = f"{stage}{'' if attempt == 1 else f'({attempt})'} {verdict}"
    if isinstance(row.then, Terminal):
        return Step(terminal=row.then, why=f"{label}: {row.note}" if row.note else label)
    if not _guard(row.guard, state):
        if isinstance(row.otherwise, Stage):  # F: only when enabled and not yet run
            if state.residual and state.runs[row.otherwise] < CAPS[row.otherwise]:
                return Step(stage=row.otherwise, attempt=state.runs[row.otherwise] + 1,
                            why=f"{label}: {_guard_text(row.guard)}; residual performance enabled")
            return Step(terminal=Terminal.COMPLETE, why=f"{label}: {_guard_text(row.guard)}")
        return Step(terminal=row.otherwise, why=f"{label}: {_guard_text(row.guard)}")
    target = row.then
    if state.runs[target] >= CAPS[target]:
        return Step(terminal=Terminal.COMPLETE, why=f"{label}: cap of {target} ({CAPS[target]}) spent")
    return Step(stage=target, attempt=state.runs[target] + 1, why=label)


def _guard_text(guard: str | None) -> str:
    return {"c_not_run": "C already ran", "c_not_run_b_not_respawned": "C already ran or B was respawned",
            "b_not_respawned": "B was already respawned", "d_not_respawned": "D was already respawned",
            "residual": "run complete (F not enabled)",
            "residual_after_investigate": "run complete"}.get(guard or "", "guard")


__all__ = ["CAPS", "Terminal", "Step", "RunState", "Route", "TABLE", "match", "next_step"]
