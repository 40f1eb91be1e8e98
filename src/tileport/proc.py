"""External tools (rustfmt, cargo, tileiras, tileirdisasm, nvdisasm, cuobjdump, git, pip, an agent...) run
with a time limit. Each runs in a process group of its own; past its limit, or when the caller is
interrupted, the whole group is killed, so nothing it started keeps running (`subprocess.run` kills
only the direct child, and then waits for pipes its children still hold open).

A group of its own no longer receives what is sent to tileport's (Ctrl-C at the terminal, `timeout`,
`kill -- -PGID`): while tools run, SIGINT, SIGTERM and SIGHUP (where their handler is Python's default)
first kill every running tool's group, then act as before; so does the interpreter's exit. Only a
SIGKILL of tileport itself leaves its tools to finish on their own.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import subprocess
import threading
import time
from typing import Callable, Sequence

KILL_WAIT_S = 5.0  # after the kill: how long to collect the output of a group that should be gone
PROGRESS_EVERY_S = 30.0
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_running: set[int] = set()  # process groups of the tools running now


class ToolTimeout(subprocess.TimeoutExpired):
    """A tool ran past its time limit; it was stopped with every process it started."""

    def __init__(self, cmd, timeout: float, output=None, stderr=None, what: str = ""):
        super().__init__(cmd, timeout, output, stderr)
        self.what = what or _name(cmd)

    def __str__(self) -> str:
        shown = self.cmd if isinstance(self.cmd, str) else shlex.join(map(str, self.cmd))
        return (f"{self.what} did not finish within {self.timeout:g} s and was stopped, with every process it "
                f"started (`{shown[:300]}`)")


def _name(cmd) -> str:
    first = cmd.split()[0] if isinstance(cmd, str) and cmd.split() else cmd[0] if cmd else "?"
    return os.path.basename(str(first))


def run(cmd: Sequence | str, timeout: float, what: str = "", capture: bool = True,
        progress: Callable[[float], None] | None = None, every: float = PROGRESS_EVERY_S,
        **popen: object) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=capture, text=True, **popen)` bounded by `timeout` seconds:
    ToolTimeout (a subprocess.TimeoutExpired) once the tool and its process group are killed.
    `progress(seconds)` is called every `every` seconds while it runs. stdin is /dev/null unless given."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} if capture else {}
    stop_tools_on_signals()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, start_new_session=True, text=True, **pipes, **popen)
    _running.add(proc.pid)
    try:
        while True:
            left = timeout - (time.monotonic() - t0)
            if left <= 0:
                raise subprocess.TimeoutExpired(cmd, timeout)
            try:
                out, err = proc.communicate(timeout=min(left, every) if progress else left)
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                if progress and time.monotonic() - t0 < timeout:
                    progress(time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        out, err = stop(proc)
        raise ToolTimeout(cmd, timeout, out, err, what) from None
    except BaseException:  # an interrupt or an error here: the tool must not outlive it
        stop(proc)
        raise
    finally:
        _running.discard(proc.pid)


def stop(proc: subprocess.Popen) -> tuple[str | None, str | None]:
    """Kill `proc`'s process group (its own: `run` starts it so) and reap it; what it wrote so far."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.communicate(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:  # a process that left the group holds the pipes: leave them to it
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.kill()
        proc.wait()
        return None, None


def stop_all() -> None:
    """Kill the process group of every tool running now."""
    for group in list(_running):
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_then_default(signum: int, frame) -> None:
    stop_all()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def stop_tools_on_signals() -> None:
    """Make FORWARDED signals kill the running tools first (see the module doc). Only a handler still at
    Python's default is replaced, and only from the main thread (the only one that can set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in FORWARDED:
        default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        if signal.getsignal(signum) is default:
            signal.signal(signum, _stop_then_default)


atexit.register(stop_all)
