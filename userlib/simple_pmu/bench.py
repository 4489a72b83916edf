"""What one counter read costs from Python, next to time.perf_counter_ns().

Both are timed in the same run, interleaved, over many calls; each keeps the fastest
of several repeats. The loop itself is timed too (an empty call-free loop) so the
cost of the call alone can be shown, but the ratio compares the two calls as a
program would make them: loop and call included.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from simple_pmu.errors import CounterUnavailable
from simple_pmu.native import native, native_error
from simple_pmu.perf import SelfMonitor, open_event, read_count
from simple_pmu.probe import Report

DEFAULT_CALLS = 1_000_000
DEFAULT_REPEATS = 7
GOAL_RATIO = 1.5


@dataclass(frozen=True)
class BenchResult:
    backend: str | None  # the counter backend read; None: the timer (no counter backend)
    read_name: str  # what was read, e.g. "driver cycles (driver_cycles())"
    read_ns: float  # per call, loop included
    perf_counter_ns: float
    loop_ns: float  # the loop alone, per iteration
    calls: int
    repeats: int

    @property
    def ratio(self) -> float:
        return self.read_ns / self.perf_counter_ns

    def to_dict(self) -> dict[str, object]:
        return {"backend": self.backend, "read": self.read_name, "read_ns": self.read_ns,
                "perf_counter_ns": self.perf_counter_ns, "loop_ns": self.loop_ns,
                "ratio": self.ratio, "goal_ratio": GOAL_RATIO, "calls": self.calls,
                "repeats": self.repeats}


def _per_call(fn: Callable[[], object], calls: int) -> float:
    repeat = itertools.repeat
    clock = time.perf_counter_ns
    t0 = clock()
    for _ in repeat(None, calls):
        fn()
    return (clock() - t0) / calls


def _loop_only(calls: int) -> float:
    repeat = itertools.repeat
    clock = time.perf_counter_ns
    t0 = clock()
    for _ in repeat(None, calls):
        pass
    return (clock() - t0) / calls


def fastest_read(report: Report) -> tuple[str | None, str, Callable[[], object]]:
    """(backend, what, read) of the counter read measure() would use, or of the timer
    read when there is none (backend None). perf events stay open for the process."""
    assert native is not None
    best = report.best("cycles")
    if best is not None and best.name == "driver":
        return best.name, "driver cycles (_native.driver_cycles())", native.driver_cycles
    if best is not None and best.name == "perf-rdpmc":
        monitor = SelfMonitor.open("cycles")
        return best.name, "perf self-monitoring cycles (PerfPage.read())", monitor.read
    if best is not None and best.name == "perf-read":
        fd = open_event("cycles")
        return best.name, "perf read(2) cycles", functools.partial(read_count, fd)
    return None, "timer (_native.tsc(); no counter backend usable)", native.tsc


def bench(report: Report, calls: int = DEFAULT_CALLS,
          repeats: int = DEFAULT_REPEATS) -> BenchResult:
    if native is None:
        raise CounterUnavailable(native_error, "no_native")
    backend, name, read = fastest_read(report)
    perf_counter = time.perf_counter_ns
    read_ns, clock_ns, loop_ns = [], [], []
    for _ in range(repeats):
        read_ns.append(_per_call(read, calls))
        clock_ns.append(_per_call(perf_counter, calls))
        loop_ns.append(_loop_only(calls))
    return BenchResult(backend, name, min(read_ns), min(clock_ns), min(loop_ns), calls,
                       repeats)
