"""The driver of a run: every kernel's route (engine.KernelRun) advanced one stage run at a time, each stage
run a unit on an executor (tileport.executor: the local thread pool or a Ray cluster).

- The slowest first: among the units ready to run, the one whose kernel has the most estimated work left
  goes first (longest-processing-time first keeps the tail of a run short). Estimates are the seconds
  each stage took for the kernel in earlier runs (`costs.json` in the cache), else a per-stage prior
  scaled by the kernel's configurations.
- Cargo builds batched per crate: each batch crate (the corpus crate, the run's files crate) is one unit,
  built before the B units of its kernels, which then only capture, diff and compile cubins; a cluster
  does not build it once per worker. (A resumed run builds it only where a B runs again, as B's first use.)
  Builds per machine are bounded by `executor.node_slot`.
- Units go to the executor only as slots free up (CPU units and GPU units apart), so the order above
  holds on a cluster too; the driver alone writes into --out (units.land) and holds its lock.
"""

from __future__ import annotations

import heapq
import itertools
import json
import time
import traceback
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tileport.atomic import write_text_atomic
from tileport.cache import sha256
from tileport.executor import Executor

from .builds import CrateBuild, batch_kind
from .context import Session, Target
from .engine import KernelRun, Outcome, Progress, execute
from .units import StageResult, StageTask, crate_unit, land, land_extra, read_tree, spec_of, stage_unit
from .verdicts import Stage

# Seconds of one stage run of a kernel with one configuration, before anything was measured (this project's
# 2-core machine; docs/scaling.md). B without its batch crate: captures, IR diffs, cubins.
PRIOR = {Stage.A: 2.0, Stage.B: 15.0, Stage.C: 0.5, Stage.D: 1.0, Stage.E: 1.0, Stage.F: 0.5}
CRATE_PRIOR = 60.0
NOMINAL = (Stage.A, Stage.B, Stage.D, Stage.E)  # the route of a kernel that goes through
GPU_STAGES = (Stage.D, Stage.E)


class Costs:
    """Measured seconds per (kernel source, stage), kept across runs in `path`."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.seen: dict[str, float] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.seen = {}
        self._ids: dict[str, str] = {}

    def stage_key(self, target: Target, stage: Stage) -> str:
        """The kernel source's and the stage's entry: the same kernel in another run or --out shares it."""
        if target.key not in self._ids:
            self._ids[target.key] = sha256(target.kernel, target.source_text, target.config_source)[:16]
        return f"{self._ids[target.key]}:{stage}"

    def estimate(self, target: Target, stage: Stage) -> float:
        seen = self.seen.get(self.stage_key(target, stage))
        return seen if seen is not None else PRIOR[stage] * max(1, len(target.captures))

    def remaining(self, target: Target, stage: Stage) -> float:
        """This stage's estimate and those of the nominal route after it."""
        after = NOMINAL[NOMINAL.index(stage) + 1:] if stage in NOMINAL else GPU_STAGES
        return self.estimate(target, stage) + sum(self.estimate(target, s) for s in after)

    def crate(self, kind: str) -> float:
        return self.seen.get(f"crate:{kind}", CRATE_PRIOR)

    def measure(self, name: str, seconds: float) -> None:
        self.seen[name] = round(seconds, 3)

    def measure_stage(self, target: Target, stage: Stage, seconds: float) -> None:
        self.measure(self.stage_key(target, stage), seconds)

    def save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.path, json.dumps(self.seen, indent=0, sort_keys=True) + "\n")
        except OSError:
            pass  # estimates that cannot be kept only cost ordering quality


@dataclass(order=True)
class _Ready:
    priority: float  # negated estimated seconds: the heap pops the slowest first
    seq: int
    key: str = field(compare=False)       # kernel key, or the batch kind of a crate unit
    stage: Stage | None = field(compare=False, default=None)
    attempt: int = field(compare=False, default=1)


@dataclass
class Stats:
    stage_units: int = 0
    reused: int = 0
    crate_units: int = 0
    nodes: set[str] = field(default_factory=set)

    def to_dict(self) -> dict:
        return {"stage_units": self.stage_units, "reused": self.reused, "crate_units": self.crate_units,
                "nodes": sorted(self.nodes)}


class Scheduler:
    """Runs `targets` of `session` on `executor`; `progress(key, message)` tells of each kernel's stages,
    `status(line)` of the whole run, `finished(outcome)` of each kernel done."""

    def __init__(self, session: Session, executor: Executor, progress: Progress,
                 status: Callable[[str], None], finished: Callable[[Outcome], None]):
        self.session, self.executor = session, executor
        self.progress, self.status, self.finished = progress, status, finished
        self.options = session.options
        self.costs = Costs(self.options.cache() / "costs.json")
        self.runs = {t.key: KernelRun(session, t) for t in session.targets}
        self.outcomes: dict[str, Outcome] = {}
        self.gpu = executor.slots()[1] > 0 and self.options.native_gpu is not False
        self.spec = executor.share(spec_of(uuid.uuid4().hex[:12], session)) if executor.remote else None
        self.crates: dict[str, CrateBuild | None] = {}  # batch kind -> its build (None while it builds)
        self.waiting: dict[str, list[_Ready]] = {}      # batch kind -> B units waiting for its crate
        self.ready: dict[bool, list[_Ready]] = {False: [], True: []}  # gpu? -> heap
        self.inflight: dict[Future, tuple[_Ready, bool, float]] = {}
        self.seq = itertools.count()
        self.stats = Stats()

    # ------------------------------------------------------------------ the loop
    def run(self) -> list[Outcome]:
        if self.options.until != Stage.A and not self.options.resume:  # resumed: B builds only if it re-runs
            for kind, target in {batch_kind(t): t for t in self.session.targets}.items():
                self.crates[kind] = None
                most = max(self.costs.remaining(t, Stage.B) for t in self.session.targets if batch_kind(t) == kind)
                self._push(_Ready(-(self.costs.crate(kind) + most), next(self.seq), kind), gpu=False)
        for run in self.runs.values():
            self._advance(run)
        while len(self.outcomes) < len(self.runs):
            self._pump()
            if not self.inflight:  # every unit waits for another: a scheduling error, never a hang
                raise RuntimeError(f"no unit can run: {sorted(set(self.runs) - set(self.outcomes))} wait")
            done, _ = wait(list(self.inflight), return_when=FIRST_COMPLETED)
            for fut in done:
                unit, gpu, t0 = self.inflight.pop(fut)
                if unit.stage is None:
                    self._crate_done(unit, fut, time.perf_counter() - t0)
                else:
                    self._stage_done(unit, fut)
            self._tell()
        self.costs.save()
        return [self.outcomes[t.key] for t in self.session.targets]

    def _pump(self) -> None:
        cpu_slots, gpu_slots = self.executor.slots()
        for gpu, slots in ((False, cpu_slots), (True, gpu_slots)):
            while self.ready[gpu] and sum(1 for _, g, _ in self.inflight.values() if g == gpu) < slots:
                self._submit(heapq.heappop(self.ready[gpu]), gpu)
        self._tell()

    def _tell(self) -> None:
        left = sum(-u.priority for heap in self.ready.values() for u in heap)
        self.status(f"{len(self.outcomes)}/{len(self.runs)} kernel(s) done, {self.stats.stage_units} stage unit(s) "
                    f"run, {len(self.inflight)} running, {sum(len(h) for h in self.ready.values())} ready "
                    f"(~{left:.0f} s of work queued)")

    def _push(self, unit: _Ready, gpu: bool) -> None:
        heapq.heappush(self.ready[gpu], unit)

    # ------------------------------------------------------------------ kernels
    def _advance(self, run: KernelRun) -> None:
        nxt = run.next_stage()
        if nxt is None:
            self._finish(run.target.key, run.finish(self.progress))
            return
        stage, attempt = nxt
        unit = _Ready(-self.costs.remaining(run.target, stage), next(self.seq), run.target.key, stage, attempt)
        kind = batch_kind(run.target)
        if stage == Stage.B and kind in self.crates and self.crates[kind] is None:
            self.waiting.setdefault(kind, []).append(unit)
        else:
            self._push(unit, gpu=self.gpu and stage in GPU_STAGES)

    def _finish(self, key: str, outcome: Outcome) -> None:
        self.outcomes[key] = outcome
        self.finished(outcome)

    def _fail(self, key: str, error: BaseException) -> None:
        """A unit that raised (or whose worker died more often than Ray retries): the kernel ends in ERROR."""
        run = self.runs[key]
        write_text_atomic(run.ctx.kernel_dir / "crash.log",
                          "".join(traceback.format_exception(type(error), error, error.__traceback__)))
        self._finish(key, Outcome(key, run.target.kernel, "ERROR", run.route,
                                  {"missing": [f"pipeline error: {error}"], "best_attainable": False, "checks": []},
                                  why=f"{type(error).__name__}: {error}"))

    # ------------------------------------------------------------------ units
    def _submit(self, unit: _Ready, gpu: bool) -> None:
        if unit.stage is None:
            target = next(t for t in self.session.targets if batch_kind(t) == unit.key)
            label = f"tileport:crate:{unit.key}"
            fut = (self.executor.submit(crate_unit, self.spec, target, label=label) if self.executor.remote
                   else self.executor.submit(self.session.builds.batch_for, target))
            self.stats.crate_units += 1
        else:
            run = self.runs[unit.key]
            label = f"{unit.stage}{'' if unit.attempt == 1 else f'({unit.attempt})'}"
            self.progress(unit.key, f"{label} running")
            if self.executor.remote:
                fut = self.executor.submit(stage_unit, self.spec, self._task(run, unit), gpu=gpu,
                                           label=f"tileport:{unit.key}:{label}")
            else:
                fut = self.executor.submit(execute, run.ctx, unit.stage, unit.attempt)
        self.inflight[fut] = (unit, gpu, time.perf_counter())

    def _task(self, run: KernelRun, unit: _Ready) -> StageTask:
        crates = [b for b in [self.crates.get(batch_kind(run.target))] if b is not None]
        return StageTask(unit.key, unit.stage, unit.attempt, dict(run.ctx.verdicts), list(run.ctx.history),
                         read_tree(run.ctx.kernel_dir), crates)

    def _crate_done(self, unit: _Ready, fut: Future, seconds: float) -> None:
        try:
            build = fut.result()
        except Exception as e:  # noqa: BLE001 - its kernels then build on their own, each showing its error
            build = CrateBuild(Path("."), "", "", set(), error=f"batch crate: {type(e).__name__}: {e}")
        self.crates[unit.key] = build
        self.costs.measure(f"crate:{unit.key}", seconds)
        for waiting in self.waiting.pop(unit.key, []):
            self._push(waiting, gpu=False)

    def _stage_done(self, unit: _Ready, fut: Future) -> None:
        run = self.runs[unit.key]
        try:
            result = fut.result()
        except Exception as e:  # noqa: BLE001 - one kernel's crash must not stop the batch
            self._fail(unit.key, e)
            return
        if isinstance(result, StageResult):
            v, reused = result.verdict, result.reused
            self._land(run, unit, result)
        else:
            v, reused = result
        self.stats.stage_units += 1
        self.stats.reused += reused
        if not reused:
            self.costs.measure_stage(run.target, unit.stage, v.seconds)
        run.record(unit.stage, unit.attempt, v, reused)
        label = f"{unit.stage}{'' if unit.attempt == 1 else f'({unit.attempt})'}"
        self.progress(unit.key, f"{label} {'unchanged: ' if reused else ''}{v.verdict}")
        self._advance(run)

    def _land(self, run: KernelRun, unit: _Ready, result: StageResult) -> None:
        """A remote unit's stage folder into --out, and the context as the unit left it."""
        ctx, out = run.ctx, self.options.out
        ctx.stage, ctx.attempt, ctx.inputs_hash = unit.stage, unit.attempt, result.verdict.inputs_hash
        ctx.history.append((str(unit.stage), unit.attempt))
        if not result.reused:
            land(out, ctx.stage_dir(unit.stage, unit.attempt), result.files)
        land_extra(out, result.extra)
        self.stats.nodes.add(result.node)
