"""measure(): time always; counters from the best backend, or None with the reason."""

from __future__ import annotations

import os
import time

import pytest


def test_measure_here(simple_pmu):
    report = simple_pmu.probe()
    best = report.best("cycles")
    with simple_pmu.measure() as m:
        time.sleep(0.05)
        simple_pmu.known_loop(1000)
    assert 50_000_000 <= m.time_ns < 2_000_000_000
    if best is None:
        assert m.backend is None
        assert m.cycles is None and m.instructions is None
        assert m.reason.startswith("no counter backend usable: driver: ")
        for name in ("perf-rdpmc", "perf-read"):
            assert f"{name}: {report.get(name).reason}" in m.reason
    else:
        assert m.backend == best.name
        assert m.cycles is not None and m.cycles > 0


def test_known_loop_instructions(simple_pmu):
    """Where instructions can be counted, known_loop costs 2 per iteration (±noise)."""
    best = simple_pmu.probe().best("instructions")
    if best is None:
        pytest.skip("no instructions counter here")

    def insns(n):
        with simple_pmu.measure() as m:
            simple_pmu.known_loop(n)
        return m.instructions
    small = min(insns(1000) for _ in range(5))
    large = min(insns(1_001_000) for _ in range(5))
    assert abs((large - small) - 2_000_000) < 2_000_000 * 0.001


def test_insisting_on_an_unusable_backend(simple_pmu):
    report = simple_pmu.probe()
    for name in ("driver", "perf-rdpmc", "perf-read"):
        backend = report.get(name)
        if backend.usable:
            continue
        with pytest.raises(simple_pmu.CounterUnavailable) as info, \
                simple_pmu.measure(backend=name):
            pass
        assert str(info.value) == f"{name}: {backend.reason}"
    with pytest.raises(ValueError, match="unknown backend 'bogus'"), \
            simple_pmu.measure(backend="bogus"):
        pass


def test_affinity_restored(simple_pmu):
    before = os.sched_getaffinity(0)
    with simple_pmu.measure():
        pass
    assert os.sched_getaffinity(0) == before


def test_counter_wrap():
    """Deltas are modulo the counter's width: 64 bits unless the reader knows better."""
    from simple_pmu.measure import Reader, wrap_delta

    reader = Reader("driver")
    assert reader.delta("cycles", 2**64 - 1000, 500) == 1500
    assert reader.delta("instructions", 10, 25) == 15
    assert reader.delta("instructions", 5, 3) == 2**64 - 2  # went backwards: wrapped
    narrow = Reader("driver", widths={"cycles": 48, "instructions": 32})
    assert narrow.delta("cycles", (1 << 48) - 5, 10) == 15
    assert narrow.delta("instructions", 2**32 - 10, 5) == 15
    assert narrow.delta("instructions", 2**31, 2**31 + 7) == 7
    assert wrap_delta(2**32 - 1, 1, 32) == 2 and wrap_delta(2**32 - 1, 1) == 2**64 - 2**32 + 2


def test_widths_follow_the_counter_index():
    """arm64: 64 bits for PMCCNTR_EL0 (31), the driver's event_width for PMEVCNTR<n>."""
    from simple_pmu.measure import Reader

    reader = Reader("driver", event_width=32)
    assert reader.placed_widths(31, 5) == {"cycles": 64, "instructions": 32}
    assert reader.placed_widths(2, 5) == {"cycles": 32, "instructions": 32}
    assert Reader("driver", event_width=64).placed_widths(2, 5) == {"cycles": 64,
                                                                      "instructions": 64}
    x86 = Reader("driver", widths={"cycles": 48, "instructions": 48})
    assert x86.placed_widths(-1, -1) == {"cycles": 48, "instructions": 48}
