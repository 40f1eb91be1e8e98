"""The driver's scheduling (pipeline/schedule.py) and the per-node limit of executor.node_slot, without Ray."""

from __future__ import annotations

import json
import threading
import time

from conftest import DATA

from tileport.executor import LocalExecutor, node_slot
from tileport.pipeline import Options, resolve_targets
from tileport.pipeline.context import Session
from tileport.pipeline.schedule import Costs, Scheduler
from tileport.pipeline.verdicts import Stage

FILES = [str(DATA / "rp_scale.py"), str(DATA / "rp_take.py"), str(DATA / "rp_rowsum.py")]


def test_the_slowest_units_run_first(tmp_path):
    """One thread, A only: the kernels' A units run in the order of their measured costs, slowest first, not in
    the order they were given."""
    targets = resolve_targets(FILES, launches=DATA / "rp_launches.json")
    cache = tmp_path / "cache"
    costs = Costs(cache / "costs.json")
    for seconds, t in enumerate(targets):  # the last target measured slowest
        costs.measure_stage(t, Stage.A, 100.0 * (seconds + 1))
    costs.save()
    session = Session(Options(out=tmp_path / "out", until=Stage.A, cache_dir=cache), targets)
    started: list[str] = []
    pool = LocalExecutor(1)
    try:
        done = Scheduler(session, pool, lambda key, msg: started.append(key) if msg.endswith("running") else None,
                         lambda line: None, lambda outcome: None).run()
    finally:
        pool.close()
    assert started == [t.key for t in reversed(targets)]
    assert [o.terminal for o in done] == ["PAUSED"] * 3
    seen = json.loads((cache / "costs.json").read_text())  # measured again: this run's seconds replace them
    assert all(seen[costs.stage_key(t, Stage.A)] < 100.0 for t in targets)


def test_node_slots_bound_concurrent_holders():
    inside, most, lock = [0], [0], threading.Lock()

    def hold():
        with node_slot(f"test-{id(inside)}", 2, poll=0.01):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.1)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2
