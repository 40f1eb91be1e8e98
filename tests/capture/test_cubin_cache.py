"""The cubin cache (`tileport.cache`, used by `verify` and `port`): a hit is what tileiras wrote for the same
bytes, architecture and tileiras binary; anything else compiles again, and a damaged entry is never served."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tileport import capture, toolchain
from tileport.cache import DiskCache


@pytest.fixture
def tileiras(tmp_path, monkeypatch):
    """A stand-in tileiras (`--gpu-name ARCH -O3 -o DST SRC`) that logs each run: bytes containing `bad`
    fail with a message, others give an ELF-headed file naming the architecture and the input."""
    log = tmp_path / "runs.log"
    tool = tmp_path / "bin" / "tileiras"
    tool.parent.mkdir()
    tool.write_text(f"""#!/bin/sh
echo "$2" >> {log}
if grep -q bad "$6"; then echo "error: bad input at k.py:3" >&2; exit 1; fi
printf '\\177ELF %s ' "$2" > "$5"; cat "$6" >> "$5"
""")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(toolchain, "tileiras", lambda: tool)
    return tool, log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_same_bytes_arch_and_tool_compile_once(tileiras, tmp_path):
    _tool, log = tileiras
    cache = DiskCache(tmp_path / "cache")
    first = capture.compile_cubin(b"kernel", "sm_90", tmp_path / "a.cubin", sass=False, cache=cache)
    again = capture.compile_cubin(b"kernel", "sm_90", tmp_path / "b.cubin", sass=False, cache=cache)
    assert first.ok and again.ok and runs(log) == 1
    assert (first.size, first.sha256) == (again.size, again.sha256)
    assert (tmp_path / "b.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes() == b"\x7fELF sm_90 kernel"
    capture.compile_cubin(b"kernel", "sm_100", None, sass=False, cache=cache)
    capture.compile_cubin(b"kernel2", "sm_90", None, sass=False, cache=cache)
    capture.compile_cubin(b"kernel", "sm_90", None, sass=False)  # no cache: always compiles
    assert runs(log) == 4


def test_a_failure_is_kept_with_its_message(tileiras, tmp_path):
    _tool, log = tileiras
    cache = DiskCache(tmp_path / "cache")
    for _ in range(2):
        r = capture.compile_cubin(b"bad kernel", "sm_90", None, sass=False, cache=cache)
        assert not r.ok and "bad input at k.py:3" in r.error
    assert runs(log) == 1


def test_a_damaged_entry_compiles_again(tileiras, tmp_path):
    _tool, log = tileiras
    cache = DiskCache(tmp_path / "cache")
    good = capture.compile_cubin(b"kernel", "sm_90", None, sass=False, cache=cache)
    [entry] = (tmp_path / "cache" / "cubin").rglob("*.cubin")
    entry.write_bytes(b"\x7fELF truncated")
    again = capture.compile_cubin(b"kernel", "sm_90", tmp_path / "k.cubin", sass=False, cache=cache)
    assert runs(log) == 2 and again.sha256 == good.sha256
    assert (tmp_path / "k.cubin").read_bytes() == b"\x7fELF sm_90 kernel"


def test_another_tileiras_binary_compiles_again(tileiras, tmp_path):
    tool, log = tileiras
    cache = DiskCache(tmp_path / "cache")
    capture.compile_cubin(b"kernel", "sm_90", None, sass=False, cache=cache)
    tool.write_text(tool.read_text() + "\n# a new release\n")
    capture.compile_cubin(b"kernel", "sm_90", None, sass=False, cache=cache)
    assert runs(log) == 2
