"""measure(): cycles, instructions and time of a block of Python code.

    with simple_pmu.measure() as m:
        work()
    print(m.cycles, m.instructions, m.time_ns)

Backend: the best usable one from probe(), in this order (see probe.py):
  driver      one RDPMC / mrs per counter; the thread is pinned to its CPU inside the
              block, because the driver's counters are per CPU
  perf-rdpmc  perf self-monitoring; perf keeps per-task counts, no pinning
  perf-read   one read(2) per counter
  none        cycles and instructions are None and m.reason says why
time_ns is always CLOCK_MONOTONIC (time.perf_counter_ns) around the block. Counts
include the few hundred instructions of the measurement itself: compare two sizes of
the same work to cancel them (see known_loop).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from simple_pmu.native import native
from simple_pmu.perf import SelfMonitor, open_event, read_count
from simple_pmu.probe import COUNTER_BACKENDS, Report, probe

ARM64_EVENT_COUNTER_BITS = 32  # PMEVCNTR<n> without PMCR.LP


class CounterUnavailable(RuntimeError):
    """The requested counter backend cannot be used here; str() says why."""


@dataclass
class Measurement:
    backend: str | None  # None: no counter backend, only time
    cycles: int | None = None
    instructions: int | None = None
    time_ns: int | None = None  # set when the block exits
    reason: str = ""  # why cycles or instructions are None
    cpu: int | None = None  # the CPU the block was pinned to (driver backend)


@dataclass
class Reader:
    """How one backend reads each counter; None for a counter it lacks."""

    backend: str | None
    cycles: Callable[[], int] | None = None
    instructions: Callable[[], int] | None = None
    pin: bool = False
    reason: str = ""
    widths: dict[str, int] = field(default_factory=dict)  # raw hardware counter widths
    _close: list[Callable[[], None]] = field(default_factory=list)

    def delta(self, counter: str, first: int, second: int) -> int:
        width = self.widths.get(counter)
        if width is None or second >= first:
            return second - first
        return second - first + (1 << width)  # wrapped once

    def close(self) -> None:
        for close in self._close:
            close()
        self._close.clear()


def open_reader(report: Report, backend: str | None = None) -> Reader:
    """A Reader for the named backend, or the best usable one."""
    if backend is None:
        best = report.best("cycles")
        if best is None:
            return Reader(None, reason="no counter backend usable: " + report.unusable_summary())
        backend = best.name
    if backend not in COUNTER_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(COUNTER_BACKENDS)}")
    status = report.get(backend)
    if not status.usable:
        raise CounterUnavailable(f"{backend}: {status.reason}")
    assert native is not None
    missing = "; ".join(status.notes)
    if backend == "driver":
        reader = Reader("driver", native.driver_cycles, pin=True, reason=missing)
        if "instructions" in status.counters:
            reader.instructions = native.driver_instructions
        if native.ARCH == "x86_64" and report.cpu.perfmon:
            width = report.cpu.perfmon.fixed_width
            reader.widths = {"cycles": width, "instructions": width}
        elif native.ARCH == "aarch64":
            reader.widths = {"instructions": ARM64_EVENT_COUNTER_BITS}
        return reader
    reader = Reader(backend, reason=missing)
    for counter in status.counters:
        if backend == "perf-rdpmc":
            monitor = SelfMonitor.open(counter)
            reader._close.append(monitor.close)
            setattr(reader, counter, monitor.page.read)
        else:
            fd = open_event(counter)
            reader._close.append(functools.partial(os.close, fd))
            setattr(reader, counter, functools.partial(read_count, fd))
    return reader


@functools.cache
def _default_report() -> Report:
    return probe()


@functools.cache
def _default_reader() -> Reader:
    return open_reader(_default_report())


@contextmanager
def measure(backend: str | None = None) -> Iterator[Measurement]:
    """Measure the block; see the module docstring for how the backend is chosen.

    backend: "driver", "perf-rdpmc" or "perf-read" to insist on one (CounterUnavailable
    if it cannot be used here); None for the best. The first call probes (~0.5 s).
    """
    reader = _default_reader() if backend is None else open_reader(_default_report(), backend)
    result = Measurement(reader.backend, reason=reader.reason)
    saved = None
    if reader.pin:
        assert native is not None
        saved = os.sched_getaffinity(0)
        result.cpu = native.current_cpu()
        os.sched_setaffinity(0, {result.cpu})
    cycles, instructions = reader.cycles, reader.instructions
    try:
        t0 = time.perf_counter_ns()
        i0 = instructions() if instructions else 0
        c0 = cycles() if cycles else 0
        yield result
        c1 = cycles() if cycles else 0
        i1 = instructions() if instructions else 0
        t1 = time.perf_counter_ns()
    finally:
        if saved is not None:
            os.sched_setaffinity(0, saved)
        if backend is not None:
            reader.close()
    result.time_ns = t1 - t0
    if cycles:
        result.cycles = reader.delta("cycles", c0, c1)
    if instructions:
        result.instructions = reader.delta("instructions", i0, i1)
    elif not result.reason:
        result.reason = "no instructions counter"
