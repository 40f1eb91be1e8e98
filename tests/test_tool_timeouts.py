"""Every external tool tileport runs has a time limit; past it, the tool and every process it started
are killed (none is left running) and the caller gets a clear error, never a hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.cli import app

SRC = Path(__file__).resolve().parents[1] / "src" / "tileport"
# The tool starts a grandchild (as cargo starts rustc), records both pids, then outlives any limit below.
HANGING_TOOL = """#!/bin/sh
sleep 30 &
echo $! > "{pids}/grandchild"
echo $$ > "{pids}/child"
sleep 30
"""
KERNEL = """import cuda.tile as ct

@ct.kernel
def k(x, y):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(y, index=(ct.bid(0),), tile=t)
"""


def hanging_tool(tmp_path: Path, name: str) -> Path:
    """A fake `name` on a directory to put first on PATH."""
    bin_dir, pids = tmp_path / "bin", tmp_path / "pids"
    bin_dir.mkdir(parents=True, exist_ok=True)
    pids.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(HANGING_TOOL.format(pids=pids))
    tool.chmod(0o755)
    return bin_dir


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a parent that does not reap it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def recorded(pids: Path) -> bool:
    """Both of a hanging tool's pids are written (its child's last): signalling it before would race them."""
    return all((pids / who).is_file() and (pids / who).read_text().strip() for who in ("grandchild", "child"))


def assert_none_left(tmp_path: Path) -> None:
    pids = [int((tmp_path / "pids" / who).read_text()) for who in ("child", "grandchild")]
    deadline = time.monotonic() + 5
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(alive, pids)), f"left running: {[p for p in pids if alive(p)]}"


def test_a_tool_past_its_limit_is_killed_with_its_children(tmp_path):
    from tileport import proc
    tool = hanging_tool(tmp_path, "slowtool") / "slowtool"
    t0 = time.monotonic()
    with pytest.raises(proc.ToolTimeout, match=r"slowtool did not finish within 0.5 s"):
        proc.run([str(tool)], 0.5)
    assert time.monotonic() - t0 < 5
    assert_none_left(tmp_path)


def test_an_interrupted_caller_leaves_no_tool_running(tmp_path):
    from tileport import proc
    tool = hanging_tool(tmp_path, "slowtool") / "slowtool"

    def interrupt(seconds: float) -> None:
        if (tmp_path / "pids" / "child").exists():
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        proc.run([str(tool)], 60, progress=interrupt, every=0.1)
    assert_none_left(tmp_path)


def test_rustfmt_past_its_limit_is_a_clear_error(tmp_path, monkeypatch):
    from tileport.emit.rust import crate
    monkeypatch.setenv("PATH", f"{hanging_tool(tmp_path, 'rustfmt')}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(crate, "RUSTFMT_TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="rustfmt did not finish within 0.5 s"):
        crate.rustfmt([tmp_path / "x.rs"])
    assert time.monotonic() - t0 < 5
    assert_none_left(tmp_path)


def test_translate_reports_a_rustfmt_timeout_without_a_traceback(tmp_path, monkeypatch):
    from tileport.emit.rust import crate
    monkeypatch.setenv("PATH", f"{hanging_tool(tmp_path, 'rustfmt')}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(crate, "RUSTFMT_TIMEOUT_S", 0.5)
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    r = CliRunner().invoke(app, ["translate", str(src), "-o", str(tmp_path / "crate")], terminal_width=300)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "rustfmt did not finish within 0.5 s" in " ".join(r.output.split())
    assert not (tmp_path / "crate").exists()  # nothing half-written
    assert_none_left(tmp_path)


def test_cargo_past_its_limit_is_a_build_error(tmp_path, monkeypatch):
    from tileport.runtime import library
    monkeypatch.setenv("PATH", f"{hanging_tool(tmp_path, 'cargo')}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(library, "CARGO_TIMEOUT_S", 0.5)
    so, log, error = library.cargo_build(tmp_path / "crate", "dev")
    assert so is None and "cargo did not finish within 0.5 s" in error
    assert_none_left(tmp_path)


def test_every_tool_call_goes_through_the_bounded_runner():
    """Only tileport.proc starts processes, except `tileport record`'s run of the user's own program (record.py;
    progress.py when it relays the program's output)."""
    allowed = {SRC / "proc.py", SRC / "launches" / "record.py", SRC / "launches" / "progress.py"}
    starters = ("subprocess.run(", "subprocess.Popen(", "subprocess.call(", "subprocess.check_output(",
                "subprocess.check_call(", "os.system(", "os.popen(")
    found = [f"{p.relative_to(SRC)}: {s}" for p in sorted(SRC.rglob("*.py")) if p not in allowed
             for s in starters if s in p.read_text()]
    assert not found, found


SIGNALLED = """import sys, threading
from tileport import proc
threading.Thread(target=proc.run, args=([sys.argv[1]], 60)).start()  # a worker thread's tool
proc.run([sys.argv[2]], 60)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_tileport_reaches_its_tools(tmp_path, signum):
    """Tools run in groups of their own: a signal tileport receives (Ctrl-C, `timeout`, a kill) kills them
    first, whichever thread started them."""
    first = hanging_tool(tmp_path / "a", "slowtool") / "slowtool"
    second = hanging_tool(tmp_path / "b", "slowtool") / "slowtool"
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}
    runner = subprocess.Popen([sys.executable, "-c", SIGNALLED, str(first), str(second)], env=env,
                              stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not all(recorded(d / "pids") for d in (tmp_path / "a", tmp_path / "b")):
        assert time.monotonic() < deadline and runner.poll() is None, runner.stderr.read()
        time.sleep(0.05)
    runner.send_signal(signum)
    assert runner.wait(timeout=20) != 0
    runner.stderr.close()
    assert_none_left(tmp_path / "a")
    assert_none_left(tmp_path / "b")
