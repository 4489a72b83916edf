"""The time-stamp counter (x86 TSC) / generic timer (arm64 CNTVCT_EL0) and its rate."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from simple_pmu._extension import native, native_error
from simple_pmu.errors import CounterUnavailable

CALIBRATION_S = 0.05
BRACKET_TRIES = 7


@dataclass(frozen=True)
class TimerFrequency:
    hz: int
    source: str  # where the value comes from

    @property
    def mhz(self) -> float:
        return self.hz / 1e6


def _stated_source() -> str:
    assert native is not None
    if native.ARCH == "aarch64":
        return "CNTFRQ_EL0"
    return "CPUID leaf 0x15 or hypervisor leaf 0x40000010"


def _bracketed_sample() -> tuple[float, int]:
    """(CLOCK_MONOTONIC ns, ticks) taken as close together as this machine allows."""
    assert native is not None
    tsc = native.tsc
    clock = time.perf_counter_ns
    best: tuple[int, float, int] | None = None
    for _ in range(BRACKET_TRIES):
        before = clock()
        ticks = tsc()
        after = clock()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) / 2, ticks)
    assert best is not None
    return best[1], best[2]


def estimate_frequency(seconds: float = CALIBRATION_S) -> int:
    """Ticks per second measured against CLOCK_MONOTONIC over the given time."""
    t0, c0 = _bracketed_sample()
    time.sleep(seconds)
    t1, c1 = _bracketed_sample()
    return round((c1 - c0) * 1e9 / (t1 - t0))


@functools.cache
def timer_frequency() -> TimerFrequency:
    """The rate the hardware states, else one measured once per process."""
    if native is None:
        raise CounterUnavailable(native_error, "no_native")
    stated = native.timer_frequency()
    if stated:
        return TimerFrequency(stated, _stated_source())
    return TimerFrequency(estimate_frequency(),
                          f"estimated against CLOCK_MONOTONIC over {CALIBRATION_S * 1000:g} ms")
