"""Where units of work run: a local thread pool (the default) or a Ray cluster (`tileport[ray]`).

A unit is a call `fn(*args)` of a module-level function. The local executor runs it in a thread of this
process (the heavy work of tileport's units runs in subprocesses: cargo, tileiras); the Ray executor
submits it as a Ray task (CPU units with `num_cpus=1`, GPU units with `num_gpus=1`), where it runs in
another process, perhaps on another node: its arguments and its result travel by value, and a unit lost
with its worker is run again (Ray's `max_retries`), so a unit must be idempotent.

Ray is imported only when the Ray executor is asked for; without it, `ExecutorError` says how to install it.
`node_slot` bounds, per machine, how many units hold a resource at once (concurrent cargo builds).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

RAY_PIN = "ray==2.52.1"  # pyproject's extra `tileport[ray]`
RETRIES = 3  # runs of a unit whose worker died (node lost, killed, out of memory)


class ExecutorError(Exception):
    """An executor that cannot be used: unknown name, Ray missing, a cluster that cannot be reached."""


class Executor(ABC):
    name = ""
    remote = False  # units run in other processes: they cannot share this process's objects

    @abstractmethod
    def submit(self, fn: Callable, *args: Any, gpu: bool = False, label: str = "") -> Future:
        """Run `fn(*args)` as one unit; `gpu`: it needs a whole GPU."""

    @abstractmethod
    def slots(self) -> tuple[int, int]:
        """(CPU units, GPU units) worth keeping in flight at once."""

    def share(self, obj: Any) -> Any:
        """`obj` as an argument many units take (Ray stores it once); a unit receives `obj` itself."""
        return obj

    def describe(self) -> dict:
        cpu, gpu = self.slots()
        return {"name": self.name, "cpu_slots": cpu, "gpu_slots": gpu}

    def close(self) -> None:
        """Release the pool (a Ray cluster this executor started is shut down)."""


class LocalExecutor(Executor):
    """`jobs` threads of this process."""

    name = "local"

    def __init__(self, jobs: int):
        self.jobs = max(1, jobs)
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="tileport-unit")

    def submit(self, fn: Callable, *args: Any, gpu: bool = False, label: str = "") -> Future:
        return self._pool.submit(fn, *args)

    def slots(self) -> tuple[int, int]:
        return self.jobs, 0  # GPU units share the same threads

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _call(fn: Callable, *args: Any) -> Any:
    return fn(*args)


class RayExecutor(Executor):
    """Ray tasks on the cluster at `address` (None: the one `RAY_ADDRESS` names, else a local one started
    here); a Ray already initialized in this process (a test's `ray.init(num_cpus=2)`) is used as it is."""

    name = "ray"
    remote = True

    def __init__(self, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise ExecutorError(f"--executor ray needs Ray, which is not installed: pip install 'tileport[ray]' "
                                f"(it pins {RAY_PIN})") from None
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            try:
                with warnings.catch_warnings():  # Ray's notes on its own future defaults are not the user's concern
                    warnings.simplefilter("ignore", FutureWarning)
                    ray.init(address=address, include_dashboard=False, log_to_driver=False,
                             logging_level="WARNING")
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise ExecutorError(f"cannot reach the Ray cluster {address or '(local)'}: {e}") from None
        self.address = address
        self._task = ray.remote(_call)

    def submit(self, fn: Callable, *args: Any, gpu: bool = False, label: str = "") -> Future:
        opts: dict[str, Any] = {"num_cpus": 1, "max_retries": RETRIES, "retry_exceptions": False}
        if gpu:
            opts["num_gpus"] = 1
        if label:
            opts["name"] = label
        return self._task.options(**opts).remote(fn, *args).future()

    def share(self, obj: Any) -> Any:
        return self._ray.put(obj)

    def slots(self) -> tuple[int, int]:
        res = self._ray.cluster_resources()
        return max(1, int(res.get("CPU", 1))), int(res.get("GPU", 0))

    def describe(self) -> dict:
        nodes = [n for n in self._ray.nodes() if n.get("Alive")]
        return {**super().describe(), "address": self.address or "local", "nodes": len(nodes)}

    def close(self) -> None:
        if self._owned:
            self._ray.shutdown()


def ray_map(fn: Callable, items: list[tuple]) -> list:
    """`[fn(*args) for args in items]` as Ray tasks, from inside a Ray task (a unit fanning out its parts): the
    waiting task lends its CPU to them, so they run wherever the cluster has room."""
    import ray
    task = ray.remote(_call).options(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)
    return ray.get([task.remote(fn, *args) for args in items])


class ThreadMap:
    """`map` over a pool of `jobs` threads of its own, beside the units' pool (a unit waiting on its parts never
    holds the threads they need)."""

    def __init__(self, jobs: int):
        self.jobs = max(1, jobs)
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, fn: Callable, items: list[tuple]) -> list:
        if len(items) <= 1 or self.jobs == 1:
            return [fn(*args) for args in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="tileport-part")
        return list(self._pool.map(lambda args: fn(*args), items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def parse(spec: str) -> tuple[str, str | None]:
    """`local`, `ray` or `ray=ADDRESS` -> (name, address)."""
    name, _, address = spec.partition("=")
    if name not in ("local", "ray") or (name == "local" and address) or (address == "" and "=" in spec):
        raise ExecutorError(f"unknown executor {spec!r}: local, ray or ray=ADDRESS")
    return name, address or None


def make(spec: str, jobs: int) -> Executor:
    name, address = parse(spec)
    return LocalExecutor(jobs) if name == "local" else RayExecutor(address)


# ------------------------------------------------------------------------------------ per-node limits

SLOT_DIR = Path(tempfile.gettempdir()) / "tileport-slots"


@contextlib.contextmanager
def node_slot(resource: str, slots: int, poll: float = 0.25) -> Iterator[int]:
    """Hold one of `slots` slots of `resource` on this machine (every process of it, every thread), waiting
    for one to free up; yields the slot's number. A slot is an flock on a file, so a process that dies frees
    its slot."""
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    while True:
        for i in range(max(1, slots)):
            f = open(SLOT_DIR / f"{resource}-{i}.lock", "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            try:
                yield i
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        time.sleep(poll)


def cargo_slots() -> int:
    """Concurrent cargo builds per machine ($TILEPORT_CARGO_SLOTS, default 1): a build of the cutile crate
    takes gigabytes of memory, and builds sharing one target directory wait on cargo's lock anyway."""
    value = os.environ.get("TILEPORT_CARGO_SLOTS", "1")
    if not value.isdigit() or int(value) < 1:
        raise ExecutorError(f"TILEPORT_CARGO_SLOTS={value!r}: give a positive number of concurrent cargo builds")
    return int(value)
