"""What one counter read costs from Python, next to time.perf_counter_ns().

Both are timed in the same run, interleaved, over many calls; each keeps the fastest
of several repeats. The loop itself is timed too (an empty call-free loop) so the
cost of the call alone can be shown, but the ratio compares the two calls as a
program would make them: loop and call included.

Beside them, every Python read path (simple_pmu's counter read, a read inside a Window
of each scope (cycles.h's window read: the bare instruction plus the call), its timer
read, time.perf_counter_ns(), time.monotonic_ns()) is timed in the same repeats, and
each gets the median and spread of its repeats and the ratio of its median to the
fastest path's (`paths`); a path that cannot run says why.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from simple_pmu._extension import native, native_error
from simple_pmu._probe import Report
from simple_pmu.errors import CounterUnavailable
from simple_pmu.perf import SelfMonitor, open_event, read_count
from simple_pmu.window import Window

DEFAULT_CALLS = 1_000_000
DEFAULT_REPEATS = 7
GOAL_RATIO = 1.5


@dataclass(frozen=True)
class PathStats:
    """One read path: ns per call (loop included) of each repeat, or why it cannot run."""

    name: str
    what: str
    samples: tuple[float, ...] = ()
    reason: str | None = None  # None: it ran
    ratio: float | None = None  # median / the fastest path's median

    @property
    def available(self) -> bool:
        return self.reason is None

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def quartiles(self) -> tuple[float, float] | None:
        """(Q1, Q3) of the samples (inclusive method: defined from one sample up)."""
        if not self.samples:
            return None
        if len(self.samples) == 1:
            return self.samples[0], self.samples[0]
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]

    def to_dict(self) -> dict[str, object]:
        if not self.available:
            return {"name": self.name, "what": self.what, "available": False,
                    "reason": self.reason}
        q = self.quartiles()
        assert q is not None
        return {"name": self.name, "what": self.what, "available": True,
                "median_ns": self.median, "min_ns": min(self.samples),
                "max_ns": max(self.samples), "q1_ns": q[0], "q3_ns": q[1],
                "ratio": self.ratio, "samples_ns": list(self.samples)}


def with_ratios(paths: Sequence[PathStats]) -> list[PathStats]:
    """The paths with `ratio` set: each available one's median over the smallest median."""
    medians = [p.median for p in paths if p.median is not None]
    fastest = min(medians) if medians else None
    out = []
    for p in paths:
        m = p.median
        ratio = m / fastest if m is not None and fastest else None
        out.append(PathStats(p.name, p.what, p.samples, p.reason, ratio))
    return out


@dataclass(frozen=True)
class BenchResult:
    backend: str | None  # the counter backend read; None: the timer (no counter backend)
    read_name: str  # what was read, e.g. "driver cycles (driver_cycles())"
    read_ns: float  # per call, loop included
    perf_counter_ns: float
    loop_ns: float  # the loop alone, per iteration
    calls: int
    repeats: int
    paths: tuple[PathStats, ...] = field(default=())

    @property
    def ratio(self) -> float:
        return self.read_ns / self.perf_counter_ns

    def to_dict(self) -> dict[str, object]:
        return {"backend": self.backend, "read": self.read_name, "read_ns": self.read_ns,
                "perf_counter_ns": self.perf_counter_ns, "loop_ns": self.loop_ns,
                "ratio": self.ratio, "goal_ratio": GOAL_RATIO, "calls": self.calls,
                "repeats": self.repeats, "paths": [p.to_dict() for p in self.paths]}


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
    """(backend, what, read) of the cheapest counter read here: the module's (scope cpu,
    one instruction) when usable, else perf's (what measure() uses by default), else the
    timer's (backend None). perf events stay open for the process."""
    assert native is not None
    best = report.best("cycles", "cpu") or report.best("cycles", "thread")
    if best is not None and best.name == "driver":
        return best.name, "driver cycles (_native.driver_cycles())", native.driver_cycles
    if best is not None and best.name == "perf-rdpmc":
        monitor = SelfMonitor.open("cycles")
        return best.name, "perf self-monitoring cycles (PerfPage.read())", monitor.read
    if best is not None and best.name == "perf-read":
        fd = open_event("cycles")
        return best.name, "perf read(2) cycles", functools.partial(read_count, fd)
    return None, "timer (_native.tsc(); no counter backend usable)", native.tsc


def python_paths(report: Report, backend: str | None, name: str, read: Callable[[], object]
                 ) -> list[tuple[str, str, Callable[[], object] | None, str | None]]:
    """(name, what, call or None, reason it cannot run or None) of every Python read path;
    `backend`, `name`, `read`: what fastest_read() chose."""
    assert native is not None
    counter: tuple[str, str, Callable[[], object] | None, str | None]
    if backend is None:
        counter = ("simple_pmu.read", "simple_pmu counter read", None,
                   str(report.no_backend()))
    else:
        counter = ("simple_pmu.read", f"simple_pmu {name}", read, None)
    windows = [window_path(scope, backend) for scope in ("thread", "cpu")]
    return [counter, *windows,
            ("simple_pmu.timer", "simple_pmu timer read (_native.tsc())", native.tsc, None),
            ("time.perf_counter_ns", "time.perf_counter_ns()", time.perf_counter_ns, None),
            ("time.monotonic_ns", "time.monotonic_ns()", time.monotonic_ns, None)]


def window_path(scope: str, backend: str | None
                ) -> tuple[str, str, Callable[[], object] | None, str | None]:
    """A read inside an open Window of scope (left open for the process: only the read's
    cost is measured; the window's validity does not change it), or why none begins."""
    assert native is not None
    name, what = f"Window({scope}).cycles", f"simple_pmu.Window(scope={scope!r}).cycles()"
    if scope == "thread" and backend == "driver" and native.ARCH == "aarch64":
        # A thread window's perf events would close the module's EL0 access on this CPU
        # (perf clears PMUSERENR when it starts them) while the module's read is timed.
        return name, what, None, ("not beside the module's read on arm64: its perf "
                                  "events would close the module's user access")
    try:
        window = Window(scope).begin()
    except CounterUnavailable as exc:
        return name, what, None, str(exc)
    return name, what, window.cycles, None


def bench(report: Report, calls: int = DEFAULT_CALLS,
          repeats: int = DEFAULT_REPEATS) -> BenchResult:
    if native is None:
        raise CounterUnavailable(native_error, "no_native")
    backend, name, read = fastest_read(report)
    perf_counter = time.perf_counter_ns
    read_ns, clock_ns, loop_ns = [], [], []
    others = python_paths(report, backend, name, read)
    samples: dict[str, list[float]] = {n: [] for n, _, _, _ in others}
    for _ in range(repeats):
        read_ns.append(_per_call(read, calls))
        clock_ns.append(_per_call(perf_counter, calls))
        loop_ns.append(_loop_only(calls))
        for path, _, call, _ in others:
            if call is not None:
                samples[path].append(_per_call(call, calls))
    paths = with_ratios([PathStats(n, what, tuple(samples[n]), why)
                         for n, what, _, why in others])
    return BenchResult(backend, name, min(read_ns), min(clock_ns), min(loop_ns), calls,
                       repeats, tuple(paths))


def paths_table(paths: Sequence[PathStats], unit: str = "ns") -> list[str]:
    """The paths as text: median, min..max and IQR per read, ratio to the fastest; then
    each path that could not run, with why."""
    name_w = max([len(p.name) for p in paths] + [4])
    lines = [f"{'path':<{name_w}}  {'median':>9}  {'min':>9}  {'max':>9}  "
             f"{'IQR':>8}  {'ratio':>6}"]
    for p in paths:
        q = p.quartiles()
        if p.median is None or q is None:
            continue
        lines.append(f"{p.name:<{name_w}}  {p.median:9.2f}  {min(p.samples):9.2f}  "
                     f"{max(p.samples):9.2f}  {q[1] - q[0]:8.2f}  {p.ratio or 0:6.2f}")
    lines.append(f"({unit} per read; ratio: median over the fastest median)")
    lines += [f"unavailable: {p.name}: {p.reason}" for p in paths if not p.available]
    return lines
