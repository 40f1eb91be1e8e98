"""What a port run may write, replace and delete in `--out`: only what a port run wrote there.

Every run names, in MANIFEST, each entry at the top of `--out` it writes (its kernel folders,
`summary.json`, the reports, `_gpu/`, the lock) before it writes any; what lies inside a folder it
names is the run's own, and a later run replaces it. A non-empty `--out` without a MANIFEST holds no
port run and is refused unless forced; even forced, an entry the run would write that exists and that
no earlier run named is refused, so a file tileport did not write is never replaced or deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from tileport.version import __version__
from tileport.atomic import write_text_atomic

MANIFEST = ".tileport-port.json"
LOCK_FILE = ".tileport.lock"
REPORTS = ("summary.json", "report.html", "report.md", "parity.png")
GPU_DIR = "_gpu"
OWN = (MANIFEST, LOCK_FILE)  # what every run writes


class OutDirError(ValueError):
    """`--out` holds files a port run did not write and would have to replace, or holds no port run."""


class OutLockedError(RuntimeError):
    """Another run holds the lock of the output directory."""


def run_entries(keys: list[str], gpu: bool) -> set[str]:
    """The top-level entries of `--out` a run over kernel folders `keys` may write."""
    return {*OWN, *REPORTS, *keys} | ({GPU_DIR} if gpu else set())


def owned(out: Path) -> set[str] | None:
    """The entries earlier port runs wrote into `out`; None when `out` holds no port run's MANIFEST."""
    try:
        doc = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    names = doc.get("written") if isinstance(doc, dict) and doc.get("format") == "tileport-port" else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else None


def check_out(out: Path, entries: set[str], force: bool) -> None:
    """OutLockedError when another run writes into `out`; OutDirError when `out` holds no port run
    (unless `force`) or holds, under a name of `entries`, something no port run wrote. Writes nothing."""
    _refuse_if_locked(out)
    if not out.is_dir() or not any(out.iterdir()):
        return
    mine = owned(out)
    if mine is None and not force:
        raise OutDirError(f"--out {out} is not empty and holds no `tileport port` run (no {MANIFEST}); choose an "
                          "empty or new directory, or pass --force to write the run's files there (files tileport "
                          "did not write are never replaced or deleted)")
    clashes = sorted(n for n in entries - (mine or set()) if os.path.lexists(out / n))
    if clashes:
        raise OutDirError(f"--out {out}: tileport did not write {', '.join(clashes)} there, and never replaces or "
                          "deletes what it did not write; move them away or choose another --out")


def claim(out: Path, entries: set[str]) -> None:
    """Add `entries` to the MANIFEST of `out` (created if need be) before the run writes them, so that a
    run killed midway still owns what it wrote."""
    names = (owned(out) or set()) | entries | set(OWN)
    doc = {"format": "tileport-port", "tileport": __version__, "written": sorted(names)}
    write_text_atomic(out / MANIFEST, json.dumps(doc, indent=1) + "\n")


def _refuse_if_locked(out: Path) -> None:
    try:
        fd = os.open(out / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _locked(out, fd) from None
    finally:
        os.close(fd)


def _locked(out: Path, fd: int) -> OutLockedError:
    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
    return OutLockedError(f"another `tileport port` (pid {holder}) is writing into {out}; wait for it to finish "
                          "or give another --out")


@contextlib.contextmanager
def out_lock(out: Path, entries: set[str] = frozenset()):
    """Hold an exclusive lock on `out` for a whole run, `entries` claimed (`check_out` first): a second
    run into the same directory is refused at once (two runs would interleave verdicts, run.json and
    summary.json)."""
    out.mkdir(parents=True, exist_ok=True)
    if owned(out) is None:
        claim(out, entries)  # before the lock file: a folder a run starts to write is marked first
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _locked(out, fd) from None
        claim(out, entries)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
