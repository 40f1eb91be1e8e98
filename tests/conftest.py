"""Shared fixtures: GPU detection (gpu-marked tests skip with the reason) and the built cdylib."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tests never write to ~/.cache: the pipeline's cache, cutile's cubin cache and cuda.tile's cache
# (both follow XDG_CACHE_HOME) go to a temporary directory removed after the run; cargo builds go to
# $CARGO_TARGET_DIR, default rust/target (ignored by git; reused across runs, as CI does).
TEST_CACHE = Path(tempfile.mkdtemp(prefix="tileport-tests-cache-"))
os.environ["XDG_CACHE_HOME"] = str(TEST_CACHE)
os.environ["TILEPORT_CACHE_DIR"] = str(TEST_CACHE / "tileport" / "pipeline")
if not (os.environ.get("TILEPORT_CARGO_TARGET_DIR") or os.environ.get("CARGO_TARGET_DIR")):
    os.environ["CARGO_TARGET_DIR"] = str(REPO / "rust" / "target")


def pytest_unconfigure(config):
    shutil.rmtree(TEST_CACHE, ignore_errors=True)


def gpu_unavailable_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "no GPU: PyTorch is not installed on this machine"
    if not torch.cuda.is_available():
        return "no GPU: torch.cuda.is_available() is False on this machine"
    return None


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the exhaustive sweeps (tests marked slow); by default only their fixed sample runs")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--slow"):
        slow = [item for item in items if "slow" in item.keywords]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if "slow" not in item.keywords]
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def library():
    """The generated crate's cdylib: $TILEPORT_LIB if set, else built with cargo (dev profile)."""
    from tileport.runtime.library import load
    profile = os.environ.get("TILEPORT_PROFILE", "dev")
    return load(REPO / "rust", profile=profile)
