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
    assert m.time_ns >= 50_000_000  # at least the sleep (no upper bound: a busy machine)
    if best is None:
        assert m.backend is None
        assert m.cycles is None and m.instructions is None
        assert m.reason.startswith("no counter backend usable for scope thread: perf-rdpmc: ")
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
    from simple_pmu._measure import Reader, wrap_delta

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
    from simple_pmu._measure import Reader

    reader = Reader("driver", event_width=32)
    assert reader.placed_widths(31, 5) == {"cycles": 64, "instructions": 32}
    assert reader.placed_widths(2, 5) == {"cycles": 32, "instructions": 32}
    assert Reader("driver", event_width=64).placed_widths(2, 5) == {"cycles": 64,
                                                                      "instructions": 64}
    x86 = Reader("driver", widths={"cycles": 48, "instructions": 48})
    assert x86.placed_widths(-1, -1) == {"cycles": 48, "instructions": 48}


@pytest.mark.parametrize("width", [32, 40, 48, 64])
def test_wrap_delta_every_width(width):
    """For each width: plain, across the wrap, a full period minus one, bits above the
    width ignored (a sign-extended raw read), and never negative."""
    from simple_pmu._measure import wrap_delta

    top = 1 << width
    assert wrap_delta(10, 25, width) == 15
    assert wrap_delta(top - 1000, 500, width) == 1500
    assert wrap_delta(0, top - 1, width) == top - 1
    assert wrap_delta(5, 5, width) == 0
    if width < 64:
        high = 0xFFFF << width  # what sign extension puts above a narrower counter
        assert wrap_delta(high | (top - 3), 4, width) == 7
    for a, b in ((top - 1, 0), (1, 0), (top // 2, top // 2 - 1)):
        assert 0 <= wrap_delta(a, b, width) < top


def test_wrap_delta_refuses_a_bad_width(simple_pmu):
    from simple_pmu._measure import wrap_delta

    for width in (0, -1, 65):
        with pytest.raises(simple_pmu.UsageError, match=f"counter width {width} is outside"):
            wrap_delta(0, 1, width)


def _x86_report(simple_pmu, fixed_width: int):
    """A report for an Intel CPU whose CPUID leaf 0xA states fixed counters of this width
    (and 48-bit general-purpose ones), the driver usable."""
    from simple_pmu._probe import Backend, Report
    from simple_pmu.sysinfo import CpuInfo, Perfmon

    eax = 4 | 8 << 8 | 48 << 16 | 7 << 24  # version 4, 8 gp counters, 48 bits, 7 events
    edx = 3 | fixed_width << 5  # 3 fixed counters
    perfmon = Perfmon.from_regs(eax, 0, 0, edx)
    assert (perfmon.fixed_width, perfmon.gp_width, perfmon.num_gp) == (fixed_width, 48, 8)
    cpu = CpuInfo("x86_64", "GenuineIntel", "test", frozenset(), None, perfmon)
    driver = Backend("driver", "fake", True, (), (), ("cycles", "instructions"),
                     {"recheck_ms": 100}, (0,))
    return Report(cpu, (driver,))


@pytest.mark.parametrize("fixed_width", [40, 48])
def test_x86_driver_widths_from_cpuid(simple_pmu, monkeypatch, fixed_width):
    """x86: the driver reads fixed counters, CPUID leaf 0xA EDX[12:5] bits wide."""
    from simple_pmu._measure import open_reader

    monkeypatch.setattr(simple_pmu.native, "ARCH", "x86_64")
    reader = open_reader(_x86_report(simple_pmu, fixed_width), "driver")
    top = 1 << fixed_width
    assert reader.widths == {"cycles": fixed_width, "instructions": fixed_width}
    assert reader.delta("cycles", top - 10, 5) == 15
    assert reader.delta("instructions", top - 1, 0) == 1


def test_x86_driver_refuses_width_zero(simple_pmu, monkeypatch):
    from simple_pmu._measure import open_reader

    monkeypatch.setattr(simple_pmu.native, "ARCH", "x86_64")
    with pytest.raises(simple_pmu.CounterUnavailable, match="CPUID leaf 0xA EDX"):
        open_reader(_x86_report(simple_pmu, 0), "driver")


def test_x86_widths_follow_the_rdpmc_operand(simple_pmu, monkeypatch):
    """x86: a fixed counter (operand 2^30 + n) is fixed_width bits, a general counter
    (operand n) gp_width; where nothing is published (-1) the 2011 fixed counters are."""
    from simple_pmu._measure import PinnedCpu, open_reader

    monkeypatch.setattr(simple_pmu.native, "ARCH", "x86_64")
    reader = open_reader(_x86_report(simple_pmu, 40), "driver")  # gp counters: 48 bits
    fixed = 1 << 30
    assert reader.placed_widths(fixed + 1, fixed + 0) == {"cycles": 40, "instructions": 40}
    assert reader.placed_widths(5, fixed + 0) == {"cycles": 48, "instructions": 40}
    assert reader.placed_widths(-1, 3) == {"cycles": 40, "instructions": 48}
    monkeypatch.setattr(simple_pmu.native, "driver_indices", lambda: (0, 5, 2))
    with PinnedCpu(reader):
        assert reader.widths == {"cycles": 48, "instructions": 48}
        assert reader.delta("cycles", 2**48 - 10, 5) == 15
