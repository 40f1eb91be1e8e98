"""The pipeline's units of work as they run in another process (a Ray worker, perhaps on another node).

A unit is one stage run of one kernel (`stage_unit`: translate + build + IR diff + cubins for B, a GPU test
for D, a benchmark for E...) or the build of a batch crate (`crate_unit`: the translation of the run's
modules and one cargo build serving all their kernels). A worker keeps one `Session` per run (`RunSpec`);
a stage unit rebuilds the kernel's folder from the files it carries in a scratch directory of its own,
runs the stage exactly as the local pipeline does (`engine.execute`, `--resume`'s reuse included) and
returns the stage's folder. The driver, which alone holds the lock of `--out`, writes it there (`land`):
a unit never writes into `--out`, so a unit cut short by a dead worker leaves nothing behind and its
retry starts from the same inputs.

Crates, libraries and captures go through the content-addressed cache and cargo's target directory,
which every node must see at the same path (a shared file system): the driver's are handed to the units.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tileport.executor import ExecutorError, ray_map
from tileport.runtime.library import cargo_target_dir

from .artifacts import inside, remove_tree
from .builds import CrateBuild
from .context import KernelContext, Options, Session, Target
from .evidence import EvidenceStore
from .verdicts import Stage, Verdict

GPU_DIR = "_gpu"  # evidence recorded by D on a GPU node (context.Session.native_evidence)


@dataclass
class RunSpec:
    """What every unit of one run shares (stored once in the cluster)."""

    run_id: str
    options: Options
    targets: list[Target]
    evidence: EvidenceStore
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class StageTask:
    key: str
    stage: Stage
    attempt: int
    verdicts: dict[tuple[str, int], Verdict]
    history: list[tuple[str, int]]
    files: dict[str, bytes]                 # the kernel's folder, relative paths
    crates: list[CrateBuild] = field(default_factory=list)  # batch crates built by crate units


@dataclass
class StageResult:
    verdict: Verdict
    reused: bool
    files: dict[str, bytes]   # the stage's folder (empty when reused: the driver has it)
    extra: dict[str, bytes]   # files written outside the kernel's folder, relative to --out (GPU evidence)
    node: str
    pid: int


def spec_of(run_id: str, session: Session) -> RunSpec:
    """The run as its units see it: the driver's cache and cargo target directory (shared paths on a cluster;
    a node's own settings, such as its cargo slots, stay its own)."""
    env = {"TILEPORT_CACHE_DIR": str(session.options.cache()), "CARGO_TARGET_DIR": str(cargo_target_dir())}
    return RunSpec(run_id, session.options, session.targets, session.evidence, env)


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` (relative path -> bytes); a link is skipped, never followed."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = inside(root, root / rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def land(out: Path, stage_dir: Path, files: dict[str, bytes]) -> None:
    """Replace `stage_dir` (inside `out`) by `files` at once: written beside it, then renamed into place, so a
    reader (or a run killed meanwhile) sees the old folder or the new one, never half of each."""
    incoming = stage_dir.with_name(f".{stage_dir.name}.incoming")
    old = stage_dir.with_name(f".{stage_dir.name}.old")
    for p in (incoming, old):
        remove_tree(out, p)
    inside(out, incoming).mkdir(parents=True)
    write_tree(incoming, files)
    if stage_dir.exists():
        inside(out, stage_dir).rename(old)
    incoming.rename(stage_dir)
    remove_tree(out, old)


def land_extra(out: Path, files: dict[str, bytes]) -> None:
    """Files a unit wrote beside the kernels (GPU evidence), each written once."""
    for rel, data in files.items():
        if not inside(out, out / rel).exists():
            write_tree(out, {rel: data})


# ------------------------------------------------------------------------------------ on the worker

_sessions: dict[str, Session] = {}
_lock = threading.Lock()


def _session(spec: RunSpec) -> Session:
    """This process's Session of the run (its units share builds and caches, as the local pool's threads do)."""
    with _lock:
        if spec.run_id not in _sessions:
            os.environ.update(spec.env)
            scratch = Path(tempfile.gettempdir()) / f"tileport-unit-{spec.run_id}-{os.getpid()}"
            options = dataclasses.replace(spec.options, out=scratch, cache_dir=Path(spec.env["TILEPORT_CACHE_DIR"]))
            session = Session(options, spec.targets, fan_out=ray_map)
            session.evidence = spec.evidence  # the driver's --gpu-results, as it read them
            for done in _sessions.values():  # one run at a time per worker: an earlier run's session is over
                shutil.rmtree(done.options.out, ignore_errors=True)
            _sessions.clear()
            _sessions[spec.run_id] = session
        return _sessions[spec.run_id]


def _visible(build: CrateBuild) -> None:
    if build.so is not None and not build.so.is_file():
        raise ExecutorError(f"the library {build.so} built by another node is not visible on {socket.gethostname()}: "
                            f"CARGO_TARGET_DIR and TILEPORT_CACHE_DIR must be paths every node shares")


def stage_unit(spec: RunSpec, task: StageTask) -> StageResult:
    """Run one stage of one kernel in a scratch copy of its folder; returns the stage's folder."""
    from .engine import execute
    session = _session(spec)
    target = next(t for t in spec.targets if t.key == task.key)
    for build in task.crates:
        _visible(build)
        session.builds.adopt(target, build)
    ctx = KernelContext(session, target, verdicts=dict(task.verdicts), history=list(task.history))
    out = session.options.out
    out.mkdir(parents=True, exist_ok=True)
    remove_tree(out, ctx.kernel_dir)  # a retried unit starts from the folder it was given, nothing else
    write_tree(ctx.kernel_dir, task.files)
    gpu_before = set(read_tree(out / GPU_DIR))
    try:
        v, reused = execute(ctx, task.stage, task.attempt)
        files = {} if reused else read_tree(ctx.dir)
        extra = {f"{GPU_DIR}/{rel}": data for rel, data in read_tree(out / GPU_DIR).items() if rel not in gpu_before}
    finally:
        shutil.rmtree(ctx.kernel_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            out.rmdir()  # nothing is left behind, unless GPU evidence this session reads again
    return StageResult(v, reused, files, extra, socket.gethostname(), os.getpid())


def crate_unit(spec: RunSpec, kind_of: Target) -> CrateBuild:
    """Translate and build the batch crate that serves `kind_of`'s kind of kernels."""
    build = _session(spec).builds.batch_for(kind_of)
    return dataclasses.replace(build, _lib=None)
