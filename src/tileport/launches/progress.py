"""The progress line of `tileport record` (launches seen, distinct specializations, kernels), read from the
spec the command's processes write, and the relay that keeps the command's own output intact around it.

The command's stderr reaches ours through a pipe, copied byte for byte; the progress line is written
only between its lines, never inside one. Where our stdout and stderr are one terminal, the command gets
a pseudo-terminal for both instead (it still sees a terminal: colours, line buffering, the terminal's
width), and the progress line is one transient line, erased before the command's next output. Elsewhere
(a log, a CI job) it is a line of its own, `tileport record: ...`, at most every `LOG_EVERY` seconds."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import BinaryIO

from tileport.launches.spec import dropped_from_dict, record_from_dict

TERMINAL_EVERY = 0.5  # seconds between updates of the transient line
LOG_EVERY = 10.0      # seconds between progress lines in a log
ERASE = b"\r\x1b[K"


class Relay:
    """Copies what the command writes to `source` onto `sink` unchanged; `show` puts the progress line
    between the command's lines (transient on a terminal, a line of its own elsewhere)."""

    def __init__(self, source: int, sink: BinaryIO, transient: bool):
        self.source, self.sink, self.transient = source, sink, transient
        self.lock = threading.Lock()
        self.at_line_start = True
        self.shown = False
        self.waiting: str | None = None  # progress to show at the end of the command's current line
        self.thread = threading.Thread(target=self._copy, name="tileport-record-relay", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        while True:
            try:
                chunk = os.read(self.source, 1 << 16)
            except OSError:  # a pseudo-terminal reads EIO once the command has closed it
                break
            if not chunk:
                break
            with self.lock:
                self._erase()
                self._write(chunk)
                self.at_line_start = chunk.endswith(b"\n")
                self._draw()

    def show(self, text: str) -> None:
        """Show `text` now, or at the end of the command's current line."""
        with self.lock:
            self.waiting = text
            self._draw()

    def _draw(self) -> None:
        if not self.at_line_start or self.waiting is None:
            return
        text, self.waiting = self.waiting.encode(), None
        if self.transient:
            self._write(ERASE + text)
            self.shown = True
        else:
            self._write(text + b"\n")

    def close(self, wait: float = 2.0) -> None:
        """After the command exited: copy what is left (a process it left behind that still holds the
        pipe is not waited for longer than `wait` seconds), then erase the transient line."""
        self.thread.join(wait)
        with self.lock:
            self.waiting = None
            self._erase()

    def _erase(self) -> None:
        if self.shown:
            self._write(ERASE)
            self.shown = False

    def _write(self, data: bytes) -> None:
        try:
            self.sink.write(data)
            self.sink.flush()
        except (OSError, ValueError):  # our own stream went away: the command's output is still drained
            pass


def progress_text(spec: Path) -> str | None:
    """`tileport record: N launches, S specializations of K kernels` (+ what the caps dropped), from the
    spec as the command's processes have written it so far (None before the first write)."""
    try:
        data = json.loads(spec.read_text())
        records = [record_from_dict(d) for d in data["launches"]]
        dropped = [dropped_from_dict(d) for d in data.get("dropped", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    launches = sum(r.count for r in records)
    over = sum(d.launches + d.extra_launches for d in dropped)
    specs = len({r.specialization() for r in records})
    kernels = len({r.kernel_id() for r in records})
    text = f"tileport record: {launches + over} launches, {specs} specializations of {kernels} kernels"
    if over:
        text += (f" ({over} launches over the caps not kept, "
                 f"{sum(len(d.specializations) for d in dropped)} specializations among them)")
    return text


def _one_terminal() -> bool:
    """Whether our stdout and stderr are the same terminal (an interactive run)."""
    try:
        out, err = os.fstat(1), os.fstat(2)
    except OSError:
        return False
    return os.isatty(1) and os.isatty(2) and (out.st_rdev, out.st_ino) == (err.st_rdev, err.st_ino)


def run_with_progress(command: list[str], env: dict[str, str], spec: Path, every: float | None = None) -> int:
    """Run `command` to its end with the progress line; returns its exit code (128 + N for signal N)."""
    terminal = _one_terminal()
    if terminal:
        import pty
        source, target = pty.openpty()
        _copy_window_size(target)
        streams, sink = {"stdout": target, "stderr": target}, sys.stdout.buffer
    else:
        source, target = os.pipe()
        streams, sink = {"stderr": target}, sys.stderr.buffer
    try:
        # The user's own program, in the foreground (Ctrl-C reaches it): no time limit of tileport's, as
        # `time` or `timeout` would set none (a wrapper can: `tileport record -- timeout 1h ...`).
        proc = subprocess.Popen(command, env=env, **streams)
    except OSError:
        os.close(source)
        raise
    finally:
        os.close(target)
    relay = Relay(source, sink, transient=terminal)
    rc = _wait(proc, relay, spec, every or (TERMINAL_EVERY if terminal else LOG_EVERY))
    relay.close()
    os.close(source)
    return 128 - rc if rc < 0 else rc


def _wait(proc: subprocess.Popen, relay: Relay, spec: Path, every: float) -> int:
    last = None
    while True:
        try:
            return proc.wait(timeout=every)
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:  # the command got the Ctrl-C too: it decides whether it stops
            continue
        text = progress_text(spec)
        if text and text != last:
            relay.show(text)
            last = text


def _copy_window_size(fd: int) -> None:
    try:
        size = fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, size)
    except OSError:
        pass


__all__ = ["Relay", "progress_text", "run_with_progress", "TERMINAL_EVERY", "LOG_EVERY"]
