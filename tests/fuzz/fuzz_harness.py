"""Runs generated inputs through the translator and classifies what goes wrong.

Per input, in a fresh sandbox directory holding only the input file:
- in process: `translate()` (render only; every `write_every`-th input also writes the crate, so rustfmt
  runs), under a SIGALRM limit;
- every `cli_every`-th input also through the CLI, `python -m tileport.cli translate <file> -o out`, under a
  subprocess timeout.
Problems (the work folder is snapshotted around each input): `traceback` (an exception escaped, or the CLI printed one / exited other than 0 or 1), `internal`
(an "internal translator error" diagnostic), `unlocated` (a diagnostic without file:line), `hang` (over the
time limit), `outside_write` (the sandbox changed anywhere but in the output folder).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzz_generator import generate

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = ("traceback", "internal", "unlocated", "hang", "outside_write")
# Values a fuzzed configuration puts in place of a dtype or a constant: legal, illegal and ill-typed.
CONFIG_VALUES = (0, 1, 2, 3, -8, 16, 2**40, 2**62, True, False, 1.5, -0.0, "abc", None, "f16", "float8", "i64",
                 "u16", "tf32", "bool", "float16", 7)
CLI_STARTUP_S = 5.0  # the CLI's limit adds interpreter start-up and rustfmt to the per-input limit


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` in the translator swallows it."""


@dataclass
class Problem:
    index: int
    kind: str
    problem: str
    via: str  # "in-process" | "cli"
    detail: str


@dataclass
class Figures:
    seed: int
    inputs: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    in_process_runs: int = 0
    written_runs: int = 0
    cli_runs: int = 0
    kernels_translated: int = 0
    kernel_diagnostics: int = 0
    file_diagnostics: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PROBLEMS, 0))
    slowest_input_s: float = 0.0
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    def to_dict(self) -> dict:
        out = asdict(self)
        out["problems"] = out["problems"][:50]  # the first ones; the counts say how many
        return out


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            dirnames[:] = []
            continue
        for name in [d for d in dirnames if Path(dirpath, d) != skip]:  # folders: existence only (their mtime
            out[str(Path(dirpath, name).relative_to(root))] = (-1, 0)  # changes when the output folder appears)
        for name in filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def _with_alarm(seconds: float, fn):
    def alarm(*_):
        raise Hang()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_in_process(path: Path, out_dir: Path | None, timeout: float, figures: Figures) -> tuple[str, str] | None:
    from tileport.translate import translate
    try:
        report = _with_alarm(timeout, lambda: translate([str(path)], out_dir))
    except Hang:
        return "hang", f"translate() ran over {timeout} s"
    except BaseException:  # noqa: BLE001 - exactly what the fuzzer looks for
        return "traceback", traceback.format_exc(limit=-6)
    for r in report.results:
        d = r.diagnostic
        if d is None:
            figures.kernels_translated += 1
            continue
        if r.kernel == "<file>":
            figures.file_diagnostics += 1
        else:
            figures.kernel_diagnostics += 1
        if d.construct == "internal" or "internal translator error" in d.message:
            return "internal", str(d)
        if d.loc is None or d.loc.line < 1 or d.loc.file != str(path):
            return "unlocated", str(d)
    return None


def run_cli(path: Path, out_dir: Path, timeout: float) -> tuple[str, str] | None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "tileport.cli", "translate", path.name, "-o", str(out_dir.relative_to(path.parent))]
    try:
        proc = subprocess.run(cmd, cwd=path.parent, env=env, capture_output=True, text=True, errors="replace",
                              timeout=timeout + CLI_STARTUP_S)
    except subprocess.TimeoutExpired:
        return "hang", f"the CLI ran over {timeout + CLI_STARTUP_S} s"
    output = proc.stdout + proc.stderr
    if "Traceback (most recent call last)" in output or proc.returncode not in (0, 1):
        return "traceback", f"exit {proc.returncode}: {output[-2000:]}"
    if "internal translator error" in output:
        return "internal", output[-2000:]
    return None


def fuzz(n: int, seed: int, workdir: Path, timeout: float = 10.0, write_every: int = 5, cli_every: int = 25,
         start: int = 0, progress=None) -> Figures:
    figures = Figures(seed)
    t_start = time.perf_counter()
    sandbox = workdir / "sandbox"
    for index in range(start, start + n):
        item = generate(seed, index)
        figures.inputs += 1
        figures.by_kind[item.kind] = figures.by_kind.get(item.kind, 0) + 1
        shutil.rmtree(sandbox, ignore_errors=True)
        sandbox.mkdir(parents=True)
        path = sandbox / "fuzz_kernels.py"
        path.write_bytes(item.data)
        out = sandbox / "out"
        before = snapshot(workdir, out)  # the whole work folder: a write beside the sandbox counts too
        t0 = time.perf_counter()
        runs = [("in-process", lambda: run_in_process(path, None, timeout, figures))]
        if write_every and index % write_every == 0:
            runs.append(("in-process", lambda: run_in_process(path, out / "in_process", timeout, figures)))
            figures.written_runs += 1
        if cli_every and index % cli_every == 0:
            runs.append(("cli", lambda: run_cli(path, out / "cli", timeout)))
            figures.cli_runs += 1
        for via, run in runs:
            figures.in_process_runs += via == "in-process"
            found = run()
            if found:
                figures.counts[found[0]] += 1
                figures.problems.append(Problem(index, item.kind, found[0], via, found[1][-3000:]))
        after = snapshot(workdir, out)
        if after != before:
            changed = sorted(set(after.items()) ^ set(before.items()))
            figures.counts["outside_write"] += 1
            figures.problems.append(Problem(index, item.kind, "outside_write", "any", repr(changed[:10])))
        figures.slowest_input_s = max(figures.slowest_input_s, time.perf_counter() - t0)
        if progress:
            progress(index, figures)
    shutil.rmtree(sandbox, ignore_errors=True)
    figures.seconds = round(time.perf_counter() - t_start, 2)
    figures.slowest_input_s = round(figures.slowest_input_s, 2)
    return figures


def fuzz_configs(n: int, seed: int, workdir: Path, timeout: float = 10.0, write_every: int = 10) -> Figures:
    """The corpus kernels under random configurations (dtypes and constant values replaced by CONFIG_VALUES):
    what comes from captures or a user's `--config` must be checked like source."""
    import random

    from tileport.corpus import corpus_files, kernel_configs
    from tileport.frontends.cutile import KernelConfig
    from tileport.ops.specs import all_specs
    specs = all_specs()
    files, base = corpus_files(specs), kernel_configs(specs)
    figures = Figures(seed)
    t_start = time.perf_counter()
    for index in range(n):
        rng = random.Random(f"config:{seed}:{index}")
        path = rng.choice(files)
        configs = {}
        target = rng.choice(sorted(base[path]))  # one kernel, one configuration gets 1-2 bad entries
        for kernel, cfg in base[path].items():
            variants = [dict(c) for c in cfg.configs] or [{}]
            if kernel == target:
                c = rng.choice(variants)
                for _ in range(rng.randint(1, 2)):
                    c[rng.choice(sorted(c) or ["x"])] = rng.choice(CONFIG_VALUES)
            configs[kernel] = KernelConfig(tuple(variants), cfg.ranks, cfg.pinned)
        figures.inputs += 1
        out = workdir / "config_out" if write_every and index % write_every == 0 else None
        figures.written_runs += out is not None
        figures.in_process_runs += 1
        found = _run_config(Path(path), configs, out, timeout, figures)
        if found:
            figures.counts[found[0]] += 1
            figures.problems.append(Problem(index, "config", found[0], "in-process", found[1][-3000:]))
    figures.by_kind["config"] = n
    figures.seconds = round(time.perf_counter() - t_start, 2)
    return figures


def _run_config(path: Path, configs, out_dir: Path | None, timeout: float, figures: Figures):
    from tileport.translate import translate
    try:
        report = _with_alarm(timeout, lambda: translate([str(path)], out_dir, {str(path): configs}))
    except Hang:
        return "hang", f"translate() ran over {timeout} s"
    except BaseException:  # noqa: BLE001 - exactly what the fuzzer looks for
        return "traceback", traceback.format_exc(limit=-6)
    for r in report.results:
        d = r.diagnostic
        figures.kernels_translated += d is None
        figures.kernel_diagnostics += d is not None
        if d is not None and (d.construct == "internal" or "internal translator error" in d.message):
            return "internal", str(d)
        if d is not None and (d.loc is None or d.loc.line < 1):
            return "unlocated", str(d)
    return None
