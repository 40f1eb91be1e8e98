"""Where a GPU evidence document comes from: the kind every evidence file carries and the commit it was
recorded at (and whether the tree differed from it). Written by the GPU harnesses, read back by the
pipeline (`tileport.pipeline.evidence`)."""

from __future__ import annotations

import os
import subprocess

from tileport.corpus import REPO
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

EVIDENCE_KIND = "tileport-gpu-evidence"


def git(*args: str) -> subprocess.CompletedProcess | None:
    """`git` in the repository (None when git cannot run there)."""
    try:
        return run_tool(["git", "-C", str(REPO), *args], 60)
    except (OSError, ToolTimeout):
        return None


def current_commit() -> tuple[str | None, bool | None]:
    commit = os.environ.get("TILEPORT_COMMIT")
    proc = git("rev-parse", "HEAD")
    if not commit and proc and proc.returncode == 0:
        commit = proc.stdout.strip()
    st = git("status", "--porcelain", "--", "rust", "src")
    dirty = bool(st.stdout.strip()) if st and st.returncode == 0 else None
    return commit or None, dirty
