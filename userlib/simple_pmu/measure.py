"""measure(): cycles, instructions and time of a block of Python code.

    with simple_pmu.measure() as m:
        work()
    print(m.cycles, m.instructions, m.time_ns)

Backend: the best usable one from probe(), in this order (see probe.py):
  driver      one RDPMC / mrs per counter; the thread is pinned inside the block, because
              the driver's counters are per CPU: to its CPU if probe() verified reads
              there, else to the first CPU where it did. The CPU's generation (sysfs
              cpuN/generation) is read before the first read and after the last, outside
              the measured span; if it changed (perf moved or reloaded a counter, the CPU
              was replugged, the settings changed) the counts are None and m.reason says
              so: measure again. Deltas are taken modulo the counter's width: 64 bits for
              PMCCNTR_EL0 (index 31), the driver's event_width for an event counter
  perf-rdpmc  perf self-monitoring; perf keeps per-task counts, no pinning
  perf-read   one read(2) per counter
  none        cycles and instructions are None and m.reason says why
With the driver, a read that faults (arm64: perf used the PMU on this CPU less than
2 * recheck_ms ago) raises no signal: the extension turns it into CounterFault. At the
start of the block measure() then retries for up to 2 * recheck_ms + 0.1 s (then raises
CounterUnavailable); at its end it leaves the counts None and says why in m.reason.
If the module was unloaded since the probe, the default measure() probes again.
time_ns is always CLOCK_MONOTONIC (time.perf_counter_ns) around the block. Counts
include the few hundred instructions of the measurement itself: compare two sizes of
the same work to cancel them (see known_loop).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from simple_pmu import reasons, sysinfo
from simple_pmu.native import native
from simple_pmu.perf import SelfMonitor, open_event, read_count
from simple_pmu.probe import (
    COUNTER_BACKENDS,
    DEFAULT_RECHECK_MS,
    RETRY_MARGIN_S,
    RETRY_PAUSE_S,
    Report,
    probe,
)
from simple_pmu.sysinfo import counter_width, read_int

COUNTER_BITS = 64  # what a counter value is read as: deltas are modulo this at most
# What a guarded driver read raises where user access is off (the extension's exception).
CounterFault: type[OSError] = native.CounterFault if native is not None else OSError


_T = TypeVar("_T")


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
    generation: int | None = None  # driver: the CPU's generation the counts belong to


def wrap_delta(first: int, second: int, width: int = COUNTER_BITS) -> int:
    """second - first for a counter width bits wide that may have wrapped (once)."""
    return (second - first) % (1 << width)


@dataclass
class Reader:
    """How one backend reads each counter; None for a counter it lacks."""

    backend: str | None
    cycles: Callable[[], int] | None = None
    instructions: Callable[[], int] | None = None
    pin: bool = False
    reason: str = ""
    widths: dict[str, int] = field(default_factory=dict)  # counter widths; 64 if absent
    cpus: tuple[int, ...] = ()  # pin: CPUs where probe() verified reads (empty: any)
    retry_s: float = 0.0  # how long a faulting first read is retried
    event_width: int | None = None  # arm64 driver: sysfs event_width
    generation: Callable[[], int] | None = None  # driver: this CPU's generation
    _close: list[Callable[[], None]] = field(default_factory=list)

    def delta(self, counter: str, first: int, second: int) -> int:
        """second - first modulo the counter's width (64 bits unless widths says)."""
        return wrap_delta(first, second, self.widths.get(counter, COUNTER_BITS))

    def placed_widths(self, cycle_index: int, insn_index: int) -> dict[str, int]:
        """arm64 driver: the widths of the counters at these indices (cpuN/cycle_index,
        the INST_RETIRED entry of cpuN/event_index); self.widths elsewhere."""
        if self.event_width is None:
            return self.widths
        return {"cycles": counter_width(cycle_index, self.event_width),
                "instructions": counter_width(insn_index, self.event_width)}

    def use_this_cpu(self) -> None:
        """arm64 driver, pinned: take the widths of the counters this CPU reads."""
        if self.event_width is not None and native is not None:
            _cpu, cycle, insn = native.driver_indices()
            self.widths = self.placed_widths(cycle, insn)

    def target_cpu(self) -> int:
        """The CPU to pin to: the current one if verified, else the first verified."""
        assert native is not None
        current: int = native.current_cpu()
        if not self.cpus or current in self.cpus:
            return current
        allowed = os.sched_getaffinity(0)
        return next((c for c in self.cpus if c in allowed), self.cpus[0])

    def stale(self) -> bool:
        """The driver's module was unloaded since the probe."""
        return self.backend == "driver" and not sysinfo.SYSFS_DIR.is_dir()

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
    # Only notes about a missing counter explain a None count (not e.g. a wait in probe).
    missing = "; ".join(n for n in status.notes if n.startswith("no instructions"))
    if backend == "driver":
        recheck = status.facts.get("recheck_ms", DEFAULT_RECHECK_MS)
        recheck_ms = recheck if isinstance(recheck, int) else DEFAULT_RECHECK_MS
        reader = Reader("driver", native.driver_cycles, pin=True, reason=missing,
                        cpus=status.cpus, retry_s=2 * recheck_ms / 1000 + RETRY_MARGIN_S,
                        generation=native.driver_generation)
        if "instructions" in status.counters:
            reader.instructions = native.driver_instructions
        if native.ARCH == "x86_64" and report.cpu.perfmon:
            width = report.cpu.perfmon.fixed_width
            reader.widths = {"cycles": width, "instructions": width}
        elif native.ARCH == "aarch64":
            if not sysinfo.SYSFS_DIR.is_dir():  # unloaded since the probe
                problem = reasons.DRIVER_NOT_LOADED.format(path=sysinfo.SYSFS_DIR)
                raise CounterUnavailable(f"driver: {problem}")
            # Per CPU: 64 for PMCCNTR_EL0, else what the driver says its counters are.
            path = sysinfo.SYSFS_DIR / "event_width"
            width = read_int(path)
            if width not in (32, 64):
                problem = reasons.DRIVER_MALFORMED.format(path=path, value=width)
                raise CounterUnavailable(f"driver: {problem}")
            reader.event_width = width
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


_cache: dict[str, object] = {}


def _default_report() -> Report:
    report = _cache.get("report")
    if not isinstance(report, Report):
        report = _cache["report"] = probe()
    return report


def _driver_gone(report: Report) -> bool:
    """The report would pick the driver, but its module was unloaded since."""
    best = report.best("cycles")
    return best is not None and best.name == "driver" and not sysinfo.SYSFS_DIR.is_dir()


def _default_reader() -> Reader:
    reader = _cache.get("reader")
    # The module went away since the probe (cached reader or report): probe again.
    if isinstance(reader, Reader) and reader.stale() or _driver_gone(_default_report()):
        forget()
        reader = None
    if not isinstance(reader, Reader):
        reader = _cache["reader"] = open_reader(_default_report())
    return reader


def forget() -> None:
    """Drop the cached probe and reader: the next measure() probes again."""
    reader = _cache.pop("reader", None)
    if isinstance(reader, Reader):
        reader.close()
    _cache.pop("report", None)


class PinnedCpu:
    """Pin the thread to reader.target_cpu() (when reader.pin) and restore afterwards."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.saved: set[int] | None = None
        self.cpu: int | None = None

    def __enter__(self) -> PinnedCpu:
        if self.reader.pin:
            if native is not None:
                native.guard()  # a faulting read raises CounterFault, even if replaced
            self.saved = os.sched_getaffinity(0)
            self.cpu = self.reader.target_cpu()
            os.sched_setaffinity(0, {self.cpu})
            self.reader.use_this_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved is not None:
            os.sched_setaffinity(0, self.saved)
            self.saved = None


def _retrying(reader: Reader, call: Callable[[], _T]) -> _T:
    """call() once reads work: a CounterFault is retried for reader.retry_s."""
    deadline = time.monotonic() + reader.retry_s
    while True:
        try:
            return call()
        except CounterFault as exc:
            if time.monotonic() >= deadline:
                raise CounterUnavailable(f"{reader.backend}: {exc}") from None
            time.sleep(RETRY_PAUSE_S)


def first_read(reader: Reader) -> tuple[int, int]:
    """(instructions, cycles) once reads work (see _retrying)."""
    def read() -> tuple[int, int]:
        i0 = reader.instructions() if reader.instructions else 0
        c0 = reader.cycles() if reader.cycles else 0
        return i0, c0
    return _retrying(reader, read)


class measure:  # noqa: N801 - used as a function: with measure() as m
    """Measure the block; see the module docstring for how the backend is chosen.

    backend: "driver", "perf-rdpmc" or "perf-read" to insist on one (CounterUnavailable
    if it cannot be used here); None for the best. The first call probes (~0.5 s; up to
    2 * recheck_ms more with the module loaded, see probe.py).

    A class, not a generator: the last reads are the first thing __exit__ does, so the
    code between the first and the last read is the same every time (exact counts).
    """

    def __init__(self, backend: str | None = None) -> None:
        self.backend = backend
        self.reader: Reader | None = None

    def __enter__(self) -> Measurement:
        backend = self.backend
        if backend is None:
            reader = _default_reader()
        else:
            report = _default_report()
            if backend == "driver" and not sysinfo.SYSFS_DIR.is_dir():
                forget()
                report = _default_report()
            reader = open_reader(report, backend)
        self.reader = reader
        self.result = result = Measurement(reader.backend, reason=reader.reason)
        # The driver: all four reads in C, no Python object made between first and last.
        self.span = span = (native.DriverSpan(reader.instructions is not None)
                            if reader.backend == "driver" and native is not None else None)
        self.pinned = PinnedCpu(reader)
        self.i0 = self.c0 = 0
        try:
            result.cpu = self.pinned.__enter__().cpu
            if span is None:
                self.t0 = time.perf_counter_ns()
                self.i0, self.c0 = first_read(reader)
                return result
            self.t0 = time.perf_counter_ns()
            try:
                span.start()  # the last thing before the block
            except CounterFault:
                _retrying(reader, span.start)
        except BaseException:
            self._close()
            raise
        return result

    def __exit__(self, typ: object, value: object, tb: object) -> None:
        # Named parameters: *args would allocate a tuple before the reads.
        span = self.span
        if span is not None:
            try:
                span.stop()
            except CounterFault as err:
                self._finish(str(err), 0, 0)
                return
            self._finish("", 0, 0)
            return
        self._exit_python_reads()

    def _exit_python_reads(self) -> None:
        reader = self.reader
        assert reader is not None
        fault = ""
        c1 = i1 = 0
        try:
            c1 = reader.cycles() if reader.cycles else 0
            i1 = reader.instructions() if reader.instructions else 0
        except CounterFault as err:  # access withdrawn during the block
            fault = str(err)
        self._finish(fault, c1, i1)

    def _finish(self, fault: str, c1: int, i1: int) -> None:
        span, reader, result = self.span, self.reader, self.result
        assert reader is not None
        t1 = time.perf_counter_ns()
        self._close()
        result.time_ns = t1 - self.t0
        if fault:
            result.reason = fault
            return
        c0, i0 = self.c0, self.i0
        widths = reader.widths
        if span is not None:
            c0, c1, i0, i1 = span.values()
            info = span.info()
            before, after = info["generation_before"], info["generation_after"]
            if before != after:
                result.reason = reasons.MEASURE_GENERATION_CHANGED.format(
                    cpu=info["cpu"], before=before, after=after)
                return
            result.generation = after or None
            widths = reader.placed_widths(info["cycle_index"], info["insn_index"])
        if reader.cycles:
            result.cycles = wrap_delta(c0, c1, widths.get("cycles", COUNTER_BITS))
        if reader.instructions:
            result.instructions = wrap_delta(i0, i1, widths.get("instructions", COUNTER_BITS))
        elif not result.reason:
            result.reason = "no instructions counter"

    def _close(self) -> None:
        self.pinned.__exit__()
        if self.backend is not None and self.reader is not None:
            self.reader.close()
