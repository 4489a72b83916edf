"""Counters: raw reads of the counters, for code that takes its own samples.

    with simple_pmu.Counters() as counters:   # this thread, the best perf backend
        a = counters.read()
        work()
        b = counters.read()
    d = b - a                                  # a Delta
    d.cycles, d.instructions, d.time_ns, d.ok, d.reason, d.exact

A Counters opens its own events (or, with scope="cpu", pins the thread to a CPU where
the driver's counters are readable, until close()); it belongs to the thread that made
it, in the process that made it: read() anywhere else is a UsageError, as its events
count that thread only. read() gives a Sample: the raw values with what they mean (the
path they came from, scope, exactness, counter widths, perf's times, the driver's CPU
and generation). Sample - Sample is a Delta: the differences modulo each counter's
width, with the same path and exactness, or the counts None and the reason when the two
samples do not belong together (the driver's counters moved or the CPU changed; perf
never ran the events in between). Samples of two different Counters do not subtract.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from types import TracebackType

from simple_pmu import perf, reasons
from simple_pmu._measure import (
    COUNTER_BITS,
    PinnedCpu,
    Reader,
    _default_report,
    first_read,
    open_reader,
    resolve_scope,
    wrap_delta,
)
from simple_pmu.errors import CounterUnavailable, UsageError
from simple_pmu.reasons import Reason
from simple_pmu.sysinfo import thread_switches


@dataclass(frozen=True)
class Sample:
    """One raw reading of each counter (None: the backend lacks it)."""

    backend: str
    scope: str | None  # "thread" or "cpu"
    exact: bool | None  # see Measurement.exact
    cycles: int | None
    instructions: int | None
    time_ns: int  # time.perf_counter_ns() at the read
    widths: tuple[tuple[str, int], ...]  # (counter, bits): differences are modulo 2^bits
    cpu: int | None = None  # the driver: the CPU read, and its generation
    generation: int | None = None  # read just before the counters
    time_enabled_ns: int | None = None  # perf: the group's times since it was opened
    time_running_ns: int | None = None
    source: int = 0  # which Counters took it (id): only samples of one subtract
    generation_after: int | None = None  # the driver: read just after the counters
    user_reads: tuple[int, int] = (0, 0)  # perf.user_reads_token() at the read
    # The driver: this thread's context switches just before and just after the reads
    # (sysinfo.thread_switches); None elsewhere.
    switches: tuple[int, int] | None = None

    def width(self, counter: str) -> int:
        return dict(self.widths).get(counter, COUNTER_BITS)

    def __sub__(self, earlier: Sample) -> Delta:
        if not isinstance(earlier, Sample):
            return NotImplemented
        if earlier.source != self.source:
            raise UsageError(reasons.SAMPLES_UNRELATED.format())
        reason: Reason | None = None
        # The generation before the earlier sample's reads against the one after the
        # later sample's: any move between the two reads changed it.
        after = self.generation if self.generation_after is None else self.generation_after
        if (earlier.cpu, earlier.generation) != (self.cpu, after):
            reason = reasons.SAMPLES_MOVED.format(
                before=f"cpu {earlier.cpu} generation {earlier.generation}",
                after=f"cpu {self.cpu} generation {after}")
        enabled = running = None
        ratio = None
        if self.time_enabled_ns is not None and earlier.time_enabled_ns is not None:
            enabled = self.time_enabled_ns - earlier.time_enabled_ns
            running = (self.time_running_ns or 0) - (earlier.time_running_ns or 0)
            ratio = running / enabled if enabled > 0 else None
            if running <= 0 and reason is None:
                reason = reasons.PERF_NOT_SCHEDULED.format(enabled=enabled)

        def diff(name: str, a: int | None, b: int | None) -> int | None:
            if reason is not None or a is None or b is None:
                return None
            return wrap_delta(a, b, self.width(name))

        exact = self.exact
        if ratio is not None and ratio < 1.0:
            exact = False  # multiplexed: the counts cover only the time on the PMU
        if self.backend == "driver" and exact and perf.user_reads_between(
                earlier.user_reads, self.user_reads):
            exact = False  # see PERF_USER_READS_ADVISORY
        if (exact and self.switches is not None and earlier.switches is not None
                and earlier.switches[0] != self.switches[1]):
            exact = False  # switched out: other tasks' work is in the CPU's counts
        cycles = diff("cycles", earlier.cycles, self.cycles)
        instructions = diff("instructions", earlier.instructions, self.instructions)
        if reason is None and instructions is None:
            reason = reasons.NO_INSN_COUNTER.format()
        return Delta(self.backend, self.scope, exact, cycles, instructions,
                     self.time_ns - earlier.time_ns, enabled, running, ratio, reason)


@dataclass(frozen=True)
class Delta:
    """What happened between two Samples of one Counters (later - earlier)."""

    backend: str
    scope: str | None
    exact: bool | None
    cycles: int | None  # None: see reason
    instructions: int | None
    time_ns: int
    time_enabled_ns: int | None = None
    time_running_ns: int | None = None
    running_ratio: float | None = None  # below 1.0: multiplexed, counts unscaled
    reason: Reason | None = None  # why a count is None

    @property
    def ok(self) -> bool:
        return self.reason is None and self.cycles is not None and self.instructions is not None


class Counters:
    """The counters of the best usable backend of scope (default "thread"), or of the
    one named, opened for raw reads by this thread; CounterUnavailable (with the
    reasons) where there is none. Close it (or use it as a context manager)."""

    def __init__(self, backend: str | None = None, *, scope: str | None = None) -> None:
        reader = open_reader(_default_report(resolve_scope(backend, scope)), backend, scope)
        if reader.backend is None:
            why = reader.reason or reasons.NO_COUNTER_BACKEND.format(
                scope=reader.scope, summary="")
            raise CounterUnavailable(why, why.code, (why,))
        self._reader: Reader | None = reader
        self.backend: str = reader.backend
        self._thread = threading.get_ident()
        self._pid = os.getpid()
        self._pinned = PinnedCpu(reader)
        try:
            self._pinned.__enter__()
        except BaseException:
            reader.close()
            raise

    def read(self) -> Sample:
        reader = self._usable()
        driver = reader.backend == "driver"
        switches = thread_switches() if driver else 0
        generation = reader.generation() if reader.generation is not None else None
        group0 = None
        if reader.group is not None and reader.backend == "perf-read":
            group0 = reader.group.read()
            cycles = group0.counts.get("cycles")
            instructions = group0.counts.get("instructions")
        else:
            if reader.group is not None:
                group0 = reader.group.read()
            i, c = first_read(reader)
            cycles = c if reader.cycles else None
            instructions = i if reader.instructions else None
        after = reader.generation() if reader.generation is not None else None
        switched = (switches, thread_switches()) if driver else None
        return Sample(
            reader.backend or "", reader.scope, reader.exact, cycles, instructions,
            time.perf_counter_ns(), tuple(sorted(reader.widths.items())),
            self._pinned.cpu, generation,
            None if group0 is None else group0.time_enabled,
            None if group0 is None else group0.time_running, id(self), after,
            perf.user_reads_token(), switched)

    def _usable(self) -> Reader:
        if self._reader is None:
            raise UsageError(reasons.COUNTERS_CLOSED.format())
        if os.getpid() != self._pid or threading.get_ident() != self._thread:
            raise UsageError(reasons.COUNTERS_OTHER_THREAD.format(backend=self.backend))
        return self._reader

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is None:
            return
        if os.getpid() == self._pid and threading.get_ident() == self._thread:
            self._pinned.__exit__()  # the affinity is this thread's to restore
        reader.close()

    def __enter__(self) -> Counters:
        return self

    def __exit__(self, typ: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["Counters", "Delta", "Sample"]
