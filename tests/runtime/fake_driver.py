"""A fake CUDA driver and a fake `tileiras` for CPU tests of the generated launchers: the driver
(fake_cuda.c, built with the system C compiler) counts calls and records launches; the fake
tileiras writes an ELF-headed placeholder cubin (cuda-core checks the ELF magic only, the fake
driver loads anything), so a first launch goes through cutile's own launcher without a toolkit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

FAKE_DRIVER_C = Path(__file__).with_name("fake_cuda.c")
FAKE_TILEIRAS = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake tileiras 0"; exit 0; fi
out=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; shift; fi; shift; done
printf '\\177ELF-fake-cubin' > "$out"
"""


def build_fake_driver(directory: Path) -> Path:
    """libcuda.so.1 of fake_cuda.c in `directory` (skips the test without a C compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the fake CUDA driver")
    lib = directory / "libcuda.so.1"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(FAKE_DRIVER_C)],
                   check=True, capture_output=True, text=True)
    return lib


def fake_tileiras(directory: Path) -> Path:
    """An executable fake `tileiras` in `directory` (for CUTILE_TILEIRAS_PATH)."""
    path = directory / "tileiras"
    path.write_text(FAKE_TILEIRAS)
    path.chmod(0o755)
    return path
