"""CPU frequency by the dependent-XOR method of Willy Tarreau's mhz tool.

A chain of XORs, each needing the one before, retires one per cycle on every core.
Run `count` iterations of a 50-XOR chain and of a 250-XOR chain, keep the fastest of
five runs of each, and the difference, 200 * count XORs, took (t250 - t50):

    MHz = 200 * count / (t250 - t50 in microseconds)

Everything else in the loop (counter, call, clock reads) is the same in both runs and
cancels. count is raised until the 50-XOR run takes at least 20 ms, as mhz does.

Beside it: the timer's rate over the same runs (as mhz's rdtsc_MHz) and, where a cycle
counter works, the cycles the counter saw, as MHz and as cycles per XOR (1.0 when the
counter and the method agree).

clock "wall" is CLOCK_MONOTONIC, as mhz; "cpu" is this thread's CPU time, which does
not count time the thread spent preempted on a busy machine.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simple_pmu._extension import native, native_error
from simple_pmu.errors import CounterUnavailable, UsageError

if TYPE_CHECKING:
    from simple_pmu._measure import Reader

SHORT, LONG = 50, 250
REPEATS = 5
TARGET_NS = 20_000_000  # the 50-XOR run must take this long, like mhz
START_COUNT = 1000
MAX_CALIBRATION_STEPS = 24
CLOCKS: dict[str, Callable[[], int]] = {"wall": time.perf_counter_ns,
                                         "cpu": time.thread_time_ns}


@dataclass(frozen=True)
class MhzRun:
    count: int
    ns_short: int
    ns_long: int
    mhz: float
    timer_mhz: float
    cycles_mhz: float | None = None  # from the cycle counter, where there is one
    cycles_per_xor: float | None = None


@dataclass(frozen=True)
class MhzResult:
    runs: tuple[MhzRun, ...]
    clock: str
    cycle_backend: str | None  # the counter used beside the method, if any
    cycle_reason: str  # why there is none

    @property
    def median_mhz(self) -> float:
        return statistics.median(r.mhz for r in self.runs)

    @property
    def median_timer_mhz(self) -> float:
        return statistics.median(r.timer_mhz for r in self.runs)

    @property
    def median_cycles_mhz(self) -> float | None:
        values = [r.cycles_mhz for r in self.runs if r.cycles_mhz is not None]
        return statistics.median(values) if values else None


@dataclass(frozen=True)
class _Sample:
    ns: int  # by the chosen clock
    wall_ns: int  # CLOCK_MONOTONIC over the same run: the timer's rate is per wall time
    ticks: int
    cycles: int | None


def _fastest(count: int, length: int, clock: Callable[[], int],
             cycles: Callable[[], int] | None,
             delta: Callable[[int, int], int] | None = None,
             generation: Callable[[], int] | None = None) -> _Sample:
    """The fastest of REPEATS runs. With the driver's cycle counter, a run whose CPU
    generation changed (the counter was moved or reloaded) keeps no cycle count."""
    assert native is not None
    xor_loop, tsc, wall = native.xor_loop, native.tsc, time.perf_counter_ns
    best: _Sample | None = None
    for _ in range(REPEATS):
        g0 = generation() if generation else 0
        c0 = cycles() if cycles else 0
        w0 = wall()
        k0 = tsc()
        t0 = clock()
        xor_loop(count, length)
        t1 = clock()
        k1 = tsc()
        w1 = wall()
        c1 = cycles() if cycles else 0
        same = not generation or generation() == g0
        counted = None
        if cycles and same:
            counted = delta(c0, c1) if delta else (c1 - c0) % 2**64
        if best is None or t1 - t0 < best.ns:
            best = _Sample(t1 - t0, w1 - w0, k1 - k0, counted if cycles else None)
    assert best is not None
    return best


def calibrate(clock: Callable[[], int], count: int = START_COUNT) -> int:
    """The count for which the 50-XOR run takes at least TARGET_NS."""
    assert native is not None
    for _ in range(MAX_CALIBRATION_STEPS):
        ns = _fastest(count, SHORT, clock, None).ns
        if ns >= TARGET_NS:
            return count
        # Aim 10% past the target in one step once the run is long enough to time.
        scale = TARGET_NS * 1.1 / ns if ns > 1_000_000 else 2.0
        count = max(count + 1, int(count * scale))
    return count


def run_once(count: int, clock: Callable[[], int],
             cycles: Callable[[], int] | None = None, reader: Reader | None = None) -> MhzRun:
    delta = generation = None
    if reader is not None and cycles is not None:
        delta = functools.partial(reader.delta, "cycles")
        generation = reader.generation

    def fastest(length: int) -> _Sample:
        return _fastest(count, length, clock, cycles, delta, generation)
    short, long = fastest(SHORT), fastest(LONG)
    # As mhz: equal times mean the clock could not tell the runs apart.
    for _ in range(MAX_CALIBRATION_STEPS):
        if long.ns > short.ns:
            break
        count *= 2
        short, long = fastest(SHORT), fastest(LONG)
    diff_ns = long.ns - short.ns
    xors = (LONG - SHORT) * count
    diff_wall = long.wall_ns - short.wall_ns
    timer_mhz = (long.ticks - short.ticks) * 1000 / diff_wall if diff_wall > 0 else 0.0
    run = MhzRun(count, short.ns, long.ns, xors * 1000 / diff_ns, timer_mhz)
    if short.cycles is not None and long.cycles is not None:
        diff_cycles = long.cycles - short.cycles
        run = MhzRun(run.count, run.ns_short, run.ns_long, run.mhz, run.timer_mhz,
                     diff_cycles * 1000 / diff_ns, diff_cycles / xors)
    return run


def measure_mhz(runs: int = 1, clock: str = "cpu", use_cycle_counter: bool = True) -> MhzResult:
    """runs measurements after one calibration; the cycle counter beside if there is one
    (pinned to one CPU while it is read: the driver's counters are per CPU)."""
    if native is None:
        raise CounterUnavailable(native_error, "no_native")  # the XOR loop is in C
    if runs < 1:
        raise UsageError(f"runs must be at least 1, not {runs}")
    read_clock = CLOCKS[clock]
    reader: Reader | None = None
    cycles, backend, reason = None, None, "cycle counter not requested"
    if use_cycle_counter:
        from simple_pmu._measure import _default_reader

        reader = _default_reader()
        cycles, backend, reason = reader.cycles, reader.backend, reader.reason or ""
    count = calibrate(read_clock)
    results = []
    with contextlib.ExitStack() as stack:
        if reader is not None:
            from simple_pmu._measure import PinnedCpu

            stack.enter_context(PinnedCpu(reader))
        for _ in range(runs):
            run = run_once(count, read_clock, cycles, reader)
            count = run.count
            results.append(run)
    return MhzResult(tuple(results), clock, backend, reason if cycles is None else "")
