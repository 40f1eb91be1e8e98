"""Package mode: `tileport translate|port DIR|WHEEL|SDIST|PIP-SPEC`.

- `fetch`: the input as a folder (archives unpacked, a requirement downloaded by pip, under OUT);
- `index`: the package's modules (dotted name -> file), other vendors' back ends marked, and the resolver
  the frontends read imports with;
- `library`: every kernel of every module lowered (worker processes), one crate;
- `port`: the pipeline over the package's translated kernels;
- `report`: OUT/library.json and OUT/library.html.

Nothing of the package is imported or run.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TextIO

from .fetch import FetchError, PackageSource, is_package_input, open_package
from .index import PackageIndex, PackageResolver, build_index
from .library import Library, Tally, translate_package
from .report import write_library

CRATE_DIR = "crate"  # OUT/crate: the package's crate


class StderrProgress:
    """Progress lines (files and kernels done, elapsed, ETA by the bytes left, the file done last), at most
    one every `every` seconds, and the last one."""

    def __init__(self, stream: TextIO | None = None, every: float = 2.0):
        self.stream = stream or sys.stderr
        self.every = every
        self.t0 = time.perf_counter()
        self.last = -every

    def __call__(self, t: Tally) -> None:
        now = time.perf_counter() - self.t0
        if t.files_done < t.files and now - self.last < self.every:
            return
        self.last = now
        eta = now / t.size_done * (t.size - t.size_done) if t.size_done else None
        print(f"tileport: {t.files_done}/{t.files} files, {t.found} kernels found, {t.translated} translated; "
              f"{_clock(now)} elapsed, ETA {_clock(eta) if eta is not None else '-'}"
              + (f"; {t.last}" if t.last else ""), file=self.stream, flush=True)


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def open_index(arg: str, out: Path, timeout: float = 300.0) -> tuple[PackageSource, PackageIndex]:
    source = open_package(arg, out, timeout)
    return source, build_index(source.root, skip=out)


MAX_DEFAULT_JOBS = 8


def default_jobs() -> int:
    """Worker processes when none are asked for: one per CPU this process may run on, at most MAX_DEFAULT_JOBS."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_JOBS))


def translate(arg: str, out: Path, crate: str = "tileport_kernels", jobs: int | None = None, force: bool = False,
              progress: StderrProgress | None = None, faithful: bool = False
              ) -> tuple[Library, object, tuple[Path, Path]]:
    """Package mode's `translate`: OUT/crate, OUT/library.json, OUT/library.html, lowered in `jobs` worker
    processes (None: `default_jobs()`), `faithful` as in `tileport.translate.translate`. FetchError for an input
    that is no package; `emit.crate.OutputDirError` when OUT/crate cannot take the crate."""
    from tileport.emit.rust.crate import check_output_dir
    check_output_dir(out / CRATE_DIR, force)
    t0 = time.perf_counter()
    source, index = open_index(arg, out)
    lib, report = translate_package(index, source.label, source.kind, out / CRATE_DIR, crate, jobs or default_jobs(),
                                    force, progress, {"index": time.perf_counter() - t0}, faithful)
    return lib, report, write_library(lib, out)


def port_input(arg: str, options, launches: Path | None, console, progress: StderrProgress | None = None):
    """Package mode's `port`: the pipeline under OUT, OUT/library.json and OUT/library.html. FetchError for
    an input that is no package; the pipeline's own errors (a locked OUT, a bad launch spec) pass through.
    Not named `port`: importing the `port` submodule rebinds that attribute of the package."""
    from .port import port_package
    source, index = open_index(arg, options.out)
    lib, ported, session = port_package(index, source.label, source.kind, options, launches, console, progress)
    return lib, ported, session, write_library(lib, options.out)


__all__ = ["FetchError", "Library", "PackageIndex", "PackageResolver", "StderrProgress", "build_index",
           "is_package_input", "open_index", "port_input", "translate", "write_library", "CRATE_DIR"]
