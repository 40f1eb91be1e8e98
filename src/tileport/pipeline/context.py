"""What a pipeline run works on: targets (one kernel of one file), options, the run's `Session`
(builds, caches, GPU evidence shared by its kernels) and the per-kernel context a stage receives.

Layout of a run under `--out`:

    <out>/<kernel>/A/            analysis.json, reference/<config>.tileirbc|.tileir, verdict.json
    <out>/<kernel>/B/, B2/       kernel.rs, translation.json, translation/, build.log, generated/, irdiff/,
                                 cubins/, findings.json, verdict.json (crates themselves: see builds.py)
    <out>/<kernel>/C/            diff_report.md, diagnosis.json, verdict.json
    <out>/<kernel>/D/, D2/       ffi.rs, host_checks.json, correctness.json|.md, verdict.json
    <out>/<kernel>/E/, E2/       performance.json|.md, verdict.json
    <out>/<kernel>/F/            perf_investigation.md, verdict.json
    <out>/<kernel>/run.json      the route taken, the terminal state; final.json: the final gate
    <out>/_gpu/                  GPU evidence recorded by this run (only on a machine with a GPU)
    <out>/summary.json, report.html, report.md
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

from tileport.cache import default_root, sha256
from tileport.corpus import REPO
from tileport.executor import ExecutorError, ThreadMap, parse
from tileport.ops.spec import KERNELS_DIR

from .builds import BuildManager
from .evidence import EvidenceStore, record
from .target import Target, primary_op
from .verdicts import Stage, Verdict

PIPELINE_DIR = Path(__file__).parent
TRANSLATOR_PARTS = ("frontends", "emit", "passes", "model", "translate.py", "diagnostics.py", "corpus.py")


def _tree_hash(paths: list[Path]) -> str:
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*"))
                   if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".rs", ".json", ".toml"))
    return sha256(*[(str(f.relative_to(REPO / "src" / "tileport")), f.read_bytes()) for f in files])


@lru_cache(maxsize=1)
def translator_fingerprint() -> str:
    """Hash of the translator's code: B re-runs when the translator changed."""
    root = REPO / "src" / "tileport"
    return _tree_hash([root / p for p in TRANSLATOR_PARTS])


@lru_cache(maxsize=1)
def pipeline_fingerprint() -> str:
    """Hash of the pipeline's own code: every stage re-runs when it changed."""
    return _tree_hash([PIPELINE_DIR])


# ------------------------------------------------------------------------------------ options

@dataclass
class Options:
    out: Path
    jobs: int = 1
    resume: bool = False
    agent_cmd: str | None = None
    agent_timeout: float = 900.0
    gpu_results: list[Path] = field(default_factory=list)
    residual: bool = False         # run F after an unresolved E INVESTIGATE
    profile: str = "dev"           # cargo profile of the libraries built for IR capture
    archs: tuple[str, ...] = ("sm_80", "sm_90", "sm_100")
    native_gpu: bool | None = None  # None: detect (torch + a CUDA device)
    until: Stage | None = None     # stop after this stage (resume later)
    faithful: bool = False         # ports written one Tile IR operation per line (else idiomatic Rust)
    cache_dir: Path | None = None
    force: bool = False            # write into a non-empty `out` that holds no port run (outdir.py)
    executor: str = "local"        # where units run: local (threads), ray, ray=ADDRESS (tileport.executor)
    # Tests only: kernel -> a translator defect planted into B(1)'s kernel text (stage_b.PlantedDefect).
    planted: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tileport.runtime.library import PROFILES
        if self.profile not in PROFILES:
            raise ValueError(f"unknown cargo profile {self.profile!r} (one of {', '.join(PROFILES)})")
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {self.jobs}")
        try:
            parse(self.executor)
        except ExecutorError as e:
            raise ValueError(str(e)) from None

    def cache(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else default_root()


# ------------------------------------------------------------------------------------ contexts

class Session:
    """State shared by every kernel of a run: builds, capture caches, GPU evidence, locks."""

    def __init__(self, options: Options, targets: list[Target], fan_out: Callable | None = None):
        self.options = options
        self.targets = targets
        # map(fn, [args...]) for the parts of a unit that run apart (B's cubins): threads here, Ray tasks on a cluster
        self.fan_out = fan_out or ThreadMap(options.jobs)
        self.builds = BuildManager(options.cache(), options.profile, targets, options.faithful)
        self.evidence = EvidenceStore.load(options.gpu_results)
        self.lock = threading.Lock()
        self._gpu: tuple[bool, str] | None = None
        self._toolchain: dict[str, object] | None = None
        self._native_ops: set[str] = set()
        self._native_paths: list[Path] = []
        self._native = None  # EvidenceStore of _native_paths, reloaded when a recording adds one

    def close(self) -> None:
        """Release the threads of the fan-out (a Ray fan-out holds none)."""
        getattr(self.fan_out, "close", lambda: None)()

    def native_evidence(self, ctx: "KernelContext", ops: list[str], build: dict):
        """Record GPU evidence here (torch + a CUDA device) for `ops`, once per run; None if impossible.

        The GPU harness runs the library crate rust/, so only a library kernel whose B used that very
        crate can be checked natively."""
        ok, _ = self.gpu()
        if not ok or not ctx.target.library or not build.get("shared_repo_crate"):
            return None
        with self.lock:
            todo = [op for op in ops if op not in self._native_ops]
            if todo:
                path = record(todo, self.options.out / "_gpu" / sha256(todo)[:12], jobs=max(1, self.options.jobs))
                self._native_paths.append(path)
                self._native_ops.update(todo)
                self._native = EvidenceStore.load(self._native_paths)
            return self._native

    def assess(self, ctx: "KernelContext", kind: str, current: dict[str, tuple], build: dict) -> dict:
        """{op: Assessment} of the `kind` evidence (check / bench) for each op of `current` ({op:
        (fingerprint, components) of the build}): the --gpu-results evidence, or, unless it is fresh
        for every op, evidence recorded here (`native_evidence`) when that is possible."""
        found = {op: self.evidence.assess(op, kind, fp) for op, fp in current.items()}
        if not all(a.status == "fresh" for a in found.values()):
            native = self.native_evidence(ctx, list(current), build)
            if native:
                found = {op: native.assess(op, kind, fp) for op, fp in current.items()}
        return found

    def toolchain(self) -> dict[str, object]:
        """name -> toolchain Component (tileport doctor's checks), computed once per run."""
        with self.lock:
            if self._toolchain is None:
                from tileport import doctor
                self._toolchain = {c.name: c for c in doctor.check_all()}
            return self._toolchain

    def missing_tools(self, prefixes: tuple[str, ...]) -> list[str]:
        """Required components whose name starts with one of `prefixes` and that are missing."""
        return [f"{c.name} ({c.fix})" for name, c in self.toolchain().items()
                if c.required and not c.ok and name.startswith(prefixes)]

    def gpu(self) -> tuple[bool, str]:
        """(a GPU can run D/E here, why not)."""
        if self._gpu is None:
            if self.options.native_gpu is False:
                self._gpu = (False, "GPU stages disabled for this run")
            else:
                self._gpu = _detect_gpu()
        return self._gpu


def _detect_gpu() -> tuple[bool, str]:
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return False, "no GPU: PyTorch is not installed on this machine"
    try:
        import torch
        if not torch.cuda.is_available():
            return False, "no GPU: torch.cuda.is_available() is False on this machine"
    except Exception as e:  # noqa: BLE001 - a broken torch install is an environment fact
        return False, f"no GPU: torch failed to initialize CUDA ({e})"
    return True, ""


@dataclass
class KernelContext:
    """What a stage's `run(ctx)` / `validate(ctx)` receive."""

    session: Session
    target: Target
    stage: Stage = Stage.A
    attempt: int = 1
    verdicts: dict[tuple[str, int], Verdict] = field(default_factory=dict)  # (stage, attempt) -> verdict
    repair_errors: list[str] = field(default_factory=list)  # set on a validator-repair run
    inputs_hash: str = ""
    history: list[tuple[str, int]] = field(default_factory=list)  # (stage, attempt) in the order they ran

    def previous(self, *stages: str) -> Verdict | None:
        """The most recent verdict, among `stages`, before the current stage run."""
        for s, a in reversed(self.history):
            if s in stages and (s, a) != (str(self.stage), self.attempt):
                return self.verdicts.get((s, a))
        return None

    @property
    def options(self) -> Options:
        return self.session.options

    @property
    def kernel(self) -> str:
        return self.target.kernel

    @property
    def kernel_dir(self) -> Path:
        return self.options.out / self.target.key

    def stage_dir(self, stage: Stage | str, attempt: int = 1) -> Path:
        return self.kernel_dir / (f"{stage}" if attempt == 1 else f"{stage}{attempt}")

    @property
    def dir(self) -> Path:
        return self.stage_dir(self.stage, self.attempt)

    def latest(self, stage: Stage | str) -> Verdict | None:
        """The latest verdict of `stage` in this run (None if it has not run)."""
        found = [(a, v) for (s, a), v in self.verdicts.items() if s == str(stage)]
        return max(found, key=lambda x: x[0])[1] if found else None

    def latest_dir(self, stage: Stage | str) -> Path | None:
        v = self.latest(stage)
        return self.stage_dir(stage, v.attempt) if v else None

    def rel(self, path: Path) -> str:
        """A path relative to the kernel directory (how verdicts name artifacts)."""
        return os.path.relpath(path, self.kernel_dir)

    def verdict(self, verdict: str, reason: str = "", **kw) -> Verdict:
        return Verdict(kernel=self.kernel, stage=str(self.stage), verdict=verdict, attempt=self.attempt,
                       reason=reason, **kw)


__all__ = ["Target", "Options", "Session", "KernelContext", "translator_fingerprint",
           "pipeline_fingerprint", "primary_op", "KERNELS_DIR", "REPO"]
