"""GPU kernel time from profiler events, and call-level time, with the L2 cache flushed before every
repetition.

Kernel time (`gpu_time`): each repetition runs `flush()` (a write of a buffer larger than L2) and
then the function under test; the profiler (CUPTI through torch.profiler) records every kernel, and
a repetition's time is the sum of the device durations of its kernels, so host launch cost and gaps
never count.

Call time (`call_time`): what a caller waits for one call, host included. Each repetition flushes
L2, drains the queue (synchronize), records a CUDA event, calls the function and records another:
the GPU is idle when the first event is recorded, so the interval spans the host's launch work and
every kernel (do_bench-style events, without letting the flush hide the host cost).

Side by side (`gpu_times`, `call_times`): the repetitions of several functions interleave within one
measurement, so that a drift of clocks or temperature over the measurement falls on every function alike,
in an order where every function follows every function (itself included) equally often (`balanced_order`),
so that what one function leaves behind that the flush does not undo (a GEMM heats the GPU; some kernels'
L2 lines outlast the flush) falls on every function alike too, and their ratios compare like with like.
The order A B C C B A A B C .. it replaces had the middle function alone follow the last one.

Warm-up and the number of repetitions follow a time budget; results are medians with their spread.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

L2_FLUSH_BYTES = 256 << 20


@dataclass
class Timing:
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    reps: int
    kernels_per_rep: int

    def to_dict(self) -> dict:
        return asdict(self)


class TimingError(RuntimeError):
    pass


def _torch():
    import torch
    return torch


def make_flush(device) -> Callable[[], None]:
    buf = _torch().empty(L2_FLUSH_BYTES, dtype=_torch().int8, device=device)
    return buf.zero_


def _cuda_kernels(prof) -> list[tuple[str, int, int]]:
    """(name, start ns, duration ns) of every GPU activity the profiler saw, in start order."""
    torch = _torch()
    events = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA:
            events.append((e.name(), e.start_ns(), e.duration_ns()))
    return sorted(events, key=lambda x: x[1])


def _profile(fns: list[Callable[[], None]], flush: Callable[[], None] | None) -> list[list[tuple]]:
    """The GPU activity of running `fns` in order, each after `flush`."""
    torch = _torch()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for fn in fns:
            if flush is not None:
                flush()
            fn()
        torch.cuda.synchronize()
    return _cuda_kernels(prof)


_FLUSH_NAMES: dict = {}


def flush_kernel_name(flush: Callable[[], None]) -> str:
    key = id(flush)
    if key not in _FLUSH_NAMES:
        events = _profile([lambda: None], flush)
        if len(events) != 1:
            raise TimingError(f"the L2 flush should be one kernel, the profiler saw {len(events)}")
        _FLUSH_NAMES[key] = events[0][0]
    return _FLUSH_NAMES[key]


def gpu_time(fn: Callable[[], None], flush: Callable[[], None], *, budget_s: float = 0.3,
             min_reps: int = 10, max_reps: int = 500, warmup_s: float = 0.05) -> Timing:
    """Median GPU time of `fn` (all its kernels) over repetitions, each after an L2 flush."""
    return gpu_times({"fn": fn}, flush, budget_s=budget_s, min_reps=min_reps, max_reps=max_reps,
                     warmup_s=warmup_s)["fn"]


def gpu_times(fns: dict[str, Callable[[], None]], flush: Callable[[], None], *, budget_s: float = 0.3,
              min_reps: int = 10, max_reps: int = 500, warmup_s: float = 0.05) -> dict[str, Timing]:
    """Median GPU time of each function, their repetitions interleaved in one profiler session
    (`balanced_order`), each after an L2 flush; `budget_s` is each function's share."""
    flush_name = flush_kernel_name(flush)
    reps = min(_reps_for(fn, flush, budget_s, min_reps, max_reps, warmup_s) for fn in fns.values())
    order = balanced_order(list(fns), reps)
    events = _profile([fns[name] for name in order], flush)
    return {name: _summarize(times, kernels) for name, (times, kernels) in
            split_repetitions(events, flush_name, order).items()}


def balanced_order(names: list[str], reps: int) -> list[str]:
    """At least `reps` repetitions of every name (rounded up to whole cycles), as a repeated cycle in which
    every ordered pair of names, (a, a) included, is adjacent exactly once (a de Bruijn sequence of order 2:
    per name i, i itself, then i j for each later name j; for A B C: A A B A C B B C C, then A again)."""
    cycle: list[str] = []
    for i, name in enumerate(names):
        cycle.append(name)
        for later in names[i + 1:]:
            cycle += [name, later]
    per_cycle = max(len(names), 1)
    return cycle * -(-reps // per_cycle)


def split_repetitions(events: list[tuple], flush_name: str, order: list[str]) -> dict[str, tuple[list[float], int]]:
    """{name: (its repetitions' times in µs, most kernels in one repetition)} from the profiler's events
    (name, start ns, duration ns): the flush kernel opens each repetition, `order` names whose it is, and a
    repetition's time is the sum of its kernels' durations."""
    groups: list[list[int]] = []
    for name, _start, dur in events:
        if name == flush_name:
            groups.append([])
        elif groups:
            groups[-1].append(dur)
    if len(groups) != len(order) or any(not g for g in groups):
        raise TimingError(f"expected {len(order)} repetitions with kernels, the profiler saw {len(groups)} "
                          f"(empty: {sum(1 for g in groups if not g)})")
    found: dict[str, tuple[list[float], int]] = {}
    for name, g in zip(order, groups):
        times, kernels = found.setdefault(name, ([], 0))
        times.append(sum(g) / 1e3)
        found[name] = (times, max(kernels, len(g)))
    return found


def _reps_for(fn: Callable[[], None], flush: Callable[[], None], budget_s: float, min_reps: int, max_reps: int,
              warmup_s: float) -> int:
    """Warm `fn` up (first call: JIT compilation, allocations) and size the repetitions to the budget."""
    torch = _torch()
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < warmup_s or n < 3:
        flush()
        fn()
        torch.cuda.synchronize()
        n += 1
    per_call = (time.perf_counter() - t0) / n
    return int(min(max_reps, max(min_reps, budget_s / max(per_call, 1e-6))))


def _summarize(times: list[float], kernels: int) -> Timing:
    times = sorted(times)
    q = statistics.quantiles(times, n=10) if len(times) >= 10 else [times[0]] * 9
    return Timing(statistics.median(times), q[0], q[-1], times[0], len(times), kernels)


def call_time(fn: Callable[[], None], flush: Callable[[], None], *, budget_s: float = 0.3,
              min_reps: int = 10, max_reps: int = 500, warmup_s: float = 0.05) -> Timing:
    """Median call-level time of `fn` (host launch work + its kernels), each call after an L2 flush
    and a drained queue (see the module docstring). `kernels_per_rep` is 0: events do not count."""
    return call_times({"fn": fn}, flush, budget_s=budget_s, min_reps=min_reps, max_reps=max_reps,
                      warmup_s=warmup_s)["fn"]


def call_times(fns: dict[str, Callable[[], None]], flush: Callable[[], None], *, budget_s: float = 0.3,
               min_reps: int = 10, max_reps: int = 500, warmup_s: float = 0.05) -> dict[str, Timing]:
    """`call_time` of each function, their repetitions interleaved (`balanced_order`)."""
    torch = _torch()
    reps = min(_reps_for(fn, flush, budget_s, min_reps, max_reps, warmup_s) for fn in fns.values())
    order = balanced_order(list(fns), reps)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in order]
    for name, (start, end) in zip(order, events):
        flush()
        torch.cuda.synchronize()
        start.record()
        fns[name]()
        end.record()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for name, (start, end) in zip(order, events):
        times[name].append(start.elapsed_time(end) * 1e3)
    return {name: _summarize(t, 0) for name, t in times.items()}


def host_overhead_us(fn: Callable[[], None], calls: int = 2000) -> float:
    """Host time per call of an asynchronous launch (the GPU work is tiny and overlaps)."""
    torch = _torch()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed / calls * 1e6
